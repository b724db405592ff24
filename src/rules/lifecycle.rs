//! Calls observed only so tracked state ends with what it belongs to: a destroyed context or
//! stream, a primary context reset or released, a HIP device reset.

use super::state::Grants;
use super::{with_grants, Prediction};
use crate::facts::{self, HipQueries};
use sharecheck_core::functions::args;

/// A prediction with no finding that updates the grants once the driver succeeded.
fn on_success(update: impl FnOnce(&mut Grants) + 'static) -> Prediction {
    let mut p = Prediction::default();
    p.then(move |code| {
        if code == 0 {
            with_grants(update);
        }
        Vec::new()
    });
    p
}

pub fn context_destroy(a: &args::cuCtxDestroy_v2) -> Prediction {
    let ctx = a.ctx.addr();
    on_success(move |g| g.forget_context(ctx))
}

pub fn stream_destroy(a: &args::cuStreamDestroy_v2) -> Prediction {
    let stream = a.hStream.addr();
    on_success(move |g| g.forget_stream(stream))
}

pub fn primary_reset(a: &args::cuDevicePrimaryCtxReset_v2) -> Prediction {
    let dev = a.dev.0;
    on_success(move |g| g.forget_cuda_device(dev))
}

pub fn primary_release(a: &args::cuDevicePrimaryCtxRelease_v2) -> Prediction {
    let dev = a.dev.0;
    let mut p = Prediction::default();
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
    let dev = HipQueries::begin().current_device();
    // Without the device, forgetting every HIP grant is the safe side.
    on_success(move |g| match dev {
        Some(dev) => g.forget_hip_device(dev),
        None => g.forget_hip(),
    })
}
