use super::*;
use crate::state;

/// A created stream of the current context.
fn stream(flags: u32, priority: i32) -> CUstream {
    let mut s = null_mut();
    // SAFETY: `s` is a live local `CUstream`.
    let rc = unsafe { cuStreamCreateWithPriority(&mut s, flags, priority) };
    assert_eq!(rc, SUCCESS);
    s
}

/// `(rc, context)` of `cuStreamGetCtx`; the context is 0x1 when it was left untouched.
fn stream_ctx(s: CUstream) -> (Code, CUcontext) {
    let mut ctx = 0x1 as CUcontext;
    // SAFETY: `ctx` is a live local `CUcontext`.
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
    // SAFETY: the out-pointers are live locals of the types written, or NULL where the export
    // checks for NULL; handles and device addresses are plain values (see the module doc).
    unsafe {
        setup(r580());
        let c1 = context(1);
        let s1 = stream(0, 0);
        let c0 = context(0); // current from here on
        let mut s0 = null_mut();
        assert_eq!(cuStreamCreate(&mut s0, STREAM_NON_BLOCKING), SUCCESS);
        assert_eq!(stream_ctx(s1), (SUCCESS, c1), "not the current context");
        assert_eq!(stream_ctx(s0), (SUCCESS, c0));
        let mut ctx = null_mut();
        assert_eq!(cuStreamGetCtx_ptsz(s1, &mut ctx), SUCCESS);
        assert_eq!(ctx, c1);
        // v2: the regular context, and NULL for the green context (none are simulated).
        let mut green = 0x1 as CUgreenCtx;
        assert_eq!(cuStreamGetCtx_v2(s1, &mut ctx, &mut green), SUCCESS);
        assert_eq!((ctx, green), (c1, null_mut()));
        green = 0x1 as CUgreenCtx;
        assert_eq!(cuStreamGetCtx_v2_ptsz(s0, &mut ctx, &mut green), SUCCESS);
        assert_eq!((ctx, green), (c0, null_mut()));
    }
}

