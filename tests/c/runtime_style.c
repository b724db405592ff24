/* The CUDA runtime's way in: dlopen libcuda.so.1, dlsym only cuGetProcAddress_v2, resolve the
 * rest through it (flags 0, and CU_GET_PROC_ADDRESS_PER_THREAD_DEFAULT_STREAM for the per-thread
 * variants), then the 4-argument v1 resolver. */
#define _GNU_SOURCE
#include <cuda.h>
#include <dlfcn.h>
#include <string.h>
#include "object_of.h"

typedef CUresult (*resolve_v2_t)(const char *, void **, int, cuuint64_t, CUdriverProcAddressQueryResult *);
typedef CUresult (*resolve_v1_t)(const char *, void **, int, cuuint64_t);
typedef CUresult (*peer_copy_t)(CUdeviceptr, CUcontext, CUdeviceptr, CUcontext, size_t);
typedef CUresult (*attach_t)(CUstream, CUdeviceptr, size_t, unsigned int);
typedef CUresult (*ipc_open_t)(CUdeviceptr *, CUipcMemHandle, unsigned int);
typedef CUresult (*ipc_get_t)(CUipcMemHandle *, CUdeviceptr);

static resolve_v2_t resolve;

static void *get(const char *name, int version, cuuint64_t flags) {
    void *p = NULL;
    CUdriverProcAddressQueryResult status = (CUdriverProcAddressQueryResult)-1;
    CUresult rc = resolve(name, &p, version, flags, &status);
    printf("RESOLVE %s@%d/%d %d %d %s\n", name, version, (int)flags, (int)rc, (int)status, p ? "ptr" : "null");
    return p;
}

