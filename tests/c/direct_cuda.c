/* Direct binding: linked with -lcuda (the simulated driver), run with the shim preloaded.
 * Built twice: plain, and with -DCUDA_API_PER_THREAD_DEFAULT_STREAM, where cuda.h maps the calls
 * to cuMemcpyPeer_ptds, cuMemcpyPeerAsync_ptsz and cuStreamAttachMemAsync_ptsz. */
#include <cuda.h>
#include "check.h"

#ifdef CUDA_API_PER_THREAD_DEFAULT_STREAM
#define PTDS(name) name "_ptds"
#define PTSZ(name) name "_ptsz"
#else
#define PTDS(name) name
#define PTSZ(name) name
#endif

int main(void) {
    CUdevice dev0, dev1;
    CUcontext ctx0, ctx1;
    MUST(cuInit(0));
    MUST(cuDeviceGet(&dev0, 0));
    MUST(cuDeviceGet(&dev1, 1));
    MUST(cuDevicePrimaryCtxRetain(&ctx0, dev0));
    MUST(cuDevicePrimaryCtxRetain(&ctx1, dev1));
    MUST(cuCtxSetCurrent(ctx0));

    int can = -1;
    CALL("cuDeviceCanAccessPeer", cuDeviceCanAccessPeer(&can, dev0, dev1));
    printf("CAN %d\n", can);
    CALL("cuCtxEnablePeerAccess", cuCtxEnablePeerAccess(ctx1, 0));
    CALL("cuCtxEnablePeerAccess", cuCtxEnablePeerAccess(ctx1, 0)); /* already enabled: 704 */

    CUdeviceptr a, b, managed;
    MUST(cuMemAlloc(&a, 1 << 20));
    MUST(cuCtxSetCurrent(ctx1));
    MUST(cuMemAlloc(&b, 1 << 20));
    MUST(cuMemAllocManaged(&managed, 4096, CU_MEM_ATTACH_GLOBAL));
    MUST(cuCtxSetCurrent(ctx0));
    CALL(PTDS("cuMemcpyPeer"), cuMemcpyPeer(b, ctx1, a, ctx0, 4096));
    CALL(PTSZ("cuMemcpyPeerAsync"), cuMemcpyPeerAsync(b, ctx1, a, ctx0, 4096, 0));
    CALL(PTSZ("cuStreamAttachMemAsync"), cuStreamAttachMemAsync(0, managed, 0, CU_MEM_ATTACH_GLOBAL));

    CUipcMemHandle handle;
    CALL("cuIpcGetMemHandle", cuIpcGetMemHandle(&handle, a));
    CUdeviceptr opened = 0;
    /* Same process: the driver refuses (201). cuda.h maps the name to the _v2 export. */
    CALL("cuIpcOpenMemHandle_v2", cuIpcOpenMemHandle(&opened, handle, CU_IPC_MEM_LAZY_ENABLE_PEER_ACCESS));
    CALL("cuCtxDisablePeerAccess", cuCtxDisablePeerAccess(ctx1));
    CALL("cuCtxDisablePeerAccess", cuCtxDisablePeerAccess(ctx1)); /* not enabled: 705 */
    return 0;
}
