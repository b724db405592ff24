use super::*;
use crate::state;

/// A created stream of the current context.
fn stream(flags: u32, priority: i32) -> CUstream {
    let mut s = null_mut();
    assert_eq!(
        unsafe { cuStreamCreateWithPriority(&mut s, flags, priority) },
        SUCCESS
    );
    s
}

/// `(rc, context)` of `cuStreamGetCtx`; the context is 0x1 when it was left untouched.
fn stream_ctx(s: CUstream) -> (Code, CUcontext) {
    let mut ctx = 0x1 as CUcontext;
    let rc = unsafe { cuStreamGetCtx(s, &mut ctx) };
    (rc, ctx)
}

/// `(flags, priority)` the model recorded for a stream.
fn recorded(s: CUstream) -> (u32, i32) {
    state::with(|d| {
        let s = d.streams.stream(s as usize as u64).expect("a live stream");
        (s.flags, s.priority)
    })
}

#[test]
fn stream_ctx_is_the_creating_context() {
    setup(r580());
    let c1 = context(1);
    let s1 = stream(0, 0);
    let c0 = context(0); // current from here on
    let mut s0 = null_mut();
    assert_eq!(
        unsafe { cuStreamCreate(&mut s0, STREAM_NON_BLOCKING) },
        SUCCESS
    );
    assert_eq!(stream_ctx(s1), (SUCCESS, c1), "not the current context");
    assert_eq!(stream_ctx(s0), (SUCCESS, c0));
    let mut ctx = null_mut();
    assert_eq!(unsafe { cuStreamGetCtx_ptsz(s1, &mut ctx) }, SUCCESS);
    assert_eq!(ctx, c1);
    // v2: the regular context, and NULL for the green context (none are simulated).
    let mut green = 0x1 as CUgreenCtx;
    assert_eq!(
        unsafe { cuStreamGetCtx_v2(s1, &mut ctx, &mut green) },
        SUCCESS
    );
    assert_eq!((ctx, green), (c1, null_mut()));
    green = 0x1 as CUgreenCtx;
    assert_eq!(
        unsafe { cuStreamGetCtx_v2_ptsz(s0, &mut ctx, &mut green) },
        SUCCESS
    );
    assert_eq!((ctx, green), (c0, null_mut()));
}

#[test]
fn stream_ctx_of_special_streams_is_the_current_context() {
    setup(r580());
    let c1 = context(1);
    let c0 = context(0);
    for special in [0usize, 1, 2] {
        let s = special as CUstream;
        assert_eq!(stream_ctx(s), (SUCCESS, c0), "stream {special}");
        let mut ctx = null_mut();
        assert_eq!(unsafe { cuStreamGetCtx_ptsz(s, &mut ctx) }, SUCCESS);
        assert_eq!(ctx, c0, "stream {special}, ptsz");
    }
    assert_eq!(unsafe { cuCtxSetCurrent(c1) }, SUCCESS);
    assert_eq!(
        stream_ctx(null_mut()),
        (SUCCESS, c1),
        "follows the current context"
    );
    // No current context: INVALID_CONTEXT for the special streams only.
    let s0 = stream(0, 0);
    while unsafe { cuCtxPopCurrent_v2(null_mut()) } == SUCCESS {}
    for special in [0usize, 1, 2] {
        assert_eq!(
            stream_ctx(special as CUstream),
            (INVALID_CONTEXT, 0x1 as CUcontext)
        );
    }
    assert_eq!(
        stream_ctx(s0),
        (SUCCESS, c1),
        "a created stream keeps its context"
    );
}

#[test]
fn stream_ctx_of_destroyed_or_unknown_streams_is_invalid_handle() {
    setup(r580());
    let c1 = context(1);
    let gone = stream(0, 0);
    assert_eq!(unsafe { cuStreamDestroy_v2(gone) }, SUCCESS);
    assert_eq!(stream_ctx(gone), (INVALID_HANDLE, 0x1 as CUcontext));
    let mut green = 0x1 as CUgreenCtx;
    let mut ctx = 0x1 as CUcontext;
    assert_eq!(
        unsafe { cuStreamGetCtx_v2(gone, &mut ctx, &mut green) },
        INVALID_HANDLE
    );
    assert_eq!((ctx, green), (0x1 as CUcontext, 0x1 as CUgreenCtx));
    assert_eq!(stream_ctx(0x57_0000_9999 as CUstream).0, INVALID_HANDLE);
    assert_eq!(stream_ctx(c1).0, INVALID_HANDLE, "a context is no stream");
    let mut event = null_mut();
    assert_eq!(unsafe { cuEventCreate(&mut event, 0) }, SUCCESS);
    assert_eq!(stream_ctx(event).0, INVALID_HANDLE, "an event is no stream");
    // Destroying a context destroys its streams.
    let c0 = context(0);
    let s0 = stream(0, 0);
    assert_eq!(stream_ctx(s0), (SUCCESS, c0));
    assert_eq!(unsafe { cuCtxDestroy_v2(c0) }, SUCCESS);
    assert_eq!(stream_ctx(s0).0, INVALID_HANDLE);
    // NULL out-parameters.
    assert_eq!(
        unsafe { cuStreamGetCtx(null_mut(), null_mut()) },
        INVALID_VALUE
    );
    let live = stream(0, 0);
    assert_eq!(
        unsafe { cuStreamGetCtx_ptsz(live, null_mut()) },
        INVALID_VALUE
    );
    assert_eq!(
        unsafe { cuStreamGetCtx_v2(live, &mut ctx, null_mut()) },
        INVALID_VALUE
    );
    assert_eq!(
        unsafe { cuStreamGetCtx_v2(live, null_mut(), &mut green) },
        INVALID_VALUE
    );
}

#[test]
fn stream_create_with_priority_clamps_and_checks_flags() {
    setup(r580());
    let _c = context(0);
    let high = stream(0, -100);
    let low = stream(STREAM_NON_BLOCKING, 7);
    let middle = stream(0, -2);
    assert_eq!(recorded(high), (0, CU_STREAM_PRIORITY_GREATEST));
    assert_eq!(
        recorded(low),
        (STREAM_NON_BLOCKING, CU_STREAM_PRIORITY_LEAST)
    );
    assert_eq!(recorded(middle), (0, -2));
    let mut plain = null_mut();
    assert_eq!(unsafe { cuStreamCreate(&mut plain, 0) }, SUCCESS);
    assert_eq!(recorded(plain), (0, 0), "cuStreamCreate: default priority");
    let mut s = 0x1 as CUstream;
    assert_eq!(
        unsafe { cuStreamCreateWithPriority(&mut s, 2, 0) },
        INVALID_VALUE
    );
    assert_eq!(s, 0x1 as CUstream, "untouched on error");
    assert_eq!(
        unsafe { cuStreamCreateWithPriority(null_mut(), 0, 0) },
        INVALID_VALUE
    );
    // Usable like any stream, and destroyed like one.
    assert_eq!(unsafe { cuStreamSynchronize(high) }, SUCCESS);
    assert_eq!(unsafe { cuStreamDestroy_v2(high) }, SUCCESS);
    assert_eq!(unsafe { cuStreamSynchronize(high) }, INVALID_HANDLE);
    while unsafe { cuCtxPopCurrent_v2(null_mut()) } == SUCCESS {}
    assert_eq!(
        unsafe { cuStreamCreateWithPriority(&mut s, 0, 0) },
        INVALID_CONTEXT,
        "no current context"
    );
}
