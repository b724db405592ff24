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

/// Two allocations of the current context, and an async peer copy between them on `s`.
fn copy_async(ctx: CUcontext, s: CUstream) -> Code {
    let (src, dst) = (alloc(256), alloc(256));
    upload(src, &[7; 256]);
    let rc = unsafe { cuMemcpyPeerAsync(dst, ctx, src, ctx, 256, s) };
    if rc == SUCCESS {
        assert_eq!(
            download(dst, 256),
            [7; 256],
            "the copy itself is done at once"
        );
    }
    rc
}

#[test]
fn stream_query_is_not_ready_after_async_copy_until_stream_synchronize() {
    setup(r580());
    let c0 = context(0);
    let busy = stream(0, 0);
    let idle = stream(0, 0);
    assert_eq!(
        unsafe { cuStreamQuery(busy) },
        SUCCESS,
        "nothing issued yet"
    );
    assert_eq!(copy_async(c0, busy), SUCCESS);
    assert_eq!(unsafe { cuStreamQuery(busy) }, NOT_READY);
    assert_eq!(unsafe { cuStreamQuery_ptsz(busy) }, NOT_READY);
    assert_eq!(
        unsafe { cuStreamQuery(idle) },
        SUCCESS,
        "other streams unaffected"
    );
    assert_eq!(
        unsafe { cuStreamQuery(null_mut()) },
        SUCCESS,
        "the default stream is unaffected"
    );
    assert_eq!(
        unsafe { cuStreamQuery(busy) },
        NOT_READY,
        "a query waits for nothing"
    );
    assert_eq!(unsafe { cuStreamSynchronize(busy) }, SUCCESS);
    assert_eq!(unsafe { cuStreamQuery(busy) }, SUCCESS);
    // The _ptsz forms of the copy and of the synchronization do the same.
    let (src, dst) = (alloc(64), alloc(64));
    assert_eq!(
        unsafe { cuMemcpyPeerAsync_ptsz(dst, c0, src, c0, 64, idle) },
        SUCCESS
    );
    assert_eq!(unsafe { cuStreamQuery(idle) }, NOT_READY);
    assert_eq!(unsafe { cuStreamSynchronize_ptsz(idle) }, SUCCESS);
    assert_eq!(unsafe { cuStreamQuery_ptsz(idle) }, SUCCESS);
    // A synchronous peer copy leaves nothing pending anywhere.
    assert_eq!(unsafe { cuMemcpyPeer(dst, c0, src, c0, 64) }, SUCCESS);
    assert_eq!(unsafe { cuStreamQuery(null_mut()) }, SUCCESS);
}

#[test]
fn stream_query_failed_async_copy_leaves_nothing_pending() {
    setup(r580());
    let c0 = context(0);
    let s = stream(0, 0);
    let dst = alloc(64);
    let unknown = 0x10; // no device memory
    assert_eq!(
        unsafe { cuMemcpyPeerAsync(dst, c0, unknown, c0, 64, s) },
        INVALID_VALUE
    );
    assert_eq!(unsafe { cuStreamQuery(s) }, SUCCESS);
    assert_eq!(
        unsafe { cuMemcpyPeerAsync(dst, c0, unknown, c0, 64, null_mut()) },
        INVALID_VALUE
    );
    assert_eq!(unsafe { cuStreamQuery(null_mut()) }, SUCCESS);
}

#[test]
fn stream_query_cleared_by_ctx_synchronize_of_that_context_only() {
    setup(r580());
    let c1 = context(1);
    let other = stream(0, 0);
    assert_eq!(copy_async(c1, other), SUCCESS);
    let c0 = context(0); // current from here on
    let (a, b) = (stream(0, 0), stream(STREAM_NON_BLOCKING, 0));
    assert_eq!(copy_async(c0, a), SUCCESS);
    assert_eq!(copy_async(c0, b), SUCCESS);
    assert_eq!(copy_async(c0, null_mut()), SUCCESS);
    for s in [a, b, null_mut(), other] {
        assert_eq!(unsafe { cuStreamQuery(s) }, NOT_READY, "{s:?}");
    }
    assert_eq!(unsafe { cuCtxSynchronize() }, SUCCESS);
    for s in [a, b, null_mut()] {
        assert_eq!(unsafe { cuStreamQuery(s) }, SUCCESS, "{s:?}");
    }
    assert_eq!(
        unsafe { cuStreamQuery(other) },
        NOT_READY,
        "a stream of another context is unaffected"
    );
    // cuCtxSynchronize_v2 of a context that is not current.
    assert_eq!(copy_async(c0, a), SUCCESS);
    assert_eq!(unsafe { cuCtxSynchronize_v2(c1) }, SUCCESS);
    assert_eq!(unsafe { cuStreamQuery(other) }, SUCCESS);
    assert_eq!(
        unsafe { cuStreamQuery(a) },
        NOT_READY,
        "c0 was not synchronized"
    );
    // cuCtxSynchronize_v2(NULL): the current context.
    assert_eq!(unsafe { cuCtxSynchronize_v2(null_mut()) }, SUCCESS);
    assert_eq!(unsafe { cuStreamQuery(a) }, SUCCESS);
}

