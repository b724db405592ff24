use super::*;

fn managed(size: usize) -> CUdeviceptr {
    let mut p = 0;
    // SAFETY: `p` is a live local `CUdeviceptr`.
    let rc = unsafe { cuMemAllocManaged(&mut p, size, MEM_ATTACH_GLOBAL) };
    assert_eq!(rc, SUCCESS);
    p
}

fn stream() -> CUstream {
    let mut s = null_mut();
    // SAFETY: `s` is a live local `CUstream`.
    assert_eq!(unsafe { cuStreamCreate(&mut s, 0) }, SUCCESS);
    s
}

#[test]
fn observed_r580_rules() {
    // SAFETY: the out-pointers are live locals of the types written, or NULL where the export
    // checks for NULL; handles and device addresses are plain values (see the module doc).
    unsafe {
        setup(r580());
        let _c = context(0);
        let m = managed(1 << 20);
        let s = stream();
        let attach = |s: CUstream, p, len, flags| cuStreamAttachMemAsync(s, p, len, flags);
        assert_eq!(
            attach(s, m, 0, MEM_ATTACH_SINGLE),
            SUCCESS,
            "length 0: whole allocation"
        );
        assert_eq!(
            attach(s, m, 1 << 20, MEM_ATTACH_SINGLE),
            SUCCESS,
            "exact size"
        );
        assert_eq!(
            attach(s, m, 4096, MEM_ATTACH_SINGLE),
            INVALID_VALUE,
            "partial"
        );
        assert_eq!(
            attach(null_mut(), m, 0, MEM_ATTACH_SINGLE),
            INVALID_VALUE,
            "SINGLE on NULL"
        );
        assert_eq!(attach(null_mut(), m, 0, MEM_ATTACH_GLOBAL), SUCCESS);
        assert_eq!(attach(null_mut(), m, 0, MEM_ATTACH_HOST), SUCCESS);
        assert_eq!(attach(s, m, 0, 8), INVALID_VALUE, "flags 8");
        assert_eq!(attach(s, m, 0, 0), INVALID_VALUE, "flags 0");
        assert_eq!(
            attach(s, m, 0, MEM_ATTACH_GLOBAL | MEM_ATTACH_HOST),
            INVALID_VALUE,
            "two flags"
        );
        let device_memory = alloc(4096);
        assert_eq!(
            attach(s, device_memory, 0, MEM_ATTACH_GLOBAL),
            INVALID_VALUE,
            "not managed"
        );
        assert_eq!(
            attach(0x57_0000_7777 as CUstream, m, 0, MEM_ATTACH_GLOBAL),
            INVALID_HANDLE
        );
        // The _ptsz variant behaves the same.
        assert_eq!(
            cuStreamAttachMemAsync_ptsz(s, m, 4096, MEM_ATTACH_GLOBAL),
            INVALID_VALUE
        );
        assert_eq!(
            cuStreamAttachMemAsync_ptsz(s, m, 0, MEM_ATTACH_SINGLE),
            SUCCESS
        );
    }
}

#[test]
fn destroyed_stream_is_invalid_handle_and_releases_association() {
    // SAFETY: the out-pointers are live locals of the types written, or NULL where the export
    // checks for NULL; handles and device addresses are plain values (see the module doc).
    unsafe {
        setup(r580());
        let _c = context(0);
        let m = managed(4096);
        let s = stream();
        assert_eq!(cuStreamAttachMemAsync(s, m, 0, MEM_ATTACH_SINGLE), SUCCESS);
        assert_eq!(cuStreamDestroy_v2(s), SUCCESS);
        let attachment = crate::state::with(|d| d.memory.find(m).unwrap().attachment);
        assert_eq!(
            attachment,
            (MEM_ATTACH_GLOBAL, 0),
            "back to the allocation's default"
        );
        assert_eq!(
            cuStreamAttachMemAsync(s, m, 0, MEM_ATTACH_GLOBAL),
            INVALID_HANDLE
        );
        assert_eq!(cuStreamDestroy_v2(s), INVALID_HANDLE);
        assert_eq!(cuStreamSynchronize(s), INVALID_HANDLE);
        assert_eq!(
            cuStreamSynchronize(STREAM_LEGACY as usize as CUstream),
            SUCCESS
        );
        assert_eq!(
            cuStreamSynchronize_ptsz(STREAM_PER_THREAD as usize as CUstream),
            SUCCESS
        );
    }
}

#[test]
fn pageable_memory_needs_the_attribute_and_a_length() {
    // SAFETY: `host` is a live buffer of 8192 bytes; attaching only validates its address. The
    // rest as the module doc says: live locals, plain handles.
    unsafe {
        let mut config = r580();
        config
            .attributes
            .insert((0, attribute::PAGEABLE_MEMORY_ACCESS), 1);
        setup(config);
        let _c = context(0);
        let s = stream();
        let host = vec![0u8; 8192];
        let p = host.as_ptr() as u64;
        assert_eq!(
            cuStreamAttachMemAsync(s, p, 8192, MEM_ATTACH_SINGLE),
            SUCCESS
        );
        assert_eq!(
            cuStreamAttachMemAsync(s, p, 0, MEM_ATTACH_SINGLE),
            INVALID_VALUE
        );
    }
}

#[test]
fn hip_attach_follows_the_clr_checks() {
    // SAFETY: out-pointers are live locals; `host` is a live 64-byte buffer, which attaching only
    // validates; the stream handles, garbage ones included, are plain values.
    unsafe {
        let _hip = HIP_LOCK.lock();
        setup(r580());
        use crate::hip_exports::*;
        let mut m = null_mut();
        assert_eq!(
            hipMallocManaged(&mut m, 1 << 16, MEM_ATTACH_GLOBAL),
            SUCCESS
        );
        let mut s = null_mut();
        assert_eq!(hipStreamCreate(&mut s), SUCCESS);
        let attach =
            |s: hipStream_t, p: *mut c_void, len, flags| hipStreamAttachMemAsync(s, p, len, flags);
        assert_eq!(attach(s, null_mut(), 0, MEM_ATTACH_SINGLE), INVALID_VALUE);
        assert_eq!(
            attach(0x57_0000_7777 as hipStream_t, m, 0, MEM_ATTACH_SINGLE),
            CONTEXT_IS_DESTROYED
        );
        assert_eq!(attach(s, m, 0, 3), INVALID_VALUE);
        assert_eq!(attach(null_mut(), m, 0, MEM_ATTACH_SINGLE), INVALID_VALUE);
        assert_eq!(
            attach(s, m, 4096, MEM_ATTACH_SINGLE),
            INVALID_VALUE,
            "partial managed"
        );
        assert_eq!(attach(s, m, 1 << 16, MEM_ATTACH_SINGLE), SUCCESS);
        assert_eq!(attach(s, m, 0, MEM_ATTACH_HOST), SUCCESS);
        let host = [0u8; 64];
        let hp = host.as_ptr() as *mut c_void;
        assert_eq!(
            attach(s, hp, 64, MEM_ATTACH_GLOBAL),
            INVALID_VALUE,
            "no pageable access"
        );
        assert_eq!(hipStreamDestroy(s), SUCCESS);
        assert_eq!(hipFree(m), SUCCESS);
    }
}
