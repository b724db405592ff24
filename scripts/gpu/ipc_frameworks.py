"""IPC through frameworks nobody here wrote: a producer process shares GPU memory with a consumer
process, through PyTorch's torch.multiprocessing or CuPy's cudaIpc* bindings. Run by
scripts/gpu-ipc-frameworks.sh, plain and under `sharecheck run`.

Usage: python3 ipc_frameworks.py MODE
  torch-correct     the producer puts a CUDA tensor on a torch.multiprocessing queue; the consumer
                    sums it, drops it and answers; the producer then drops its own
  cupy-correct      the producer exports an array's memory (cudaIpcGetMemHandle; CuPy's memory
                    pool off, so the pointer is its allocation's base); the consumer opens it
                    (cudaIpcOpenMemHandle), sums it and closes it; then the producer frees it
  cupy-free-early   planted: the producer frees the memory while the consumer has it open
  cupy-never-close  planted: the consumer exits without closing what it opened

Prints `RESULT <sum>` as the consumer computed it (the producer checks it) and exits 0 when the
exchange did what it should. Both processes use device 0; 4 MiB of device memory."""
import multiprocessing as mp
import sys

N = 1 << 20  # float32 elements: 4 MiB
EXPECTED = float(N * (N - 1) // 2)


def torch_consumer(q, answers):
    import torch
    t = q.get()
    answers.put(float(t.sum(dtype=torch.float64).item()))
    del t
    torch.cuda.synchronize()


def torch_correct():
    import torch
    import torch.multiprocessing as tmp
    ctx = tmp.get_context("spawn")
    q, answers = ctx.Queue(), ctx.Queue()
    t = torch.arange(N, device="cuda:0", dtype=torch.float32)
    p = ctx.Process(target=torch_consumer, args=(q, answers))
    p.start()
    q.put(t)
    got = answers.get(timeout=120)
    p.join(120)
    del t
    torch.cuda.synchronize()
    return got, p.exitcode


def cupy_consumer(handle, mode, to_producer, from_producer):
    import cupy
    rt = cupy.cuda.runtime
    cupy.cuda.Device(0).use()
    ptr = rt.ipcOpenMemHandle(handle, rt.cudaIpcMemLazyEnablePeerAccess)
    mem = cupy.cuda.UnownedMemory(ptr, N * 4, None)
    x = cupy.ndarray((N,), dtype=cupy.float32, memptr=cupy.cuda.MemoryPointer(mem, 0))
    to_producer.put(float(x.sum(dtype=cupy.float64).get()))
    del x, mem
    if mode == "cupy-free-early":
        from_producer.get(timeout=120)  # the producer freed it
    if mode != "cupy-never-close":
        rt.ipcCloseMemHandle(ptr)
    cupy.cuda.runtime.deviceSynchronize()


def cupy_exchange(mode):
    import cupy
    cupy.cuda.set_allocator(None)  # each array its own cudaMalloc: the pointer is the base
    rt = cupy.cuda.runtime
    x = cupy.arange(N, dtype=cupy.float32)
    handle = rt.ipcGetMemHandle(x.data.ptr)
    ctx = mp.get_context("spawn")
    to_producer, from_producer = ctx.Queue(), ctx.Queue()
    p = ctx.Process(target=cupy_consumer, args=(handle, mode, to_producer, from_producer))
    p.start()
    got = to_producer.get(timeout=120)
    if mode == "cupy-free-early":
        del x  # cudaFree while the consumer still has the memory open
        cupy.cuda.runtime.deviceSynchronize()
        from_producer.put("freed")
    p.join(120)
    return got, p.exitcode


def main():
    mode = sys.argv[1] if len(sys.argv) == 2 else ""
    if mode == "torch-correct":
        got, code = torch_correct()
    elif mode in ("cupy-correct", "cupy-free-early", "cupy-never-close"):
        got, code = cupy_exchange(mode)
    else:
        print(__doc__, file=sys.stderr)
        return 2
    print("RESULT %.1f" % got)
    print("CONSUMER exit %s" % code)
    return 0 if got == EXPECTED and code == 0 else 1


if __name__ == "__main__":
    sys.exit(main())
