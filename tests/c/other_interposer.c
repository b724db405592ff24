/* Another interposer, preloaded before the shim: it forwards with dlsym(RTLD_NEXT), which must
 * lead to the next definition after it (the shim's), so the call is still seen and traced. */
#define _GNU_SOURCE
#include <dlfcn.h>
#include <stdio.h>
typedef int (*can_access_t)(int *, int, int);
int cuDeviceCanAccessPeer(int *can, int dev, int peer) {
    can_access_t next = (can_access_t)dlsym(RTLD_NEXT, "cuDeviceCanAccessPeer");
    Dl_info info;
    if (next && dladdr((void *)next, &info)) fprintf(stderr, "NEXT %s\n", info.dli_fname);
    return next ? next(can, dev, peer) : -1;
}
