/* A minimal "CUDA 13.0 driver" that lacks the logical endpoint functions (as R580 does). */
#include <string.h>
typedef int CUresult;
CUresult cuInit(unsigned int flags) { (void)flags; return 0; }
CUresult cuDeviceCanAccessPeer(int *can, int dev, int peer) { *can = dev != peer; return 0; }
CUresult cuGetProcAddress_v2(const char *symbol, void **pfn, int version, unsigned long long flags, int *status) {
    (void)version; (void)flags;
    *pfn = strcmp(symbol, "cuDeviceCanAccessPeer") == 0 ? (void *)cuDeviceCanAccessPeer : 0;
    if (status) *status = *pfn ? 0 : 1;
    return 0;
}
CUresult cuDriverGetVersion(int *v) { *v = 13000; return 0; }
