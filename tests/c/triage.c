/* One bad call in a helper of the program's own, for the triage tests (issue 26): built with -g,
 * without it (-g0), with the helper inlined (-DINLINED -O2), and with an unrelated function
 * inserted before it (-DEXTRA: every offset after it moves; the baseline must not). The bad call
 * is cuCtxEnablePeerAccess with flags 1 (cuCtxEnablePeerAccess.flags-not-zero). */
#include <cuda.h>
#include "check.h"

#ifdef EXTRA
/* Unrelated code above the helper: moves everything after it. */
__attribute__((noinline)) int unrelated_helper(int x) {
    volatile int y = x * 3;
    for (int i = 0; i < x; i++)
        y += i * y;
    return y;
}
#endif

#ifdef INLINED
static inline __attribute__((always_inline))
#else
__attribute__((noinline))
#endif
int enable_with_flags(CUcontext peer) {
    return cuCtxEnablePeerAccess(peer, 1);
}

int main(int argc, char **argv) {
    (void)argv;
    CUcontext ctx[2];
    CUdevice dev;
    MUST(cuInit(0));
    for (int d = 1; d >= 0; d--) {
        MUST(cuDeviceGet(&dev, d));
        MUST(cuDevicePrimaryCtxRetain(&ctx[d], dev));
    }
    MUST(cuCtxSetCurrent(ctx[0]));
#ifdef EXTRA
    if (argc > 5)
        printf("%d\n", unrelated_helper(argc));
#endif
    CALL("cuCtxEnablePeerAccess", enable_with_flags(ctx[1]));
    return argc > 5;
}
