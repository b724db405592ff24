/* sharecheck benchmark: the cost of single CUDA driver calls, timed in loops.
 *
 * Built with `cc -O2 bench.c -lcuda -lpthread` against the simulated driver (scripts/bench.sh) or
 * a real libcuda.so.1 (scripts/gpu-bench.sh). It declares the few driver prototypes it needs
 * itself (the exported ELF names of cuda.h, CUDA 12/13), so it needs no CUDA headers.
 * It is run twice per round, once plain and once with libsharecheck.so preloaded; the scripts
 * compare the two.
 *
 * Usage: bench [--threads T] [--reps R] [--iters CASE=N,...] [--cases CASE,...] [--calibrate MS]
 *              [--probe] [--ab [--entries link|proc,dlsym|proc]]
 *
 * Cases (each a loop of N calls, timed with CLOCK_MONOTONIC after one untimed warm-up loop,
 * repeated R times; the result is the median ns per call over the repetitions):
 *   can_access_peer       cuDeviceCanAccessPeer(&v, dev0, dev1)                    ns per call
 *   memcpy_peer_async_4B  cuMemcpyPeerAsync(dst on dev1, ctx1, src on dev0, ctx0, 4, stream),
 *                         the stream made in ctx0; cuStreamSynchronize after every 64 copies,
 *                         outside the timed part (so for every case on a stream)   ns per call
 *   memcpy_peer_async_4B_stream0  the same on stream 0 (the legacy default stream) ns per call
 *   memcpy_peer_4B        cuMemcpyPeer(dst, ctx1, src, ctx0, 4) (synchronous)      ns per call
 *   memcpy_dtod_async_4B  cuMemcpyDtoDAsync_v2(dst, src, 4, stream): a copy the shim observes
 *                         (unified addressing: dst on dev1, src on dev0)           ns per call
 *   memset_d8_async_4B    cuMemsetD8Async(src, 0, 4, stream) (observed)            ns per call
 *   stream_attach         cuStreamAttachMemAsync(stream, managed 4 KiB, 0, SINGLE) ns per call
 *   ipc_get_mem_handle    cuIpcGetMemHandle(&h, src)                               ns per call
 *   alloc_free_256B       cuMemAlloc_v2(&p, 256) + cuMemFree_v2(p)                 ns per PAIR
 *   vmm_map_unmap         cuMemMap of one granule of the thread's VMM allocation into its
 *                         reservation + cuMemUnmap of it                           ns per PAIR
 *   vmm_set_access        cuMemSetAccess(read-write for dev0) of the thread's mapped granule
 *                                                                                  ns per call
 *   ctx_get_current       cuCtxGetCurrent(&c) (no shim observes it)                ns per call
 *   device_get_count      cuDeviceGetCount(&n) (no shim observes it)               ns per call
 *   pointer_get_attribute cuPointerGetAttribute(&type, MEMORY_TYPE, src) (not interposed: the
 *                         driver's cost of the kind of question the shim's checks ask) ns per call
 *
 * Setup: cuInit, the primary contexts of devices 0 and 1 (0 and 0 when there is one device:
 * can_access_peer is left out then, as it would ask about a device and itself),
 * peer access from ctx0 to ctx1 when cuDeviceCanAccessPeer says it is possible. Every call is a
 * correct use, so a checker must report nothing.
 *
 * --threads T: T threads run each case at once (a barrier starts every repetition), each with
 * the current context set to ctx0, its own stream and its own buffers; each thread's median is
 * taken, and the result is the median over the threads (also printed: the lowest and highest).
 * --calibrate MS: before the runs, pick N per case so that one loop takes about MS ms on one
 * thread, and print it as an `ITERS` line that can be passed back with --iters.
 * --probe: print the setup (devices, peer access), and the ITERS line with --calibrate, then
 * exit without running the cases.
 * --ab: in-process A/B. Every repetition runs its loop twice, alternating which goes first: once
 * through the functions as linked (the shim's, when it is preloaded) and once through the driver's
 * own entries (glibc's own dlsym on libcuda.so.1, past any shim's), on the same stream and buffers.
 * --entries LINKED,DIRECT changes where each side's functions come from: LINKED `link` (as linked)
 * or `proc` (through the cuGetProcAddress_v2 the program links, at each function's base version
 * with LEGACY_STREAM, as libcudart asks: a preloaded shim answers with its wrappers), DIRECT
 * `dlsym` or `proc` (through the driver's own cuGetProcAddress_v2). `proc,proc` times what a
 * runtime program's calls cost; `link,proc` without a shim times the driver's exported entries
 * against the ones cuGetProcAddress returns. An ENTRIES line names the functions whose two
 * entries differ.
 * The difference per repetition is the shim's cost with the driver's own run-to-run variance (on
 * R580 a 4-byte peer copy takes 1.7 to 2.8 us depending on the process) cancelled. Without a shim
 * both are the driver: the difference is the method's noise. Prints AB lines instead of RESULT.
 *
 * Output lines (tab-separated, for scripts):
 *   INFO  key=value ...
 *   ITERS case=N,case=N,...
 *   RESULT <case> <threads> <median ns> <lowest thread median> <highest thread median> <unit> <N>
 *          <aggregate ns> <median CPU ns>
 *   AB <case> <threads> <median ns linked> <median ns direct> <median of (linked - direct)> <unit>
 *      <N> <same: 1 when the linked and the direct entry are one address (no shim)>
 * where the medians are wall-clock ns per call (CLOCK_MONOTONIC); CPU ns is the same measured
 * with the thread's CPU clock (CLOCK_THREAD_CPUTIME_ID: time it waited for a CPU or slept on a
 * lock does not count); aggregate is, per repetition, the time from the first thread's start to
 * the last thread's end divided by the calls of all threads (median over the repetitions; for
 * memcpy_peer_async_4B it includes the untimed synchronizations).
 * Exit status 0, or 1 with a message on stderr when a driver call failed.
 */
