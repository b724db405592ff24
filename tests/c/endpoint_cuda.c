/* Logical endpoint scenarios for the rule tests: `endpoint_cuda SCENARIO [HANDLE]`. Every covered
 * call is printed as `CALL symbol result` (check.h); set-up calls that must succeed are not.
 * Each negative scenario breaks one rule once (named in the table of tests/endpoint_rules.rs);
 * the correct ones are:
 *   correct            ids: two ranges reserved, an endpoint created, queried, destroyed, the
 *                      ranges released (one whole, one in two parts)
 *   unicast            a unicast endpoint's whole life: limits, create, query, BindAddr and
 *                      BindMem of its owner's VMM memory, one unbind of both, destroy, release
 *   multicast          a team of two devices in one process: both added, queried ready, each
 *                      device's memory bound and unbound, destroy
 *   two-process        a FABRIC multicast team of two across processes: this process creates it,
 *                      adds device 0 and exports it; a child (`team-child HANDLE`) imports it,
 *                      adds device 1, queries, binds and unbinds FABRIC memory of device 1,
 *                      destroys and releases; then this process queries, binds, unbinds,
 *                      destroys
 * Multicast needs SHARECHECK_SIM_ATTRS=0:154=1,1:154=1 (the test sets it). Children
 * (`*-child`) get the handle in hex and their environment from the parent. */
#include <cuda.h>
#include <stdint.h>
#include <string.h>
#include <sys/wait.h>
#include <unistd.h>
#include "check.h"

static cuuint64_t A; /* the bind alignment */
static CUlogicalEndpointId base;

static CUlogicalEndpointProp props(CUlogicalEndpointType type, int device_or_team, cuuint64_t size,
                                   unsigned types, unsigned flags) {
    CUlogicalEndpointProp p;
    memset(&p, 0, sizeof p);
    p.type = type;
    if (type == CU_LOGICAL_ENDPOINT_TYPE_MULTICAST)
        p.multicast.numDevices = (unsigned)device_or_team;
    else
        p.unicast.device = device_or_team;
    p.size = size;
    p.ipcHandleTypes = (CUlogicalEndpointIpcHandleType)types;
    p.flags = flags;
    return p;
}

static CUlogicalEndpointProp unicast(int owner, unsigned types) {
    return props(CU_LOGICAL_ENDPOINT_TYPE_UNICAST, owner, 4 * A, types, 0);
}

static CUlogicalEndpointProp multicast(int team, unsigned types) {
    return props(CU_LOGICAL_ENDPOINT_TYPE_MULTICAST, team, 4 * A, types, 0);
}

static CUmemGenericAllocationHandle mem_create(int device, int numa, cuuint64_t size, unsigned types) {
    CUmemAllocationProp p;
    memset(&p, 0, sizeof p);
    p.type = CU_MEM_ALLOCATION_TYPE_PINNED;
    p.requestedHandleTypes = (CUmemAllocationHandleType)types;
    if (numa >= 0) {
        p.location.type = CU_MEM_LOCATION_TYPE_HOST_NUMA;
        p.location.id = numa;
    } else {
        p.location.type = CU_MEM_LOCATION_TYPE_DEVICE;
        p.location.id = device;
    }
    CUmemGenericAllocationHandle h;
    MUST(cuMemCreate(&h, size, &p, 0));
    return h;
}

/* `size` bytes of `device` memory, mapped read-write for it; the handle in *handle. */
static CUdeviceptr vmm(int device, cuuint64_t size, unsigned types, CUmemGenericAllocationHandle *handle) {
    CUdeviceptr ptr;
    CUmemGenericAllocationHandle h = mem_create(device, -1, size, types);
    MUST(cuMemAddressReserve(&ptr, size, 0, 0, 0));
    MUST(cuMemMap(ptr, size, 0, h, 0));
    CUmemAccessDesc access;
    memset(&access, 0, sizeof access);
    access.location.type = CU_MEM_LOCATION_TYPE_DEVICE;
    access.location.id = device;
    access.flags = CU_MEM_ACCESS_FLAGS_PROT_READWRITE;
    MUST(cuMemSetAccess(ptr, size, &access, 1));
    if (handle) *handle = h;
    return ptr;
}

