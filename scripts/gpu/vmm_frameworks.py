"""VMM sharing the way current frameworks do it, for scripts/gpu-real.sh (plain and under the shim).

Usage: python3 vmm_frameworks.py MODE
  torch-expandable-mp   PyTorch with PYTORCH_CUDA_ALLOC_CONF=expandable_segments:True (its caching
                        allocator maps cuMemCreate'd memory into reserved ranges and shares it as
                        POSIX fds): the producer puts CUDA tensors on a torch.multiprocessing queue,
                        the consumer sums them and answers, then both drop them
  cumem-remap           a cuMem allocator as vLLM's sleep mode has (its own calls through libcuda,
                        in a PyTorch process): reserve, create (POSIX-fd shareable), map, give
                        access, use (memset, copies to and from a torch tensor), export the handle
                        to an fd and close it; "sleep" (unmap, release); "wake" (create, map at the
                        same address, give access again), use, and tear down
  cumem-remap-no-access planted: the same, but the wake maps the new memory without giving access
                        again (the public bug that hangs or faults a job after a remap); the use
                        after the wake fails, and sharecheck names the map that got no access

Prints `CHECK <name> <value>` lines that are the same with and without the shim (the planted mode's
too), and exits 0 when the correct modes did what they should (the planted mode exits 0 when the
use after the wake failed as the driver says it does). 3 without PyTorch or without expandable
segments' IPC (PyTorch before 2.5)."""
import ctypes
import os
import sys

N = 1 << 20  # float32 elements: 4 MiB


def check(name, value):
    print("CHECK %s %s" % (name, value), flush=True)


# ---------------------------------------------------------------------------------------------
# PyTorch expandable segments, shared through torch.multiprocessing.

def torch_consumer(q, answers):
    import torch
    sums = []
    for _ in range(2):
        t = q.get()
        sums.append(float(t.sum(dtype=torch.float64).item()))
        del t
    torch.cuda.synchronize()
    answers.put(sums)