#define _GNU_SOURCE
#include <dlfcn.h>
#include <pthread.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

/* ---- The driver API: types and prototypes as cuda.h declares them (64-bit). ---- */
typedef int CUresult;
typedef int CUdevice;
typedef struct CUctx_st *CUcontext;
typedef struct CUstream_st *CUstream;
typedef unsigned long long CUdeviceptr;

CUresult cuInit(unsigned int Flags);
CUresult cuDriverGetVersion(int *driverVersion);
CUresult cuDeviceGetCount(int *count);
CUresult cuDeviceGet(CUdevice *device, int ordinal);
CUresult cuDeviceGetName(char *name, int len, CUdevice dev);
CUresult cuDeviceCanAccessPeer(int *canAccessPeer, CUdevice dev, CUdevice peerDev);
CUresult cuDevicePrimaryCtxRetain(CUcontext *pctx, CUdevice dev);
CUresult cuDevicePrimaryCtxRelease_v2(CUdevice dev);
CUresult cuCtxSetCurrent(CUcontext ctx);
CUresult cuCtxGetCurrent(CUcontext *pctx);
CUresult cuCtxEnablePeerAccess(CUcontext peerContext, unsigned int Flags);
CUresult cuCtxDisablePeerAccess(CUcontext peerContext);
CUresult cuMemAlloc_v2(CUdeviceptr *dptr, size_t bytesize);
CUresult cuMemFree_v2(CUdeviceptr dptr);
CUresult cuMemcpyPeerAsync(CUdeviceptr dstDevice, CUcontext dstContext, CUdeviceptr srcDevice,
                           CUcontext srcContext, size_t ByteCount, CUstream hStream);
CUresult cuMemcpyPeer(CUdeviceptr dstDevice, CUcontext dstContext, CUdeviceptr srcDevice,
                      CUcontext srcContext, size_t ByteCount);
CUresult cuMemcpyDtoDAsync_v2(CUdeviceptr dstDevice, CUdeviceptr srcDevice, size_t ByteCount,
                              CUstream hStream);
CUresult cuMemsetD8Async(CUdeviceptr dstDevice, unsigned char uc, size_t N, CUstream hStream);
CUresult cuMemAllocManaged(CUdeviceptr *dptr, size_t bytesize, unsigned int flags);
typedef enum { CU_POINTER_ATTRIBUTE_MEMORY_TYPE = 2 } CUpointer_attribute;
enum { CU_MEMORYTYPE_DEVICE = 2 };
CUresult cuPointerGetAttribute(void *data, CUpointer_attribute attribute, CUdeviceptr ptr);
CUresult cuStreamAttachMemAsync(CUstream hStream, CUdeviceptr dptr, size_t length,
                                unsigned int flags);
typedef struct {
    char reserved[64];
} CUipcMemHandle;
CUresult cuIpcGetMemHandle(CUipcMemHandle *pHandle, CUdeviceptr dptr);
CUresult cuStreamCreate(CUstream *phStream, unsigned int Flags);
CUresult cuStreamSynchronize(CUstream hStream);
CUresult cuStreamDestroy_v2(CUstream hStream);
CUresult cuGetErrorName(CUresult error, const char **pStr);
CUresult cuGetProcAddress_v2(const char *symbol, void **pfn, int cudaVersion,
                             unsigned long long flags, int *symbolStatus);
typedef CUresult (*get_proc_t)(const char *, void **, int, unsigned long long, int *);
/* Virtual memory management: CUmemAllocationProp (32 bytes) and CUmemAccessDesc (12). */
typedef unsigned long long CUmemGenericAllocationHandle;
typedef struct {
    unsigned int type, requestedHandleTypes, locationType;
    int locationId;
    void *win32HandleMetaData;
    unsigned char allocFlags[8];
} CUmemAllocationProp;
typedef struct {
    unsigned int locationType;
    int locationId;
    unsigned int flags;
} CUmemAccessDesc;
CUresult cuMemGetAllocationGranularity(size_t *granularity, const CUmemAllocationProp *prop,
                                       int option);
CUresult cuMemCreate(CUmemGenericAllocationHandle *handle, size_t size,
                     const CUmemAllocationProp *prop, unsigned long long flags);
CUresult cuMemRelease(CUmemGenericAllocationHandle handle);
CUresult cuMemAddressReserve(CUdeviceptr *ptr, size_t size, size_t alignment, CUdeviceptr addr,
                             unsigned long long flags);
CUresult cuMemAddressFree(CUdeviceptr ptr, size_t size);
CUresult cuMemMap(CUdeviceptr ptr, size_t size, size_t offset, CUmemGenericAllocationHandle handle,
                  unsigned long long flags);
CUresult cuMemUnmap(CUdeviceptr ptr, size_t size);
CUresult cuMemSetAccess(CUdeviceptr ptr, size_t size, const CUmemAccessDesc *desc, size_t count);

