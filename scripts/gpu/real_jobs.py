"""Jobs of frameworks nobody here wrote, for scripts/gpu-real.sh (plain and under the shim).

Usage: python3 real_jobs.py MODE [ITERATIONS]
  torch-peer   PyTorch copies between cuda:0 and cuda:1: ITERATIONS (default 400) rounds of a
               64 MiB tensor copied 0 -> 1 and back (blocking and non-blocking, on each device's
               current stream), timed; the result is checked element by element once at the end
  cupy-peer    CuPy: peer access enabled both ways (cudaDeviceEnablePeerAccess), arrays copied
               between the devices with cudaMemcpyPeer and by cupy's own cross-device copy
  nccl         torch.distributed with NCCL across 2 processes on 2 GPUs (this process is rank 0;
               rank 1 is started by spawn): ITERATIONS (default 300) all_reduce of 64 MiB after a
               warm-up, timed between two barriers

Prints `CHECK <name> <value>` lines that must be the same with and without the shim, and for
torch-peer `TIME <seconds>` of the timed rounds. Exits 0 when every check holds, 3 with fewer than
two GPUs (or without the framework)."""
import sys
import time

failures = 0


def check(name, ok, value=None):
    global failures
    print("CHECK %s %s" % (name, ok if value is None else value), flush=True)
    if not ok:
        failures += 1


def torch_peer(iterations):
    import torch

    if torch.cuda.device_count() < 2:
        print("SKIP need 2 GPUs", flush=True)
        return 3
    check("can_access_0_1", torch.cuda.can_device_access_peer(0, 1))
    check("can_access_1_0", torch.cuda.can_device_access_peer(1, 0))
    count = 16 << 20  # 64 MiB of float32
    a = torch.arange(count, dtype=torch.float32, device="cuda:0")
    b = torch.empty(count, dtype=torch.float32, device="cuda:1")
    # Warm-up: the peer mappings and the streams exist before the timed part.
    b.copy_(a)
    a.copy_(b)
    torch.cuda.synchronize(0)
    torch.cuda.synchronize(1)
    start = time.perf_counter()
    for i in range(iterations):
        b.copy_(a, non_blocking=(i % 2 == 1))
        torch.cuda.synchronize(0)
        a.copy_(b, non_blocking=(i % 2 == 0))
        torch.cuda.synchronize(1)
    torch.cuda.synchronize(0)
    torch.cuda.synchronize(1)
    elapsed = time.perf_counter() - start
    expected = torch.arange(count, dtype=torch.float32)
    check("round_trip_exact", torch.equal(a.cpu(), expected) and torch.equal(b.cpu(), expected))
    check("bytes_moved_GiB", True, 2 * iterations * count * 4 // (1 << 30))
    print("TIME %.6f" % elapsed, flush=True)
    print("NOTE %.1f GB/s each way" % (2 * iterations * count * 4 / elapsed / 2e9), flush=True)
    return 0


def cupy_peer():
    import cupy as cp
    from cupy.cuda import runtime

    if runtime.getDeviceCount() < 2:
        print("SKIP need 2 GPUs", flush=True)
        return 3
    check("can_access_0_1", runtime.deviceCanAccessPeer(0, 1) == 1)
    check("can_access_1_0", runtime.deviceCanAccessPeer(1, 0) == 1)
    for dev, peer in ((0, 1), (1, 0)):
        with cp.cuda.Device(dev):
            runtime.deviceEnablePeerAccess(peer)
    n = 1 << 22
    with cp.cuda.Device(0):
        x = cp.arange(n, dtype=cp.float32)
    with cp.cuda.Device(1):
        y = cp.zeros(n, dtype=cp.float32)
    runtime.memcpyPeer(y.data.ptr, 1, x.data.ptr, 0, n * 4)
    cp.cuda.Device(1).synchronize()
    with cp.cuda.Device(1):
        check("memcpy_peer_0_to_1", bool((y == cp.arange(n, dtype=cp.float32)).all()))
        z = x.copy()  # cupy's own cross-device copy (peer access is enabled)
        check("cross_device_copy", z.device.id == 1 and bool((z == y).all()))
        y *= 2
    with cp.cuda.Device(0):
        w = cp.empty(n, dtype=cp.float32)
    runtime.memcpyPeerAsync(w.data.ptr, 0, y.data.ptr, 1, n * 4, 0)
    cp.cuda.Device(0).synchronize()
    with cp.cuda.Device(0):
        check("memcpy_peer_async_1_to_0", bool((w == 2 * cp.arange(n, dtype=cp.float32)).all()))
        check("sum", True, float(w.sum(dtype=cp.float64)))
    return 0


def nccl_rank(rank, iterations, port):
    import os

    import torch
    import torch.distributed as dist

    os.environ["MASTER_ADDR"] = "127.0.0.1"
    os.environ["MASTER_PORT"] = str(port)
    dev = torch.device("cuda:%d" % rank)
    torch.cuda.set_device(dev)
    dist.init_process_group("nccl", rank=rank, world_size=2, device_id=dev)
    t = torch.ones(16 << 20, device=dev)
    for _ in range(20):  # warm-up: NCCL's channels and buffers exist before the timed part
        dist.all_reduce(t)
        t /= 2
    torch.cuda.synchronize()
    dist.barrier()
    start = time.perf_counter()
    for _ in range(iterations):
        dist.all_reduce(t)
        t /= 2
    torch.cuda.synchronize()
    dist.barrier()
    elapsed = time.perf_counter() - start
    value = t[0].item()
    dist.destroy_process_group()
    return elapsed, value


def nccl(iterations):
    import torch
    import torch.multiprocessing as mp

    if torch.cuda.device_count() < 2:
        print("SKIP need 2 GPUs", flush=True)
        return 3
    port = 29600 + (time.time_ns() // 1000) % 300
    other = mp.get_context("spawn").Process(target=nccl_rank, args=(1, iterations, port))
    other.start()
    elapsed, value = nccl_rank(0, iterations, port)
    other.join()
    check("rank1_exit", other.exitcode == 0, other.exitcode)
    check("all_reduce_value", value == 1.0, value)
    print("TIME %.6f" % elapsed, flush=True)
    print("NOTE %.1f GB/s algorithm bandwidth" % (iterations * (64 << 20) / elapsed / 1e9), flush=True)
    return 0


def main():
    mode = sys.argv[1] if len(sys.argv) > 1 else ""
    try:
        if mode == "torch-peer":
            rc = torch_peer(int(sys.argv[2]) if len(sys.argv) > 2 else 400)
        elif mode == "cupy-peer":
            rc = cupy_peer()
        elif mode == "nccl":
            rc = nccl(int(sys.argv[2]) if len(sys.argv) > 2 else 300)
        else:
            sys.exit(__doc__)
    except ImportError as e:
        print("SKIP %s" % e, flush=True)
        return 3
    print("DONE failures=%d" % failures, flush=True)
    return rc if failures == 0 else 1


if __name__ == "__main__":
    sys.exit(main())
