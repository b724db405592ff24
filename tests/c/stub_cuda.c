/* A minimal "CUDA 13.0 driver" that lacks the logical endpoint functions (as R580 does). */
typedef int CUresult;
CUresult cuInit(unsigned int flags) { (void)flags; return 0; }
CUresult cuDeviceCanAccessPeer(int *can, int dev, int peer) { *can = dev != peer; return 0; }