#[test]
fn stream_query_of_special_streams_is_the_current_contexts_default_stream() {
    setup(r580());
    let c1 = context(1);
    let c0 = context(0);
    // Any special handle issues to and queries the one default stream of the context.
    assert_eq!(copy_async(c0, 1usize as CUstream), SUCCESS);
    for special in [0usize, 1, 2] {
        let s = special as CUstream;
        assert_eq!(unsafe { cuStreamQuery(s) }, NOT_READY, "stream {special}");
        assert_eq!(
            unsafe { cuStreamQuery_ptsz(s) },
            NOT_READY,
            "stream {special}"
        );
    }
    assert_eq!(unsafe { cuCtxSetCurrent(c1) }, SUCCESS);
    assert_eq!(
        unsafe { cuStreamQuery(null_mut()) },
        SUCCESS,
        "c1's default stream is another one"
    );
    assert_eq!(unsafe { cuCtxSetCurrent(c0) }, SUCCESS);
    assert_eq!(unsafe { cuStreamSynchronize(2usize as CUstream) }, SUCCESS);
    assert_eq!(unsafe { cuStreamQuery(null_mut()) }, SUCCESS);
    let (src, dst) = (alloc(64), alloc(64));
    assert_eq!(
        unsafe { cuMemcpyPeerAsync_ptsz(dst, c0, src, c0, 64, null_mut()) },
        SUCCESS
    );
    assert_eq!(unsafe { cuStreamQuery_ptsz(null_mut()) }, NOT_READY);
    assert_eq!(unsafe { cuStreamSynchronize(null_mut()) }, SUCCESS);
    assert_eq!(unsafe { cuStreamQuery(1usize as CUstream) }, SUCCESS);
    // No current context: INVALID_CONTEXT for the special streams; created ones still answer.
    let s = stream(0, 0);
    assert_eq!(copy_async(c0, s), SUCCESS);
    while unsafe { cuCtxPopCurrent_v2(null_mut()) } == SUCCESS {}
    for special in [0usize, 1, 2] {
        let h = special as CUstream;
        assert_eq!(
            unsafe { cuStreamQuery(h) },
            INVALID_CONTEXT,
            "stream {special}"
        );
        assert_eq!(unsafe { cuStreamQuery_ptsz(h) }, INVALID_CONTEXT);
    }
    assert_eq!(unsafe { cuStreamQuery(s) }, NOT_READY);
}

#[test]
fn stream_query_of_destroyed_or_unknown_streams_is_invalid_handle() {
    setup(r580());
    let c0 = context(0);
    let gone = stream(0, 0);
    assert_eq!(copy_async(c0, gone), SUCCESS);
    assert_eq!(unsafe { cuStreamDestroy_v2(gone) }, SUCCESS);
    assert_eq!(unsafe { cuStreamQuery(gone) }, INVALID_HANDLE);
    assert_eq!(unsafe { cuStreamQuery_ptsz(gone) }, INVALID_HANDLE);
    assert_eq!(
        unsafe { cuStreamQuery(0x57_0000_9999 as CUstream) },
        INVALID_HANDLE
    );
    assert_eq!(
        unsafe { cuStreamQuery(c0) },
        INVALID_HANDLE,
        "a context is no stream"
    );
    // Destroying a context destroys its streams and forgets its default stream's work.
    let c1 = context(1);
    let s1 = stream(0, 0);
    assert_eq!(copy_async(c1, s1), SUCCESS);
    assert_eq!(unsafe { cuCtxDestroy_v2(c1) }, SUCCESS);
    assert_eq!(unsafe { cuStreamQuery(s1) }, INVALID_HANDLE);
}

#[test]
fn stream_query_pending_default_stream_ends_with_a_primary_reset() {
    let mut config = r580();
    config.devices = 8;
    setup(config);
    // Device 7 is this test's only.
    let mut p = null_mut();
    assert_eq!(unsafe { cuDevicePrimaryCtxRetain(&mut p, 7) }, SUCCESS);
    assert_eq!(unsafe { cuCtxPushCurrent_v2(p) }, SUCCESS);
    assert_eq!(copy_async(p, null_mut()), SUCCESS);
    assert_eq!(unsafe { cuStreamQuery(null_mut()) }, NOT_READY);
    assert_eq!(unsafe { cuDevicePrimaryCtxReset_v2(7) }, SUCCESS);
    assert_eq!(unsafe { cuDevicePrimaryCtxRetain(&mut p, 7) }, SUCCESS);
    assert_eq!(
        unsafe { cuStreamQuery(null_mut()) },
        SUCCESS,
        "the reset context starts with nothing pending"
    );
    assert_eq!(unsafe { cuDevicePrimaryCtxRelease_v2(7) }, SUCCESS);
    assert_eq!(unsafe { cuDevicePrimaryCtxRelease_v2(7) }, SUCCESS);
}

#[test]
fn not_ready_has_a_name() {
    let mut name = std::ptr::null();
    assert_eq!(unsafe { cuGetErrorName(NOT_READY, &mut name) }, SUCCESS);
    let name = unsafe { std::ffi::CStr::from_ptr(name) };
    assert_eq!(name.to_str(), Ok("CUDA_ERROR_NOT_READY"));
    let mut text = std::ptr::null();
    assert_eq!(unsafe { cuGetErrorString(NOT_READY, &mut text) }, SUCCESS);
    let text = unsafe { std::ffi::CStr::from_ptr(text) };
    assert_eq!(text.to_str(), Ok("device not ready"));
}
