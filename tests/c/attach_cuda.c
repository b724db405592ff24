/* Stream-attach scenarios for the rule tests: `attach_cuda SCENARIO`. Every covered call is
 * printed as `CALL symbol result` (check.h); set-up calls that must succeed are not.
 *   single-null        CU_MEM_ATTACH_SINGLE on stream 0 through the legacy export
 *   single-legacy      CU_MEM_ATTACH_SINGLE on CU_STREAM_LEGACY
 *   flags-combined     flags CU_MEM_ATTACH_GLOBAL | CU_MEM_ATTACH_HOST
 *   flags-zero         flags 0 (R580, and the simulator, kill the process with SIGSEGV in it)
 *   device-memory      cuMemAlloc memory
 *   interior           a pointer 4 KiB into a managed allocation, length 0
 *   partial            half of a managed allocation
 *   pageable           malloc memory with its length (the device reports no pageable access)
 *   pageable-length-zero  the same with length 0
 *   destroyed-attached memory attached SINGLE to a stream, which is then destroyed
 *   procaddress-legacy SINGLE on stream 0 through the function cuGetProcAddress gives for the
 *                      legacy stream (the NULL stream: a misuse)
 *   procaddress-ptsz   the same for the per-thread default stream (stream 0 is the thread's own)
 *   correct            SINGLE on a stream of its own, on the per-thread stream (both spellings)
 *                      and through _ptsz on stream 0; each flag; length 0 and the whole size */
#include <cuda.h>
#include <dlfcn.h>
#include <stdlib.h>
#include <string.h>
#include "check.h"

#undef cuStreamAttachMemAsync
CUresult CUDAAPI cuStreamAttachMemAsync(CUstream hStream, CUdeviceptr dptr, size_t length, unsigned int flags);
CUresult CUDAAPI cuStreamAttachMemAsync_ptsz(CUstream hStream, CUdeviceptr dptr, size_t length, unsigned int flags);

#define BYTES (1 << 16)
#define ATTACH(stream, ptr, length, flags) \
    CALL("cuStreamAttachMemAsync", cuStreamAttachMemAsync(stream, ptr, length, flags))
#define ATTACH_PTSZ(stream, ptr, length, flags) \
    CALL("cuStreamAttachMemAsync_ptsz", cuStreamAttachMemAsync_ptsz(stream, ptr, length, flags))

int main(int argc, char **argv) {
    if (argc != 2) return 2;
    const char *s = argv[1];
    CUdevice dev;
    CUcontext ctx;
    CUstream own;
    CUdeviceptr m;
    MUST(cuInit(0));
    MUST(cuDeviceGet(&dev, 0));
    MUST(cuDevicePrimaryCtxRetain(&ctx, dev));
    MUST(cuCtxSetCurrent(ctx));
    MUST(cuStreamCreate(&own, CU_STREAM_NON_BLOCKING));
    MUST(cuMemAllocManaged(&m, BYTES, CU_MEM_ATTACH_GLOBAL));
    if (!strcmp(s, "single-null")) {
        ATTACH(0, m, 0, CU_MEM_ATTACH_SINGLE);
    } else if (!strcmp(s, "single-legacy")) {
        ATTACH(CU_STREAM_LEGACY, m, 0, CU_MEM_ATTACH_SINGLE);
    } else if (!strcmp(s, "flags-combined")) {
        ATTACH(own, m, 0, CU_MEM_ATTACH_GLOBAL | CU_MEM_ATTACH_HOST);
    } else if (!strcmp(s, "flags-zero")) {
        ATTACH(own, m, 0, 0);
    } else if (!strcmp(s, "device-memory")) {
        CUdeviceptr d;
        MUST(cuMemAlloc(&d, BYTES));
        ATTACH(own, d, 0, CU_MEM_ATTACH_GLOBAL);
        MUST(cuMemFree(d));
    } else if (!strcmp(s, "interior")) {
        ATTACH(own, m + 4096, 0, CU_MEM_ATTACH_GLOBAL);
    } else if (!strcmp(s, "partial")) {
        ATTACH(own, m, BYTES / 2, CU_MEM_ATTACH_GLOBAL);
    } else if (!strcmp(s, "pageable") || !strcmp(s, "pageable-length-zero")) {
        char *buf = malloc(BYTES);
        memset(buf, 1, BYTES);
        ATTACH(own, (CUdeviceptr)buf, strcmp(s, "pageable") ? 0 : BYTES, CU_MEM_ATTACH_GLOBAL);
        MUST(cuStreamSynchronize(own));
        free(buf);
    } else if (!strcmp(s, "destroyed-attached")) {
        CUstream other;
        MUST(cuStreamCreate(&other, CU_STREAM_NON_BLOCKING));
        ATTACH(other, m, 0, CU_MEM_ATTACH_SINGLE);
        MUST(cuStreamSynchronize(other));
        CALL("cuStreamDestroy_v2", cuStreamDestroy(other));
    } else if (!strcmp(s, "procaddress-legacy") || !strcmp(s, "procaddress-ptsz")) {
        /* As the runtime does it: the function cuGetProcAddress gives for the stream flavour. */
        typedef CUresult (*resolve_t)(const char *, void **, int, cuuint64_t,
                                      CUdriverProcAddressQueryResult *);
        typedef CUresult (*attach_t)(CUstream, CUdeviceptr, size_t, unsigned);
        resolve_t resolve = (resolve_t)dlsym(RTLD_DEFAULT, "cuGetProcAddress_v2");
        int ptsz = !strcmp(s, "procaddress-ptsz");
        void *f = NULL;
        MUST(resolve("cuStreamAttachMemAsync", &f, ptsz ? 7000 : 6000,
                     ptsz ? CU_GET_PROC_ADDRESS_PER_THREAD_DEFAULT_STREAM
                          : CU_GET_PROC_ADDRESS_LEGACY_STREAM,
                     NULL));
        CALL(ptsz ? "cuStreamAttachMemAsync_ptsz" : "cuStreamAttachMemAsync",
             ((attach_t)f)(0, m, 0, CU_MEM_ATTACH_SINGLE));
    } else if (!strcmp(s, "correct")) {
        ATTACH(own, m, 0, CU_MEM_ATTACH_SINGLE);
        ATTACH(CU_STREAM_PER_THREAD, m, 0, CU_MEM_ATTACH_SINGLE);
        ATTACH_PTSZ(0, m, 0, CU_MEM_ATTACH_SINGLE);
        ATTACH_PTSZ(CU_STREAM_PER_THREAD, m, BYTES, CU_MEM_ATTACH_SINGLE);
        ATTACH(own, m, BYTES, CU_MEM_ATTACH_HOST);
        ATTACH(0, m, 0, CU_MEM_ATTACH_GLOBAL);
    } else {
        return 2;
    }
    MUST(cuCtxSynchronize());
    MUST(cuMemFree(m));
    CALL("cuStreamDestroy_v2", cuStreamDestroy(own));
    return 0;
}