/* The covered calls the cases make, through one table: as linked, or the driver's own entries. */
struct api {
    CUresult (*can_access_peer)(int *, CUdevice, CUdevice);
    CUresult (*memcpy_peer_async)(CUdeviceptr, CUcontext, CUdeviceptr, CUcontext, size_t,
                                  CUstream);
    CUresult (*memcpy_peer)(CUdeviceptr, CUcontext, CUdeviceptr, CUcontext, size_t);
    CUresult (*memcpy_dtod_async)(CUdeviceptr, CUdeviceptr, size_t, CUstream);
    CUresult (*memset_d8_async)(CUdeviceptr, unsigned char, size_t, CUstream);
    CUresult (*stream_attach)(CUstream, CUdeviceptr, size_t, unsigned int);
    CUresult (*ipc_get)(CUipcMemHandle *, CUdeviceptr);
    CUresult (*mem_alloc)(CUdeviceptr *, size_t);
    CUresult (*mem_free)(CUdeviceptr);
    CUresult (*ctx_get_current)(CUcontext *);
    CUresult (*device_get_count)(int *);
    CUresult (*pointer_get_attribute)(void *, CUpointer_attribute, CUdeviceptr);
    CUresult (*mem_map)(CUdeviceptr, size_t, size_t, CUmemGenericAllocationHandle,
                        unsigned long long);
    CUresult (*mem_unmap)(CUdeviceptr, size_t);
    CUresult (*mem_set_access)(CUdeviceptr, size_t, const CUmemAccessDesc *, size_t);
};
static struct api LINKED = {
    cuDeviceCanAccessPeer, cuMemcpyPeerAsync, cuMemcpyPeer,  cuMemcpyDtoDAsync_v2,
    cuMemsetD8Async,       cuStreamAttachMemAsync, cuIpcGetMemHandle, cuMemAlloc_v2,
    cuMemFree_v2,          cuCtxGetCurrent,   cuDeviceGetCount, cuPointerGetAttribute,
    cuMemMap,              cuMemUnmap,        cuMemSetAccess,
};
static struct api g_direct;
static int g_same;    /* direct entries that are the linked one */
static int g_entries; /* direct entries (all the same: no shim in between) */

/* ---- Errors ---- */
static void check(CUresult r, const char *what, int line) {
    if (r == 0)
        return;
    const char *name = NULL;
    if (cuGetErrorName(r, &name) != 0 || name == NULL)
        name = "?";
    fprintf(stderr, "bench: %s failed: %d %s (bench.c:%d)\n", what, r, name, line);
    exit(1);
}
#define CHECK(call) check((call), #call, __LINE__)

static void die(const char *msg) {
    fprintf(stderr, "bench: %s\n", msg);
    exit(2);
}

/* ---- Setup shared by all threads ---- */
enum { COPY_BYTES = 4, ALLOC_BYTES = 256, MANAGED_BYTES = 4096, SYNC_EVERY = 64 };
enum { CU_MEM_ATTACH_GLOBAL = 1, CU_MEM_ATTACH_SINGLE = 4 };

static int g_devices;
static CUdevice g_dev0, g_dev1;
static CUcontext g_ctx0, g_ctx1;
static int g_can_access;   /* cuDeviceCanAccessPeer(dev0, dev1) */
static int g_peer_enabled; /* ctx0 -> ctx1 enabled by us */

/* ---- Cases ---- */
enum {
    CAN_ACCESS,
    MEMCPY,
    MEMCPY_STREAM0,
    MEMCPY_SYNC,
    DTOD_ASYNC,
    MEMSET_ASYNC,
    ATTACH,
    IPC_GET,
    ALLOC_FREE,
    VMM_MAP_UNMAP,
    VMM_SET_ACCESS,
    CTX_GET_CURRENT,
    DEVICE_GET_COUNT,
    POINTER_GET_ATTRIBUTE,
    NCASES
};
static const char *const CASE_NAME[NCASES] = {
    "can_access_peer",      "memcpy_peer_async_4B", "memcpy_peer_async_4B_stream0",
    "memcpy_peer_4B",       "memcpy_dtod_async_4B", "memset_d8_async_4B",
    "stream_attach",        "ipc_get_mem_handle",   "alloc_free_256B",
    "vmm_map_unmap",        "vmm_set_access",
    "ctx_get_current",      "device_get_count",     "pointer_get_attribute",
};
static const char *const CASE_UNIT[NCASES] = {"call", "call", "call", "call", "call", "call", "call",
                                              "call", "pair", "pair", "call", "call", "call", "call"};
static long g_iters[NCASES] = {200000, 50000, 50000, 5000,   50000,  50000, 50000,
                               50000,  20000, 5000,  20000,  400000, 400000, 200000};
static int g_enabled[NCASES] = {1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1};

/* The VMM cases' allocation granularity and properties (device 0). */
static size_t g_granularity;
static CUmemAllocationProp g_vmm_prop;

/* The stream a case enqueues on (synchronized after every SYNC_EVERY calls), or -1: none. */
static int on_stream(int c) {
    switch (c) {
    case MEMCPY:
    case DTOD_ASYNC:
    case MEMSET_ASYNC:
    case ATTACH:
        return 1;
    case MEMCPY_STREAM0:
        return 0;
    default:
        return -1;
    }
}

/* What one thread owns. */
struct worker {
    pthread_t thread;
    int index;
    CUstream stream;
    CUdeviceptr src; /* on dev0, ctx0 */
    CUdeviceptr dst; /* on dev1, ctx1 */
    CUdeviceptr managed; /* MANAGED_BYTES, attached to `stream` by the attach case */
    CUmemGenericAllocationHandle vmm; /* one granule on dev0 */
    CUdeviceptr va;      /* two granules reserved: the first mapped read-write, the second free */
    double *samples; /* wall ns per call, one per repetition */
    double *cpu;     /* CPU ns per call, one per repetition */
    double *direct;  /* --ab: wall ns per call through the driver's own entries */
    int64_t *spans;  /* per repetition: when its loop started and ended (CLOCK_MONOTONIC) */
};

