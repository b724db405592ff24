/* Measures what the driver answers to cuStreamAttachMemAsync (and its _ptsz export) where the
 * documentation is silent or says "illegal": every spelling of the NULL and per-thread streams
 * with CU_MEM_ATTACH_SINGLE, lengths, flags, kinds of memory, an interior pointer, and a stream
 * destroyed with memory attached to it. One process, device 0. Every line it prints is
 * `FACT <case> <name>=<value> ...` (CUresult numbers). It makes no multicast object and asks for
 * 64 KiB of managed memory at a time (checked against the free memory first).
 *
 * Build: gcc -O1 -o attach_probe scripts/gpu/attach_probe.c -I/usr/local/cuda/include -lcuda -ldl
 * (on the simulated driver: -I.deps/cuda/nvidia/cu13/include -L<dir of libcuda.so> -lcuda -ldl).
 */
#define _GNU_SOURCE
#include <cuda.h>
#include <dlfcn.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>
#include <unistd.h>

#define BYTES (64 << 10)

/* Both exports by their own names (cuda.h maps the plain one to a versioned name only under
 * CUDA_API_PER_THREAD_DEFAULT_STREAM). */
#undef cuStreamAttachMemAsync
CUresult CUDAAPI cuStreamAttachMemAsync(CUstream hStream, CUdeviceptr dptr, size_t length, unsigned int flags);
CUresult CUDAAPI cuStreamAttachMemAsync_ptsz(CUstream hStream, CUdeviceptr dptr, size_t length, unsigned int flags);

