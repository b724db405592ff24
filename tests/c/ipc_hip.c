/* HIP IPC scenarios for the rule tests: `ipc_hip SCENARIO` (see ipc_cuda.c).
 *   export-interior   exports a pointer 4 KiB into its allocation
 *   export-base       exports the allocation's base (correct)
 *   open-same-process opens its own handle
 *   close-not-opened  closes memory of its own (no open returned it) */
#define __HIP_PLATFORM_AMD__
#include <hip/hip_runtime_api.h>
#include <string.h>
#include "check.h"

int main(int argc, char **argv) {
    if (argc != 2) return 2;
    void *p;
    hipIpcMemHandle_t h;
    MUST(hipSetDevice(0));
    MUST(hipMalloc(&p, 1 << 16));
    if (!strcmp(argv[1], "export-interior")) {
        CALL("hipIpcGetMemHandle", hipIpcGetMemHandle(&h, (char *)p + 4096));
    } else if (!strcmp(argv[1], "open-same-process")) {
        void *q = NULL;
        CALL("hipIpcGetMemHandle", hipIpcGetMemHandle(&h, p));
        /* 1: the simulated runtime's value of hipIpcMemLazyEnablePeerAccess (0 in HIP 5.x headers) */
        CALL("hipIpcOpenMemHandle", hipIpcOpenMemHandle(&q, h, 1));
    } else if (!strcmp(argv[1], "close-not-opened")) {
        CALL("hipIpcCloseMemHandle", hipIpcCloseMemHandle(p));
    } else if (!strcmp(argv[1], "export-base")) {
        CALL("hipIpcGetMemHandle", hipIpcGetMemHandle(&h, p));
    } else {
        return 2;
    }
    memset(&h, 0, sizeof h);
    MUST(hipFree(p));
    return 0;
}
