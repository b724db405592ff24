/* Direct binding of HIP: linked with -lamdhip64, run with the shim preloaded. */
#define __HIP_PLATFORM_AMD__
#include <hip/hip_runtime_api.h>
#include "check.h"

int main(void) {
    int count = -1;
    hipError_t status = hipGetDeviceCount(&count);
    printf("COUNT %d %d\n", (int)status, count);
    int can = -1;
    CALL("hipDeviceCanAccessPeer", hipDeviceCanAccessPeer(&can, 0, 1));
    CALL("hipDeviceEnablePeerAccess", hipDeviceEnablePeerAccess(1, 0));
    CALL("hipDeviceEnablePeerAccess", hipDeviceEnablePeerAccess(1, 0));
    void *a = NULL, *b = NULL;
    if (status == hipSuccess && count >= 2) {
        MUST(hipMalloc(&a, 4096));
        MUST(hipSetDevice(1));
        MUST(hipMalloc(&b, 4096));
        MUST(hipSetDevice(0));
    }
    CALL("hipMemcpyPeer", hipMemcpyPeer(b, 1, a, 0, 4096));
    CALL("hipMemcpyPeerAsync", hipMemcpyPeerAsync(a, 0, b, 1, 4096, 0));
    hipIpcMemHandle_t handle;
    CALL("hipIpcGetMemHandle", hipIpcGetMemHandle(&handle, a));
    CALL("hipDeviceDisablePeerAccess", hipDeviceDisablePeerAccess(1));
    CALL("hipDeviceDisablePeerAccess", hipDeviceDisablePeerAccess(1));
    return 0;
}