#[test]
fn stream_ctx_of_special_streams_is_the_current_context() {
    // SAFETY: the out-pointers are live locals of the types written, or NULL where the export
    // checks for NULL; handles and device addresses are plain values (see the module doc).
    unsafe {
        setup(r580());
        let c1 = context(1);
        let c0 = context(0);
        for special in [0usize, 1, 2] {
            let s = special as CUstream;
            assert_eq!(stream_ctx(s), (SUCCESS, c0), "stream {special}");
            let mut ctx = null_mut();
            assert_eq!(cuStreamGetCtx_ptsz(s, &mut ctx), SUCCESS);
            assert_eq!(ctx, c0, "stream {special}, ptsz");
        }
        assert_eq!(cuCtxSetCurrent(c1), SUCCESS);
        assert_eq!(
            stream_ctx(null_mut()),
            (SUCCESS, c1),
            "follows the current context"
        );
        // No current context: INVALID_CONTEXT for the special streams only.
        let s0 = stream(0, 0);
        while cuCtxPopCurrent_v2(null_mut()) == SUCCESS {}
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
}

#[test]
fn stream_ctx_of_destroyed_or_unknown_streams_is_invalid_handle() {
    // SAFETY: the out-pointers are live locals of the types written, or NULL where the export
    // checks for NULL; handles and device addresses are plain values (see the module doc).
    unsafe {
        setup(r580());
        let c1 = context(1);
        let gone = stream(0, 0);
        assert_eq!(cuStreamDestroy_v2(gone), SUCCESS);
        assert_eq!(stream_ctx(gone), (INVALID_HANDLE, 0x1 as CUcontext));
        let mut green = 0x1 as CUgreenCtx;
        let mut ctx = 0x1 as CUcontext;
        assert_eq!(
            cuStreamGetCtx_v2(gone, &mut ctx, &mut green),
            INVALID_HANDLE
        );
        assert_eq!((ctx, green), (0x1 as CUcontext, 0x1 as CUgreenCtx));
        assert_eq!(stream_ctx(0x57_0000_9999 as CUstream).0, INVALID_HANDLE);
        assert_eq!(stream_ctx(c1).0, INVALID_HANDLE, "a context is no stream");
        let mut event = null_mut();
        assert_eq!(cuEventCreate(&mut event, 0), SUCCESS);
        assert_eq!(stream_ctx(event).0, INVALID_HANDLE, "an event is no stream");
        // Destroying a context destroys its streams.
        let c0 = context(0);
        let s0 = stream(0, 0);
        assert_eq!(stream_ctx(s0), (SUCCESS, c0));
        assert_eq!(cuCtxDestroy_v2(c0), SUCCESS);
        assert_eq!(stream_ctx(s0).0, INVALID_HANDLE);
        // NULL out-parameters.
        assert_eq!(cuStreamGetCtx(null_mut(), null_mut()), INVALID_VALUE);
        let live = stream(0, 0);
        assert_eq!(cuStreamGetCtx_ptsz(live, null_mut()), INVALID_VALUE);
        assert_eq!(cuStreamGetCtx_v2(live, &mut ctx, null_mut()), INVALID_VALUE);
        assert_eq!(
            cuStreamGetCtx_v2(live, null_mut(), &mut green),
            INVALID_VALUE
        );
    }
}

#[test]
fn stream_create_with_priority_clamps_and_checks_flags() {
    // SAFETY: the out-pointers are live locals of the types written, or NULL where the export
    // checks for NULL; handles and device addresses are plain values (see the module doc).
    unsafe {
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
        assert_eq!(cuStreamCreate(&mut plain, 0), SUCCESS);
        assert_eq!(recorded(plain), (0, 0), "cuStreamCreate: default priority");
        let mut s = 0x1 as CUstream;
        assert_eq!(cuStreamCreateWithPriority(&mut s, 2, 0), INVALID_VALUE);
        assert_eq!(s, 0x1 as CUstream, "untouched on error");
        assert_eq!(cuStreamCreateWithPriority(null_mut(), 0, 0), INVALID_VALUE);
        // Usable like any stream, and destroyed like one.
        assert_eq!(cuStreamSynchronize(high), SUCCESS);
        assert_eq!(cuStreamDestroy_v2(high), SUCCESS);
        assert_eq!(cuStreamSynchronize(high), INVALID_HANDLE);
        while cuCtxPopCurrent_v2(null_mut()) == SUCCESS {}
        assert_eq!(
            cuStreamCreateWithPriority(&mut s, 0, 0),
            INVALID_CONTEXT,
            "no current context"
        );
    }
}

/// Two allocations of the current context, and an async peer copy between them on `s`.
fn copy_async(ctx: CUcontext, s: CUstream) -> Code {
    let (src, dst) = (alloc(256), alloc(256));
    upload(src, &[7; 256]);
    // SAFETY: no host pointer: device addresses, a context and a stream.
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
    // SAFETY: the out-pointers are live locals of the types written, or NULL where the export
    // checks for NULL; handles and device addresses are plain values (see the module doc).
    unsafe {
        setup(r580());
        let c0 = context(0);
        let busy = stream(0, 0);
        let idle = stream(0, 0);
        assert_eq!(cuStreamQuery(busy), SUCCESS, "nothing issued yet");
        assert_eq!(copy_async(c0, busy), SUCCESS);
        assert_eq!(cuStreamQuery(busy), NOT_READY);
        assert_eq!(cuStreamQuery_ptsz(busy), NOT_READY);
        assert_eq!(cuStreamQuery(idle), SUCCESS, "other streams unaffected");
        assert_eq!(
            cuStreamQuery(null_mut()),
            SUCCESS,
            "the default stream is unaffected"
        );
        assert_eq!(cuStreamQuery(busy), NOT_READY, "a query waits for nothing");
        assert_eq!(cuStreamSynchronize(busy), SUCCESS);
        assert_eq!(cuStreamQuery(busy), SUCCESS);
        // The _ptsz forms of the copy and of the synchronization do the same.
        let (src, dst) = (alloc(64), alloc(64));
        assert_eq!(cuMemcpyPeerAsync_ptsz(dst, c0, src, c0, 64, idle), SUCCESS);
        assert_eq!(cuStreamQuery(idle), NOT_READY);
        assert_eq!(cuStreamSynchronize_ptsz(idle), SUCCESS);
        assert_eq!(cuStreamQuery_ptsz(idle), SUCCESS);
        // A synchronous peer copy leaves nothing pending anywhere.
        assert_eq!(cuMemcpyPeer(dst, c0, src, c0, 64), SUCCESS);
        assert_eq!(cuStreamQuery(null_mut()), SUCCESS);
    }
}

#[test]
fn stream_query_failed_async_copy_leaves_nothing_pending() {
    // SAFETY: the out-pointers are live locals of the types written, or NULL where the export
    // checks for NULL; handles and device addresses are plain values (see the module doc).
    unsafe {
        setup(r580());
        let c0 = context(0);
        let s = stream(0, 0);
        let dst = alloc(64);
        let unknown = 0x10; // no device memory
        assert_eq!(
            cuMemcpyPeerAsync(dst, c0, unknown, c0, 64, s),
            INVALID_VALUE
        );
        assert_eq!(cuStreamQuery(s), SUCCESS);
        assert_eq!(
            cuMemcpyPeerAsync(dst, c0, unknown, c0, 64, null_mut()),
            INVALID_VALUE
        );
        assert_eq!(cuStreamQuery(null_mut()), SUCCESS);
    }
}

#[test]
fn stream_query_cleared_by_ctx_synchronize_of_that_context_only() {
    // SAFETY: the out-pointers are live locals of the types written, or NULL where the export
    // checks for NULL; handles and device addresses are plain values (see the module doc).
    unsafe {
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
            assert_eq!(cuStreamQuery(s), NOT_READY, "{s:?}");
        }
        assert_eq!(cuCtxSynchronize(), SUCCESS);
        for s in [a, b, null_mut()] {
            assert_eq!(cuStreamQuery(s), SUCCESS, "{s:?}");
        }
        assert_eq!(
            cuStreamQuery(other),
            NOT_READY,
            "a stream of another context is unaffected"
        );
        // cuCtxSynchronize_v2 of a context that is not current.
        assert_eq!(copy_async(c0, a), SUCCESS);
        assert_eq!(cuCtxSynchronize_v2(c1), SUCCESS);
        assert_eq!(cuStreamQuery(other), SUCCESS);
        assert_eq!(cuStreamQuery(a), NOT_READY, "c0 was not synchronized");
        // cuCtxSynchronize_v2(NULL): the current context.
        assert_eq!(cuCtxSynchronize_v2(null_mut()), SUCCESS);
        assert_eq!(cuStreamQuery(a), SUCCESS);
    }
}

