use super::*;
use crate::config::PeerMatrix;

#[test]
fn can_access_peer_follows_the_matrix_only() {
    // SAFETY: the out-pointers are live locals of the types written, or NULL where the export
    // checks for NULL; handles and device addresses are plain values (see the module doc).
    unsafe {
        let mut config = r580();
        config.devices = 3;
        config.peers = PeerMatrix::Pairs([(0, 1), (1, 0), (0, 2)].into_iter().collect());
        config
            .attributes
            .insert((2, attribute::COMPUTE_CAPABILITY_MAJOR), 8);
        setup(config);
        let can = |a, b| {
            let mut v = -1;
            let rc = cuDeviceCanAccessPeer(&mut v, a, b);
            (rc, v)
        };
        assert_eq!(can(0, 1), (SUCCESS, 1));
        assert_eq!(can(1, 0), (SUCCESS, 1));
        assert_eq!(can(0, 0), (SUCCESS, 0), "a device is not its own peer");
        assert_eq!(can(1, 2), (SUCCESS, 0), "not in the matrix");
        assert_eq!(
            can(0, 2),
            (SUCCESS, 1),
            "a different major compute capability does not decide the answer"
        );
        assert_eq!(can(0, 99).0, INVALID_DEVICE);
        assert_eq!(cuDeviceCanAccessPeer(null_mut(), 0, 1), INVALID_VALUE);
    }
}

#[test]
fn unified_addressing_off_does_not_block_peer_access() {
    // SAFETY: the out-pointers are live locals of the types written, or NULL where the export
    // checks for NULL; handles and device addresses are plain values (see the module doc).
    unsafe {
        let mut config = r580();
        config
            .attributes
            .insert((1, attribute::UNIFIED_ADDRESSING), 0);
        setup(config);
        let mut v = -1;
        assert_eq!(cuDeviceCanAccessPeer(&mut v, 0, 1), SUCCESS);
        assert_eq!(v, 1);
        let peer = context(1);
        let _own = context(0); // current
        assert_eq!(cuCtxEnablePeerAccess(peer, 0), SUCCESS);
    }
}

#[test]
fn enable_disable_codes_r580() {
    // SAFETY: the out-pointers are live locals of the types written, or NULL where the export
    // checks for NULL; handles and device addresses are plain values (see the module doc).
    unsafe {
        setup(r580());
        let c1 = context(1);
        let c0 = context(0); // current
        assert_eq!(cuCtxEnablePeerAccess(c1, 1), INVALID_VALUE);
        assert_eq!(cuCtxEnablePeerAccess(c1, 0), SUCCESS);
        assert_eq!(cuCtxEnablePeerAccess(c1, 0), PEER_ACCESS_ALREADY_ENABLED);
        assert_eq!(
            cuCtxEnablePeerAccess(c0, 0),
            PEER_ACCESS_UNSUPPORTED,
            "self on R580"
        );
        assert_eq!(cuCtxEnablePeerAccess(null_mut(), 0), INVALID_CONTEXT);
        assert_eq!(
            cuCtxEnablePeerAccess(0xdead_beef as CUcontext, 0),
            INVALID_CONTEXT
        );
        assert_eq!(cuCtxDisablePeerAccess(c1), SUCCESS);
        assert_eq!(cuCtxDisablePeerAccess(c1), PEER_ACCESS_NOT_ENABLED);
        assert_eq!(cuCtxDisablePeerAccess(c0), PEER_ACCESS_NOT_ENABLED, "self");
        // Grants are directed: from the current context to the peer.
        assert_eq!(cuCtxEnablePeerAccess(c1, 0), SUCCESS);
        assert_eq!(cuCtxSetCurrent(c1), SUCCESS);
        assert_eq!(cuCtxDisablePeerAccess(c0), PEER_ACCESS_NOT_ENABLED);
        assert_eq!(cuCtxEnablePeerAccess(c0, 0), SUCCESS);
        // Destroying a context drops the grants that involve it.
        assert_eq!(cuCtxSetCurrent(c0), SUCCESS);
        assert_eq!(cuCtxDestroy_v2(c1), SUCCESS);
        assert_eq!(cuCtxEnablePeerAccess(c1, 0), INVALID_CONTEXT);
    }
}

