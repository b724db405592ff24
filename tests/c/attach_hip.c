/* HIP stream-attach scenarios for the rule tests: `attach_hip SCENARIO`.
 *   flags-combined   hipMemAttachGlobal | hipMemAttachHost (refused)
 *   device-memory    hipMalloc memory (the CLR accepts it, and ignores it)
 *   correct          SINGLE on a stream of its own, then each flag: the runtime accepts them all
 *                    (and HIP's AMD runtime ignores them: its divergence, once per process)
 * 64 KiB of managed memory. */
#define __HIP_PLATFORM_AMD__
#include <hip/hip_runtime_api.h>
#include <string.h>
#include "check.h"

int main(int argc, char **argv) {
    if (argc != 2) return 2;
    const char *s = argv[1];
    void *m = NULL;
    hipStream_t stream;
    MUST(hipSetDevice(0));
    MUST(hipMallocManaged(&m, 1 << 16, hipMemAttachGlobal));
    MUST(hipStreamCreate(&stream));
    if (!strcmp(s, "flags-combined")) {
        CALL("hipStreamAttachMemAsync",
             hipStreamAttachMemAsync(stream, m, 0, hipMemAttachGlobal | hipMemAttachHost));
    } else if (!strcmp(s, "device-memory")) {
        void *d = NULL;
        MUST(hipMalloc(&d, 1 << 16));
        CALL("hipStreamAttachMemAsync", hipStreamAttachMemAsync(stream, d, 0, hipMemAttachGlobal));
        MUST(hipStreamSynchronize(stream));
        MUST(hipFree(d));
    } else if (!strcmp(s, "correct")) {
        CALL("hipStreamAttachMemAsync", hipStreamAttachMemAsync(stream, m, 0, hipMemAttachSingle));
        CALL("hipStreamAttachMemAsync", hipStreamAttachMemAsync(stream, m, 0, hipMemAttachGlobal));
        CALL("hipStreamAttachMemAsync", hipStreamAttachMemAsync(stream, m, 1 << 16, hipMemAttachHost));
    } else {
        return 2;
    }
    MUST(hipStreamSynchronize(stream));
    MUST(hipStreamDestroy(stream));
    MUST(hipFree(m));
    return 0;
}