#[test]
fn stream_query_of_special_streams_is_the_current_contexts_default_stream() {
    // SAFETY: the out-pointers are live locals of the types written, or NULL where the export
    // checks for NULL; handles and device addresses are plain values (see the module doc).
    unsafe {
        setup(r580());
        let c1 = context(1);
        let c0 = context(0);
        // Any special handle issues to and queries the one default stream of the context.
        assert_eq!(copy_async(c0, 1usize as CUstream), SUCCESS);
        for special in [0usize, 1, 2] {
            let s = special as CUstream;
            assert_eq!(cuStreamQuery(s), NOT_READY, "stream {special}");
            assert_eq!(cuStreamQuery_ptsz(s), NOT_READY, "stream {special}");
        }
        assert_eq!(cuCtxSetCurrent(c1), SUCCESS);
        assert_eq!(
            cuStreamQuery(null_mut()),
            SUCCESS,
            "c1's default stream is another one"
        );
        assert_eq!(cuCtxSetCurrent(c0), SUCCESS);
        assert_eq!(cuStreamSynchronize(2usize as CUstream), SUCCESS);
        assert_eq!(cuStreamQuery(null_mut()), SUCCESS);
        let (src, dst) = (alloc(64), alloc(64));
        assert_eq!(
            cuMemcpyPeerAsync_ptsz(dst, c0, src, c0, 64, null_mut()),
            SUCCESS
        );
        assert_eq!(cuStreamQuery_ptsz(null_mut()), NOT_READY);
        assert_eq!(cuStreamSynchronize(null_mut()), SUCCESS);
        assert_eq!(cuStreamQuery(1usize as CUstream), SUCCESS);
        // No current context: INVALID_CONTEXT for the special streams; created ones still answer.
        let s = stream(0, 0);
        assert_eq!(copy_async(c0, s), SUCCESS);
        while cuCtxPopCurrent_v2(null_mut()) == SUCCESS {}
        for special in [0usize, 1, 2] {
            let h = special as CUstream;
            assert_eq!(cuStreamQuery(h), INVALID_CONTEXT, "stream {special}");
            assert_eq!(cuStreamQuery_ptsz(h), INVALID_CONTEXT);
        }
        assert_eq!(cuStreamQuery(s), NOT_READY);
    }
}