static int g_threads = 1;
static int g_ab;
static int g_reps = 11;
static pthread_barrier_t g_barrier;

static int64_t read_clock(clockid_t id) {
    struct timespec ts;
    clock_gettime(id, &ts);
    return (int64_t)ts.tv_sec * 1000000000 + ts.tv_nsec;
}

/* k units of case c through `a`, untimed; returns the results OR-ed together. */
static CUresult run_calls(int c, long k, struct worker *w, const struct api *a) {
    CUresult r = 0;
    switch (c) {
    case CAN_ACCESS: {
        int v = 0;
        for (long i = 0; i < k; i++)
            r |= a->can_access_peer(&v, g_dev0, g_dev1);
        break;
    }
    case MEMCPY:
        for (long i = 0; i < k; i++)
            r |= a->memcpy_peer_async(w->dst, g_ctx1, w->src, g_ctx0, COPY_BYTES, w->stream);
        break;
    case MEMCPY_STREAM0:
        for (long i = 0; i < k; i++)
            r |= a->memcpy_peer_async(w->dst, g_ctx1, w->src, g_ctx0, COPY_BYTES, NULL);
        break;
    case MEMCPY_SYNC:
        for (long i = 0; i < k; i++)
            r |= a->memcpy_peer(w->dst, g_ctx1, w->src, g_ctx0, COPY_BYTES);
        break;
    case DTOD_ASYNC:
        for (long i = 0; i < k; i++)
            r |= a->memcpy_dtod_async(w->dst, w->src, COPY_BYTES, w->stream);
        break;
    case MEMSET_ASYNC:
        for (long i = 0; i < k; i++)
            r |= a->memset_d8_async(w->src, 0, COPY_BYTES, w->stream);
        break;
    case ATTACH:
        for (long i = 0; i < k; i++)
            r |= a->stream_attach(w->stream, w->managed, 0, CU_MEM_ATTACH_SINGLE);
        break;
    case IPC_GET: {
        CUipcMemHandle h;
        for (long i = 0; i < k; i++)
            r |= a->ipc_get(&h, w->src);
        break;
    }
    case ALLOC_FREE: {
        CUdeviceptr p = 0;
        for (long i = 0; i < k; i++) {
            r |= a->mem_alloc(&p, ALLOC_BYTES);
            r |= a->mem_free(p);
        }
        break;
    }
    case CTX_GET_CURRENT: {
        CUcontext cur = NULL;
        for (long i = 0; i < k; i++)
            r |= a->ctx_get_current(&cur);
        if (r == 0 && cur != g_ctx0)
            die("cuCtxGetCurrent did not return ctx0");
        break;
    }
    case DEVICE_GET_COUNT: {
        int count = 0;
        for (long i = 0; i < k; i++)
            r |= a->device_get_count(&count);
        break;
    }
    case VMM_MAP_UNMAP: {
        size_t g = g_granularity;
        for (long i = 0; i < k; i++) {
            r |= a->mem_map(w->va + g, g, 0, w->vmm, 0);
            r |= a->mem_unmap(w->va + g, g);
        }
        break;
    }
    case VMM_SET_ACCESS: {
        CUmemAccessDesc rw = {1 /* DEVICE */, 0, 3 /* PROT_READWRITE */};
        for (long i = 0; i < k; i++)
            r |= a->mem_set_access(w->va, g_granularity, &rw, 1);
        break;
    }
    case POINTER_GET_ATTRIBUTE: {
        unsigned int type = 0;
        for (long i = 0; i < k; i++)
            r |= a->pointer_get_attribute(&type, CU_POINTER_ATTRIBUTE_MEMORY_TYPE, w->src);
        if (r == 0 && type != CU_MEMORYTYPE_DEVICE)
            die("cuPointerGetAttribute(MEMORY_TYPE) of a cuMemAlloc buffer is not DEVICE");
        break;
    }
    }
    return r;
}

/* What one loop measured. */
struct timing {
    int64_t wall;  /* ns in the timed part, CLOCK_MONOTONIC */
    int64_t cpu;   /* the same, this thread's CPU time (CLOCK_THREAD_CPUTIME_ID) */
    int64_t first; /* CLOCK_MONOTONIC when the timed part began */
    int64_t last;  /* and ended */
};

/* One loop of n units of case c. A case on a stream synchronizes it after every SYNC_EVERY
 * calls, outside the timed part. */
static void run_loop(int c, long n, struct worker *w, struct timing *tm, const struct api *a) {
    long block = on_stream(c) >= 0 ? SYNC_EVERY : n;
    memset(tm, 0, sizeof *tm);
    for (long done = 0; done < n;) {
        long k = n - done < block ? n - done : block;
        int64_t c0 = read_clock(CLOCK_THREAD_CPUTIME_ID);
        int64_t t0 = read_clock(CLOCK_MONOTONIC);
        CUresult r = run_calls(c, k, w, a);
        int64_t t1 = read_clock(CLOCK_MONOTONIC);
        int64_t c1 = read_clock(CLOCK_THREAD_CPUTIME_ID);
        if (done == 0)
            tm->first = t0;
        tm->last = t1;
        tm->wall += t1 - t0;
        tm->cpu += c1 - c0;
        done += k;
        CHECK(r);
        if (on_stream(c) >= 0)
            CHECK(cuStreamSynchronize(on_stream(c) ? w->stream : NULL));
    }
}

