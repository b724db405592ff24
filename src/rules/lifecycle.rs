//! Calls observed only so tracked state ends with what it belongs to: a destroyed context, a
//! primary context reset or released, a HIP device reset.

use super::{with_grants, Prediction};
use crate::facts::{self, HipQueries};
use sharecheck_core::functions::args;

pub fn context_destroy(a: &args::cuCtxDestroy_v2) -> Prediction {
    let mut p = Prediction::default();
    let ctx = a.ctx.addr();
    p.then(move |code| {
        if code == 0 {
            with_grants(|g| g.forget_context(ctx));
        }
        Vec::new()
    });
    p
}

pub fn stream_destroy(a: &args::cuStreamDestroy_v2) -> Prediction {
    let mut p = Prediction::default();
    let stream = a.hStream.addr();
    p.then(move |code| {
        if code == 0 {
            with_grants(|g| g.forget_stream(stream));
        }
        Vec::new()
    });
    p
}

pub fn primary_reset(a: &args::cuDevicePrimaryCtxReset_v2) -> Prediction {
    let mut p = Prediction::default();
    let dev = a.dev.0;
    p.then(move |code| {
        if code == 0 {
            with_grants(|g| g.forget_cuda_device(dev));
        }
        Vec::new()
    });
    p
}

pub fn primary_release(a: &args::cuDevicePrimaryCtxRelease_v2) -> Prediction {
    let mut p = Prediction::default();
    let dev = a.dev.0;
    p.then(move |code| {
        // The primary context ends when its last reference is released; ask whether it did.
        if code == 0 && facts::primary_context_active(dev) != Some(true) {
            with_grants(|g| g.forget_cuda_device(dev));
        }
        Vec::new()
    });
    p
}

pub fn hip_device_reset(_: &args::hipDeviceReset) -> Prediction {
    let mut p = Prediction::default();
    let dev = HipQueries::begin().current_device();
    p.then(move |code| {
        if code == 0 {
            // Without the device, forgetting every HIP grant is the safe side.
            with_grants(|g| match dev {
                Some(dev) => g.forget_hip_device(dev),
                None => g.forget_hip(),
            });
        }
        Vec::new()
    });
    p
}