#[test]
fn stream_query_of_destroyed_or_unknown_streams_is_invalid_handle() {
    // SAFETY: the out-pointers are live locals of the types written, or NULL where the export
    // checks for NULL; handles and device addresses are plain values (see the module doc).
    unsafe {
        setup(r580());
        let c0 = context(0);
        let gone = stream(0, 0);
        assert_eq!(copy_async(c0, gone), SUCCESS);
        assert_eq!(cuStreamDestroy_v2(gone), SUCCESS);
        assert_eq!(cuStreamQuery(gone), INVALID_HANDLE);
        assert_eq!(cuStreamQuery_ptsz(gone), INVALID_HANDLE);
        assert_eq!(cuStreamQuery(0x57_0000_9999 as CUstream), INVALID_HANDLE);
        assert_eq!(cuStreamQuery(c0), INVALID_HANDLE, "a context is no stream");
        // Destroying a context destroys its streams and forgets its default stream's work.
        let c1 = context(1);
        let s1 = stream(0, 0);
        assert_eq!(copy_async(c1, s1), SUCCESS);
        assert_eq!(cuCtxDestroy_v2(c1), SUCCESS);
        assert_eq!(cuStreamQuery(s1), INVALID_HANDLE);
    }
}

#[test]
fn stream_query_pending_default_stream_ends_with_a_primary_reset() {
    // SAFETY: the out-pointers are live locals of the types written, or NULL where the export
    // checks for NULL; handles and device addresses are plain values (see the module doc).
    unsafe {
        let mut config = r580();
        config.devices = 8;
        setup(config);
        // Device 7 is this test's only.
        let mut p = null_mut();
        assert_eq!(cuDevicePrimaryCtxRetain(&mut p, 7), SUCCESS);
        assert_eq!(cuCtxPushCurrent_v2(p), SUCCESS);
        assert_eq!(copy_async(p, null_mut()), SUCCESS);
        assert_eq!(cuStreamQuery(null_mut()), NOT_READY);
        assert_eq!(cuDevicePrimaryCtxReset_v2(7), SUCCESS);
        assert_eq!(cuDevicePrimaryCtxRetain(&mut p, 7), SUCCESS);
        assert_eq!(
            cuStreamQuery(null_mut()),
            SUCCESS,
            "the reset context starts with nothing pending"
        );
        assert_eq!(cuDevicePrimaryCtxRelease_v2(7), SUCCESS);
        assert_eq!(cuDevicePrimaryCtxRelease_v2(7), SUCCESS);
    }
}

#[test]
fn not_ready_has_a_name() {
    // SAFETY: `name` and `text` are live locals; the driver sets them to static C strings.
    unsafe {
        let mut name = std::ptr::null();
        assert_eq!(cuGetErrorName(NOT_READY, &mut name), SUCCESS);
        let name = std::ffi::CStr::from_ptr(name);
        assert_eq!(name.to_str(), Ok("CUDA_ERROR_NOT_READY"));
        let mut text = std::ptr::null();
        assert_eq!(cuGetErrorString(NOT_READY, &mut text), SUCCESS);
        let text = std::ffi::CStr::from_ptr(text);
        assert_eq!(text.to_str(), Ok("device not ready"));
    }
}
