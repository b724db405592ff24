/* dlopen + dlsym: the program loads the driver itself, as PyTorch and CuPy do. */
#define _GNU_SOURCE
#include <cuda.h>
#include <dlfcn.h>
#include <string.h>
#include "object_of.h"

int main(void) {
    void *h = dlopen("libcuda.so.1", RTLD_NOW | RTLD_LOCAL);
    if (!h) { fprintf(stderr, "dlopen: %s\n", dlerror()); return 3; }
    CUresult (*init)(unsigned) = (CUresult (*)(unsigned))dlsym(h, "cuInit");
    CUresult (*device_get)(CUdevice *, int) = (CUresult (*)(CUdevice *, int))dlsym(h, "cuDeviceGet");
    CUresult (*retain)(CUcontext *, CUdevice) = (CUresult (*)(CUcontext *, CUdevice))dlsym(h, "cuDevicePrimaryCtxRetain");
    CUresult (*set_current)(CUcontext) = (CUresult (*)(CUcontext))dlsym(h, "cuCtxSetCurrent");
    void *can_access = dlsym(h, "cuDeviceCanAccessPeer");
    void *enable = dlsym(h, "cuCtxEnablePeerAccess");
    void *mem_alloc = dlsym(h, "cuMemAlloc_v2");
    /* Where each pointer lives: covered names come from the shim, others from the driver. */
    printf("OBJECT cuDeviceCanAccessPeer %s\n", object_of(can_access));
    printf("OBJECT cuCtxEnablePeerAccess %s\n", object_of(enable));
    printf("OBJECT cuMemAlloc_v2 %s\n", object_of(mem_alloc));
    Dl_info info;
    printf("EXACT cuMemAlloc_v2 %d\n", dladdr(mem_alloc, &info) && info.dli_saddr == mem_alloc &&
                                            info.dli_sname && strcmp(info.dli_sname, "cuMemAlloc_v2") == 0);
    /* RTLD_DEFAULT answers as without the shim: the driver was opened RTLD_LOCAL, so nothing in
       the global scope defines these names (the shim's own exports are not handed out). */
    printf("OBJECT local-default:cuMemcpyPeer %s\n", object_of(dlsym(RTLD_DEFAULT, "cuMemcpyPeer")));
    printf("OBJECT local-default:cuMemAlloc_v2 %s\n", object_of(dlsym(RTLD_DEFAULT, "cuMemAlloc_v2")));
    /* Made global, the driver defines them: a covered name gives the shim's wrapper. */
    if (!dlopen("libcuda.so.1", RTLD_NOW | RTLD_NOLOAD | RTLD_GLOBAL)) return 3;
    printf("OBJECT default:cuMemcpyPeer %s\n", object_of(dlsym(RTLD_DEFAULT, "cuMemcpyPeer")));
    /* Declared but observed: a free is observed (the shim's), an allocation by nobody (the
       driver's own, even where glibc finds the shim's export first). */
    printf("OBJECT cuMemFree_v2 %s\n", object_of(dlsym(h, "cuMemFree_v2")));
    void *default_alloc = dlsym(RTLD_DEFAULT, "cuMemAlloc_v2");
    printf("OBJECT default:cuMemAlloc_v2 %s\n", object_of(default_alloc));
    printf("SAME default:cuMemAlloc_v2 %d\n", default_alloc == mem_alloc);

    CUdevice d0, d1;
    CUcontext c0, c1;
    MUST(init(0));
    MUST(device_get(&d0, 0));
    MUST(device_get(&d1, 1));
    MUST(retain(&c0, d0));
    MUST(retain(&c1, d1));
    MUST(set_current(c0));
    int can = -1;
    CALL("cuDeviceCanAccessPeer", ((CUresult (*)(int *, CUdevice, CUdevice))can_access)(&can, d0, d1));
    CALL("cuCtxEnablePeerAccess", ((CUresult (*)(CUcontext, unsigned))enable)(c1, 0));
    CALL("cuCtxEnablePeerAccess", ((CUresult (*)(CUcontext, unsigned))enable)(c1, 1)); /* flags */
    return 0;
}