int main(void) {
    void *h = dlopen("libcuda.so.1", RTLD_NOW | RTLD_LOCAL);
    if (!h) { fprintf(stderr, "dlopen: %s\n", dlerror()); return 3; }
    resolve = (resolve_v2_t)dlsym(h, "cuGetProcAddress_v2");
    printf("OBJECT cuGetProcAddress_v2 %s\n", object_of((void *)resolve));

    void *probe = (void *)1;
    CUresult rc = resolve("", &probe, 0, 0, NULL);
    printf("PROBE %d %s\n", (int)rc, probe ? "ptr" : "null");
    /* The runtime's self-lookups: both resolvers come back as the shim's. */
    void *self_v2 = get("cuGetProcAddress", 12000, 0);
    resolve_v1_t resolve_v1 = (resolve_v1_t)get("cuGetProcAddress", 11030, 0);
    printf("SAME resolver_v2 %d\n", self_v2 == (void *)resolve);
    printf("OBJECT resolver_v1 %s\n", object_of((void *)resolve_v1));

    CUresult (*init)(unsigned) = (CUresult (*)(unsigned))get("cuInit", 2000, 0);
    CUresult (*device_get)(CUdevice *, int) = (CUresult (*)(CUdevice *, int))get("cuDeviceGet", 2000, 0);
    CUresult (*retain)(CUcontext *, CUdevice) = (CUresult (*)(CUcontext *, CUdevice))get("cuDevicePrimaryCtxRetain", 7000, 0);
    CUresult (*set_current)(CUcontext) = (CUresult (*)(CUcontext))get("cuCtxSetCurrent", 4000, 0);
    CUresult (*mem_alloc)(CUdeviceptr *, size_t) = (CUresult (*)(CUdeviceptr *, size_t))get("cuMemAlloc", 3020, 0);
    CUresult (*alloc_managed)(CUdeviceptr *, size_t, unsigned) = (CUresult (*)(CUdeviceptr *, size_t, unsigned))get("cuMemAllocManaged", 6000, 0);
    printf("OBJECT cuMemAlloc %s\n", object_of((void *)mem_alloc));
    printf("SAME cuMemAlloc %d\n", (void *)mem_alloc == dlsym(h, "cuMemAlloc_v2"));
    /* Observed: the free is (the shim's wrapper, at every version and per-thread flag). */
    printf("OBJECT cuMemFree %s\n", object_of(get("cuMemFree", 3020, 0)));
    printf("OBJECT cuMemFreeAsync/ptsz %s\n", object_of(get("cuMemFreeAsync", 11020, CU_GET_PROC_ADDRESS_PER_THREAD_DEFAULT_STREAM)));

    peer_copy_t copy_legacy = (peer_copy_t)get("cuMemcpyPeer", 4000, 0);
    peer_copy_t copy_ptds = (peer_copy_t)get("cuMemcpyPeer", 7000, CU_GET_PROC_ADDRESS_PER_THREAD_DEFAULT_STREAM);
    attach_t attach_legacy = (attach_t)get("cuStreamAttachMemAsync", 6000, 0);
    attach_t attach_ptsz = (attach_t)get("cuStreamAttachMemAsync", 7000, CU_GET_PROC_ADDRESS_PER_THREAD_DEFAULT_STREAM);
    ipc_get_t ipc_get = (ipc_get_t)get("cuIpcGetMemHandle", 4010, 0);
    ipc_open_t open_v1 = (ipc_open_t)get("cuIpcOpenMemHandle", 4010, 0);
    ipc_open_t open_v2 = (ipc_open_t)get("cuIpcOpenMemHandle", 11000, 0);
    /* Passed through untouched: per-thread below 7000, too new a version, unknown name. */
    get("cuMemcpyPeer", 4000, CU_GET_PROC_ADDRESS_PER_THREAD_DEFAULT_STREAM);
    get("cuLogicalEndpointCreate", 99990, 0);
    get("cuNoSuchFunction", 12000, 0);

    CUdevice d0, d1;
    CUcontext c0, c1;
    CUdeviceptr a, b, managed;
    MUST(init(0));
    MUST(device_get(&d0, 0));
    MUST(device_get(&d1, 1));
    MUST(retain(&c0, d0));
    MUST(retain(&c1, d1));
    MUST(set_current(c1));
    MUST(mem_alloc(&b, 4096));
    MUST(set_current(c0));
    MUST(mem_alloc(&a, 4096));
    MUST(alloc_managed(&managed, 4096, CU_MEM_ATTACH_GLOBAL));

    CALL("cuMemcpyPeer", copy_legacy(b, c1, a, c0, 4096));
    CALL("cuMemcpyPeer_ptds", copy_ptds(b, c1, a, c0, 4096));
    CALL("cuStreamAttachMemAsync", attach_legacy(0, managed, 0, CU_MEM_ATTACH_GLOBAL));
    CALL("cuStreamAttachMemAsync_ptsz", attach_ptsz(0, managed, 0, CU_MEM_ATTACH_GLOBAL));
    CUipcMemHandle handle;
    CALL("cuIpcGetMemHandle", ipc_get(&handle, a));
    CUdeviceptr opened;
    CALL("cuIpcOpenMemHandle", open_v1(&opened, handle, CU_IPC_MEM_LAZY_ENABLE_PEER_ACCESS));
    CALL("cuIpcOpenMemHandle_v2", open_v2(&opened, handle, CU_IPC_MEM_LAZY_ENABLE_PEER_ACCESS));

    /* The v1 resolver substitutes the same way. */
    void *p = NULL;
    CUresult v1rc = resolve_v1("cuMemcpyPeerAsync", &p, 7000, CU_GET_PROC_ADDRESS_PER_THREAD_DEFAULT_STREAM);
    printf("RESOLVE_V1 %d %s\n", (int)v1rc, p ? "ptr" : "null");
    CALL("cuMemcpyPeerAsync_ptsz", ((CUresult (*)(CUdeviceptr, CUcontext, CUdeviceptr, CUcontext, size_t, CUstream))p)(b, c1, a, c0, 64, 0));
    return 0;
}
