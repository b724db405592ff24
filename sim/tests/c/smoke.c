/* End-to-end checks of the simulated driver through its C ABI, linked as libcuda.so.
 *
 * Modes (argv[1]):
 *   basics                 calls before cuInit, devices, contexts, copies, peer codes
 *   ipc-parent             exports memory, an event and a logical endpoint, runs `ipc-child` in a
 *                          fork+exec'ed child, then checks the bytes the child wrote
 *   ipc-child MEM EVENT    (run by ipc-parent) imports the three handles (the logical endpoint's
 *                          comes in SMOKE_LE_HANDLE), checks the bytes and codes
 *   procaddr               cuGetProcAddress_v2 pointers equal dlsym(libcuda, name), also under an
 *                          LD_PRELOADed library that exports the same names
 *   hip-ipc-parent         as ipc-parent through HIP, exporting an interior pointer
 *   hip-ipc-child MEM      (run by hip-ipc-parent) imports it on device 1
 *   queries LIMIT          cuStreamGetCtx, cuStreamCreateWithPriority, hipMemGetAddressRange, HIP's
 *                          last error, and cuCtxEnablePeerAccess on 3 devices under
 *                          SHARECHECK_SIM_MAX_PEERS (LIMIT: the grants expected to fit, 1 or 2)
 *
 * Prototypes are written out here (as in CUDA 13.5 cuda.h) so the program needs no CUDA headers.
 */
#define _GNU_SOURCE
#include <dlfcn.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>
#include <unistd.h>

typedef int CUresult;
typedef int CUdevice;
typedef unsigned long long CUdeviceptr;
typedef struct CUctx_st *CUcontext;
typedef struct CUevent_st *CUevent;
typedef struct CUstream_st *CUstream;
typedef struct { char reserved[64]; } CUipcMemHandle;
typedef struct { char reserved[64]; } CUipcEventHandle;

CUresult cuInit(unsigned int flags);
CUresult cuDeviceGetCount(int *count);
CUresult cuCtxCreate_v4(CUcontext *pctx, void *params, unsigned int flags, CUdevice dev);
CUresult cuCtxDestroy_v2(CUcontext ctx);
CUresult cuCtxSetCurrent(CUcontext ctx);
CUresult cuMemAlloc_v2(CUdeviceptr *dptr, size_t bytesize);
CUresult cuMemFree_v2(CUdeviceptr dptr);
CUresult cuMemcpyHtoD_v2(CUdeviceptr dst, const void *src, size_t n);
CUresult cuMemcpyDtoH_v2(void *dst, CUdeviceptr src, size_t n);
CUresult cuMemcpyPeer(CUdeviceptr dst, CUcontext dstCtx, CUdeviceptr src, CUcontext srcCtx, size_t n);
CUresult cuCtxEnablePeerAccess(CUcontext peer, unsigned int flags);
CUresult cuCtxDisablePeerAccess(CUcontext peer);
CUresult cuStreamCreateWithPriority(CUstream *s, unsigned int flags, int priority);
CUresult cuStreamDestroy_v2(CUstream s);
CUresult cuStreamGetCtx(CUstream s, CUcontext *pctx);
CUresult cuDeviceCanAccessPeer(int *can, CUdevice dev, CUdevice peer);
CUresult cuEventCreate(CUevent *ev, unsigned int flags);
CUresult cuEventDestroy_v2(CUevent ev);
CUresult cuIpcGetMemHandle(CUipcMemHandle *h, CUdeviceptr p);
CUresult cuIpcOpenMemHandle(CUdeviceptr *p, CUipcMemHandle h, unsigned int flags);
CUresult cuIpcOpenMemHandle_v2(CUdeviceptr *p, CUipcMemHandle h, unsigned int flags);
CUresult cuIpcCloseMemHandle(CUdeviceptr p);
CUresult cuIpcGetEventHandle(CUipcEventHandle *h, CUevent ev);
CUresult cuIpcOpenEventHandle(CUevent *ev, CUipcEventHandle h);