static void worker_setup(struct worker *w) {
    CHECK(cuCtxSetCurrent(g_ctx1));
    CHECK(cuMemAlloc_v2(&w->dst, COPY_BYTES));
    CHECK(cuCtxSetCurrent(g_ctx0));
    CHECK(cuMemAlloc_v2(&w->src, COPY_BYTES));
    CHECK(cuMemAllocManaged(&w->managed, MANAGED_BYTES, CU_MEM_ATTACH_GLOBAL));
    CHECK(cuStreamCreate(&w->stream, 0));
    CUmemAccessDesc rw = {1 /* DEVICE */, 0, 3 /* PROT_READWRITE */};
    CHECK(cuMemCreate(&w->vmm, g_granularity, &g_vmm_prop, 0));
    CHECK(cuMemAddressReserve(&w->va, 2 * g_granularity, 0, 0, 0));
    CHECK(cuMemMap(w->va, g_granularity, 0, w->vmm, 0));
    CHECK(cuMemSetAccess(w->va, g_granularity, &rw, 1));
}

static void worker_teardown(struct worker *w) {
    /* The managed memory back to GLOBAL before its stream goes (else the association silently
     * reverts when the stream is destroyed, which a checker rightly points out). */
    CHECK(cuStreamAttachMemAsync(w->stream, w->managed, 0, CU_MEM_ATTACH_GLOBAL));
    CHECK(cuStreamSynchronize(w->stream));
    CHECK(cuStreamDestroy_v2(w->stream));
    CHECK(cuMemFree_v2(w->managed));
    CHECK(cuMemFree_v2(w->src));
    CHECK(cuMemFree_v2(w->dst));
    CHECK(cuMemUnmap(w->va, g_granularity));
    CHECK(cuMemAddressFree(w->va, 2 * g_granularity));
    CHECK(cuMemRelease(w->vmm));
}

static int cmp_double(const void *a, const void *b) {
    double x = *(const double *)a, y = *(const double *)b;
    return (x > y) - (x < y);
}

static double median(double *v, int n) {
    qsort(v, (size_t)n, sizeof *v, cmp_double);
    return n % 2 ? v[n / 2] : (v[n / 2 - 1] + v[n / 2]) / 2;
}

static void *worker_main(void *arg) {
    struct worker *w = arg;
    CHECK(cuCtxSetCurrent(g_ctx0));
    worker_setup(w);
    for (int c = 0; c < NCASES; c++) {
        if (!g_enabled[c])
            continue;
        long n = g_iters[c];
        struct timing tm;
        pthread_barrier_wait(&g_barrier);
        run_loop(c, n, w, &tm, &LINKED); /* warm-up */
        if (g_ab)
            run_loop(c, n, w, &tm, &g_direct);
        for (int rep = 0; rep < g_reps; rep++) {
            int at = c * g_reps + rep;
            pthread_barrier_wait(&g_barrier);
            if (g_ab && rep % 2) {
                /* Direct first on every other repetition. */
                struct timing td;
                run_loop(c, n, w, &td, &g_direct);
                w->direct[at] = (double)td.wall / (double)n;
                run_loop(c, n, w, &tm, &LINKED);
            } else {
                run_loop(c, n, w, &tm, &LINKED);
                if (g_ab) {
                    struct timing td;
                    run_loop(c, n, w, &td, &g_direct);
                    w->direct[at] = (double)td.wall / (double)n;
                }
            }
            w->samples[at] = (double)tm.wall / (double)n;
            w->cpu[at] = (double)tm.cpu / (double)n;
            w->spans[2 * at] = tm.first;
            w->spans[2 * at + 1] = tm.last;
        }
    }
    worker_teardown(w);
    return NULL;
}

/* Picks N per case so one loop takes about ms milliseconds on this thread. */
static void calibrate(double ms) {
    struct worker w = {0};
    struct timing tm;
    worker_setup(&w);
    for (int c = 0; c < NCASES; c++) {
        if (!g_enabled[c])
            continue;
        /* Grow n until a loop takes a quarter of the target, then scale it to the target by the
         * fastest of three loops of that size (a preempted loop must not shrink n). */
        long n = SYNC_EVERY;
        run_loop(c, n, &w, &tm, &LINKED);
        while (tm.wall < ms * 1e6 / 4 && n < (1L << 26)) {
            n *= 4;
            run_loop(c, n, &w, &tm, &LINKED);
        }
        int64_t best = tm.wall;
        for (int again = 0; again < 2; again++) {
            run_loop(c, n, &w, &tm, &LINKED);
            best = tm.wall < best ? tm.wall : best;
        }
        double per = (double)best / (double)n;
        n = (long)(ms * 1e6 / (per > 0.1 ? per : 0.1));
        if (n < SYNC_EVERY)
            n = SYNC_EVERY;
        g_iters[c] = (n + SYNC_EVERY - 1) / SYNC_EVERY * SYNC_EVERY;
    }
    worker_teardown(&w);
    printf("ITERS\t");
    const char *sep = "";
    for (int c = 0; c < NCASES; c++) {
        if (!g_enabled[c])
            continue;
        printf("%s%s=%ld", sep, CASE_NAME[c], g_iters[c]);
        sep = ",";
    }
    printf("\n");
    fflush(stdout);
}

