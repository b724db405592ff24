"""A small PyTorch training job for scripts/gpu-overhead.sh: timed plain and under the shim.

Trains a convolutional net on random data for a fixed number of steps with a forked DataLoader
(workers made by fork, as PyTorch does by default on Linux), then, when --nccl is given, runs
all_reduce steps through torch.distributed with the NCCL backend (one rank per process; NVLS is
kept off by the caller). With --ranks 2 (two GPUs), a second process (started by spawn, so it is
traced as a new program) joins as rank 1 on the second GPU, and each step is an all_reduce across
the two GPUs (the sum is divided by the rank count, so the checked value stays 1). Prints `TIME <seconds>` for the timed part (after one untimed warm-up
epoch) and `CHECK <name> <value>` lines that must not change under the shim.
"""
import argparse
import os
import time

import torch
import torch.nn as nn
import torch.nn.functional as F


class Random(torch.utils.data.Dataset):
    def __init__(self, n):
        self.n = n

    def __len__(self):
        return self.n

    def __getitem__(self, i):
        g = torch.Generator().manual_seed(i)
        return torch.randn(3, 32, 32, generator=g), i % 10


def net():
    return nn.Sequential(
        nn.Conv2d(3, 64, 3, padding=1), nn.ReLU(), nn.Conv2d(64, 128, 3, padding=1), nn.ReLU(),
        nn.AdaptiveAvgPool2d(1), nn.Flatten(), nn.Linear(128, 10))


def epoch(model, opt, loader, dev):
    total = 0.0
    for x, y in loader:
        x, y = x.to(dev, non_blocking=True), y.to(dev, non_blocking=True)
        opt.zero_grad(set_to_none=True)
        loss = F.cross_entropy(model(x), y)
        loss.backward()
        opt.step()
        total += loss.item()
    return total


def init_nccl(rank, ranks, dev):
    import torch.distributed as dist
    os.environ.setdefault("MASTER_ADDR", "127.0.0.1")
    os.environ.setdefault("MASTER_PORT", "29517")
    dist.init_process_group("nccl", rank=rank, world_size=ranks, device_id=dev)
    return dist


def all_reduce_steps(dist, dev, steps, ranks):
    t = torch.ones(1 << 22, device=dev)
    for _ in range(steps):
        dist.all_reduce(t)
        t /= ranks
    torch.cuda.synchronize()
    return t[0].item()


def other_rank(rank, ranks, steps):
    """Rank `rank` (> 0) of the NCCL phase, in its own process on GPU `rank`."""
    dev = torch.device("cuda:%d" % rank)
    torch.cuda.set_device(dev)
    dist = init_nccl(rank, ranks, dev)
    all_reduce_steps(dist, dev, steps, ranks)
    dist.destroy_process_group()


def main():
    p = argparse.ArgumentParser()
    p.add_argument("--samples", type=int, default=8192)
    p.add_argument("--epochs", type=int, default=3)
    p.add_argument("--nccl", type=int, default=0, help="all_reduce steps (0: none)")
    p.add_argument("--ranks", type=int, default=1, help="NCCL ranks, one GPU each (1 or more)")
    a = p.parse_args()
    torch.manual_seed(0)
    dev = torch.device("cuda:0")
    torch.backends.cudnn.benchmark = False
    torch.backends.cudnn.deterministic = True
    model = net().to(dev)
    opt = torch.optim.SGD(model.parameters(), lr=0.01)
    loader = torch.utils.data.DataLoader(Random(a.samples), batch_size=128, num_workers=4,
                                         pin_memory=True, shuffle=False)
    epoch(model, opt, loader, dev)  # warm-up: cuDNN, allocator, workers
    torch.cuda.synchronize()
    start = time.perf_counter()
    for _ in range(a.epochs):
        last = epoch(model, opt, loader, dev)
    if a.nccl:
        others = []
        if a.ranks > 1:
            import torch.multiprocessing as mp
            ctx = mp.get_context("spawn")
            for rank in range(1, a.ranks):
                proc = ctx.Process(target=other_rank, args=(rank, a.ranks, a.nccl))
                proc.start()
                others.append(proc)
        dist = init_nccl(0, a.ranks, dev)
        print("CHECK all_reduce_value %.1f" % all_reduce_steps(dist, dev, a.nccl, a.ranks),
              flush=True)
        dist.destroy_process_group()
        for proc in others:
            proc.join()
            if proc.exitcode != 0:
                raise SystemExit("rank process failed: exit %s" % proc.exitcode)
    torch.cuda.synchronize()
    print("TIME %.4f" % (time.perf_counter() - start), flush=True)
    print("CHECK final_loss %.4f" % last, flush=True)


if __name__ == "__main__":
    main()
