/* What one-way peer access does to peer copies: the measurement behind peer-access.unidirectional
 * (LD_PRELOAD.md, "One-way peer access and copies, measured"). Two devices. For each state of
 * peer access (none; 0 -> 1 only; both ways), copies 256 MiB between device 0 and device 1 with
 * cuMemcpyPeer, 10 times each way, issued with each device's context current, and prints
 * `COPY <access> <direction> <current context> <result> <GB/s>` lines.
 * Build: gcc -O1 -o unidirectional_probe unidirectional_probe.c -I/usr/local/cuda/include -lcuda */
#include <cuda.h>
#include <stdio.h>
#include <stdlib.h>
#include <time.h>

#define MUST(x)                                                          \
    do {                                                                 \
        CUresult r_ = (x);                                               \
        if (r_ != CUDA_SUCCESS) {                                        \
            fprintf(stderr, "%s:%d: %s = %d\n", __FILE__, __LINE__, #x, r_); \
            exit(3);                                                     \
        }                                                                \
    } while (0)

static double now(void) {
    struct timespec t;
    clock_gettime(CLOCK_MONOTONIC, &t);
    return t.tv_sec + t.tv_nsec * 1e-9;
}

static CUcontext c[2];
static CUdeviceptr buf[2];
static const size_t S = 256u << 20;

static void copies(const char *access) {
    for (int to = 0; to < 2; to++) {
        int from = 1 - to;
        for (int cur = 0; cur < 2; cur++) {
            MUST(cuCtxSetCurrent(c[cur]));
            CUresult r = cuMemcpyPeer(buf[to], c[to], buf[from], c[from], S); /* warm-up */
            MUST(cuCtxSynchronize());
            double t0 = now();
            for (int i = 0; i < 10 && r == CUDA_SUCCESS; i++)
                r = cuMemcpyPeer(buf[to], c[to], buf[from], c[from], S);
            MUST(cuCtxSynchronize());
            double dt = now() - t0;
            printf("COPY %s %d->%d current=%d result=%d %.1f GB/s\n", access, from, to, cur, (int)r,
                   r == CUDA_SUCCESS ? 10.0 * S / dt / 1e9 : 0.0);
            fflush(stdout);
        }
    }
}

int main(void) {
    CUdevice d[2];
    MUST(cuInit(0));
    for (int i = 0; i < 2; i++) {
        MUST(cuDeviceGet(&d[i], i));
        MUST(cuDevicePrimaryCtxRetain(&c[i], d[i]));
        MUST(cuCtxSetCurrent(c[i]));
        MUST(cuMemAlloc(&buf[i], S));
    }
    int can = 0;
    MUST(cuDeviceCanAccessPeer(&can, d[0], d[1]));
    printf("CAN_ACCESS 0->1 %d\n", can);
    copies("none");
    MUST(cuCtxSetCurrent(c[0]));
    MUST(cuCtxEnablePeerAccess(c[1], 0)); /* context 0 may access context 1's memory */
    copies("0->1-only");
    MUST(cuCtxSetCurrent(c[1]));
    MUST(cuCtxEnablePeerAccess(c[0], 0));
    copies("both");
    return 0;
}
