/* The bundled demo: a small two-GPU program of the kind sharecheck is for. It enables peer access,
 * copies between the devices, shares a buffer with a child process over CUDA IPC, and makes two
 * classic mistakes (a peer copy that runs past its allocation, and opening its own IPC handle in
 * the same process), besides a harmless second enable (an info: the driver says it was done).
 * Self-contained: it declares the few driver prototypes it needs, so no CUDA toolkit is required.
 * Build: cc -o peer_demo peer_demo.c -ldl    Run: sharecheck run --sim -- ./peer_demo */
#define _GNU_SOURCE
#include <dlfcn.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>
#include <unistd.h>

typedef int CUresult;
typedef int CUdevice;
typedef void *CUcontext;
typedef unsigned long long CUdeviceptr;
typedef struct { char reserved[64]; } CUipcMemHandle;

static CUresult (*cuInit)(unsigned);
static CUresult (*cuDeviceGet)(CUdevice *, int);
static CUresult (*cuDevicePrimaryCtxRetain)(CUcontext *, CUdevice);
static CUresult (*cuCtxSetCurrent)(CUcontext);
static CUresult (*cuMemAlloc)(CUdeviceptr *, size_t);
static CUresult (*cuMemcpyHtoD)(CUdeviceptr, const void *, size_t);
static CUresult (*cuMemcpyDtoH)(void *, CUdeviceptr, size_t);
static CUresult (*cuDeviceCanAccessPeer)(int *, CUdevice, CUdevice);
static CUresult (*cuCtxEnablePeerAccess)(CUcontext, unsigned);
static CUresult (*cuMemcpyPeer)(CUdeviceptr, CUcontext, CUdeviceptr, CUcontext, size_t);
static CUresult (*cuIpcGetMemHandle)(CUipcMemHandle *, CUdeviceptr);
static CUresult (*cuIpcOpenMemHandle)(CUdeviceptr *, CUipcMemHandle, unsigned);
static CUresult (*cuIpcCloseMemHandle)(CUdeviceptr);

/* Loads the driver the way the CUDA runtime does: dlopen + get-proc-address. */
static void load_driver(void) {
    void *lib = dlopen("libcuda.so.1", RTLD_NOW | RTLD_LOCAL);
    if (!lib) { fprintf(stderr, "peer_demo: no CUDA driver: %s\n", dlerror()); exit(2); }
    CUresult (*resolve)(const char *, void **, int, unsigned long long, int *) =
        (CUresult (*)(const char *, void **, int, unsigned long long, int *))dlsym(lib, "cuGetProcAddress_v2");
    if (!resolve) { fprintf(stderr, "peer_demo: driver has no cuGetProcAddress_v2\n"); exit(2); }
#define RESOLVE(fn, version) resolve(#fn, (void **)&fn, version, 0, NULL)
    RESOLVE(cuInit, 2000); RESOLVE(cuDeviceGet, 2000); RESOLVE(cuDevicePrimaryCtxRetain, 7000);
    RESOLVE(cuCtxSetCurrent, 4000); RESOLVE(cuMemAlloc, 3020); RESOLVE(cuMemcpyHtoD, 3020);
    RESOLVE(cuMemcpyDtoH, 3020); RESOLVE(cuDeviceCanAccessPeer, 4000); RESOLVE(cuCtxEnablePeerAccess, 4000);
    RESOLVE(cuMemcpyPeer, 4000); RESOLVE(cuIpcGetMemHandle, 4010); RESOLVE(cuIpcOpenMemHandle, 11000);
    RESOLVE(cuIpcCloseMemHandle, 4010);
}

#define CHECK(expr) do { CUresult r_ = (expr); printf("  %-58s -> %d\n", #expr, r_); } while (0)

int main(int argc, char **argv) {
    load_driver();
    CUdevice d0, d1;
    CUcontext c0, c1;
    cuInit(0);
    cuDeviceGet(&d0, 0); cuDeviceGet(&d1, 1);
    cuDevicePrimaryCtxRetain(&c0, d0); cuDevicePrimaryCtxRetain(&c1, d1);

    if (argc == 3 && strcmp(argv[1], "import") == 0) {
        /* The child: map the parent's buffer on device 1 and read it. */
        cuCtxSetCurrent(c1);
        CUipcMemHandle handle;
        FILE *f = fopen(argv[2], "rb");
        if (!f || fread(&handle, sizeof handle, 1, f) != 1) return 4;
        fclose(f);
        CUdeviceptr shared = 0;
        printf("child %d:\n", (int)getpid());
        CHECK(cuIpcOpenMemHandle(&shared, handle, 1));
        char text[32] = {0};
        cuMemcpyDtoH(text, shared, sizeof text - 1);
        printf("  child read: \"%s\"\n", text);
        CHECK(cuIpcCloseMemHandle(shared));
        return 0;
    }

    printf("parent %d:\n", (int)getpid());
    int can = 0;
    CHECK(cuDeviceCanAccessPeer(&can, d0, d1));
    cuCtxSetCurrent(c0);
    CHECK(cuCtxEnablePeerAccess(c1, 0));
    CHECK(cuCtxEnablePeerAccess(c1, 0)); /* harmless: already enabled */

    CUdeviceptr a, b;
    cuMemAlloc(&a, 1 << 20);
    cuCtxSetCurrent(c1);
    cuMemAlloc(&b, 1 << 20);
    cuCtxSetCurrent(c0);
    const char message[] = "hello from device 0";
    cuMemcpyHtoD(a, message, sizeof message);
    CHECK(cuMemcpyPeer(b, c1, a, c0, sizeof message));
    CHECK(cuMemcpyPeer(b, c1, a, c0, 2 << 20)); /* mistake: 2 MiB of a 1 MiB allocation */

    CUipcMemHandle handle;
    CHECK(cuIpcGetMemHandle(&handle, b));
    CUdeviceptr mine = 0;
    CHECK(cuIpcOpenMemHandle(&mine, handle, 1)); /* mistake: same process */

    char path[] = "/tmp/peer_demo_handle_XXXXXX";
    int fd = mkstemp(path);
    if (fd < 0 || write(fd, &handle, sizeof handle) != (ssize_t)sizeof handle) return 4;
    close(fd);
    fflush(stdout);
    pid_t child = fork();
    if (child == 0) {
        execl("/proc/self/exe", argv[0], "import", path, (char *)NULL);
        _exit(127);
    }
    int status = 0;
    waitpid(child, &status, 0);
    unlink(path);
    return WIFEXITED(status) ? WEXITSTATUS(status) : 1;
}