static void die(const char *what, int rc) {
    fprintf(stderr, "attach_probe: %s: %d\n", what, rc);
    exit(3);
}
#define MUST(expr)                               \
    do {                                         \
        int must_rc_ = (int)(expr);              \
        if (must_rc_ != 0) die(#expr, must_rc_); \
    } while (0)

static CUdeviceptr managed(void) {
    /* Looked up, not linked: the simulated driver has no cuMemGetInfo (and no memory to run
     * out of). */
    CUresult (*get_info)(size_t *, size_t *) =
        (CUresult(*)(size_t *, size_t *))dlsym(RTLD_DEFAULT, "cuMemGetInfo_v2");
    if (get_info) {
        size_t free_bytes = 0, total = 0;
        MUST(get_info(&free_bytes, &total));
        if (free_bytes < 4 * BYTES) die("not enough free memory for managed memory", 0);
    }
    CUdeviceptr p;
    MUST(cuMemAllocManaged(&p, BYTES, CU_MEM_ATTACH_GLOBAL));
    return p;
}

int main(int argc, char **argv) {
    CUdevice dev;
    CUcontext ctx;
    CUstream s;
    setvbuf(stdout, NULL, _IOLBF, 0); /* each FACT out before the next case */
    MUST(cuInit(0));
    MUST(cuDeviceGet(&dev, 0));
    MUST(cuDevicePrimaryCtxRetain(&ctx, dev));
    MUST(cuCtxSetCurrent(ctx));
    MUST(cuStreamCreate(&s, CU_STREAM_NON_BLOCKING));
    if (argc == 2 && !strcmp(argv[1], "flags0")) {
        CUdeviceptr m0 = managed();
        printf("FACT flags0 step=call\n");
        int rc = cuStreamAttachMemAsync(s, m0, 0, 0);
        printf("FACT flags0 rc=%d step=sync\n", rc);
        int sync = cuStreamSynchronize(s);
        printf("FACT flags0 sync=%d\n", sync);
        MUST(cuMemFree(m0));
        return 0;
    }
    int concurrent = -1, pageable = -1, version = 0;
    MUST(cuDeviceGetAttribute(&concurrent, CU_DEVICE_ATTRIBUTE_CONCURRENT_MANAGED_ACCESS, dev));
    MUST(cuDeviceGetAttribute(&pageable, CU_DEVICE_ATTRIBUTE_PAGEABLE_MEMORY_ACCESS, dev));
    MUST(cuDriverGetVersion(&version));
    printf("FACT device concurrent_managed_access=%d pageable_memory_access=%d driver=%d\n",
           concurrent, pageable, version);

    CUdeviceptr m = managed();
    struct {
        const char *name;
        CUstream stream;
    } streams[] = {{"0", 0}, {"legacy", CU_STREAM_LEGACY}, {"per_thread", CU_STREAM_PER_THREAD},
                   {"created", s}};
    for (int i = 0; i < 4; i++) {
        int legacy = cuStreamAttachMemAsync(streams[i].stream, m, 0, CU_MEM_ATTACH_SINGLE);
        MUST(cuCtxSynchronize());
        int ptsz = cuStreamAttachMemAsync_ptsz(streams[i].stream, m, 0, CU_MEM_ATTACH_SINGLE);
        MUST(cuCtxSynchronize());
        printf("FACT single stream=%s legacy=%d ptsz=%d\n", streams[i].name, legacy, ptsz);
        MUST(cuStreamAttachMemAsync(s, m, 0, CU_MEM_ATTACH_GLOBAL));
        MUST(cuStreamSynchronize(s));
    }
    printf("FACT length zero=%d whole=%d partial=%d past=%d\n",
           cuStreamAttachMemAsync(s, m, 0, CU_MEM_ATTACH_GLOBAL),
           cuStreamAttachMemAsync(s, m, BYTES, CU_MEM_ATTACH_GLOBAL),
           cuStreamAttachMemAsync(s, m, BYTES / 2, CU_MEM_ATTACH_GLOBAL),
           cuStreamAttachMemAsync(s, m, 2 * BYTES, CU_MEM_ATTACH_GLOBAL));
    MUST(cuStreamSynchronize(s));
    /* One line each: a flags value may cost the process (the line before it says which). */
    const unsigned flag_values[] = {CU_MEM_ATTACH_GLOBAL, CU_MEM_ATTACH_HOST, CU_MEM_ATTACH_SINGLE,
                                    CU_MEM_ATTACH_GLOBAL | CU_MEM_ATTACH_HOST, 8};
    for (int i = 0; i < 5; i++) {
        printf("FACT flags trying=%u\n", flag_values[i]);
        int rc = cuStreamAttachMemAsync(s, m, 0, flag_values[i]);
        int sync = cuStreamSynchronize(s);
        printf("FACT flags value=%u rc=%d sync=%d\n", flag_values[i], rc, sync);
        MUST(cuStreamAttachMemAsync(s, m, 0, CU_MEM_ATTACH_GLOBAL));
        MUST(cuStreamSynchronize(s));
    }
    printf("FACT interior len0=%d rest=%d page=%d\n",
           cuStreamAttachMemAsync(s, m + 4096, 0, CU_MEM_ATTACH_GLOBAL),
           cuStreamAttachMemAsync(s, m + 4096, BYTES - 4096, CU_MEM_ATTACH_GLOBAL),
           cuStreamAttachMemAsync(s, m + 4096, 4096, CU_MEM_ATTACH_GLOBAL));
    MUST(cuStreamSynchronize(s));

    CUdeviceptr d;
    MUST(cuMemAlloc(&d, BYTES));
    void *pinned;
    MUST(cuMemAllocHost(&pinned, BYTES));
    char *pageable_mem = malloc(BYTES);
    memset(pageable_mem, 1, BYTES);
    printf("FACT memory device=%d pinned=%d pageable_len0=%d pageable_len=%d\n",
           cuStreamAttachMemAsync(s, d, 0, CU_MEM_ATTACH_GLOBAL),
           cuStreamAttachMemAsync(s, (CUdeviceptr)pinned, 0, CU_MEM_ATTACH_GLOBAL),
           cuStreamAttachMemAsync(s, (CUdeviceptr)pageable_mem, 0, CU_MEM_ATTACH_GLOBAL),
           cuStreamAttachMemAsync(s, (CUdeviceptr)pageable_mem, BYTES, CU_MEM_ATTACH_GLOBAL));
    MUST(cuStreamSynchronize(s));

    /* A stream destroyed with memory attached SINGLE to it: the attach on the destroyed stream,
     * then the memory attached elsewhere. */
    CUstream t;
    MUST(cuStreamCreate(&t, CU_STREAM_NON_BLOCKING));
    MUST(cuStreamAttachMemAsync(t, m, 0, CU_MEM_ATTACH_SINGLE));
    MUST(cuStreamSynchronize(t));
    MUST(cuStreamDestroy(t));
    MUST(cuCtxSynchronize());
    int host_reads = ((volatile char *)m)[0] == ((volatile char *)m)[0];
    printf("FACT destroyed reattach_other=%d host_read=%d\n",
           cuStreamAttachMemAsync(s, m, 0, CU_MEM_ATTACH_GLOBAL), host_reads);
    MUST(cuStreamSynchronize(s));

    /* flags 0, last and in a process of its own (this program again, `flags0`): on R580 it
     * costs the process; which step, and the signal. */
    fflush(stdout);
    pid_t child = fork();
    if (child == 0) {
        execl("/proc/self/exe", "attach_probe", "flags0", (char *)NULL);
        _exit(127);
    }
    int status = 0;
    waitpid(child, &status, 0);
    printf("FACT flags0 exited=%d signal=%d\n", WIFEXITED(status) ? WEXITSTATUS(status) : -1,
           WIFSIGNALED(status) ? WTERMSIG(status) : 0);

    MUST(cuMemFree(m));
    MUST(cuMemFree(d));
    MUST(cuMemFreeHost(pinned));
    free(pageable_mem);
    MUST(cuStreamDestroy(s));
    return 0;
}
