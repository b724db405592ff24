"""PyTorch peer-copy smoke case for the sharecheck shim (run by scripts/gpu-smoke.sh).

Copies tensors between cuda:0 and cuda:1 (x.to(), copy_ both ways, blocking and non-blocking) and
checks the values. Prints `CHECK <name> <value>` lines (compared between the runs without and with
the shim) and `NOTE` lines (information). Exit status 0 if every check holds, 1 otherwise, 3 if
fewer than 2 GPUs.
"""
import sys

import torch

failures = 0


def check(name, ok, value=None):
    global failures
    shown = ok if value is None else value
    print("CHECK %s %s" % (name, shown), flush=True)
    if not ok:
        failures += 1


def main():
    print("NOTE torch %s cuda %s" % (torch.__version__, torch.version.cuda), flush=True)
    n = torch.cuda.device_count()
    check("device_count_at_least_2", n >= 2, n >= 2)
    if n < 2:
        print("SKIP need 2 GPUs, found %d" % n, flush=True)
        return 3
    can01 = torch.cuda.can_device_access_peer(0, 1)
    can10 = torch.cuda.can_device_access_peer(1, 0)
    check("can_device_access_peer(0,1)", can01 is True, can01)
    check("can_device_access_peer(1,0)", can10 is True, can10)

    count = 16 << 20  # 64 MiB of float32
    x = torch.arange(count, dtype=torch.float32, device="cuda:0")
    expected = torch.arange(count, dtype=torch.float32)

    y = x.to("cuda:1")
    torch.cuda.synchronize(1)
    check("to_cuda1", y.device.index == 1 and torch.equal(y.cpu(), expected))

    z = torch.zeros(count, dtype=torch.float32, device="cuda:1")
    z.copy_(x)  # 0 -> 1
    torch.cuda.synchronize(0)
    torch.cuda.synchronize(1)
    check("copy_0_to_1", torch.equal(z.cpu(), expected))

    w = torch.full((count,), 7.0, dtype=torch.float32, device="cuda:1")
    x.copy_(w)  # 1 -> 0
    torch.cuda.synchronize(0)
    torch.cuda.synchronize(1)
    check("copy_1_to_0", bool((x.cpu() == 7.0).all()))

    v = torch.empty(count, dtype=torch.float32, device="cuda:0")
    v.copy_(z, non_blocking=True)  # 1 -> 0, stream-ordered
    u = torch.empty(count, dtype=torch.float32, device="cuda:1")
    u.copy_(v, non_blocking=True)  # 0 -> 1, stream-ordered
    torch.cuda.synchronize(0)
    torch.cuda.synchronize(1)
    check("copy_non_blocking_round_trip", torch.equal(u.cpu(), expected))

    print("DONE failures=%d" % failures, flush=True)
    return 0 if failures == 0 else 1


if __name__ == "__main__":
    sys.exit(main())
