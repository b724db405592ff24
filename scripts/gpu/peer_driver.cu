// Driver-API smoke program for the sharecheck shim (run by scripts/gpu-smoke.sh).
//
// Plain host C++ (no kernels): nvcc builds it on the GPU machine, and it can be syntax-checked with
// `g++ -fsyntax-only -x c++ -I<cuda include>`. Build: nvcc -arch=sm_90 -cudart none peer_driver.cu
// -lcuda -ldl, once as is and once with -DCUDA_API_PER_THREAD_DEFAULT_STREAM.
//
// Output, one line each (the smoke test compares CALL/CHECK/RESOLVE/UNEXPECTED/DONE lines of a run
// without the shim and a run with it; they must be identical):
//   CALL <exact symbol called> <result> [note]   every driver call; the symbol is the one the header
//                                                macros selected (cuMemcpyPeer_ptds in PTDS builds)
//   CHECK <name> ok|FAIL                         data and value checks
//   RESOLVE <name>@<version>/<flags> rc=.. status=.. -> <symbol|NULL>
//                                                cuGetProcAddress results; the symbol is what
//                                                dladdr() names the returned pointer (the driver's
//                                                export without the shim, the shim's wrapper of the
//                                                same name with it)
//   HANDLE <kind> <hex>                          IPC handle bytes (the traces must never hold them)
//   NOTE ...                                     information that may differ between runs
//   DLSYM/DLCALL ...                             dlsym(RTLD_DEFAULT) of a logical-endpoint function:
//                                                absent without the shim, the shim's export with it
//   UNEXPECTED ...                               a result other than the documented/observed one
// Exit status: 0 if every result was expected, 1 otherwise, 3 if fewer than 2 GPUs.
#include <cuda.h>
#include <dlfcn.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <initializer_list>
#include <vector>

#define SC_STR(x) #x
#define SC_XSTR(x) SC_STR(x)

// CHK(expected, fn, args...): call fn, print `CALL <expanded name of fn> <rc>`, flag surprises.
#define CHK(expected, fn, ...) record(SC_XSTR(fn), (int)(fn(__VA_ARGS__)), {expected})
// EXPECT(ANY_OF(a, b), fn, args...): as CHK with several acceptable results.
#define ANY_OF(...) std::initializer_list<int>{__VA_ARGS__}
#define EXPECT(list, fn, ...) record(SC_XSTR(fn), (int)(fn(__VA_ARGS__)), list)

static int g_unexpected = 0;

static void flag_unexpected(const char *what, int rc, std::initializer_list<int> expected) {
    g_unexpected++;
    printf("UNEXPECTED %s returned %d, expected", what, rc);
    for (int e : expected) printf(" %d", e);
    printf("\n");
}

static int record(const char *fn, int rc, std::initializer_list<int> expected, const char *note = "") {
    printf("CALL %s %d%s%s\n", fn, rc, *note ? " " : "", note);
    bool ok = false;
    for (int e : expected) ok = ok || e == rc;
    if (!ok) flag_unexpected(fn, rc, expected);
    fflush(stdout);
    return rc;
}

static void check(const char *name, bool ok) {
    printf("CHECK %s %s\n", name, ok ? "ok" : "FAIL");
    if (!ok) g_unexpected++;
    fflush(stdout);
}

static void print_handle(const char *kind, const void *bytes, size_t n) {
    const unsigned char *b = (const unsigned char *)bytes;
    printf("HANDLE %s ", kind);
    for (size_t i = 0; i < n; i++) printf("%02x", b[i]);
    printf("\n");
}

// The exported symbol a function pointer points at (what dladdr calls it), or "?".
static const char *symbol_name(void *p) {
    Dl_info info;
    if (p == NULL) return "NULL";
    if (dladdr(p, &info) != 0 && info.dli_sname != NULL && info.dli_saddr == p) return info.dli_sname;
    return "?";
}

typedef CUresult (*GetProcAddressFn)(const char *, void **, int, cuuint64_t, CUdriverProcAddressQueryResult *);
typedef CUresult (*MemcpyPeerFn)(CUdeviceptr, CUcontext, CUdeviceptr, CUcontext, size_t);
// cuLogicalEndpointIdReserve (CUDA 13.3); declared here because CUDA 13.0 headers lack it.
typedef CUresult (*LeIdReserveFn)(unsigned int *, unsigned int);
typedef CUresult (*LeIdReleaseFn)(unsigned int, unsigned int);

