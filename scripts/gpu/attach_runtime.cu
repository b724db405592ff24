// cudaStreamAttachMemAsync(0, ..., cudaMemAttachSingle) through the CUDA runtime, which resolves
// the driver's cuStreamAttachMemAsync through cuGetProcAddress: built without
// `--default-stream per-thread` stream 0 is the legacy NULL stream (the legacy export: SINGLE is
// illegal there, R580 answers 1); built with it, stream 0 is the thread's per-thread stream (the
// _ptsz export: a specific stream, R580 answers 0). Prints `CALL <driver symbol> <result>` as the
// C scenarios do, naming the export the runtime reaches in this build; 64 KiB of managed memory.
#include <cstdio>
#include <cuda_runtime.h>

int main() {
    float *m = nullptr;
    if (cudaMallocManaged(&m, 1 << 16) != cudaSuccess) return 3;
#ifdef CUDA_API_PER_THREAD_DEFAULT_STREAM
    const char *symbol = "cuStreamAttachMemAsync_ptsz";
#else
    const char *symbol = "cuStreamAttachMemAsync";
#endif
    cudaError_t r = cudaStreamAttachMemAsync(0, m, 0, cudaMemAttachSingle);
    std::printf("CALL %s %d\n", symbol, (int)r);
    cudaGetLastError();
    if (cudaDeviceSynchronize() != cudaSuccess) return 4;
    cudaFree(m);
    return 0;
}
