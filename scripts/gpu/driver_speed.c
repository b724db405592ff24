// The driver's own speed over time, beside plain CPU work (issue 24): per window of about 100 ms,
// the ns per iteration of a dependent multiply chain (the core), of a dependent chase through
// 1 MiB (L2), of cuPointerGetAttribute (the kind of question the shim's checks ask the driver,
// answered from host memory) and of that call followed by 16 dependent loads from the 1 MiB
// (what lines the shim keeps cost after a driver call). One line per window:
//   TAG window alu_ns l2_ns driver_ns driver_then_16_loads_ns
// Built and run by scripts/gpu/driver-speed.sh. No multicast object is created.
#include <cuda.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <time.h>

static double now(void)
{
    struct timespec t;
    clock_gettime(CLOCK_MONOTONIC, &t);
    return t.tv_sec * 1e9 + t.tv_nsec;
}

static uint64_t *chain; /* one index per 64-byte line: a random cycle through all of them */
static uint64_t at;

static void make_chain(size_t bytes)
{
    size_t n = bytes / 64, *perm = malloc(n * sizeof *perm);
    chain = aligned_alloc(64, n * 64);
    if (!perm || !chain)
        exit(1);
    for (size_t i = 0; i < n; i++)
        perm[i] = i;
    srand(1);
    for (size_t i = n - 1; i > 0; i--) {
        size_t j = (size_t)rand() % (i + 1), t = perm[i];
        perm[i] = perm[j];
        perm[j] = t;
    }
    for (size_t i = 0; i < n; i++)
        chain[perm[i] * 8] = perm[(i + 1) % n] * 8;
    free(perm);
}

static uint64_t loads(long n)
{
    uint64_t q = at;
    for (long i = 0; i < n; i++)
        q = chain[q];
    return at = q;
}

static double alu(long n)
{
    volatile uint64_t sink;
    uint64_t x = at | 1;
    double t0 = now();
    for (long i = 0; i < n; i++)
        x = x * 6364136223846793005ULL + 1442695040888963407ULL;
    sink = x;
    (void)sink;
    return (now() - t0) / n;
}

int main(int argc, char **argv)
{
    const char *tag = argc > 1 ? argv[1] : "-";
    int windows = argc > 2 ? atoi(argv[2]) : 30;
    CUdevice dev;
    CUcontext ctx;
    CUdeviceptr ptr;
    unsigned int type;
    make_chain(1 << 20);
    if (cuInit(0) || cuDeviceGet(&dev, 0) || cuDevicePrimaryCtxRetain(&ctx, dev) ||
        cuCtxSetCurrent(ctx) || cuMemAlloc(&ptr, 256)) {
        fprintf(stderr, "driver_speed: no CUDA device\n");
        return 1;
    }
    for (int w = 0; w < windows; w++) {
        double a = alu(10000000), t0 = now();
        loads(2000000);
        double l2 = (now() - t0) / 2000000;
        t0 = now();
        for (int i = 0; i < 200000; i++)
            cuPointerGetAttribute(&type, CU_POINTER_ATTRIBUTE_MEMORY_TYPE, ptr);
        double drv = (now() - t0) / 200000;
        t0 = now();
        for (int i = 0; i < 100000; i++) {
            cuPointerGetAttribute(&type, CU_POINTER_ATTRIBUTE_MEMORY_TYPE, ptr);
            loads(16);
        }
        double then = (now() - t0) / 100000;
        printf("%s\t%d\t%.2f\t%.2f\t%.1f\t%.1f\n", tag, w, a, l2, drv, then);
        fflush(stdout);
    }
    cuMemFree(ptr);
    return 0;
}