// The resolver itself: `cuGetProcAddress` is a macro (cuGetProcAddress_v2, and in PTDS builds an
// inline cuGetProcAddress_v2_ptsz that adds the per-thread flag when no stream flag is given).
static void *resolve(const char *symbol, int version, cuuint64_t flags, int *rc_out, int *status_out) {
    void *p = NULL;
    CUdriverProcAddressQueryResult status = (CUdriverProcAddressQueryResult)-1;
    int rc = (int)cuGetProcAddress(symbol, &p, version, flags, &status);
    cuuint64_t effective = flags;
#ifdef CUDA_API_PER_THREAD_DEFAULT_STREAM
    // What the inline cuGetProcAddress_v2_ptsz of cuda.h passes on.
    if ((flags & (CU_GET_PROC_ADDRESS_LEGACY_STREAM | CU_GET_PROC_ADDRESS_PER_THREAD_DEFAULT_STREAM)) == 0)
        effective |= CU_GET_PROC_ADDRESS_PER_THREAD_DEFAULT_STREAM;
#endif
    printf("RESOLVE %s@%d/%llu rc=%d status=%d -> %s\n", symbol, version, (unsigned long long)effective, rc,
           (int)status, symbol_name(p));
    fflush(stdout);
    if (rc_out) *rc_out = rc;
    if (status_out) *status_out = (int)status;
    return rc == 0 ? p : NULL;
}

static void fill_pattern(std::vector<unsigned char> &v) {
    for (size_t i = 0; i < v.size(); i++) v[i] = (unsigned char)((i * 131u + 7u) ^ (i >> 12));
}