typedef struct {
    unsigned int type; /* CUlogicalEndpointType: 1 = unicast */
    int device;        /* unicast.device */
    unsigned long long size;
    unsigned int ipcHandleTypes; /* 1 = FABRIC */
    unsigned int flags;
} CUlogicalEndpointProp;
CUresult cuLogicalEndpointIdReserve(unsigned int *base, unsigned int count);
CUresult cuLogicalEndpointCreate(unsigned int id, const CUlogicalEndpointProp *prop);
CUresult cuLogicalEndpointExport(void *handle, unsigned int id, unsigned int type);
CUresult cuLogicalEndpointImport(unsigned int id, const void *handle, unsigned int type);
CUresult cuLogicalEndpointQuery(unsigned int id, unsigned int count, int *status);
CUresult cuLogicalEndpointDestroy(unsigned int id);

typedef int hipError_t;
typedef struct { char reserved[64]; } hipIpcMemHandle_t;
hipError_t hipSetDevice(int device);
hipError_t hipMalloc(void **ptr, size_t size);
hipError_t hipFree(void *ptr);
hipError_t hipMemcpy(void *dst, const void *src, size_t n, int kind);
hipError_t hipIpcGetMemHandle(hipIpcMemHandle_t *h, void *ptr);
hipError_t hipIpcOpenMemHandle(void **ptr, hipIpcMemHandle_t h, unsigned int flags);
hipError_t hipIpcCloseMemHandle(void *ptr);
hipError_t hipMemGetAddressRange(void **pbase, size_t *psize, void *dptr);
hipError_t hipGetLastError(void);
hipError_t hipPeekAtLastError(void);

typedef CUresult (*GetProcAddress_v2)(const char *, void **, int, unsigned long long, int *);
typedef CUresult (*MemcpyPeer)(CUdeviceptr, CUcontext, CUdeviceptr, CUcontext, size_t);

#define SIZE (1u << 20)
#define LAZY 1u

static int failures;

