/* CUDA peer-access scenarios for the rule tests: `peer_cuda SCENARIO`. Each negative scenario
 * makes exactly one documented requirement break (its name says which); `correct*` scenarios use
 * the API as documented and must produce no finding. Every interposed call prints
 * `CALL <symbol> <result>`. Built plain and with -DCUDA_API_PER_THREAD_DEFAULT_STREAM. Needs
 * three devices for `too-many-peers`, two otherwise. The same program runs on real GPUs
 * (scripts/gpu-smoke.sh). */
#include <cuda.h>
#include <pthread.h>
#include <string.h>
#include "check.h"

#ifdef CUDA_API_PER_THREAD_DEFAULT_STREAM
#define PTDS(name) name "_ptds"
#define PTSZ(name) name "_ptsz"
#else
#define PTDS(name) name
#define PTSZ(name) name
#endif

#define BYTES (1 << 20)

static CUcontext ctx[3];
static CUdeviceptr mem[3];
static int devices;

static void setup(void) {
    MUST(cuInit(0));
    MUST(cuDeviceGetCount(&devices));
    if (devices > 3) devices = 3;
    for (int d = 0; d < devices; d++) {
        CUdevice dev;
        MUST(cuDeviceGet(&dev, d));
        MUST(cuDevicePrimaryCtxRetain(&ctx[d], dev));
        MUST(cuCtxSetCurrent(ctx[d]));
        MUST(cuMemAlloc(&mem[d], BYTES));
    }
    MUST(cuCtxSetCurrent(ctx[0]));
}

static void enable(int from, int to) {
    MUST(cuCtxSetCurrent(ctx[from]));
    CALL("cuCtxEnablePeerAccess", cuCtxEnablePeerAccess(ctx[to], 0));
}

static void disable(int from, int to) {
    MUST(cuCtxSetCurrent(ctx[from]));
    CALL("cuCtxDisablePeerAccess", cuCtxDisablePeerAccess(ctx[to]));
}

static void copy(int dst, int src, size_t bytes) {
    CALL(PTDS("cuMemcpyPeer"), cuMemcpyPeer(mem[dst], ctx[dst], mem[src], ctx[src], bytes));
}

static void copy_async(int dst, int src, CUstream stream) {
    CALL(PTSZ("cuMemcpyPeerAsync"),
         cuMemcpyPeerAsync(mem[dst], ctx[dst], mem[src], ctx[src], 4096, stream));
}

/* A context of its own on `device`, current when this returns. */
static CUcontext new_context(int device) {
    CUdevice dev;
    CUcontext c;
    MUST(cuDeviceGet(&dev, device));
    MUST(cuCtxCreate(&c, NULL, 0, dev));
    return c;
}

/* Both directions between 0 and 1, from two threads at once. */
static void *enable_from(void *arg) {
    int from = *(int *)arg;
    enable(from, 1 - from);
    copy(1 - from, from, 4096);
    return NULL;
}

static int correct(void) {
    int can = -1;
    CALL("cuDeviceCanAccessPeer", cuDeviceCanAccessPeer(&can, 0, 1));
    if (!can) return 0;
    CALL("cuDeviceCanAccessPeer", cuDeviceCanAccessPeer(&can, 1, 0));
    /* Enable, copy both ways (sync and async, on streams of each side), disable, re-enable. */
    enable(0, 1);
    enable(1, 0);
    CUstream s0, s1;
    MUST(cuCtxSetCurrent(ctx[0]));
    MUST(cuStreamCreate(&s0, 0));
    MUST(cuCtxSetCurrent(ctx[1]));
    MUST(cuStreamCreate(&s1, 0));
    MUST(cuCtxSetCurrent(ctx[0]));
    copy(1, 0, BYTES);
    copy(0, 1, 4096);
    copy_async(1, 0, s0);
    copy_async(0, 1, s1);
    copy_async(1, 0, 0);
    MUST(cuStreamSynchronize(s0));
    MUST(cuStreamSynchronize(s1));
    MUST(cuStreamSynchronize(0));
    disable(0, 1);
    disable(1, 0);
    enable(0, 1);
    copy(1, 0, 4096);
    disable(0, 1);
    /* One direction only, copies issued in the context that has access. */
    enable(1, 0);
    MUST(cuCtxSetCurrent(ctx[1]));
    copy(0, 1, 4096);
    copy(1, 0, 4096);
    disable(1, 0);
    /* Several threads, each enabling its own direction. */
    pthread_t t[2];
    int from[2] = {0, 1};
    for (int i = 0; i < 2; i++) pthread_create(&t[i], NULL, enable_from, &from[i]);
    for (int i = 0; i < 2; i++) pthread_join(t[i], NULL);
    disable(0, 1);
    disable(1, 0);
    /* Several contexts: a context of its own on device 1, destroyed while access to it is
     * enabled; a new one (which may get the same handle) can be enabled again. */
    for (int round = 0; round < 2; round++) {
        CUcontext extra = new_context(1);
        MUST(cuCtxSetCurrent(ctx[0]));
        CALL("cuCtxEnablePeerAccess", cuCtxEnablePeerAccess(extra, 0));
        CALL("cuCtxDestroy_v2", cuCtxDestroy(extra));
    }
    /* A primary context reset ends the access granted from and to it. */
    enable(0, 1);
    CUdevice dev1;
    MUST(cuDeviceGet(&dev1, 1));
    CALL("cuDevicePrimaryCtxReset_v2", cuDevicePrimaryCtxReset(dev1));
    MUST(cuDevicePrimaryCtxRetain(&ctx[1], dev1));
    enable(0, 1);
    /* Releasing the last reference ends the primary context (a reset does not release): it was
     * retained twice, so the first release keeps the access and the second ends it. */
    CALL("cuDevicePrimaryCtxRelease_v2", cuDevicePrimaryCtxRelease(dev1));
    CALL("cuDevicePrimaryCtxRelease_v2", cuDevicePrimaryCtxRelease(dev1));
    MUST(cuDevicePrimaryCtxRetain(&ctx[1], dev1));
    enable(0, 1);
    disable(0, 1);
    MUST(cuStreamDestroy(s0));
    return 0;
}