static int case_index(const char *name, size_t len) {
    for (int c = 0; c < NCASES; c++)
        if (strlen(CASE_NAME[c]) == len && strncmp(CASE_NAME[c], name, len) == 0)
            return c;
    fprintf(stderr, "bench: unknown case '%.*s'\n", (int)len, name);
    exit(2);
}

static void parse_cases(const char *list) {
    for (int c = 0; c < NCASES; c++)
        g_enabled[c] = 0;
    while (*list) {
        size_t len = strcspn(list, ",");
        g_enabled[case_index(list, len)] = 1;
        list += len + (list[len] == ',');
    }
}

static void parse_iters(const char *list) {
    while (*list) {
        size_t len = strcspn(list, ",");
        const char *eq = memchr(list, '=', len);
        if (!eq)
            die("--iters wants CASE=N,...");
        int c = case_index(list, (size_t)(eq - list));
        char *end;
        long n = strtol(eq + 1, &end, 10);
        if (n <= 0 || end != list + len)
            die("--iters: N must be a positive integer");
        g_iters[c] = n;
        list += len + (list[len] == ',');
    }
}

/* The covered calls of the cases: the table's field, the exported symbol, and the base name and
 * version libcudart asks cuGetProcAddress for (flags LEGACY_STREAM: the exported symbols are the
 * legacy-stream ones). */
#define ENTRIES(X)                                                                                 \
    X(can_access_peer, "cuDeviceCanAccessPeer", "cuDeviceCanAccessPeer", 4000)                     \
    X(memcpy_peer_async, "cuMemcpyPeerAsync", "cuMemcpyPeerAsync", 4000)                           \
    X(memcpy_peer, "cuMemcpyPeer", "cuMemcpyPeer", 4000)                                           \
    X(memcpy_dtod_async, "cuMemcpyDtoDAsync_v2", "cuMemcpyDtoDAsync", 3020)                        \
    X(memset_d8_async, "cuMemsetD8Async", "cuMemsetD8Async", 3020)                                 \
    X(stream_attach, "cuStreamAttachMemAsync", "cuStreamAttachMemAsync", 6000)                     \
    X(ipc_get, "cuIpcGetMemHandle", "cuIpcGetMemHandle", 4010)                                     \
    X(mem_alloc, "cuMemAlloc_v2", "cuMemAlloc", 3020)                                              \
    X(mem_free, "cuMemFree_v2", "cuMemFree", 3020)                                                 \
    X(ctx_get_current, "cuCtxGetCurrent", "cuCtxGetCurrent", 4000)                                 \
    X(device_get_count, "cuDeviceGetCount", "cuDeviceGetCount", 2000)                              \
    X(pointer_get_attribute, "cuPointerGetAttribute", "cuPointerGetAttribute", 4000)               \
    X(mem_map, "cuMemMap", "cuMemMap", 10020)                                                      \
    X(mem_unmap, "cuMemUnmap", "cuMemUnmap", 10020)                                                \
    X(mem_set_access, "cuMemSetAccess", "cuMemSetAccess", 10020)

/* --entries: how each side of --ab finds its functions. */
enum { VIA_LINK, VIA_DLSYM, VIA_PROC };
static int g_linked_via = VIA_LINK, g_direct_via = VIA_DLSYM;

/* Every entry of `out` through `get` (a cuGetProcAddress_v2), as libcudart asks for them. */
static void proc_entries(struct api *out, get_proc_t get, const char *whose) {
#define PROC(field, symbol, base, version)                                                         \
    do {                                                                                           \
        void *f = NULL;                                                                            \
        int status = -1;                                                                           \
        CUresult rc = get(base, &f, version, 1 /* LEGACY_STREAM */, &status);                      \
        if (rc != 0 || !f) {                                                                       \
            fprintf(stderr, "bench: %s cuGetProcAddress_v2(%s, %d) = %d, status %d\n", whose,    \
                    base, version, rc, status);                                                    \
            exit(1);                                                                               \
        }                                                                                          \
        memcpy(&out->field, &f, sizeof f);                                                         \
    } while (0);
    ENTRIES(PROC)
#undef PROC
}

/* The driver's own entries of the covered calls (the direct side of --ab): looked up by glibc's
 * own dlsym (found with dlvsym under its symbol version), since a shim's exported dlsym would
 * hand back its wrappers; or (--entries ...,proc) through the driver's own cuGetProcAddress_v2,
 * so looked up. The linked side (--entries proc,...) can come through the cuGetProcAddress_v2
 * the program links (a shim's, when one is preloaded), as libcudart's calls do. */
