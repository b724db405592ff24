/* The steady state of HIP's clean path (see steady.c): each case warms up (one call), then makes
 * the same call N times between two markers (hipDriverGetVersion, which the shim does not
 * interpose).
 *
 *   steady_hip CASE N   CASE: can-access, copy-stream0, copy-own-stream, copy-sync, attach,
 *                       ipc-get
 * Prints MARKED <case> once the markers are written. */
#define __HIP_PLATFORM_AMD__
#include <hip/hip_runtime_api.h>
#include <stdlib.h>
#include <string.h>
#include "check.h"

static void marker(void) {
    int version = 0;
    MUST(hipDriverGetVersion(&version));
}

int main(int argc, char **argv) {
    if (argc != 3) return 2;
    const char *mode = argv[1];
    long n = atol(argv[2]);
    void *b1, *a0, *managed;
    MUST(hipSetDevice(1));
    MUST(hipMalloc(&b1, 4096));
    MUST(hipSetDevice(0));
    MUST(hipMalloc(&a0, 4096));
    MUST(hipDeviceEnablePeerAccess(1, 0));
    hipStream_t own;
    MUST(hipStreamCreateWithFlags(&own, hipStreamNonBlocking));
    MUST(hipMallocManaged(&managed, 4096, hipMemAttachGlobal));
    hipIpcMemHandle_t handle;
    for (long i = 0; i <= n; i++) {
        if (i == 1) marker();
        int can = 0;
        if (!strcmp(mode, "can-access")) {
            MUST(hipDeviceCanAccessPeer(&can, 0, 1));
        } else if (!strcmp(mode, "copy-stream0")) {
            MUST(hipMemcpyPeerAsync(b1, 1, a0, 0, 4, 0));
        } else if (!strcmp(mode, "copy-own-stream")) {
            MUST(hipMemcpyPeerAsync(b1, 1, a0, 0, 4, own));
        } else if (!strcmp(mode, "copy-sync")) {
            MUST(hipMemcpyPeer(b1, 1, a0, 0, 4));
        } else if (!strcmp(mode, "attach")) {
            MUST(hipStreamAttachMemAsync(own, managed, 0, hipMemAttachSingle));
        } else if (!strcmp(mode, "ipc-get")) {
            MUST(hipIpcGetMemHandle(&handle, a0));
        } else {
            return 2;
        }
    }
    marker();
    MUST(hipStreamSynchronize(own));
    printf("MARKED %s\n", mode);
    return 0;
}