int main(int argc, char **argv) {
    if (argc != 2) {
        fprintf(stderr, "usage: %s SCENARIO\n", argv[0]);
        return 2;
    }
    const char *s = argv[1];
    setup();
    int can = -1;
    if (!strcmp(s, "correct")) return correct();
    if (!strcmp(s, "can-access-invalid-device")) {
        CALL("cuDeviceCanAccessPeer", cuDeviceCanAccessPeer(&can, 0, 7));
    } else if (!strcmp(s, "can-access-same-device")) {
        CALL("cuDeviceCanAccessPeer", cuDeviceCanAccessPeer(&can, 0, 0));
        printf("CAN %d\n", can);
    } else if (!strcmp(s, "enable-flags")) {
        CALL("cuCtxEnablePeerAccess", cuCtxEnablePeerAccess(ctx[1], 1));
        printf("AFTER\n");
    } else if (!strcmp(s, "enable-flags-repeated")) {
        for (int i = 0; i < 5; i++)
            CALL("cuCtxEnablePeerAccess", cuCtxEnablePeerAccess(ctx[1], 1));
    } else if (!strcmp(s, "enable-no-current-context")) {
        MUST(cuCtxSetCurrent(NULL));
        CALL("cuCtxEnablePeerAccess", cuCtxEnablePeerAccess(ctx[1], 0));
    } else if (!strcmp(s, "enable-null-peer")) {
        CALL("cuCtxEnablePeerAccess", cuCtxEnablePeerAccess(NULL, 0));
    } else if (!strcmp(s, "enable-destroyed-peer")) {
        CUcontext gone = new_context(1);
        MUST(cuCtxDestroy(gone));
        MUST(cuCtxSetCurrent(ctx[0]));
        CALL("cuCtxEnablePeerAccess", cuCtxEnablePeerAccess(gone, 0));
    } else if (!strcmp(s, "enable-self")) {
        CALL("cuCtxEnablePeerAccess", cuCtxEnablePeerAccess(ctx[0], 0));
        CALL("cuCtxEnablePeerAccess", cuCtxEnablePeerAccess(ctx[0], 0));
    } else if (!strcmp(s, "enable-unsupported")) {
        CALL("cuCtxEnablePeerAccess", cuCtxEnablePeerAccess(ctx[1], 0));
    } else if (!strcmp(s, "enable-same-device")) {
        CUcontext other = new_context(0);
        MUST(cuCtxSetCurrent(ctx[0]));
        CALL("cuCtxEnablePeerAccess", cuCtxEnablePeerAccess(other, 0));
    } else if (!strcmp(s, "enable-twice")) {
        enable(0, 1);
        enable(0, 1);
    } else if (!strcmp(s, "enable-attributes")) {
        /* Run with SHARECHECK_SIM_ATTRS making device 1 differ. */
        enable(0, 1);
    } else if (!strcmp(s, "enable-too-many-peers")) {
        /* Run with SHARECHECK_SIM_MAX_PEERS=1 and three devices. */
        enable(0, 1);
        enable(0, 2);
    } else if (!strcmp(s, "disable-not-enabled")) {
        disable(0, 1);
    } else if (!strcmp(s, "disable-other-direction")) {
        enable(0, 1);
        disable(1, 0);
    } else if (!strcmp(s, "disable-no-current-context")) {
        MUST(cuCtxSetCurrent(NULL));
        CALL("cuCtxDisablePeerAccess", cuCtxDisablePeerAccess(ctx[1]));
    } else if (!strcmp(s, "disable-null-peer")) {
        CALL("cuCtxDisablePeerAccess", cuCtxDisablePeerAccess(NULL));
    } else if (!strcmp(s, "disable-after-async-copies")) {
        CUstream s0;
        MUST(cuStreamCreate(&s0, 0));
        enable(0, 1);
        copy_async(1, 0, s0);
        disable(0, 1);
        MUST(cuStreamSynchronize(s0));
    } else if (!strcmp(s, "disable-after-stream-destroyed")) {
        /* The copy's stream is gone by the disable: nothing may ask about it any more. */
        CUstream s0;
        MUST(cuStreamCreate(&s0, 0));
        enable(0, 1);
        copy_async(1, 0, s0);
        MUST(cuStreamSynchronize(s0));
        CALL("cuStreamDestroy_v2", cuStreamDestroy(s0));
        disable(0, 1);
    } else if (!strcmp(s, "memcpy-range")) {
        copy(1, 0, BYTES + 16);
    } else if (!strcmp(s, "memcpy-adjacent")) {
        /* Two allocations of device 0 side by side (the simulator maps them next to each other
           in most runs; a few tries find a pair): a copy from the end of the lower one into the
           upper one. */
        CUdeviceptr a[8], lower = 0;
        MUST(cuCtxSetCurrent(ctx[0]));
        for (int i = 0; i < 8; i++) MUST(cuMemAlloc(&a[i], BYTES));
        for (int i = 0; i < 8 && !lower; i++)
            for (int j = 0; j < 8; j++)
                if (a[i] + BYTES == a[j]) lower = a[i];
        if (!lower) { fprintf(stderr, "no adjacent allocations\n"); return 3; }
        CALL(PTDS("cuMemcpyPeer"), cuMemcpyPeer(mem[1], ctx[1], lower + BYTES - 64, ctx[0], 128));
        for (int i = 0; i < 8; i++) MUST(cuMemFree(a[i]));
    } else if (!strcmp(s, "memcpy-freed")) {
        CUdeviceptr gone;
        MUST(cuCtxSetCurrent(ctx[0]));
        MUST(cuMemAlloc(&gone, BYTES));
        CALL("cuMemFree_v2", cuMemFree(gone));
        CALL(PTDS("cuMemcpyPeer"), cuMemcpyPeer(mem[1], ctx[1], gone, ctx[0], 4096));
    } else if (!strcmp(s, "memcpy-freed-after-copy")) {
        /* The copy before the free teaches the shim the allocation's range: the free keeps its
           size, and the explanation of the copy after it names it. */
        CUdeviceptr gone;
        MUST(cuCtxSetCurrent(ctx[0]));
        MUST(cuMemAlloc(&gone, BYTES));
        CALL(PTDS("cuMemcpyPeer"), cuMemcpyPeer(mem[1], ctx[1], gone, ctx[0], 4096));
        CALL("cuMemFree_v2", cuMemFree(gone));
        CALL(PTDS("cuMemcpyPeer"), cuMemcpyPeer(mem[1], ctx[1], gone, ctx[0], 4096));
    } else if (!strcmp(s, "memcpy-wrong-context")) {
        CALL(PTDS("cuMemcpyPeer"), cuMemcpyPeer(mem[1], ctx[0], mem[0], ctx[1], 4096));
    } else if (!strcmp(s, "memcpy-null-context")) {
        CALL(PTDS("cuMemcpyPeer"), cuMemcpyPeer(mem[1], NULL, mem[0], ctx[0], 4096));
    } else if (!strcmp(s, "memcpy-destroyed-stream")) {
        CUstream gone;
        MUST(cuStreamCreate(&gone, 0));
        MUST(cuStreamDestroy(gone));
        copy_async(1, 0, gone);
    } else if (!strcmp(s, "unidirectional")) {
        enable(0, 1);
        MUST(cuCtxSetCurrent(ctx[1]));
        copy(0, 1, 4096);
    } else {
        fprintf(stderr, "unknown scenario %s\n", s);
        return 2;
    }
    return 0;
}