#define CREATE(id, p)                                                      \
    do {                                                                   \
        CUlogicalEndpointProp p_ = (p);                                    \
        CALL("cuLogicalEndpointCreate", cuLogicalEndpointCreate(id, &p_)); \
    } while (0)

static void query(CUlogicalEndpointId id, unsigned count) {
    int status = -1;
    CALL("cuLogicalEndpointQuery", cuLogicalEndpointQuery(id, count, &status));
}

static void add(CUlogicalEndpointId id, int dev) {
    CALL("cuLogicalEndpointAddDevice", cuLogicalEndpointAddDevice(id, dev));
}

static void bind_addr(CUlogicalEndpointId id, int dev, cuuint64_t offset, CUdeviceptr ptr, cuuint64_t size,
                      unsigned long long flags) {
    CALL("cuLogicalEndpointBindAddr",
         cuLogicalEndpointBindAddr(id, dev, offset, (void *)(uintptr_t)ptr, size, flags));
}

static void bind_mem(CUlogicalEndpointId id, int dev, cuuint64_t offset, CUmemGenericAllocationHandle h,
                     cuuint64_t mem_offset, cuuint64_t size) {
    CALL("cuLogicalEndpointBindMem", cuLogicalEndpointBindMem(id, dev, offset, h, mem_offset, size, 0));
}

static void unbind(CUlogicalEndpointId id, int dev, cuuint64_t offset, cuuint64_t size) {
    CALL("cuLogicalEndpointUnbind", cuLogicalEndpointUnbind(id, dev, offset, size));
}

static void destroy(CUlogicalEndpointId id) {
    CALL("cuLogicalEndpointDestroy", cuLogicalEndpointDestroy(id));
}

/* A unicast endpoint of device 0 on `base`, queried ready. */
static void ready_unicast(unsigned types) {
    CREATE(base, unicast(0, types));
    query(base, 1);
}

/* A multicast endpoint for a team of `team` on `base`, device 0 added, queried. */
static void ready_multicast(int team, unsigned types) {
    CREATE(base, multicast(team, types));
    add(base, 0);
    query(base, 1);
}

static void export_handle(CUlogicalEndpointId id, unsigned char handle[64]) {
    CALL("cuLogicalEndpointExport",
         cuLogicalEndpointExport(handle, id, CU_LOGICAL_ENDPOINT_IPC_HANDLE_TYPE_FABRIC));
}

/* Runs this program as `scenario hex(handle)` with `name=value` set, and waits for it. */
static void child(const char *scenario, const unsigned char handle[64], const char *name, const char *value) {
    char hex[129];
    for (int i = 0; i < 64; i++) sprintf(hex + 2 * i, "%02x", handle[i]);
    printf("HANDLE %s\n", hex);
    fflush(stdout);
    pid_t pid = fork();
    if (pid == 0) {
        if (name) setenv(name, value, 1);
        execl("/proc/self/exe", "endpoint_cuda", scenario, hex, (char *)NULL);
        _exit(127);
    }
    int status = 0;
    if (pid < 0 || waitpid(pid, &status, 0) != pid || !WIFEXITED(status) || WEXITSTATUS(status) != 0) {
        fprintf(stderr, "child %s failed (%d)\n", scenario, status);
        exit(4);
    }
}

static void unhex(const char *hex, unsigned char handle[64]) {
    for (int i = 0; i < 64; i++) {
        unsigned v = 0;
        sscanf(hex + 2 * i, "%2x", &v);
        handle[i] = (unsigned char)v;
    }
}

/* The children: import into an id of their own. */
static int run_child(const char *s, const char *hex) {
    unsigned char handle[64];
    unhex(hex, handle);
    CALL("cuLogicalEndpointIdReserve", cuLogicalEndpointIdReserve(&base, 2));
    CALL("cuLogicalEndpointImport", cuLogicalEndpointImport(base, handle, CU_LOGICAL_ENDPOINT_IPC_HANDLE_TYPE_FABRIC));
    if (!strcmp(s, "unicast-child")) { /* binds an imported unicast endpoint */
        CUmemGenericAllocationHandle h;
        CUdeviceptr on0 = vmm(0, A, CU_MEM_HANDLE_TYPE_FABRIC, &h);
        query(base, 1);
        bind_addr(base, 0, 0, on0, A, 0);
        destroy(base);
    } else if (!strcmp(s, "team-child")) {
        CUmemGenericAllocationHandle h;
        CUdeviceptr on1 = vmm(1, A, CU_MEM_HANDLE_TYPE_FABRIC, &h);
        add(base, 1);
        query(base, 1);
        bind_addr(base, 1, 0, on1, A, 0);
        unbind(base, 1, 0, A);
        destroy(base);
    }
    CALL("cuLogicalEndpointIdRelease", cuLogicalEndpointIdRelease(base, 2));
    return 0;
}