#[test]
fn enable_self_is_invalid_context_when_documented() {
    // SAFETY: the out-pointers are live locals of the types written, or NULL where the export
    // checks for NULL; handles and device addresses are plain values (see the module doc).
    unsafe {
        setup(documented());
        let c0 = context(0);
        assert_eq!(cuCtxEnablePeerAccess(c0, 0), INVALID_CONTEXT);
    }
}

#[test]
fn no_current_context_is_invalid_context() {
    // SAFETY: the out-pointers are live locals of the types written, or NULL where the export
    // checks for NULL; handles and device addresses are plain values (see the module doc).
    unsafe {
        setup(r580());
        let c1 = context(1);
        let mut popped = null_mut();
        assert_eq!(cuCtxPopCurrent_v2(&mut popped), SUCCESS);
        assert_eq!(popped, c1);
        assert_eq!(cuCtxEnablePeerAccess(c1, 0), INVALID_CONTEXT);
        assert_eq!(cuCtxDisablePeerAccess(c1), INVALID_CONTEXT);
    }
}

#[test]
fn peers_none_makes_everything_unsupported() {
    // SAFETY: the out-pointers are live locals of the types written, or NULL where the export
    // checks for NULL; handles and device addresses are plain values (see the module doc).
    unsafe {
        let mut config = r580();
        config.peers = PeerMatrix::None;
        setup(config);
        let c1 = context(1);
        let _c0 = context(0);
        assert_eq!(cuCtxEnablePeerAccess(c1, 0), PEER_ACCESS_UNSUPPORTED);
    }
}

#[test]
fn memcpy_peer_moves_bytes_and_checks_ranges() {
    // SAFETY: the out-pointers are live locals of the types written, or NULL where the export
    // checks for NULL; handles and device addresses are plain values (see the module doc).
    unsafe {
        setup(r580());
        let c1 = context(1);
        let dst = alloc(4096);
        let c0 = context(0);
        let src = alloc(4096);
        let data: Vec<u8> = (0..4096u32).map(|i| (i * 7) as u8).collect();
        upload(src, &data);
        assert_eq!(cuMemcpyPeer(dst, c1, src, c0, 4096), SUCCESS);
        assert_eq!(download(dst, 4096), data);
        // Beyond the allocation: INVALID_VALUE, as R580.
        assert_eq!(cuMemcpyPeer(dst + 1, c1, src, c0, 4096), INVALID_VALUE);
        assert_eq!(cuMemcpyPeer(dst, c1, 0x1000, c0, 16), INVALID_VALUE);
        // R580 tolerates a NULL context.
        assert_eq!(cuMemcpyPeer(dst, null_mut(), src, c0, 16), SUCCESS);
        assert_eq!(cuMemcpyPeer_ptds(dst, c1, src, null_mut(), 16), SUCCESS);
        assert_eq!(
            cuMemcpyPeerAsync_ptsz(dst, c1, src, c0, 64, null_mut()),
            SUCCESS
        );
        assert_eq!(
            cuMemcpyPeerAsync(dst, c1, src, c0, 64, 0x57_0000_9999 as CUstream),
            INVALID_HANDLE
        );
        assert_eq!(
            cuMemcpyPeer(dst, 0x1234 as CUcontext, src, c0, 16),
            INVALID_CONTEXT
        );
    }
}

#[test]
fn memcpy_peer_null_context_is_invalid_when_documented() {
    // SAFETY: the out-pointers are live locals of the types written, or NULL where the export
    // checks for NULL; handles and device addresses are plain values (see the module doc).
    unsafe {
        setup(documented());
        let c0 = context(0);
        let a = alloc(64);
        let b = alloc(64);
        assert_eq!(cuMemcpyPeer(a, null_mut(), b, c0, 16), INVALID_CONTEXT);
        assert_eq!(cuMemcpyPeer(a, c0, b, c0, 16), SUCCESS);
    }
}

fn max_peers(devices: i32, max: u32) -> Config {
    Config {
        devices,
        max_peers: Some(max),
        ..r580()
    }
}