#define CHECK(expr)                                                                   \
    do {                                                                              \
        if (!(expr)) {                                                                \
            fprintf(stderr, "%s:%d: check failed: %s\n", __FILE__, __LINE__, #expr); \
            failures++;                                                               \
        }                                                                             \
    } while (0)
#define EXPECT(call, code)                                                                 \
    do {                                                                                   \
        CUresult rc_ = (call);                                                             \
        if (rc_ != (code)) {                                                               \
            fprintf(stderr, "%s:%d: %s returned %d, expected %d\n", __FILE__, __LINE__,   \
                    #call, rc_, (code));                                                   \
            failures++;                                                                    \
        }                                                                                  \
    } while (0)

static void to_hex(const void *bytes, char *out) {
    const unsigned char *b = bytes;
    for (int i = 0; i < 64; i++) sprintf(out + 2 * i, "%02x", b[i]);
}

static void from_hex(const char *text, void *bytes) {
    unsigned char *b = bytes;
    for (int i = 0; i < 64; i++) {
        unsigned v = 0;
        sscanf(text + 2 * i, "%2x", &v);
        b[i] = (unsigned char)v;
    }
}

static int finish(const char *mode) {
    if (failures) {
        fprintf(stderr, "%s: %d check(s) failed\n", mode, failures);
        return 1;
    }
    printf("%s: ok\n", mode);
    return 0;
}

static int basics(void) {
    int count = -1;
    EXPECT(cuDeviceGetCount(&count), 3); /* CUDA_ERROR_NOT_INITIALIZED */
    EXPECT(cuInit(0), 0);
    EXPECT(cuDeviceGetCount(&count), 0);
    printf("devices=%d\n", count);
    CUcontext c0, c1;
    EXPECT(cuCtxCreate_v4(&c1, NULL, 0, 1), 0);
    EXPECT(cuCtxCreate_v4(&c0, NULL, 0, 0), 0);
    int can = -1;
    EXPECT(cuDeviceCanAccessPeer(&can, 0, 1), 0);
    CHECK(can == 1);
    EXPECT(cuCtxEnablePeerAccess(c1, 0), 0);
    EXPECT(cuCtxEnablePeerAccess(c1, 0), 704);
    EXPECT(cuCtxEnablePeerAccess(c0, 0), 217); /* R580: self is PEER_ACCESS_UNSUPPORTED */
    CUdeviceptr a, b;
    EXPECT(cuMemAlloc_v2(&a, 4096), 0);
    EXPECT(cuCtxSetCurrent(c1), 0);
    EXPECT(cuMemAlloc_v2(&b, 4096), 0);
    char text[] = "bytes really move";
    EXPECT(cuMemcpyHtoD_v2(a, text, sizeof text), 0);
    EXPECT(cuMemcpyPeer(b, c1, a, c0, sizeof text), 0);
    char back[sizeof text] = {0};
    EXPECT(cuMemcpyDtoH_v2(back, b, sizeof text), 0);
    CHECK(memcmp(back, text, sizeof text) == 0);
    EXPECT(cuMemcpyPeer(b, c1, a, c0, 8192), 1); /* beyond the allocation */
    EXPECT(cuMemFree_v2(b), 0);
    EXPECT(cuCtxDestroy_v2(c1), 0);
    EXPECT(cuCtxDestroy_v2(c0), 0);
    return finish("basics");
}

/* Runs this program again as `mode a b` in a forked, exec'ed child. */
static pid_t spawn(const char *self, const char *mode, const char *a, const char *b) {
    fflush(stdout);
    pid_t child = fork();
    if (child == 0) {
        execl(self, self, mode, a, b, (char *)NULL);
        perror("execl");
        _exit(127);
    }
    return child;
}

static int ipc_parent(const char *self) {
    EXPECT(cuInit(0), 0);
    CUcontext ctx;
    EXPECT(cuCtxCreate_v4(&ctx, NULL, 0, 0), 0);
    CUdeviceptr p;
    EXPECT(cuMemAlloc_v2(&p, SIZE), 0);
    unsigned char *pattern = malloc(SIZE);
    for (unsigned i = 0; i < SIZE; i++) pattern[i] = (unsigned char)(i * 31 + 7);
    EXPECT(cuMemcpyHtoD_v2(p, pattern, SIZE), 0);
    CUipcMemHandle mem;
    EXPECT(cuIpcGetMemHandle(&mem, p), 0);
    CUevent ev;
    EXPECT(cuEventCreate(&ev, 0x2 | 0x4), 0);
    CUipcEventHandle evh;
    EXPECT(cuIpcGetEventHandle(&evh, ev), 0);
    unsigned int le_id = 0;
    EXPECT(cuLogicalEndpointIdReserve(&le_id, 1), 0);
    CUlogicalEndpointProp prop = {1, 0, 2u << 20, 1, 0};
    EXPECT(cuLogicalEndpointCreate(le_id, &prop), 0);
    unsigned char le_handle[64];
    EXPECT(cuLogicalEndpointExport(le_handle, le_id, 1), 0);
    char mem_hex[129], ev_hex[129], le_hex[129];
    to_hex(&mem, mem_hex);
    to_hex(&evh, ev_hex);
    to_hex(le_handle, le_hex);
    setenv("SMOKE_LE_HANDLE", le_hex, 1);
    pid_t child = spawn(self, "ipc-child", mem_hex, ev_hex);
    int status = 0;
    waitpid(child, &status, 0);
    CHECK(WIFEXITED(status) && WEXITSTATUS(status) == 0);
    /* The child overwrote the first 4 KiB with 0x5A: the parent sees it. */
    unsigned char head[4096];
    EXPECT(cuMemcpyDtoH_v2(head, p, sizeof head), 0);
    int all_5a = 1;
    for (unsigned i = 0; i < sizeof head; i++) all_5a &= head[i] == 0x5A;
    CHECK(all_5a);
    EXPECT(cuEventDestroy_v2(ev), 0);
    EXPECT(cuLogicalEndpointDestroy(le_id), 0);
    EXPECT(cuMemFree_v2(p), 0);
    free(pattern);
    return finish("ipc-parent");
}

static int ipc_child(const char *mem_hex, const char *ev_hex) {
    CUipcMemHandle mem;
    CUipcEventHandle evh;
    from_hex(mem_hex, &mem);
    from_hex(ev_hex, &evh);
    EXPECT(cuInit(0), 0);
    CUcontext ctx;
    EXPECT(cuCtxCreate_v4(&ctx, NULL, 0, 1), 0); /* the other device */
    CUdeviceptr p = 0, q = 0;
    EXPECT(cuIpcOpenMemHandle_v2(&p, mem, 0), 1); /* flags must be LAZY_ENABLE_PEER_ACCESS */
    EXPECT(cuIpcOpenMemHandle_v2(&p, mem, LAZY), 0);
    unsigned char *seen = malloc(SIZE);
    EXPECT(cuMemcpyDtoH_v2(seen, p, SIZE), 0);
    int same = 1;
    for (unsigned i = 0; i < SIZE; i++) same &= seen[i] == (unsigned char)(i * 31 + 7);
    CHECK(same);
    EXPECT(cuIpcOpenMemHandle_v2(&q, mem, LAZY), 0); /* v2 again: same pointer, refcounted */
    CHECK(p == q);
    EXPECT(cuIpcOpenMemHandle(&q, mem, LAZY), 208); /* v1 after v2: ALREADY_MAPPED */
    memset(seen, 0x5A, 4096);
    EXPECT(cuMemcpyHtoD_v2(p, seen, 4096), 0);
    EXPECT(cuIpcCloseMemHandle(p), 0);
    EXPECT(cuIpcCloseMemHandle(p), 0);
    EXPECT(cuIpcCloseMemHandle(p), 1); /* no more references */
    CUevent ev;
    EXPECT(cuIpcOpenEventHandle(&ev, evh), 0);
    EXPECT(cuEventDestroy_v2(ev), 0);
    /* The parent's logical endpoint, imported through its FABRIC handle. */
    const char *le_hex = getenv("SMOKE_LE_HANDLE");
    CHECK(le_hex != NULL);
    if (le_hex) {
        unsigned char le_handle[64];
        from_hex(le_hex, le_handle);
        unsigned int le_id = 0;
        int ready = -1;
        EXPECT(cuLogicalEndpointIdReserve(&le_id, 1), 0);
        EXPECT(cuLogicalEndpointImport(le_id, le_handle, 1), 0);
        EXPECT(cuLogicalEndpointQuery(le_id, 1, &ready), 0);
        CHECK(ready == 1);
        EXPECT(cuLogicalEndpointDestroy(le_id), 0);
    }
    free(seen);
    return finish("ipc-child");
}

static int procaddr(void) {
    void *lib = dlopen("libcuda.so.1", RTLD_NOW | RTLD_LOCAL);
    if (!lib) {
        fprintf(stderr, "dlopen: %s\n", dlerror());
        return 1;
    }
    GetProcAddress_v2 get = (GetProcAddress_v2)dlsym(lib, "cuGetProcAddress_v2");
    CHECK(get != NULL);
    if (!get) return finish("procaddr");
    void *pfn = NULL;
    int status = -1;
    EXPECT(get("cuMemcpyPeer", &pfn, 4000, 0, &status), 0);
    CHECK(status == 0);
    CHECK(pfn != NULL && pfn == dlsym(lib, "cuMemcpyPeer"));
    EXPECT(get("cuMemcpyPeer", &pfn, 7000, 2, &status), 0);
    CHECK(pfn != NULL && pfn == dlsym(lib, "cuMemcpyPeer_ptds"));
    EXPECT(get("cuGetProcAddress", &pfn, 12000, 0, &status), 0);
    CHECK(pfn == (void *)get);
    /* Under LD_PRELOAD the global name belongs to the preloaded library... */
    void *global = dlsym(RTLD_DEFAULT, "cuMemcpyPeer");
    int preloaded = global != dlsym(lib, "cuMemcpyPeer");
    printf("preloaded=%d\n", preloaded);
    /* ...but the pointer from the sim is the sim's: before cuInit it answers NOT_INITIALIZED,
     * where the preloaded stand-in answers 4242. */
    EXPECT(get("cuMemcpyPeer", &pfn, 4000, 0, &status), 0);
    EXPECT(((MemcpyPeer)pfn)(0, NULL, 0, NULL, 0), 3);
    return finish("procaddr");
}

static int hip_ipc_parent(const char *self) {
    EXPECT(hipSetDevice(0), 0);
    unsigned char *p = NULL;
    EXPECT(hipMalloc((void **)&p, 65536), 0);
    unsigned char pattern[65536];
    for (unsigned i = 0; i < sizeof pattern; i++) pattern[i] = (unsigned char)(i % 251);
    EXPECT(hipMemcpy(p, pattern, sizeof pattern, 1), 0);
    hipIpcMemHandle_t h;
    EXPECT(hipIpcGetMemHandle(&h, p + 4096), 0); /* interior: HIP keeps the offset */
    char hex[129];
    to_hex(&h, hex);
    int status = 0;
    waitpid(spawn(self, "hip-ipc-child", hex, ""), &status, 0);
    CHECK(WIFEXITED(status) && WEXITSTATUS(status) == 0);
    unsigned char byte = 0;
    EXPECT(hipMemcpy(&byte, p + 4096, 1, 2), 0);
    CHECK(byte == 0xA5);
    EXPECT(hipFree(p), 0);
    return finish("hip-ipc-parent");
}

static int hip_ipc_child(const char *hex) {
    hipIpcMemHandle_t h;
    from_hex(hex, &h);
    EXPECT(hipSetDevice(1), 0);
    unsigned char *q = NULL;
    EXPECT(hipIpcOpenMemHandle((void **)&q, h, 0), 1); /* flags must be hipIpcMemLazyEnablePeerAccess */
    EXPECT(hipIpcOpenMemHandle((void **)&q, h, 1), 0);
    unsigned char seen[16];
    EXPECT(hipMemcpy(seen, q, sizeof seen, 2), 0);
    for (unsigned i = 0; i < sizeof seen; i++) CHECK(seen[i] == (unsigned char)((4096 + i) % 251));
    unsigned char mark = 0xA5;
    EXPECT(hipMemcpy(q, &mark, 1, 1), 0);
    EXPECT(hipIpcCloseMemHandle(q), 0);
    EXPECT(hipIpcCloseMemHandle(q), 1);
    return finish("hip-ipc-child");
}

static int queries(int limit) {
    EXPECT(cuInit(0), 0);
    CUcontext c1, c2, c0, ctx = NULL;
    EXPECT(cuCtxCreate_v4(&c1, NULL, 0, 1), 0);
    EXPECT(cuCtxCreate_v4(&c2, NULL, 0, 2), 0);
    EXPECT(cuCtxCreate_v4(&c0, NULL, 0, 0), 0);
    CUstream s;
    EXPECT(cuStreamCreateWithPriority(&s, 1, -1), 0);
    EXPECT(cuCtxSetCurrent(c1), 0);
    EXPECT(cuStreamGetCtx(s, &ctx), 0);
    CHECK(ctx == c0); /* the creating context, not the current one */
    EXPECT(cuStreamGetCtx(NULL, &ctx), 0);
    CHECK(ctx == c1);
    EXPECT(cuStreamDestroy_v2(s), 0);
    EXPECT(cuStreamGetCtx(s, &ctx), 400);
    EXPECT(cuCtxSetCurrent(c0), 0);
    /* SHARECHECK_SIM_MAX_PEERS: the grant after the limit is 711 until one is disabled. */
    EXPECT(cuCtxEnablePeerAccess(c1, 0), 0);
    EXPECT(cuCtxEnablePeerAccess(c2, 0), limit >= 2 ? 0 : 711);
    if (limit < 2) {
        EXPECT(cuCtxDisablePeerAccess(c1), 0);
        EXPECT(cuCtxEnablePeerAccess(c2, 0), 0);
    }
    /* HIP: an error stays the thread's last error across successes until hipGetLastError. */
    EXPECT(hipGetLastError(), 0);
    unsigned char *p = NULL;
    EXPECT(hipMalloc((void **)&p, 5000), 0);
    void *base = NULL;
    size_t size = 0;
    EXPECT(hipMemGetAddressRange(&base, &size, p + 4999), 0);
    CHECK(base == p && size == 5000);
    EXPECT(hipMemGetAddressRange(&base, &size, &size), 500); /* hipErrorNotFound */
    EXPECT(hipMemGetAddressRange(&base, &size, p), 0);
    EXPECT(hipPeekAtLastError(), 500);
    EXPECT(hipGetLastError(), 500);
    EXPECT(hipGetLastError(), 0);
    EXPECT(hipFree(p), 0);
    return finish("queries");
}

int main(int argc, char **argv) {
    if (argc >= 2 && strcmp(argv[1], "basics") == 0) return basics();
    if (argc >= 2 && strcmp(argv[1], "ipc-parent") == 0) return ipc_parent(argv[0]);
    if (argc >= 4 && strcmp(argv[1], "ipc-child") == 0) return ipc_child(argv[2], argv[3]);
    if (argc >= 2 && strcmp(argv[1], "procaddr") == 0) return procaddr();
    if (argc >= 2 && strcmp(argv[1], "hip-ipc-parent") == 0) return hip_ipc_parent(argv[0]);
    if (argc >= 3 && strcmp(argv[1], "hip-ipc-child") == 0) return hip_ipc_child(argv[2]);
    if (argc >= 3 && strcmp(argv[1], "queries") == 0) return queries(atoi(argv[2]));
    fprintf(stderr, "usage: %s basics|ipc-parent|procaddr|hip-ipc-parent|queries LIMIT\n", argv[0]);
    return 2;
}
