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
 *                      and through _ptsz on stream 0; each flag; length 0 and the whole size
 * Stream work (for a device without concurrent managed access, SHARECHECK_SIM_ATTRS=0:89=0):
 *   single-other-stream  memory attached SINGLE to one stream, set by a memset on another
 *   host-on-device       memory attached HOST, written by a host-to-device copy on a stream
 *   stream-work          memory attached SINGLE to a stream, set, copied and read back on it
 *                        (and on the per-thread stream once attached to it): correct
 * Ordering of attaches (a memset of ATTACH_BUSY_BYTES, default 1 MiB, keeps the first stream
 * busy; prints `FACT name cuStreamQuery-result` lines, measured, not compared):
 *   unordered            attached to one stream, then to another (non-blocking, idle) while
 *                        the first is still busy
 *   ordered-sync         the same with the first stream synchronized before the second attach
 *   ordered-event        the same with the second stream waiting for an event recorded on the
 *                        first after its work */
#include <cuda.h>
#include <dlfcn.h>
#include <stdlib.h>
#include <string.h>
#include "check.h"

#undef cuStreamAttachMemAsync
CUresult CUDAAPI cuStreamAttachMemAsync(CUstream hStream, CUdeviceptr dptr, size_t length, unsigned int flags);
CUresult CUDAAPI cuStreamAttachMemAsync_ptsz(CUstream hStream, CUdeviceptr dptr, size_t length, unsigned int flags);
CUresult CUDAAPI cuMemsetD8Async_ptsz(CUdeviceptr dstDevice, unsigned char uc, size_t N, CUstream hStream);

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
    } else if (!strcmp(s, "single-other-stream")) {
        CUstream other;
        MUST(cuStreamCreate(&other, CU_STREAM_NON_BLOCKING));
        ATTACH(own, m, 0, CU_MEM_ATTACH_SINGLE);
        CALL("cuMemsetD8Async", cuMemsetD8Async(m, 7, 64, other));
        MUST(cuStreamSynchronize(other));
        CALL("cuStreamDestroy_v2", cuStreamDestroy(other));
    } else if (!strcmp(s, "host-on-device")) {
        char buf[64] = {1};
        ATTACH(own, m, 0, CU_MEM_ATTACH_HOST);
        CALL("cuMemcpyHtoDAsync_v2", cuMemcpyHtoDAsync(m, buf, sizeof buf, own));
        MUST(cuStreamSynchronize(own));
    } else if (!strcmp(s, "stream-work")) {
        char buf[64];
        ATTACH(own, m, 0, CU_MEM_ATTACH_SINGLE);
        CALL("cuMemsetD32Async", cuMemsetD32Async(m, 0x01020304, 16, own));
        CALL("cuMemcpyDtoDAsync_v2", cuMemcpyDtoDAsync(m + 1024, m, 64, own));
        CALL("cuMemcpyDtoHAsync_v2", cuMemcpyDtoHAsync(buf, m + 1024, sizeof buf, own));
        MUST(cuStreamSynchronize(own));
        if (buf[0] != 4 || buf[3] != 1) return 4;
        /* The memory belongs to the per-thread stream from now on: work there, in both spellings. */
        ATTACH(CU_STREAM_PER_THREAD, m, 0, CU_MEM_ATTACH_SINGLE);
        CALL("cuMemcpyAsync", cuMemcpyAsync(m + 2048, m, 64, CU_STREAM_PER_THREAD));
        CALL("cuMemsetD8Async_ptsz", cuMemsetD8Async_ptsz(m, 0, 64, 0));
        MUST(cuStreamSynchronize(CU_STREAM_PER_THREAD));
        /* Attached to the host and back to GLOBAL: then any stream may use it. */
        ATTACH(own, m, 0, CU_MEM_ATTACH_GLOBAL);
        CALL("cuMemsetD8Async", cuMemsetD8Async(m, 0, 64, 0));
        MUST(cuCtxSynchronize());
    } else if (!strcmp(s, "unordered") || !strcmp(s, "ordered-sync") ||
               !strcmp(s, "ordered-event")) {
        const char *env = getenv("ATTACH_BUSY_BYTES");
        size_t busy = env ? (size_t)strtoull(env, NULL, 10) : (1 << 20);
        CUstream other;
        CUdeviceptr big;
        CUevent done;
        MUST(cuStreamCreate(&other, CU_STREAM_NON_BLOCKING));
        MUST(cuMemAlloc(&big, busy));
        MUST(cuEventCreate(&done, CU_EVENT_DISABLE_TIMING));
        ATTACH(own, m, 0, CU_MEM_ATTACH_SINGLE);
        CALL("cuMemsetD8Async", cuMemsetD8Async(big, 1, busy, own));
        printf("FACT first-stream-after-work %d\n", (int)cuStreamQuery(own));
        if (!strcmp(s, "ordered-sync")) MUST(cuStreamSynchronize(own));
        if (!strcmp(s, "ordered-event")) {
            MUST(cuEventRecord(done, own));
            MUST(cuStreamWaitEvent(other, done, 0));
            printf("FACT second-stream-after-wait %d\n", (int)cuStreamQuery(other));
        }
        ATTACH(other, m, 0, CU_MEM_ATTACH_SINGLE);
        printf("FACT first-stream-after-second-attach %d\n", (int)cuStreamQuery(own));
        MUST(cuCtxSynchronize());
        /* Back to GLOBAL, ordered (everything synchronized): nothing stays attached to `other`. */
        ATTACH(other, m, 0, CU_MEM_ATTACH_GLOBAL);
        MUST(cuStreamSynchronize(other));
        MUST(cuEventDestroy(done));
        MUST(cuMemFree(big));
        CALL("cuStreamDestroy_v2", cuStreamDestroy(other));
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