#[test]
fn max_peers_refuses_the_grant_after_the_limit() {
    // SAFETY: the out-pointers are live locals of the types written, or NULL where the export
    // checks for NULL; handles and device addresses are plain values (see the module doc).
    unsafe {
        setup(max_peers(4, 2));
        let c1 = context(1);
        let c2 = context(2);
        let c3 = context(3);
        let c0 = context(0); // current
        assert_eq!(cuCtxEnablePeerAccess(c1, 0), SUCCESS);
        assert_eq!(cuCtxEnablePeerAccess(c2, 0), SUCCESS);
        assert_eq!(cuCtxEnablePeerAccess(c3, 0), TOO_MANY_PEERS, "the 3rd of 2");
        // The other checks come first.
        assert_eq!(cuCtxEnablePeerAccess(c3, 1), INVALID_VALUE);
        assert_eq!(cuCtxEnablePeerAccess(c1, 0), PEER_ACCESS_ALREADY_ENABLED);
        assert_eq!(
            cuCtxEnablePeerAccess(c0, 0),
            PEER_ACCESS_UNSUPPORTED,
            "self on R580"
        );
        assert_eq!(
            cuCtxEnablePeerAccess(0x1234 as CUcontext, 0),
            INVALID_CONTEXT
        );
        // A disable frees a slot; the refused grant was never made.
        assert_eq!(cuCtxDisablePeerAccess(c3), PEER_ACCESS_NOT_ENABLED);
        assert_eq!(cuCtxDisablePeerAccess(c1), SUCCESS);
        assert_eq!(cuCtxEnablePeerAccess(c3, 0), SUCCESS);
        assert_eq!(cuCtxEnablePeerAccess(c1, 0), TOO_MANY_PEERS);
        // The limit is per context: c1 holds no grants yet.
        assert_eq!(cuCtxSetCurrent(c1), SUCCESS);
        assert_eq!(cuCtxEnablePeerAccess(c0, 0), SUCCESS);
        assert_eq!(cuCtxEnablePeerAccess(c2, 0), SUCCESS);
        assert_eq!(cuCtxEnablePeerAccess(c3, 0), TOO_MANY_PEERS);
        // Destroying a peer context ends the grants to it, which frees c0's slot.
        assert_eq!(cuCtxSetCurrent(c0), SUCCESS);
        assert_eq!(cuCtxDestroy_v2(c3), SUCCESS);
        assert_eq!(cuCtxEnablePeerAccess(c1, 0), SUCCESS);
    }
}

#[test]
fn max_peers_zero_refuses_every_supported_grant() {
    // SAFETY: the out-pointers are live locals of the types written, or NULL where the export
    // checks for NULL; handles and device addresses are plain values (see the module doc).
    unsafe {
        let mut config = max_peers(3, 0);
        config.peers = PeerMatrix::Pairs([(0, 1)].into_iter().collect());
        setup(config);
        let c1 = context(1);
        let c2 = context(2);
        let _c0 = context(0);
        assert_eq!(
            cuCtxEnablePeerAccess(c2, 0),
            PEER_ACCESS_UNSUPPORTED,
            "unsupported comes before the limit"
        );
        assert_eq!(cuCtxEnablePeerAccess(c1, 0), TOO_MANY_PEERS);
        assert_eq!(cuCtxDisablePeerAccess(c1), PEER_ACCESS_NOT_ENABLED);
    }
}

#[test]
fn max_peers_leaves_hip_alone() {
    // SAFETY: the out-pointers are live locals of the types written, or NULL where the export
    // checks for NULL; handles and device addresses are plain values (see the module doc).
    unsafe {
        let _hip = HIP_LOCK.lock();
        setup(max_peers(2, 0));
        use crate::hip_exports::{
            hipDeviceDisablePeerAccess, hipDeviceEnablePeerAccess, hipSetDevice,
        };
        assert_eq!(hipSetDevice(0), SUCCESS);
        assert_eq!(hipDeviceEnablePeerAccess(1, 0), SUCCESS);
        assert_eq!(hipDeviceDisablePeerAccess(1), SUCCESS);
    }
}
