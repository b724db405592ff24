/* Multicast scenarios on the simulated driver (never on a GPU machine of this project):
 * `multicast_cuda SCENARIO`. Every covered call is printed as `CALL symbol result` (check.h).
 *   team        a team of two devices: the granularities asked, both devices added, memory of
 *               each device bound by handle (cuMulticastBindMem, _v2) and by address
 *               (cuMulticastBindAddr, _v2), every bind unbound, the object released
 *   incomplete  a team of two with one device added: the bind blocks (the simulator gives up
 *               after SHARECHECK_SIM_MULTICAST_WAIT_MS and answers CUDA_ERROR_ILLEGAL_STATE)
 *   map-incomplete  a team of two with one device added, mapped (cuMemMap blocks as a bind does)
 *   late-add    a thread binds device 0's memory before device 1 is added; the main thread adds
 *               it 200 ms later, and the bind returns: the pattern of one thread per device
 *   leak        a multicast object the process exits holding (never released: found at exit)
 *   procaddress the _v2 bind and the granularity through cuGetProcAddress (13.1 and 12.1), as
 *               the runtime calls them
 * Negative scenarios break one rule once (named in tests/multicast.rs) and give back what they
 * set up: create-size, create-flags, add-full, bind-not-granular, bindaddr-not-granular,
 * bind-past-memory, bind-past-object, bindaddr-past-object, bind-not-on-team, bind-flags,
 * unbind-not-granular, unbind-past-object (a team this process has not filled: device 0 of two),
 * unbind-not-a-bind, bind-not-on-dev, bind-dev-not-in-team (host NUMA memory, a team of one),
 * bind-not-shareable. */
#include <cuda.h>
#include <pthread.h>
#include <string.h>
#include <unistd.h>
#include "check.h"

static size_t G;

static CUmulticastObjectProp team_prop(unsigned devices) {
    CUmulticastObjectProp p;
    memset(&p, 0, sizeof p);
    p.numDevices = devices;
    p.size = 2 * G;
    p.handleTypes = CU_MEM_HANDLE_TYPE_POSIX_FILE_DESCRIPTOR;
    return p;
}

/* One granule at a location (device or host NUMA node) with handle types `types`. */
static CUmemGenericAllocationHandle memory_with(CUmemLocationType where, int id, int types) {
    CUmemAllocationProp p;
    memset(&p, 0, sizeof p);
    p.type = CU_MEM_ALLOCATION_TYPE_PINNED;
    p.location.type = where;
    p.location.id = id;
    p.requestedHandleTypes = (CUmemAllocationHandleType)types;
    CUmemGenericAllocationHandle h;
    CALL("cuMemCreate", cuMemCreate(&h, G, &p, 0));
    return h;
}

static CUmemGenericAllocationHandle memory_on(int dev) {
    return memory_with(CU_MEM_LOCATION_TYPE_DEVICE, dev, CU_MEM_HANDLE_TYPE_POSIX_FILE_DESCRIPTOR);
}

/* Memory of `dev` mapped at a fresh reservation. */
static CUdeviceptr mapped_on(int dev, CUmemGenericAllocationHandle *h) {
    *h = memory_on(dev);
    CUdeviceptr va;
    CALL("cuMemAddressReserve", cuMemAddressReserve(&va, G, 0, 0, 0));
    CALL("cuMemMap", cuMemMap(va, G, 0, *h, 0));
    return va;
}

struct late_bind {
    CUcontext ctx;
    CUmemGenericAllocationHandle mc, mem;
    int result;
};

static void *bind_thread(void *arg) {
    struct late_bind *b = arg;
    cuCtxSetCurrent(b->ctx);
    b->result = cuMulticastBindMem(b->mc, 0, b->mem, 0, G, 0);
    return NULL;
}

