// A CUDA runtime program (the runtime dlopens libcuda and resolves it through cuGetProcAddress):
// one device is enough. Prints what each call returned.
#include <cstdio>
#include <cuda_runtime.h>
int main() {
    int can = -1;
    cudaError_t a = cudaDeviceCanAccessPeer(&can, 0, 0);
    void *p = nullptr;
    cudaError_t b = cudaMalloc(&p, 1 << 20);
    cudaIpcMemHandle_t h;
    cudaError_t c = cudaIpcGetMemHandle(&h, p);
    cudaError_t d = cudaFree(p);
    printf("RUNTIME %d %d %d %d %d\n", (int)a, can, (int)b, (int)c, (int)d);
    return 0;
}