int main(int argc, char **argv) {
    if (argc < 2) return 2;
    const char *s = argv[1];
    CUdevice dev;
    CUcontext ctx;
    cuuint64_t max = 0;
    MUST(cuInit(0));
    MUST(cuDeviceGet(&dev, 0));
    MUST(cuDevicePrimaryCtxRetain(&ctx, dev));
    MUST(cuCtxSetCurrent(ctx));
    /* The import child's environment may make its device support no endpoint: no limits. */
    if (argc == 3 && !strcmp(s, "import-child")) return run_child(s, argv[2]);
    CUlogicalEndpointProp p = props(CU_LOGICAL_ENDPOINT_TYPE_UNICAST, 0, 0, 0, 0);
    CALL("cuLogicalEndpointGetLimits", cuLogicalEndpointGetLimits(&A, &max, &p));
    if (argc == 3) return run_child(s, argv[2]);
    CALL("cuLogicalEndpointIdReserve", cuLogicalEndpointIdReserve(&base, 4));
    CUmemGenericAllocationHandle h0 = 0;
    unsigned char handle[64];
    memset(handle, 0, sizeof handle);

    /* ---- ids ---- */
    if (!strcmp(s, "release-unreserved")) {
        CALL("cuLogicalEndpointIdRelease", cuLogicalEndpointIdRelease(base + 100, 2));
    } else if (!strcmp(s, "release-live")) {
        CREATE(base + 1, unicast(0, 0));
        CALL("cuLogicalEndpointIdRelease", cuLogicalEndpointIdRelease(base, 4));
        destroy(base + 1);
    } else if (!strcmp(s, "create-unreserved")) {
        CREATE(base + 4, unicast(0, 0));
    } else if (!strcmp(s, "create-in-use")) {
        CREATE(base, unicast(0, 0));
        CREATE(base, unicast(0, 0));
        destroy(base);
    } else if (!strcmp(s, "import-unreserved")) {
        CALL("cuLogicalEndpointImport",
             cuLogicalEndpointImport(base + 50, handle, CU_LOGICAL_ENDPOINT_IPC_HANDLE_TYPE_FABRIC));
    } else if (!strcmp(s, "import-in-use")) {
        CREATE(base, unicast(0, 0));
        CALL("cuLogicalEndpointImport",
             cuLogicalEndpointImport(base, handle, CU_LOGICAL_ENDPOINT_IPC_HANDLE_TYPE_FABRIC));
        destroy(base);
    } else if (!strcmp(s, "no-endpoint")) {
        add(base + 1, 0);
    /* ---- create ---- */
    } else if (!strcmp(s, "type-invalid")) {
        CREATE(base, props(CU_LOGICAL_ENDPOINT_TYPE_INVALID, 0, A, 0, 0));
    } else if (!strcmp(s, "team-empty")) {
        CREATE(base, multicast(0, 0));
    } else if (!strcmp(s, "size-not-aligned")) {
        CREATE(base, props(CU_LOGICAL_ENDPOINT_TYPE_UNICAST, 0, A + 4096, 0, 0));
    } else if (!strcmp(s, "size-above-max")) {
        CREATE(base, props(CU_LOGICAL_ENDPOINT_TYPE_UNICAST, 0, 2 * max, 0, 0));
    } else if (!strcmp(s, "flags-unknown")) {
        CREATE(base, props(CU_LOGICAL_ENDPOINT_TYPE_UNICAST, 0, A, 0, 2));
    } else if (!strcmp(s, "handle-type-unknown")) {
        CREATE(base, unicast(0, 4));
    } else if (!strcmp(s, "handle-type-not-supported")) { /* device 0 without fabric handles */
        CREATE(base, unicast(0, CU_LOGICAL_ENDPOINT_IPC_HANDLE_TYPE_FABRIC));
    /* ---- teams ---- */
    } else if (!strcmp(s, "add-unicast")) {
        CREATE(base, unicast(0, 0));
        add(base, 0);
        destroy(base);
    } else if (!strcmp(s, "team-full")) {
        CREATE(base, multicast(1, 0));
        add(base, 0);
        add(base, 1);
        destroy(base);
    } else if (!strcmp(s, "add-twice")) {
        CREATE(base, multicast(2, 0));
        add(base, 0);
        add(base, 0);
        destroy(base);
    } else if (!strcmp(s, "add-after-bind")) {
        /* A team of three (three devices): devices 0 and 1 added here, device 2 through this
         * process's own import of the endpoint; bound; then device 2 added on the first id. */
        CUmemGenericAllocationHandle h;
        CUdeviceptr on0 = vmm(0, A, CU_MEM_HANDLE_TYPE_FABRIC, &h);
        CREATE(base, multicast(3, CU_LOGICAL_ENDPOINT_IPC_HANDLE_TYPE_FABRIC));
        add(base, 0);
        add(base, 1);
        export_handle(base, handle);
        CALL("cuLogicalEndpointImport",
             cuLogicalEndpointImport(base + 1, handle, CU_LOGICAL_ENDPOINT_IPC_HANDLE_TYPE_FABRIC));
        add(base + 1, 2);
        query(base, 2);
        bind_addr(base, 0, 0, on0, A, 0);
        add(base, 2);
        unbind(base, 0, 0, A);
        destroy(base + 1);
        destroy(base);
    /* ---- readiness ---- */
    } else if (!strcmp(s, "query-not-endpoint")) {
        CREATE(base, unicast(0, 0));
        query(base, 2);
        destroy(base);
    } else if (!strcmp(s, "bind-without-query")) {
        CUdeviceptr on0 = vmm(0, A, 0, NULL);
        CREATE(base, unicast(0, 0));
        bind_addr(base, 0, 0, on0, A, 0);
        destroy(base);
    } else if (!strcmp(s, "bind-before-ready")) {
        CUdeviceptr on0 = vmm(0, A, 0, NULL);
        ready_multicast(2, 0);
        bind_addr(base, 0, 0, on0, A, 0);
        destroy(base);
    /* ---- binds ---- */
    } else if (!strcmp(s, "bind-flags")) {
        CUdeviceptr on0 = vmm(0, A, 0, NULL);
        ready_unicast(0);
        bind_addr(base, 0, 0, on0, A, 1);
        destroy(base);
    } else if (!strcmp(s, "bindaddr-not-aligned")) {
        CUdeviceptr on0 = vmm(0, 2 * A, 0, NULL);
        ready_unicast(0);
        bind_addr(base, 0, 0, on0 + 4096, A, 0);
        destroy(base);
    } else if (!strcmp(s, "bindmem-not-aligned")) {
        vmm(0, 2 * A, 0, &h0);
        ready_unicast(0);
        bind_mem(base, 0, 0, h0, 4096, A);
        destroy(base);
    } else if (!strcmp(s, "bindaddr-beyond-allocation")) {
        CUdeviceptr on0 = vmm(0, A, 0, NULL);
        ready_unicast(0);
        bind_addr(base, 0, 0, on0, 2 * A, 0);
        destroy(base);
    } else if (!strcmp(s, "bindmem-beyond-allocation")) {
        vmm(0, A, 0, &h0);
        ready_unicast(0);
        bind_mem(base, 0, 0, h0, A, A);
        destroy(base);
    } else if (!strcmp(s, "bind-beyond-endpoint")) {
        CUdeviceptr on0 = vmm(0, A, 0, NULL);
        ready_unicast(0);
        bind_addr(base, 0, 4 * A, on0, A, 0);
        destroy(base);
    } else if (!strcmp(s, "bindaddr-device-memory")) {
        CUdeviceptr plain;
        MUST(cuMemAlloc(&plain, 3 * A));
        CUdeviceptr ptr = (plain + A - 1) / A * A;
        ready_unicast(0);
        bind_addr(base, 0, 0, ptr, A, 0);
        destroy(base);
        MUST(cuMemFree(plain));
    } else if (!strcmp(s, "bindmem-released")) {
        CUmemGenericAllocationHandle h = mem_create(0, -1, A, 0);
        MUST(cuMemRelease(h));
        ready_unicast(0);
        bind_mem(base, 0, 0, h, 0, A);
        destroy(base);
    } else if (!strcmp(s, "bind-other-device")) {
        CUdeviceptr on1 = vmm(1, A, 0, NULL);
        ready_unicast(0);
        bind_addr(base, 0, 0, on1, A, 0);
        destroy(base);
    } else if (!strcmp(s, "bind-numa")) { /* device 1's node is 1 (SHARECHECK_SIM_ATTRS) */
        CUmemGenericAllocationHandle h = mem_create(-1, 1, A, 0);
        ready_unicast(0);
        bind_mem(base, 0, 0, h, 0, A);
        destroy(base);
    } else if (!strcmp(s, "bind-not-in-team")) {
        CUdeviceptr on1 = vmm(1, A, 0, NULL);
        ready_multicast(1, 0);
        bind_addr(base, 1, 0, on1, A, 0);
        destroy(base);
    } else if (!strcmp(s, "bind-not-owner")) {
        CUdeviceptr on1 = vmm(1, A, 0, NULL);
        ready_unicast(0);
        bind_addr(base, 1, 0, on1, A, 0);
        destroy(base);
    } else if (!strcmp(s, "bind-not-shareable")) {
        CUdeviceptr on0 = vmm(0, A, 0, NULL);
        ready_multicast(1, CU_LOGICAL_ENDPOINT_IPC_HANDLE_TYPE_FABRIC);
        bind_addr(base, 0, 0, on0, A, 0);
        destroy(base);
    } else if (!strcmp(s, "bind-overlap")) {
        CUdeviceptr on0 = vmm(0, 2 * A, 0, &h0);
        ready_unicast(0);
        bind_addr(base, 0, 0, on0, 2 * A, 0);
        bind_mem(base, 0, A, h0, 0, A);
        unbind(base, 0, 0, 2 * A);
        destroy(base);
    /* ---- unbind ---- */
    } else if (!strcmp(s, "unbind-not-aligned")) {
        CUdeviceptr on0 = vmm(0, A, 0, NULL);
        ready_unicast(0);
        bind_addr(base, 0, 0, on0, A, 0);
        unbind(base, 0, 0, 4096);
        unbind(base, 0, 0, A);
        destroy(base);
    } else if (!strcmp(s, "unbind-offset")) {
        CUdeviceptr on0 = vmm(0, 2 * A, 0, NULL);
        ready_unicast(0);
        bind_addr(base, 0, 0, on0, 2 * A, 0);
        unbind(base, 0, A, A);
        unbind(base, 0, 0, 2 * A);
        destroy(base);
    } else if (!strcmp(s, "unbind-size")) {
        CUdeviceptr on0 = vmm(0, A, 0, NULL);
        ready_unicast(0);
        bind_addr(base, 0, 0, on0, A, 0);
        unbind(base, 0, 0, 2 * A);
        unbind(base, 0, 0, A);
        destroy(base);
    } else if (!strcmp(s, "unbind-cuts")) {
        CUdeviceptr on0 = vmm(0, 2 * A, 0, NULL);
        ready_unicast(0);
        bind_addr(base, 0, 0, on0, 2 * A, 0);
        unbind(base, 0, 0, A);
        unbind(base, 0, 0, 2 * A);
        destroy(base);
    /* ---- destroy, export, import ---- */
    } else if (!strcmp(s, "destroy-not-created")) {
        destroy(base + 1);
    } else if (!strcmp(s, "destroy-bound")) {
        CUdeviceptr on0 = vmm(0, A, 0, NULL);
        ready_unicast(0);
        bind_addr(base, 0, 0, on0, A, 0);
        destroy(base);
    } else if (!strcmp(s, "export-handle-type")) {
        CREATE(base, unicast(0, 0));
        export_handle(base, handle);
        destroy(base);
    } else if (!strcmp(s, "import-not-permitted") || !strcmp(s, "import-not-supported")) {
        CREATE(base, unicast(0, CU_LOGICAL_ENDPOINT_IPC_HANDLE_TYPE_FABRIC));
        export_handle(base, handle);
        if (!strcmp(s, "import-not-permitted"))
            child("import-child", handle, "SHARECHECK_SIM_FABRIC_CHANNEL", "1");
        else /* device 0 of the importer supports no unicast endpoint */
            child("import-child", handle, "SHARECHECK_SIM_ATTRS", "0:153=0");
        destroy(base);
    /* ---- a failure no rule explains ---- */
    } else if (!strcmp(s, "limits-refused")) {
        CUlogicalEndpointProp none = props(CU_LOGICAL_ENDPOINT_TYPE_INVALID, 0, A, 0, 0);
        cuuint64_t align = 0, limit = 0;
        CALL("cuLogicalEndpointGetLimits", cuLogicalEndpointGetLimits(&align, &limit, &none));
    /* ---- found in the report phase ---- */
    } else if (!strcmp(s, "leak-ids")) { /* a second range never released */
        CUlogicalEndpointId second = 0;
        CALL("cuLogicalEndpointIdReserve", cuLogicalEndpointIdReserve(&second, 2));
    } else if (!strcmp(s, "leak-endpoint")) { /* an endpoint never destroyed (nor its ids released) */
        CREATE(base + 1, unicast(0, 0));
        return 0;
    } else if (!strcmp(s, "bind-imported-unicast")) {
        CREATE(base, unicast(0, CU_LOGICAL_ENDPOINT_IPC_HANDLE_TYPE_FABRIC));
        export_handle(base, handle);
        child("unicast-child", handle, NULL, NULL);
        destroy(base);
    /* ---- correct use ---- */
    } else if (!strcmp(s, "correct")) {
        CUlogicalEndpointId second = 0;
        CALL("cuLogicalEndpointIdReserve", cuLogicalEndpointIdReserve(&second, 4));
        CREATE(second + 2, unicast(0, 0));
        query(second + 2, 1);
        destroy(second + 2);
        CALL("cuLogicalEndpointIdRelease", cuLogicalEndpointIdRelease(second, 2));
        CALL("cuLogicalEndpointIdRelease", cuLogicalEndpointIdRelease(second + 2, 2));
    } else if (!strcmp(s, "unicast")) {
        CUlogicalEndpointProp want = unicast(0, 0);
        cuuint64_t align = 0, limit = 0;
        CALL("cuLogicalEndpointGetLimits", cuLogicalEndpointGetLimits(&align, &limit, &want));
        CUdeviceptr on0 = vmm(0, 2 * A, 0, NULL);
        CUmemGenericAllocationHandle numa = mem_create(-1, 0, 2 * A, 0);
        ready_unicast(0);
        bind_addr(base, 0, 0, on0, 2 * A, 0);
        bind_mem(base, 0, 2 * A, numa, A, A);
        bind_mem(base, 0, 3 * A, numa, 0, A);
        unbind(base, 0, 0, 3 * A);
        unbind(base, 0, 3 * A, A);
        destroy(base);
        MUST(cuMemRelease(numa));
    } else if (!strcmp(s, "multicast")) {
        CUdeviceptr on0 = vmm(0, A, 0, NULL), on1 = vmm(1, A, 0, NULL);
        CREATE(base, multicast(2, 0));
        add(base, 0);
        query(base, 1);
        add(base, 1);
        query(base, 1);
        bind_addr(base, 0, 0, on0, A, 0);
        bind_addr(base, 1, 0, on1, A, 0);
        unbind(base, 0, 0, A);
        unbind(base, 1, 0, A);
        destroy(base);
    } else if (!strcmp(s, "two-process")) {
        CUdeviceptr on0 = vmm(0, A, CU_MEM_HANDLE_TYPE_FABRIC, NULL);
        CREATE(base, multicast(2, CU_LOGICAL_ENDPOINT_IPC_HANDLE_TYPE_FABRIC));
        add(base, 0);
        export_handle(base, handle);
        child("team-child", handle, NULL, NULL);
        query(base, 1);
        bind_addr(base, 0, 0, on0, A, 0);
        unbind(base, 0, 0, A);
        destroy(base);
    } else {
        return 2;
    }
    CALL("cuLogicalEndpointIdRelease", cuLogicalEndpointIdRelease(base, 4));
    return 0;
}