int main(int argc, char **argv) {
    if (argc < 2) return 2;
    const char *s = argv[1];
    USE_PRIMARY_CONTEXT(0);
    CUmulticastObjectProp p = team_prop(2);
    p.size = 2u << 20;
    CALL("cuMulticastGetGranularity", cuMulticastGetGranularity(&G, &p, CU_MULTICAST_GRANULARITY_MINIMUM));
    if (!G) return 3;
    size_t recommended = 0;
    CALL("cuMulticastGetGranularity", cuMulticastGetGranularity(&recommended, &p, CU_MULTICAST_GRANULARITY_RECOMMENDED));
    p = team_prop(2);
    CUmemGenericAllocationHandle mc;
    CALL("cuMulticastCreate", cuMulticastCreate(&mc, &p));
    CALL("cuMulticastAddDevice", cuMulticastAddDevice(mc, 0));
    if (!strcmp(s, "leak")) return 0;
    if (!strcmp(s, "map-incomplete")) {
        CUdeviceptr va;
        CALL("cuMemAddressReserve", cuMemAddressReserve(&va, 2 * G, 0, 0, 0));
        CALL("cuMemMap", cuMemMap(va, 2 * G, 0, mc, 0));
        CALL("cuMemAddressFree", cuMemAddressFree(va, 2 * G));
        CALL("cuMemRelease", cuMemRelease(mc));
        return 0;
    }
    if (!strcmp(s, "late-add")) {
        struct late_bind b = {0};
        MUST(cuCtxGetCurrent(&b.ctx));
        b.mc = mc;
        b.mem = memory_on(0);
        pthread_t t;
        if (pthread_create(&t, NULL, bind_thread, &b) != 0) return 4;
        usleep(200 * 1000);
        CALL("cuMulticastAddDevice", cuMulticastAddDevice(mc, 1));
        pthread_join(t, NULL);
        printf("CALL cuMulticastBindMem %d\n", b.result);
        CALL("cuMulticastUnbind", cuMulticastUnbind(mc, 0, 0, G));
        CALL("cuMemRelease", cuMemRelease(mc));
        CALL("cuMemRelease", cuMemRelease(b.mem));
        return 0;
    }
    if (!strcmp(s, "incomplete")) {
        CUmemGenericAllocationHandle h0 = memory_on(0);
        CALL("cuMulticastBindMem", cuMulticastBindMem(mc, 0, h0, 0, G, 0));
        CALL("cuMemRelease", cuMemRelease(mc));
        CALL("cuMemRelease", cuMemRelease(h0));
        return 0;
    }
    if (!strcmp(s, "create-size") || !strcmp(s, "create-flags")) {
        CUmulticastObjectProp bad = team_prop(2);
        if (!strcmp(s, "create-size")) bad.size = G + 4096;
        else bad.flags = 1;
        CUmemGenericAllocationHandle other;
        CALL("cuMulticastCreate", cuMulticastCreate(&other, &bad));
        CALL("cuMemRelease", cuMemRelease(mc));
        return 0;
    }
    if (!strcmp(s, "bind-dev-not-in-team")) {
        CUmulticastObjectProp one = team_prop(1);
        CUmemGenericAllocationHandle solo;
        CUmemGenericAllocationHandle host = memory_with(CU_MEM_LOCATION_TYPE_HOST_NUMA, 0, CU_MEM_HANDLE_TYPE_POSIX_FILE_DESCRIPTOR);
        CALL("cuMulticastCreate", cuMulticastCreate(&solo, &one));
        CALL("cuMulticastAddDevice", cuMulticastAddDevice(solo, 0));
        CALL("cuMulticastBindMem_v2", cuMulticastBindMem_v2(solo, 1, 0, host, 0, G, 0));
        CALL("cuMemRelease", cuMemRelease(solo));
        CALL("cuMemRelease", cuMemRelease(mc));
        CALL("cuMemRelease", cuMemRelease(host));
        return 0;
    }
    if (!strcmp(s, "bind-not-on-team")) {
        /* A team of one (device 0), whole; memory of device 1. */
        CUmulticastObjectProp one = team_prop(1);
        CUmemGenericAllocationHandle solo, h1 = memory_on(1);
        CALL("cuMulticastCreate", cuMulticastCreate(&solo, &one));
        CALL("cuMulticastAddDevice", cuMulticastAddDevice(solo, 0));
        CALL("cuMulticastBindMem", cuMulticastBindMem(solo, 0, h1, 0, G, 0));
        CALL("cuMemRelease", cuMemRelease(solo));
        CALL("cuMemRelease", cuMemRelease(mc));
        CALL("cuMemRelease", cuMemRelease(h1));
        return 0;
    }
    if (!strcmp(s, "unbind-not-granular") || !strcmp(s, "unbind-past-object")) {
        if (!strcmp(s, "unbind-not-granular"))
            CALL("cuMulticastUnbind", cuMulticastUnbind(mc, 0, 0, G / 2));
        else
            CALL("cuMulticastUnbind", cuMulticastUnbind(mc, 0, 2 * G, G));
        CALL("cuMemRelease", cuMemRelease(mc));
        return 0;
    }
    CALL("cuMulticastAddDevice", cuMulticastAddDevice(mc, 1));
    if (!strcmp(s, "unbind-not-a-bind")) {
        CUmemGenericAllocationHandle h0 = memory_on(0);
        CALL("cuMulticastBindMem", cuMulticastBindMem(mc, 0, h0, 0, G, 0));
        CALL("cuMulticastUnbind", cuMulticastUnbind(mc, 0, 0, 2 * G));
        CALL("cuMulticastUnbind", cuMulticastUnbind(mc, 0, 0, G));
        CALL("cuMemRelease", cuMemRelease(mc));
        CALL("cuMemRelease", cuMemRelease(h0));
        return 0;
    }
    if (!strcmp(s, "add-full")) {
        CALL("cuMulticastAddDevice", cuMulticastAddDevice(mc, 0));
        CALL("cuMemRelease", cuMemRelease(mc));
        return 0;
    }
    if (!strncmp(s, "bind-", 5)) {
        CUmemGenericAllocationHandle h0 = memory_on(0);
        if (!strcmp(s, "bind-not-granular"))
            CALL("cuMulticastBindMem", cuMulticastBindMem(mc, 0, h0, 0, G / 2, 0));
        else if (!strcmp(s, "bind-past-memory"))
            CALL("cuMulticastBindMem", cuMulticastBindMem(mc, 0, h0, G, G, 0));
        else if (!strcmp(s, "bind-past-object"))
            CALL("cuMulticastBindMem", cuMulticastBindMem(mc, 2 * G, h0, 0, G, 0));
        else if (!strcmp(s, "bind-flags"))
            CALL("cuMulticastBindMem", cuMulticastBindMem(mc, 0, h0, 0, G, 1));
        else if (!strcmp(s, "bind-not-on-dev"))
            CALL("cuMulticastBindMem_v2", cuMulticastBindMem_v2(mc, 1, 0, h0, 0, G, 0));
        else if (!strcmp(s, "bind-not-shareable")) {
            CUmemGenericAllocationHandle plain = memory_with(CU_MEM_LOCATION_TYPE_DEVICE, 0, 0);
            CALL("cuMulticastBindMem", cuMulticastBindMem(mc, 0, plain, 0, G, 0));
            CALL("cuMemRelease", cuMemRelease(plain));
        }
        CALL("cuMemRelease", cuMemRelease(mc));
        CALL("cuMemRelease", cuMemRelease(h0));
        return 0;
    }
    if (!strncmp(s, "bindaddr-", 9)) {
        CUmemGenericAllocationHandle a1;
        CUdeviceptr va1 = mapped_on(1, &a1);
        if (!strcmp(s, "bindaddr-not-granular"))
            CALL("cuMulticastBindAddr_v2", cuMulticastBindAddr_v2(mc, 1, 0, va1 + 4096, G, 0));
        else
            CALL("cuMulticastBindAddr_v2", cuMulticastBindAddr_v2(mc, 1, 2 * G, va1, G, 0));
        CALL("cuMemRelease", cuMemRelease(mc));
        CALL("cuMemUnmap", cuMemUnmap(va1, G));
        CALL("cuMemAddressFree", cuMemAddressFree(va1, G));
        CALL("cuMemRelease", cuMemRelease(a1));
        return 0;
    }
    if (!strcmp(s, "procaddress")) {
        CUdriverProcAddressQueryResult st;
        CUresult (*bind_v2)(CUmemGenericAllocationHandle, CUdevice, size_t, CUmemGenericAllocationHandle, size_t, size_t, unsigned long long) = NULL;
        CUresult (*unbind)(CUmemGenericAllocationHandle, CUdevice, size_t, size_t) = NULL;
        MUST(cuGetProcAddress("cuMulticastBindMem", (void **)&bind_v2, 13010, 0, &st));
        MUST(cuGetProcAddress("cuMulticastUnbind", (void **)&unbind, 12010, 0, &st));
        if (!bind_v2 || !unbind) return 4;
        CUmemGenericAllocationHandle h1 = memory_on(1);
        CALL("cuMulticastBindMem_v2", bind_v2(mc, 1, 0, h1, 0, G, 0));
        CALL("cuMulticastUnbind", unbind(mc, 1, 0, G));
        CALL("cuMemRelease", cuMemRelease(mc));
        CALL("cuMemRelease", cuMemRelease(h1));
        return 0;
    }
    /* team */
    CUmemGenericAllocationHandle h0 = memory_on(0), h1 = memory_on(1), a0, a1;
    CUdeviceptr va0 = mapped_on(0, &a0), va1 = mapped_on(1, &a1);
    CALL("cuMulticastBindMem", cuMulticastBindMem(mc, 0, h0, 0, G, 0));
    CALL("cuMulticastBindMem_v2", cuMulticastBindMem_v2(mc, 1, 0, h1, 0, G, 0));
    CALL("cuMulticastBindAddr", cuMulticastBindAddr(mc, G, va0, G, 0));
    CALL("cuMulticastBindAddr_v2", cuMulticastBindAddr_v2(mc, 1, G, va1, G, 0));
    CALL("cuMulticastUnbind", cuMulticastUnbind(mc, 0, 0, G));
    CALL("cuMulticastUnbind", cuMulticastUnbind(mc, 1, 0, G));
    CALL("cuMulticastUnbind", cuMulticastUnbind(mc, 0, G, G));
    CALL("cuMulticastUnbind", cuMulticastUnbind(mc, 1, G, G));
    CUdeviceptr mva;
    CALL("cuMemAddressReserve", cuMemAddressReserve(&mva, 2 * G, 0, 0, 0));
    CALL("cuMemMap", cuMemMap(mva, 2 * G, 0, mc, 0));
    CALL("cuMemUnmap", cuMemUnmap(mva, 2 * G));
    CALL("cuMemAddressFree", cuMemAddressFree(mva, 2 * G));
    CALL("cuMemRelease", cuMemRelease(mc));
    CALL("cuMemUnmap", cuMemUnmap(va0, G));
    CALL("cuMemUnmap", cuMemUnmap(va1, G));
    CALL("cuMemAddressFree", cuMemAddressFree(va0, G));
    CALL("cuMemAddressFree", cuMemAddressFree(va1, G));
    CALL("cuMemRelease", cuMemRelease(h0));
    CALL("cuMemRelease", cuMemRelease(h1));
    CALL("cuMemRelease", cuMemRelease(a0));
    CALL("cuMemRelease", cuMemRelease(a1));
    return 0;
}