def torch_expandable_mp():
    os.environ["PYTORCH_CUDA_ALLOC_CONF"] = "expandable_segments:True"
    try:
        import torch
        import torch.multiprocessing as tmp
    except ImportError:
        print("SKIP no torch", flush=True)
        return 3
    major, minor = (int(x) for x in torch.__version__.split(".")[:2])
    if (major, minor) < (2, 5):
        print("SKIP torch %s shares no expandable segments" % torch.__version__, flush=True)
        return 3
    ctx = tmp.get_context("spawn")
    q, answers = ctx.Queue(), ctx.Queue()
    # Two tensors in one expandable segment, the second at an offset in it.
    a = torch.arange(N, device="cuda:0", dtype=torch.float32)
    b = torch.full((N,), 2.0, device="cuda:0", dtype=torch.float32)
    p = ctx.Process(target=torch_consumer, args=(q, answers))
    p.start()
    q.put(a)
    q.put(b)
    sums = answers.get(timeout=120)
    p.join(120)
    del a, b
    torch.cuda.synchronize()
    torch.cuda.empty_cache()  # unmaps and releases the segment's memory
    expected = [float(N * (N - 1) // 2), 2.0 * N]
    check("sums", sums)
    check("consumer_exit", p.exitcode)
    return 0 if sums == expected and p.exitcode == 0 else 1


# ---------------------------------------------------------------------------------------------
# A cuMem allocator of the program's own (vLLM's CuMemAllocator, in C there).

class Location(ctypes.Structure):
    _fields_ = [("type", ctypes.c_int), ("id", ctypes.c_int)]


class AllocFlags(ctypes.Structure):
    _fields_ = [("compressionType", ctypes.c_ubyte), ("gpuDirectRDMACapable", ctypes.c_ubyte),
                ("usage", ctypes.c_ushort), ("reserved", ctypes.c_ubyte * 4)]


class AllocationProp(ctypes.Structure):
    _fields_ = [("type", ctypes.c_int), ("requestedHandleTypes", ctypes.c_int),
                ("location", Location), ("win32HandleMetaData", ctypes.c_void_p),
                ("allocFlags", AllocFlags)]


class AccessDesc(ctypes.Structure):
    _fields_ = [("location", Location), ("flags", ctypes.c_int)]


PINNED, DEVICE, POSIX_FD, READWRITE = 1, 1, 1, 3


def cumem_remap(give_access_on_wake):
    try:
        import torch
    except ImportError:
        print("SKIP no torch", flush=True)
        return 3
    torch.zeros(1, device="cuda:0")  # the primary context, current on this thread
    cu = ctypes.CDLL("libcuda.so.1")
    u64 = ctypes.c_uint64

    def call(name, *args):
        return getattr(cu, name)(*args)

    prop = AllocationProp(PINNED, POSIX_FD, Location(DEVICE, 0), None, AllocFlags())
    granularity = ctypes.c_size_t()
    assert call("cuMemGetAllocationGranularity", ctypes.byref(granularity), ctypes.byref(prop), 0) == 0
    size = ((N * 4 + granularity.value - 1) // granularity.value) * granularity.value
    base = u64()
    assert call("cuMemAddressReserve", ctypes.byref(base), ctypes.c_size_t(size), ctypes.c_size_t(0), u64(0), u64(0)) == 0
    access = AccessDesc(Location(DEVICE, 0), READWRITE)
    rounds = {}

    def wake(give_access):
        handle = u64()
        assert call("cuMemCreate", ctypes.byref(handle), ctypes.c_size_t(size), ctypes.byref(prop), u64(0)) == 0
        assert call("cuMemMap", base, ctypes.c_size_t(size), ctypes.c_size_t(0), handle, u64(0)) == 0
        if give_access:
            assert call("cuMemSetAccess", base, ctypes.c_size_t(size), ctypes.byref(access), ctypes.c_size_t(1)) == 0
        return handle

    def use(tag):
        rc = call("cuMemsetD8_v2", base, ctypes.c_ubyte(0), ctypes.c_size_t(size))
        rounds[tag + "_memset_rc"] = rc
        if rc != 0:
            return
        src = torch.arange(N, device="cuda:0", dtype=torch.float32)
        assert call("cuMemcpyDtoD_v2", base, u64(src.data_ptr()), ctypes.c_size_t(N * 4)) == 0
        back = torch.empty(N, device="cuda:0", dtype=torch.float32)
        assert call("cuMemcpyDtoD_v2", u64(back.data_ptr()), base, ctypes.c_size_t(N * 4)) == 0
        torch.cuda.synchronize()
        rounds[tag + "_same"] = bool(torch.equal(src, back))

    def sleep(handle):
        assert call("cuMemUnmap", base, ctypes.c_size_t(size)) == 0
        assert call("cuMemRelease", handle) == 0

    handle = wake(True)
    use("first")
    fd = ctypes.c_int(-1)
    rc = call("cuMemExportToShareableHandle", ctypes.byref(fd), handle, POSIX_FD, u64(0))
    rounds["export_rc"] = rc
    if rc == 0:
        os.close(fd.value)
    sleep(handle)
    handle = wake(give_access_on_wake)
    use("after_wake")
    sleep(handle)
    assert call("cuMemAddressFree", base, ctypes.c_size_t(size)) == 0
    for k in sorted(rounds):
        check(k, rounds[k])
    if give_access_on_wake:
        ok = rounds.get("first_same") and rounds.get("after_wake_same") and rounds["export_rc"] == 0
    else:
        # R580 answers CUDA_ERROR_INVALID_VALUE for the memset of a mapping without access.
        ok = rounds.get("first_same") and rounds["after_wake_memset_rc"] != 0
    return 0 if ok else 1


def main():
    mode = sys.argv[1] if len(sys.argv) == 2 else ""
    if mode == "torch-expandable-mp":
        return torch_expandable_mp()
    if mode == "cumem-remap":
        return cumem_remap(True)
    if mode == "cumem-remap-no-access":
        return cumem_remap(False)
    print(__doc__, file=sys.stderr)
    return 2


if __name__ == "__main__":
    sys.exit(main())