static void resolve_entries(void) {
    void *h = dlopen("libcuda.so.1", RTLD_NOW | RTLD_NOLOAD);
    if (!h)
        die("--ab: libcuda.so.1 is not loaded");
    void *(*real_dlsym)(void *, const char *) = NULL;
    void *found = dlvsym(RTLD_DEFAULT, "dlsym", "GLIBC_2.34");
    if (!found)
        found = dlvsym(RTLD_DEFAULT, "dlsym", "GLIBC_2.2.5");
    if (!found)
        die("--ab: glibc's dlsym not found (dlvsym GLIBC_2.34, GLIBC_2.2.5)");
    memcpy(&real_dlsym, &found, sizeof found);
    if (g_linked_via == VIA_PROC)
        proc_entries(&LINKED, cuGetProcAddress_v2, "linked");
    if (g_direct_via == VIA_PROC) {
        void *gp = real_dlsym(h, "cuGetProcAddress_v2");
        if (!gp)
            die("--ab: libcuda.so.1 has no cuGetProcAddress_v2");
        get_proc_t get;
        memcpy(&get, &gp, sizeof gp);
        proc_entries(&g_direct, get, "the driver's");
    } else {
#define DIRECT(field, symbol, base, version)                                                       \
    do {                                                                                           \
        void *f = real_dlsym(h, symbol);                                                           \
        if (!f)                                                                                    \
            die("--ab: libcuda.so.1 has no " symbol);                                              \
        memcpy(&g_direct.field, &f, sizeof f);                                                     \
    } while (0);
        ENTRIES(DIRECT)
#undef DIRECT
    }
    int other = g_linked_via != VIA_LINK || g_direct_via != VIA_DLSYM;
    if (other)
        printf("ENTRIES\tnot the same entry on both sides:");
#define SAME(field, symbol, base, version)                                                         \
    g_same += LINKED.field == g_direct.field;                                                      \
    g_entries++;                                                                                   \
    if (other && LINKED.field != g_direct.field)                                                   \
        printf(" %s", symbol);
    ENTRIES(SAME)
#undef SAME
    if (other)
        printf("\n");
}

static void usage(void) {
    fprintf(stderr, "usage: bench [--threads T] [--reps R] [--iters CASE=N,...] [--cases CASE,...] "
                    "[--calibrate MS] [--probe] [--ab [--entries link|proc,dlsym|proc]]\n");
    exit(2);
}

