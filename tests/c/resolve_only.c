/* Resolves and calls one covered function through the shim's cuGetProcAddress_v2. */
#include <cuda.h>
#include "check.h"

int main(void) {
    void *p = NULL;
    CUdriverProcAddressQueryResult status;
    MUST(cuGetProcAddress("cuDeviceCanAccessPeer", &p, 4000, 0, &status));
    int can = -1;
    CALL("cuDeviceCanAccessPeer", ((CUresult (*)(int *, CUdevice, CUdevice))p)(&can, 0, 1));
    return 0;
}
