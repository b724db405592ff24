/* A counting layer between the shim and the real driver, for measuring on a GPU how many calls
 * the shim itself makes into the driver (issue 24): built as libcount_driver.so with libcuda.so.1
 * as its dependency and named by SHARECHECK_CUDA_LIBRARY, it is the library the shim forwards
 * to. The shim looks every driver function up in it (dlsym searches it, then libcuda.so.1): the
 * queries its checks make are defined here, counted and passed on; every other function is
 * libcuda's own. The program's calls never come here (it is loaded RTLD_LOCAL by the shim).
 *
 * At exit it writes one line per counted function called, `COUNT <symbol> <calls>`, to the file
 * COUNT_DRIVER_CALLS_OUT names (stderr when unset). Two runs of a program that differ only in
 * how many times it repeats a call give the calls the shim makes per repeated call, warm-up
 * apart (scripts/gpu/steady.sh).
 *
 * Build: scripts/gpu/steady.sh. */
#define _GNU_SOURCE
#include <dlfcn.h>
#include <stdatomic.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>

typedef int CUresult;

enum {
    CTX_GET_CURRENT,
    CTX_GET_DEVICE,
    DEVICE_GET_ATTRIBUTE,
    DEVICE_GET_COUNT,
    DEVICE_GET_UUID,
    DEVICE_GET_UUID_V2,
    DEVICE_CAN_ACCESS_PEER,
    MEM_GET_ADDRESS_RANGE_V2,
    POINTER_GET_ATTRIBUTE,
    POINTER_GET_ATTRIBUTES,
    STREAM_GET_CTX,
    STREAM_QUERY,
    PRIMARY_CTX_GET_STATE,
    MEM_GET_ALLOCATION_GRANULARITY,
    COUNTED
};

static const char *const NAMES[COUNTED] = {
    "cuCtxGetCurrent",         "cuCtxGetDevice",       "cuDeviceGetAttribute",
    "cuDeviceGetCount",        "cuDeviceGetUuid",      "cuDeviceGetUuid_v2",
    "cuDeviceCanAccessPeer",   "cuMemGetAddressRange_v2",
    "cuPointerGetAttribute",   "cuPointerGetAttributes",
    "cuStreamGetCtx",          "cuStreamQuery",        "cuDevicePrimaryCtxGetState",
    "cuMemGetAllocationGranularity",
};

static atomic_long calls[COUNTED];

/* libcuda.so.1, opened once. */
void *count_driver_libcuda(void) {
    static void *handle;
    void *h = __atomic_load_n(&handle, __ATOMIC_ACQUIRE);
    if (!h) {
        h = dlopen("libcuda.so.1", RTLD_NOW | RTLD_LOCAL);
        __atomic_store_n(&handle, h, __ATOMIC_RELEASE);
    }
    return h;
}

/* The real function of `which`, libcuda's. */
static void *real(int which) {
    static void *cache[COUNTED];
    void *f = __atomic_load_n(&cache[which], __ATOMIC_ACQUIRE);
    if (!f) {
        f = dlsym(count_driver_libcuda(), NAMES[which]);
        __atomic_store_n(&cache[which], f, __ATOMIC_RELEASE);
    }
    return f;
}

#define COUNT(which) atomic_fetch_add_explicit(&calls[which], 1, memory_order_relaxed)

CUresult cuCtxGetCurrent(void **ctx) {
    COUNT(CTX_GET_CURRENT);
    return ((CUresult(*)(void **))real(CTX_GET_CURRENT))(ctx);
}
CUresult cuCtxGetDevice(int *dev) {
    COUNT(CTX_GET_DEVICE);
    return ((CUresult(*)(int *))real(CTX_GET_DEVICE))(dev);
}
CUresult cuDeviceGetAttribute(int *value, int attribute, int dev) {
    COUNT(DEVICE_GET_ATTRIBUTE);
    return ((CUresult(*)(int *, int, int))real(DEVICE_GET_ATTRIBUTE))(value, attribute, dev);
}
CUresult cuDeviceGetCount(int *count) {
    COUNT(DEVICE_GET_COUNT);
    return ((CUresult(*)(int *))real(DEVICE_GET_COUNT))(count);
}
CUresult cuDeviceGetUuid(void *uuid, int dev) {
    COUNT(DEVICE_GET_UUID);
    return ((CUresult(*)(void *, int))real(DEVICE_GET_UUID))(uuid, dev);
}
CUresult cuDeviceGetUuid_v2(void *uuid, int dev) {
    COUNT(DEVICE_GET_UUID_V2);
    return ((CUresult(*)(void *, int))real(DEVICE_GET_UUID_V2))(uuid, dev);
}
CUresult cuDeviceCanAccessPeer(int *can, int dev, int peer) {
    COUNT(DEVICE_CAN_ACCESS_PEER);
    return ((CUresult(*)(int *, int, int))real(DEVICE_CAN_ACCESS_PEER))(can, dev, peer);
}
CUresult cuMemGetAddressRange_v2(uint64_t *base, size_t *size, uint64_t ptr) {
    COUNT(MEM_GET_ADDRESS_RANGE_V2);
    return ((CUresult(*)(uint64_t *, size_t *, uint64_t))real(MEM_GET_ADDRESS_RANGE_V2))(
        base, size, ptr);
}
CUresult cuPointerGetAttribute(void *data, int attribute, uint64_t ptr) {
    COUNT(POINTER_GET_ATTRIBUTE);
    return ((CUresult(*)(void *, int, uint64_t))real(POINTER_GET_ATTRIBUTE))(data, attribute,
                                                                           ptr);
}
CUresult cuPointerGetAttributes(unsigned n, int *attributes, void **data, uint64_t ptr) {
    COUNT(POINTER_GET_ATTRIBUTES);
    return ((CUresult(*)(unsigned, int *, void **, uint64_t))real(POINTER_GET_ATTRIBUTES))(
        n, attributes, data, ptr);
}
CUresult cuStreamGetCtx(void *stream, void **ctx) {
    COUNT(STREAM_GET_CTX);
    return ((CUresult(*)(void *, void **))real(STREAM_GET_CTX))(stream, ctx);
}
CUresult cuStreamQuery(void *stream) {
    COUNT(STREAM_QUERY);
    return ((CUresult(*)(void *))real(STREAM_QUERY))(stream);
}
CUresult cuDevicePrimaryCtxGetState(int dev, unsigned *flags, int *active) {
    COUNT(PRIMARY_CTX_GET_STATE);
    return ((CUresult(*)(int, unsigned *, int *))real(PRIMARY_CTX_GET_STATE))(dev, flags, active);
}

CUresult cuMemGetAllocationGranularity(size_t *granularity, const void *prop, int option) {
    COUNT(MEM_GET_ALLOCATION_GRANULARITY);
    return ((CUresult(*)(size_t *, const void *, int))real(MEM_GET_ALLOCATION_GRANULARITY))(
        granularity, prop, option);
}

__attribute__((destructor)) static void report(void) {
    const char *path = getenv("COUNT_DRIVER_CALLS_OUT");
    FILE *out = path ? fopen(path, "a") : stderr;
    if (!out) return;
    for (int i = 0; i < COUNTED; i++) {
        long n = atomic_load(&calls[i]);
        if (n) fprintf(out, "COUNT %s %ld\n", NAMES[i], n);
    }
    if (out != stderr) fclose(out);
}
