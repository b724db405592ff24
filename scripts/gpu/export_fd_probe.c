/* What tells an exported VMM fd apart from the driver's own descriptors (issue 25: "exported fds
 * never closed" at exit). Prints every descriptor the process holds, with its target and its
 * /proc/self/fdinfo (flags, pos, mnt_id, ino), at each step:
 *   init       after cuInit and a primary context
 *   export     after a POSIX fd export of a VMM allocation (fd E)
 *   closed     after close(E)
 *   work       after driver calls that may open descriptors of their own (a second create and
 *              export, a stream, a 64 MiB cuMemAlloc, a pool with a POSIX handle type exported,
 *              a context of its own)
 * and whether a descriptor the driver opened itself took E's number.
 * Build: gcc -O1 -o export_fd_probe export_fd_probe.c -I/usr/local/cuda/include -lcuda
 * Makes no multicast object; creates at most two granules of device memory. */
#include <cuda.h>
#include <dirent.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#define MUST(x)                                                          \
    do {                                                                 \
        CUresult r_ = (x);                                               \
        if (r_ != CUDA_SUCCESS) {                                        \
            fprintf(stderr, "%s:%d: %s = %d\n", __FILE__, __LINE__, #x, r_); \
            exit(1);                                                     \
        }                                                                \
    } while (0)

static void fds(const char *step, int exported) {
    DIR *d = opendir("/proc/self/fd");
    struct dirent *e;
    printf("== %s\n", step);
    while (d && (e = readdir(d))) {
        if (e->d_name[0] == '.') continue;
        int fd = atoi(e->d_name);
        if (fd == dirfd(d)) continue;
        char path[64], target[256] = "", info[512] = "";
        snprintf(path, sizeof path, "/proc/self/fd/%d", fd);
        ssize_t n = readlink(path, target, sizeof target - 1);
        if (n > 0) target[n] = 0;
        snprintf(path, sizeof path, "/proc/self/fdinfo/%d", fd);
        FILE *f = fopen(path, "r");
        if (f) {
            size_t got = fread(info, 1, sizeof info - 1, f);
            info[got] = 0;
            fclose(f);
            for (char *p = info; *p; p++)
                if (*p == '\n' || *p == '\t') *p = ' ';
        }
        printf("fd %d%s %s | %s\n", fd, fd == exported ? " (E)" : "", target, info);
    }
    if (d) closedir(d);
    fflush(stdout);
}

static CUmemGenericAllocationHandle create(size_t *g) {
    CUmemAllocationProp prop;
    memset(&prop, 0, sizeof prop);
    prop.type = CU_MEM_ALLOCATION_TYPE_PINNED;
    prop.location.type = CU_MEM_LOCATION_TYPE_DEVICE;
    prop.location.id = 0;
    prop.requestedHandleTypes = CU_MEM_HANDLE_TYPE_POSIX_FILE_DESCRIPTOR;
    MUST(cuMemGetAllocationGranularity(g, &prop, CU_MEM_ALLOC_GRANULARITY_MINIMUM));
    CUmemGenericAllocationHandle h;
    MUST(cuMemCreate(&h, *g, &prop, 0));
    return h;
}

int main(void) {
    CUdevice dev;
    CUcontext ctx;
    MUST(cuInit(0));
    MUST(cuDeviceGet(&dev, 0));
    MUST(cuDevicePrimaryCtxRetain(&ctx, dev));
    MUST(cuCtxSetCurrent(ctx));
    fds("init", -1);
    size_t g = 0;
    CUmemGenericAllocationHandle h = create(&g);
    int e = -1;
    MUST(cuMemExportToShareableHandle(&e, h, CU_MEM_HANDLE_TYPE_POSIX_FILE_DESCRIPTOR, 0));
    fds("export", e);
    close(e);
    fds("closed", e);
    CUmemGenericAllocationHandle h2 = create(&g);
    int e2 = -1;
    MUST(cuMemExportToShareableHandle(&e2, h2, CU_MEM_HANDLE_TYPE_POSIX_FILE_DESCRIPTOR, 0));
    printf("second export: fd %d%s\n", e2, e2 == e ? " (E's number, an export)" : "");
    close(e2);
    CUstream s;
    MUST(cuStreamCreate(&s, CU_STREAM_NON_BLOCKING));
    CUdeviceptr p;
    MUST(cuMemAlloc(&p, 64 << 20));
    CUmemPoolProps pp;
    memset(&pp, 0, sizeof pp);
    pp.allocType = CU_MEM_ALLOCATION_TYPE_PINNED;
    pp.handleTypes = CU_MEM_HANDLE_TYPE_POSIX_FILE_DESCRIPTOR;
    pp.location.type = CU_MEM_LOCATION_TYPE_DEVICE;
    pp.location.id = 0;
    CUmemoryPool pool;
    MUST(cuMemPoolCreate(&pool, &pp));
    int pe = -1;
    MUST(cuMemPoolExportToShareableHandle(&pe, pool, CU_MEM_HANDLE_TYPE_POSIX_FILE_DESCRIPTOR, 0));
    printf("pool export: fd %d\n", pe);
    CUcontext own;
    MUST(cuCtxCreate(&own, NULL, 0, dev));
    MUST(cuCtxSetCurrent(ctx));
    fds("work", e);
    close(pe);
    MUST(cuCtxDestroy(own));
    MUST(cuMemPoolDestroy(pool));
    MUST(cuMemFree(p));
    MUST(cuStreamDestroy(s));
    MUST(cuMemRelease(h2));
    MUST(cuMemRelease(h));
    printf("done\n");
    return 0;
}