int main() {
    setvbuf(stdout, NULL, _IOLBF, 0);
    const size_t N = 8u << 20;

    if (CHK(0, cuInit, 0) != 0) return 1;
    int driver_version = 0;
    CHK(0, cuDriverGetVersion, &driver_version);
    printf("NOTE driver_version %d\n", driver_version);
#ifdef CUDA_API_PER_THREAD_DEFAULT_STREAM
    printf("NOTE build per-thread-default-stream\n");
#else
    printf("NOTE build legacy-default-stream\n");
#endif
    const bool has_endpoints = driver_version >= 13030;
    int count = 0;
    CHK(0, cuDeviceGetCount, &count);
    if (count < 2) {
        printf("SKIP need 2 GPUs, found %d\n", count);
        return 3;
    }
    CUdevice d0 = 0, d1 = 0;
    CHK(0, cuDeviceGet, &d0, 0);
    CHK(0, cuDeviceGet, &d1, 1);

    // ---- Peer capability.
    int can01 = -1, can10 = -1;
    CHK(0, cuDeviceCanAccessPeer, &can01, d0, d1);
    CHK(0, cuDeviceCanAccessPeer, &can10, d1, d0);
    check("can_access_peer_0_1", can01 == 1);
    check("can_access_peer_1_0", can10 == 1);

    CUcontext ctx0 = NULL, ctx1 = NULL;
    CHK(0, cuDevicePrimaryCtxRetain, &ctx0, d0);
    CHK(0, cuDevicePrimaryCtxRetain, &ctx1, d1);

    CUdeviceptr b0 = 0, b1 = 0;
    CHK(0, cuCtxSetCurrent, ctx1);
    CHK(0, cuMemAlloc, &b1, N);
    CHK(0, cuCtxSetCurrent, ctx0);
    CHK(0, cuMemAlloc, &b0, N);
    std::vector<unsigned char> pattern(N), back(N);
    fill_pattern(pattern);
    CHK(0, cuMemcpyHtoD, b0, pattern.data(), N);

    // ---- Peer access from ctx0 (current) to ctx1.
    CHK(1, cuCtxEnablePeerAccess, ctx1, 1u);                     // Flags must be 0: INVALID_VALUE
    CHK(0, cuCtxEnablePeerAccess, ctx1, 0u);
    CHK(704, cuCtxEnablePeerAccess, ctx1, 0u);                   // PEER_ACCESS_ALREADY_ENABLED
    EXPECT(ANY_OF(217, 201), cuCtxEnablePeerAccess, ctx0, 0u);   // self: R580 217, docs 201

    // ---- Copies.
    CHK(0, cuCtxSetCurrent, ctx1);
    CHK(0, cuMemsetD8, b1, 0, N);
    CHK(0, cuCtxSynchronize);
    CHK(0, cuCtxSetCurrent, ctx0);
    // NULL destination context: R580 accepts it (unified addressing); the docs allow 201.
    if (EXPECT(ANY_OF(0, 201), cuMemcpyPeer, b1, (CUcontext)NULL, b0, ctx0, N) == 0) {
        CHK(0, cuMemcpyDtoH, back.data(), b1, N);
        check("memcpy_peer_0_to_1", memcmp(back.data(), pattern.data(), N) == 0);
    }
    CHK(1, cuMemcpyPeer, b1, ctx1, b0, ctx0, 2 * N);             // larger than both allocations
    CHK(0, cuMemsetD8, b0, 0, N);
    CHK(0, cuCtxSynchronize);
    CHK(0, cuMemcpyPeerAsync, b0, ctx0, b1, ctx1, N, (CUstream)0); // stream 0 (legacy or per-thread)
    CHK(0, cuCtxSynchronize);
    CHK(0, cuMemcpyDtoH, back.data(), b0, N);
    check("memcpy_peer_async_1_to_0", memcmp(back.data(), pattern.data(), N) == 0);

    // ---- cuGetProcAddress: the shim must keep rc/status/NULL and substitute by the real symbol.
    resolve("cuGetProcAddress", 11030, CU_GET_PROC_ADDRESS_DEFAULT, NULL, NULL);
    resolve("cuGetProcAddress", 12000, CU_GET_PROC_ADDRESS_DEFAULT, NULL, NULL);
    resolve("cuCtxEnablePeerAccess", 4000, CU_GET_PROC_ADDRESS_DEFAULT, NULL, NULL);
    resolve("cuMemcpyPeer", 4000, CU_GET_PROC_ADDRESS_PER_THREAD_DEFAULT_STREAM, NULL, NULL);  // R580: NULL, status 2
    resolve("cuMemcpyPeerAsync", 7000, CU_GET_PROC_ADDRESS_PER_THREAD_DEFAULT_STREAM, NULL, NULL);
    resolve("cuStreamAttachMemAsync", 6000, CU_GET_PROC_ADDRESS_LEGACY_STREAM, NULL, NULL);
    resolve("cuStreamAttachMemAsync", 7000, CU_GET_PROC_ADDRESS_PER_THREAD_DEFAULT_STREAM, NULL, NULL);
    resolve("cuIpcOpenMemHandle", 4010, CU_GET_PROC_ADDRESS_DEFAULT, NULL, NULL);
    resolve("cuIpcOpenMemHandle", 11000, CU_GET_PROC_ADDRESS_DEFAULT, NULL, NULL);
    // Call through resolved pointers: the trace must name the real symbol (legacy vs _ptds).
    const cuuint64_t modes[2] = {CU_GET_PROC_ADDRESS_LEGACY_STREAM, CU_GET_PROC_ADDRESS_PER_THREAD_DEFAULT_STREAM};
    for (int i = 0; i < 2; i++) {
        void *p = resolve("cuMemcpyPeer", 12000, modes[i], NULL, NULL);
        if (p == NULL) {
            flag_unexpected("cuGetProcAddress(cuMemcpyPeer) gave NULL", 0, {1});
            continue;
        }
        int rc = (int)((MemcpyPeerFn)p)(b1, ctx1, b0, ctx0, N);
        record(symbol_name(p), rc, {0}, "via=cuGetProcAddress");
    }
    CHK(0, cuCtxSynchronize);

    // ---- Disable.
    CHK(0, cuCtxDisablePeerAccess, ctx1);
    CHK(705, cuCtxDisablePeerAccess, ctx1);                      // PEER_ACCESS_NOT_ENABLED
    CHK(705, cuCtxDisablePeerAccess, ctx0);                      // self: never enabled

    // ---- IPC in one process.
    CUipcMemHandle mh;
    memset(&mh, 0, sizeof mh);
    if (CHK(0, cuIpcGetMemHandle, &mh, b0) == 0) print_handle("mem", &mh, sizeof mh);
    CUdeviceptr opened = 0;
    // cuIpcOpenMemHandle is cuIpcOpenMemHandle_v2. Same process: R580 201 INVALID_CONTEXT.
    CHK(201, cuIpcOpenMemHandle, &opened, mh, CU_IPC_MEM_LAZY_ENABLE_PEER_ACCESS);
    CHK(1, cuIpcOpenMemHandle, &opened, mh, 0u);                 // Flags must be LAZY: INVALID_VALUE
    CUipcMemHandle interior;
    memset(&interior, 0, sizeof interior);
    // Interior pointer: R580 accepts it and returns the base handle; the docs ask for the base.
    if (EXPECT(ANY_OF(0, 1), cuIpcGetMemHandle, &interior, b0 + 256) == 0) {
        print_handle("mem-interior", &interior, sizeof interior);
        printf("NOTE interior_handle_equals_base %s\n", memcmp(&interior, &mh, sizeof mh) == 0 ? "yes" : "no");
    }
    EXPECT(ANY_OF(1, 400), cuIpcCloseMemHandle, b0);              // not an IPC mapping
    CUevent ev = NULL, plain = NULL, ev_same = NULL;
    CHK(0, cuEventCreate, &ev, CU_EVENT_INTERPROCESS | CU_EVENT_DISABLE_TIMING);
    CUipcEventHandle eh;
    memset(&eh, 0, sizeof eh);
    if (CHK(0, cuIpcGetEventHandle, &eh, ev) == 0) print_handle("event", &eh, sizeof eh);
    CHK(201, cuIpcOpenEventHandle, &ev_same, eh);                // same process
    CHK(0, cuEventCreate, &plain, CU_EVENT_DEFAULT);
    CUipcEventHandle eh_plain;
    EXPECT(ANY_OF(400, 1), cuIpcGetEventHandle, &eh_plain, plain); // not an interprocess event

    // ---- Logical endpoints (CUDA 13.3): absent from a 13.0 driver.
    int rc = 0, status = 0;
    int below = driver_version < 13000 ? driver_version : 13000;
    void *le = resolve("cuLogicalEndpointIdReserve", below, CU_GET_PROC_ADDRESS_DEFAULT, &rc, &status);
    if (!has_endpoints) {
        // R580: SUCCESS, SYMBOL_NOT_FOUND, NULL.
        check("gpa_endpoint_at_13000_not_found", rc == 0 && status == CU_GET_PROC_ADDRESS_SYMBOL_NOT_FOUND && le == NULL);
    }
    resolve("cuLogicalEndpointIdReserve", 13030, CU_GET_PROC_ADDRESS_DEFAULT, &rc, &status);
    // R580: INVALID_VALUE (version above the driver's).
    if (!has_endpoints) check("gpa_endpoint_at_13030_invalid_value", rc == 1);

    // dlsym in the global scope: on a 13.0 driver nothing defines it, with or without the shim
    // (the shim does not hand out its own export of a function the driver lacks).
    void *sym = dlsym(RTLD_DEFAULT, "cuLogicalEndpointIdReserve");
    if (sym == NULL) {
        printf("DLSYM cuLogicalEndpointIdReserve absent\n");
        if (has_endpoints) printf("NOTE driver %d should export cuLogicalEndpointIdReserve\n", driver_version);
    } else {
        printf("DLSYM cuLogicalEndpointIdReserve present\n");
        unsigned int id = 0;
        int le_rc = (int)((LeIdReserveFn)sym)(&id, 1);
        printf("DLCALL cuLogicalEndpointIdReserve %d\n", le_rc);
        if (!has_endpoints && le_rc != 801) flag_unexpected("dlsym'd cuLogicalEndpointIdReserve", le_rc, {801});
        if (le_rc == 0) {
            void *rel = dlsym(RTLD_DEFAULT, "cuLogicalEndpointIdRelease");
            if (rel != NULL) printf("DLCALL cuLogicalEndpointIdRelease %d\n", (int)((LeIdReleaseFn)rel)(id, 1));
        }
    }
    fflush(stdout);

    // ---- Teardown.
    CHK(0, cuEventDestroy, plain);
    CHK(0, cuEventDestroy, ev);
    CHK(0, cuMemFree, b0);
    CHK(0, cuCtxSetCurrent, ctx1);
    CHK(0, cuMemFree, b1);
    CHK(0, cuCtxSetCurrent, (CUcontext)NULL);
    CHK(0, cuDevicePrimaryCtxRelease, d0);
    CHK(0, cuDevicePrimaryCtxRelease, d1);
    printf("DONE unexpected=%d\n", g_unexpected);
    return g_unexpected == 0 ? 0 : 1;
}