int main(int argc, char **argv) {
    int probe = 0;
    double calibrate_ms = 0;
    for (int i = 1; i < argc; i++) {
        const char *a = argv[i];
        const char *v = i + 1 < argc ? argv[i + 1] : NULL;
        if (!strcmp(a, "--probe")) {
            probe = 1;
        } else if (!strcmp(a, "--ab")) {
            g_ab = 1;
        } else if (!strcmp(a, "--entries") && v) {
            /* LINKED,DIRECT: link|proc for the linked side, dlsym|proc for the direct one */
            char l[16] = "", d[16] = "";
            if (sscanf(v, "%15[a-z],%15[a-z]", l, d) != 2)
                usage();
            g_linked_via = !strcmp(l, "link") ? VIA_LINK : !strcmp(l, "proc") ? VIA_PROC : -1;
            g_direct_via = !strcmp(d, "dlsym") ? VIA_DLSYM : !strcmp(d, "proc") ? VIA_PROC : -1;
            if (g_linked_via < 0 || g_direct_via < 0)
                usage();
            i++;
        } else if (!strcmp(a, "--threads") && v) {
            g_threads = atoi(v), i++;
        } else if (!strcmp(a, "--reps") && v) {
            g_reps = atoi(v), i++;
        } else if (!strcmp(a, "--iters") && v) {
            parse_iters(v), i++;
        } else if (!strcmp(a, "--cases") && v) {
            parse_cases(v), i++;
        } else if (!strcmp(a, "--calibrate") && v) {
            calibrate_ms = atof(v), i++;
        } else {
            usage();
        }
    }
    if (g_threads < 1 || g_threads > 1024 || g_reps < 1 || g_reps > 1000)
        die("--threads must be 1..1024 and --reps 1..1000");

    int version = 0;
    CHECK(cuInit(0));
    CHECK(cuDriverGetVersion(&version));
    CHECK(cuDeviceGetCount(&g_devices));
    if (g_devices < 1)
        die("no device");
    CHECK(cuDeviceGet(&g_dev0, 0));
    CHECK(cuDeviceGet(&g_dev1, g_devices > 1 ? 1 : 0));
    CHECK(cuDevicePrimaryCtxRetain(&g_ctx0, g_dev0));
    if (g_dev1 != g_dev0)
        CHECK(cuDevicePrimaryCtxRetain(&g_ctx1, g_dev1));
    else
        g_ctx1 = g_ctx0;
    CHECK(cuCtxSetCurrent(g_ctx0));
    g_vmm_prop.type = 1;         /* CU_MEM_ALLOCATION_TYPE_PINNED */
    g_vmm_prop.locationType = 1; /* CU_MEM_LOCATION_TYPE_DEVICE */
    g_vmm_prop.locationId = g_dev0;
    CHECK(cuMemGetAllocationGranularity(&g_granularity, &g_vmm_prop, 0 /* MINIMUM */));
    if (g_dev1 != g_dev0) {
        CHECK(cuDeviceCanAccessPeer(&g_can_access, g_dev0, g_dev1));
        if (g_can_access) {
            CHECK(cuCtxEnablePeerAccess(g_ctx1, 0));
            g_peer_enabled = 1;
        }
    } else if (g_enabled[CAN_ACCESS]) {
        /* With one device the case would ask about device 0 and itself: a misuse a checker
         * rightly reports on every call, which is not the cost of a correct call. */
        g_enabled[CAN_ACCESS] = 0;
        /* On stdout: the harness fails a plain run that writes on stderr. */
        printf("NOTE\tone device: can_access_peer left out (it needs two); the peer copies are "
               "copies within device 0\n");
    }
    char name[256] = "?";
    if (cuDeviceGetName(name, sizeof name, g_dev0) != 0)
        strcpy(name, "?");
    for (char *p = name; *p; p++)
        if (*p == ' ' || *p == '\t')
            *p = '_';
    printf("INFO\tdriver_version=%d devices=%d dev0=%d dev1=%d device0_name=%s can_access_peer=%d "
           "peer_access=%s threads=%d reps=%d\n",
           version, g_devices, g_dev0, g_dev1, name, g_can_access,
           g_peer_enabled ? "enabled" : g_dev1 == g_dev0 ? "same-device" : "not-possible",
           g_threads, g_reps);
    fflush(stdout);

    if (g_ab)
        resolve_entries();
    if (calibrate_ms > 0)
        calibrate(calibrate_ms);
    if (!probe) {
        struct worker *workers = calloc((size_t)g_threads, sizeof *workers);
        size_t per_thread = NCASES * (size_t)g_reps;
        double *all = calloc((size_t)g_threads * per_thread, sizeof *all);
        double *cpu = calloc((size_t)g_threads * per_thread, sizeof *cpu);
        double *direct = calloc((size_t)g_threads * per_thread, sizeof *direct);
        int64_t *spans = calloc((size_t)g_threads * per_thread * 2, sizeof *spans);
        if (!workers || !all || !cpu || !direct || !spans)
            die("out of memory");
        if (pthread_barrier_init(&g_barrier, NULL, (unsigned)g_threads) != 0)
            die("pthread_barrier_init failed");
        for (int t = 0; t < g_threads; t++) {
            workers[t].index = t;
            workers[t].samples = all + (size_t)t * per_thread;
            workers[t].cpu = cpu + (size_t)t * per_thread;
            workers[t].direct = direct + (size_t)t * per_thread;
            workers[t].spans = spans + (size_t)t * per_thread * 2;
        }
        if (g_threads == 1) {
            worker_main(&workers[0]); /* the main thread itself: no thread switch */
        } else {
            for (int t = 0; t < g_threads; t++)
                if (pthread_create(&workers[t].thread, NULL, worker_main, &workers[t]) != 0)
                    die("pthread_create failed");
            for (int t = 0; t < g_threads; t++)
                pthread_join(workers[t].thread, NULL);
        }
        double *medians = calloc((size_t)g_threads, sizeof *medians);
        double *aggregate = calloc((size_t)g_reps, sizeof *aggregate);
        if (!medians || !aggregate)
            die("out of memory");
        for (int c = 0; c < NCASES && g_ab; c++) {
            if (!g_enabled[c])
                continue;
            /* Per thread: the medians of each way and of the per-repetition differences; then
             * the median over the threads. */
            double *diff = calloc((size_t)g_reps, sizeof *diff);
            double *linked_m = calloc((size_t)g_threads, sizeof *linked_m);
            double *direct_m = calloc((size_t)g_threads, sizeof *direct_m);
            if (!diff || !linked_m || !direct_m)
                die("out of memory");
            for (int t = 0; t < g_threads; t++) {
                double *l = workers[t].samples + c * g_reps, *d = workers[t].direct + c * g_reps;
                for (int rep = 0; rep < g_reps; rep++)
                    diff[rep] = l[rep] - d[rep];
                medians[t] = median(diff, g_reps);
                linked_m[t] = median(l, g_reps);
                direct_m[t] = median(d, g_reps);
            }
            printf("AB\t%s\t%d\t%.2f\t%.2f\t%.2f\t%s\t%ld\t%d\n", CASE_NAME[c], g_threads,
                   median(linked_m, g_threads), median(direct_m, g_threads),
                   median(medians, g_threads), CASE_UNIT[c], g_iters[c], g_same == g_entries);
            free(diff);
            free(linked_m);
            free(direct_m);
        }
        for (int c = 0; c < NCASES && !g_ab; c++) {
            if (!g_enabled[c])
                continue;
            for (int t = 0; t < g_threads; t++)
                medians[t] = median(workers[t].samples + c * g_reps, g_reps);
            double lo = medians[0], hi = medians[0];
            for (int t = 1; t < g_threads; t++) {
                lo = medians[t] < lo ? medians[t] : lo;
                hi = medians[t] > hi ? medians[t] : hi;
            }
            /* All threads together: from the first start to the last end of a repetition, per
             * call made by any thread. */
            for (int rep = 0; rep < g_reps; rep++) {
                int at = c * g_reps + rep;
                int64_t first = workers[0].spans[2 * at], last = workers[0].spans[2 * at + 1];
                for (int t = 1; t < g_threads; t++) {
                    first = workers[t].spans[2 * at] < first ? workers[t].spans[2 * at] : first;
                    last = workers[t].spans[2 * at + 1] > last ? workers[t].spans[2 * at + 1] : last;
                }
                aggregate[rep] = (double)(last - first) / ((double)g_iters[c] * g_threads);
            }
            double wall = median(medians, g_threads);
            for (int t = 0; t < g_threads; t++)
                medians[t] = median(workers[t].cpu + c * g_reps, g_reps);
            printf("RESULT\t%s\t%d\t%.2f\t%.2f\t%.2f\t%s\t%ld\t%.2f\t%.2f\n", CASE_NAME[c],
                   g_threads, wall, lo, hi, CASE_UNIT[c], g_iters[c], median(aggregate, g_reps),
                   median(medians, g_threads));
        }
        pthread_barrier_destroy(&g_barrier);
        free(medians);
        free(aggregate);
        free(spans);
        free(cpu);
        free(direct);
        free(all);
        free(workers);
    }

    CHECK(cuCtxSetCurrent(g_ctx0));
    if (g_peer_enabled)
        CHECK(cuCtxDisablePeerAccess(g_ctx1));
    CHECK(cuCtxSetCurrent(NULL));
    if (g_dev1 != g_dev0)
        CHECK(cuDevicePrimaryCtxRelease_v2(g_dev1));
    CHECK(cuDevicePrimaryCtxRelease_v2(g_dev0));
    return 0;
}
