// C++ program that links libsharecheck.so directly (no LD_PRELOAD) and uses its own API.
#include <cuda.h>
#include <sharecheck.h>
#include <cstdio>
#include <cstring>

int main() {
    std::printf("VERSION %s\n", sharecheck_version());
    std::printf("ANNOTATE %d\n", sharecheck_annotate("phase: peer setup"));
    CUdevice d0, d1;
    if (cuInit(0) != CUDA_SUCCESS || cuDeviceGet(&d0, 0) != CUDA_SUCCESS || cuDeviceGet(&d1, 1) != CUDA_SUCCESS) return 3;
    int can = -1;
    CUresult rc = cuDeviceCanAccessPeer(&can, d0, d1);
    std::printf("CALL cuDeviceCanAccessPeer %d\n", static_cast<int>(rc));
    std::printf("CAN %d\n", can);
    std::printf("FINDINGS %llu\n", static_cast<unsigned long long>(sharecheck_finding_count()));
    std::printf("ANNOTATE_NULL %d\n", sharecheck_annotate(nullptr));
    std::printf("FLUSH %d\n", sharecheck_flush());
    return 0;
}
