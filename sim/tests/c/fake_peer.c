/* A stand-in preloaded ahead of the simulated driver: it exports the same names, so any
 * reference that binds through the global scope instead of to the simulator's own definition
 * lands here (and answers 4242). */
typedef int CUresult;
typedef unsigned long long CUdeviceptr;
typedef void *CUcontext;

CUresult cuMemcpyPeer(CUdeviceptr dst, CUcontext dc, CUdeviceptr src, CUcontext sc, unsigned long n) {
    (void)dst; (void)dc; (void)src; (void)sc; (void)n;
    return 4242;
}

CUresult cuMemcpyPeer_ptds(CUdeviceptr dst, CUcontext dc, CUdeviceptr src, CUcontext sc, unsigned long n) {
    (void)dst; (void)dc; (void)src; (void)sc; (void)n;
    return 4242;
}
