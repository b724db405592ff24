/* CUDA IPC scenarios for the rule tests: `ipc_cuda SCENARIO`. Every covered call is printed as
 * `CALL symbol result` (check.h); set-up calls that must succeed are not.
 *   export-interior   exports a pointer 256 bytes into its allocation
 *   export-again      exports an allocation twice, frees it, allocates the same size and exports
 *                     that (a caching allocator's pattern)
 *   open-flags        opens its own handle with Flags 0 (cuIpcOpenMemHandle_v2)
 *   open-v1-flags     the same through the legacy cuIpcOpenMemHandle, with Flags 3
 *   open-same-process opens its own handle, with the right flags
 *   event-same-process opens the handle of its own interprocess event
 *   close-not-opened  closes memory of its own (no open returned it)
 *   export-managed    exports managed memory (cuMemAllocManaged)
 *   export-pool       exports stream-ordered pool memory (cuMemAllocAsync)
 *   export-host       exports page-locked host memory (cuMemAllocHost)
 *   event-not-interprocess exports an event created with CU_EVENT_DISABLE_TIMING only
 *   correct           a child process (forked before cuInit) exports an allocation's base; the
 *                     parent opens it twice with CU_IPC_MEM_LAZY_ENABLE_PEER_ACCESS, reads it and
 *                     closes it twice; then the child frees it
 *   close-twice       the same, with a third close
 *   close-interior    the same, closing a pointer 256 bytes into the mapping before the right one
 *   open-v1-again     the same, and the legacy cuIpcOpenMemHandle on the handle already open
 *   free-early        the same as correct, but the child frees the memory (and exits) before the
 *                     parent closes its mappings
 *   open-after-free   the child exports and frees the memory (and stays alive); the parent then
 *                     opens the handle
 *   never-close       the parent opens the child's handle and exits without closing it (the
 *                     child outlives it and frees the memory after)
 *   exporter-exits    the parent opens the child's handle; the child exits (without freeing)
 *                     while it is open, and the parent closes it after
 *   open-second-context the parent opens the child's handle in its primary context, then again
 *                     in a second context of the same device (cuCtxCreate), and closes the first
 *   open-unreachable  the child exports memory of device 1; the parent opens it on device 0
 *   second-context-other-allocation the child exports two allocations; the parent opens the
 *                     first in its primary context and the second in another context of device 0
 *   exporter-destroys-context the child exports memory of a context of its own and destroys
 *                     that context while the parent has the memory open
 *   destroy-context-open the parent opens and closes the child's handle in its primary context,
 *                     then opens it in a context of its own and destroys that context with the
 *                     mapping open
 *   event-exchange    the child exports an interprocess event; the parent opens it and
 *                     destroys its copy, then the child destroys the event (correct)
 *   event-never-destroyed  the same, but the parent exits holding its copy
 *   event-destroyed-early  the same, but the child destroys the event while the parent holds
 *                     its copy */
#include <cuda.h>
#include <string.h>
#include <sys/wait.h>
#include <unistd.h>
#include "check.h"

/* The legacy export, which cuda.h maps to _v2. */
#undef cuIpcOpenMemHandle
CUresult CUDAAPI cuIpcOpenMemHandle(CUdeviceptr *pdptr, CUipcMemHandle handle, unsigned int Flags);

#define BYTES (1 << 16)

static void setup_on(int ordinal) {
    CUdevice dev;
    CUcontext ctx;
    MUST(cuInit(0));
    MUST(cuDeviceGet(&dev, ordinal));
    MUST(cuDevicePrimaryCtxRetain(&ctx, dev));
    MUST(cuCtxSetCurrent(ctx));
}

static void setup(void) { setup_on(0); }

static int to_parent[2], to_child[2];

/* Two pipes and a child, forked before cuInit (each process gets a driver of its own). */
static pid_t fork_exporter(void) {
    if (pipe(to_parent) != 0 || pipe(to_child) != 0) return -1;
    return fork();
}

/* The two-process exchange of `correct`, `close-twice`, `close-interior`, `open-v1-again` and
 * `free-early`. */
static int exchange(const char *how) {
    pid_t child = fork_exporter();
    if (child < 0) return 2;
    CUipcMemHandle h;
    char byte = 0;
    if (child == 0) {
        setup();
        CUdeviceptr p;
        MUST(cuMemAlloc(&p, BYTES));
        unsigned char fill[64];
        memset(fill, 0x5a, sizeof fill);
        MUST(cuMemcpyHtoD(p, fill, sizeof fill));
        CALL("cuIpcGetMemHandle", cuIpcGetMemHandle(&h, p));
        if (write(to_parent[1], &h, sizeof h) != (ssize_t)sizeof h) _exit(4);
        if (read(to_child[0], &byte, 1) != 1) _exit(5);
        CALL("cuMemFree_v2", cuMemFree(p));
        exit(0);
    }
    setup();
    if (read(to_parent[0], &h, sizeof h) != (ssize_t)sizeof h) return 4;
    CUdeviceptr q = 0, again = 0;
    CALL("cuIpcOpenMemHandle_v2", cuIpcOpenMemHandle_v2(&q, h, CU_IPC_MEM_LAZY_ENABLE_PEER_ACCESS));
    CALL("cuIpcOpenMemHandle_v2", cuIpcOpenMemHandle_v2(&again, h, CU_IPC_MEM_LAZY_ENABLE_PEER_ACCESS));
    if (!strcmp(how, "open-v1-again")) {
        CUdeviceptr legacy = 0;
        CALL("cuIpcOpenMemHandle", cuIpcOpenMemHandle(&legacy, h, CU_IPC_MEM_LAZY_ENABLE_PEER_ACCESS));
    }
    unsigned char data[64];
    MUST(cuMemcpyDtoH(data, q, sizeof data));
    int status = 0;
    int early = !strcmp(how, "free-early");
    if (early) {
        if (write(to_child[1], &byte, 1) != 1) return 5;
        waitpid(child, &status, 0);
    }
    if (!strcmp(how, "close-interior")) CALL("cuIpcCloseMemHandle", cuIpcCloseMemHandle(q + 256));
    CALL("cuIpcCloseMemHandle", cuIpcCloseMemHandle(q));
    CALL("cuIpcCloseMemHandle", cuIpcCloseMemHandle(again));
    if (!strcmp(how, "close-twice")) CALL("cuIpcCloseMemHandle", cuIpcCloseMemHandle(q));
    memset(&h, 0, sizeof h);
    if (!early) {
        if (write(to_child[1], &byte, 1) != 1) return 5;
        waitpid(child, &status, 0);
    }
    return WIFEXITED(status) && WEXITSTATUS(status) == 0 && data[0] == 0x5a ? 0 : 6;
}

/* `open-after-free`, `never-close` and `exporter-exits`: the child exports (and, for the first,
 * frees) and waits for the parent, which opens the handle once. In `never-close` the parent
 * exits with its mapping open and the child outlives it (it waits for the pipe's end); in
 * `exporter-exits` the child exits (without freeing) while the parent's mapping is open, and
 * the parent closes it after. */
static int open_once(const char *how) {
    pid_t child = fork_exporter();
    if (child < 0) return 2;
    CUipcMemHandle h;
    char byte = 0;
    int free_first = !strcmp(how, "open-after-free");
    int never = !strcmp(how, "never-close");
    if (child == 0) {
        close(to_child[1]);
        setup();
        CUdeviceptr p;
        MUST(cuMemAlloc(&p, BYTES));
        CALL("cuIpcGetMemHandle", cuIpcGetMemHandle(&h, p));
        if (free_first) CALL("cuMemFree_v2", cuMemFree(p));
        if (write(to_parent[1], &h, sizeof h) != (ssize_t)sizeof h) _exit(4);
        memset(&h, 0, sizeof h);
        /* never-close: the parent's exit ends the pipe (read returns 0). */
        if (read(to_child[0], &byte, 1) != (never ? 0 : 1)) _exit(5);
        /* never-close: freed once the importer is gone (its exit unmapped it). */
        if (never) CALL("cuMemFree_v2", cuMemFree(p));
        exit(0); /* exporter-exits: the memory goes with the process */
    }
    setup();
    if (read(to_parent[0], &h, sizeof h) != (ssize_t)sizeof h) return 4;
    CUdeviceptr q = 0;
    CALL("cuIpcOpenMemHandle_v2", cuIpcOpenMemHandle_v2(&q, h, CU_IPC_MEM_LAZY_ENABLE_PEER_ACCESS));
    if (!strcmp(how, "destroy-context-open")) {
        /* The import in a context of its own, destroyed with the mapping open. */
        CUcontext primary, own;
        CUdeviceptr q2 = 0;
        MUST(cuCtxGetCurrent(&primary));
        CALL("cuIpcCloseMemHandle", cuIpcCloseMemHandle(q));
        MUST(cuCtxCreate(&own, NULL, 0, 0));
        CALL("cuIpcOpenMemHandle_v2", cuIpcOpenMemHandle_v2(&q2, h, CU_IPC_MEM_LAZY_ENABLE_PEER_ACCESS));
        CALL("cuCtxDestroy_v2", cuCtxDestroy(own));
        MUST(cuCtxSetCurrent(primary));
    }
    if (!strcmp(how, "open-second-context")) {
        CUcontext primary, second;
        CUdeviceptr q2 = 0;
        MUST(cuCtxGetCurrent(&primary));
        MUST(cuCtxCreate(&second, NULL, 0, 0));
        CALL("cuIpcOpenMemHandle_v2", cuIpcOpenMemHandle_v2(&q2, h, CU_IPC_MEM_LAZY_ENABLE_PEER_ACCESS));
        MUST(cuCtxSetCurrent(primary));
        MUST(cuCtxDestroy(second));
        CALL("cuIpcCloseMemHandle", cuIpcCloseMemHandle(q));
    }
    memset(&h, 0, sizeof h);
    if (never) return 0;
    if (write(to_child[1], &byte, 1) != 1) return 5;
    int status = 0;
    waitpid(child, &status, 0);
    if (!strcmp(how, "exporter-exits")) CALL("cuIpcCloseMemHandle", cuIpcCloseMemHandle(q));
    return WIFEXITED(status) && WEXITSTATUS(status) == 0 ? 0 : 6;
}

/* `event-exchange`, `event-never-destroyed` and `event-destroyed-early`: the child creates an
 * interprocess event and exports it; the parent opens it. In `event-exchange` the parent
 * destroys its copy, then the child its event; in `event-never-destroyed` the parent exits
 * holding its copy (the child outlives it); in `event-destroyed-early` the child destroys its
 * event while the parent holds the copy, which the parent destroys after. */
static int event_exchange(const char *how) {
    pid_t child = fork_exporter();
    if (child < 0) return 2;
    CUipcEventHandle h;
    char byte = 0;
    int never = !strcmp(how, "event-never-destroyed"), early = !strcmp(how, "event-destroyed-early");
    if (child == 0) {
        close(to_child[1]);
        setup();
        CUevent ev;
        CALL("cuEventCreate", cuEventCreate(&ev, CU_EVENT_INTERPROCESS | CU_EVENT_DISABLE_TIMING));
        CALL("cuIpcGetEventHandle", cuIpcGetEventHandle(&h, ev));
        if (write(to_parent[1], &h, sizeof h) != (ssize_t)sizeof h) _exit(4);
        memset(&h, 0, sizeof h);
        if (read(to_child[0], &byte, 1) != (never ? 0 : 1)) _exit(5);
        CALL("cuEventDestroy_v2", cuEventDestroy(ev));
        if (early && write(to_parent[1], &byte, 1) != 1) _exit(6);
        exit(0);
    }
    setup();
    if (read(to_parent[0], &h, sizeof h) != (ssize_t)sizeof h) return 4;
    CUevent copy;
    CALL("cuIpcOpenEventHandle", cuIpcOpenEventHandle(&copy, h));
    memset(&h, 0, sizeof h);
    if (never) return 0;
    if (!early) CALL("cuEventDestroy_v2", cuEventDestroy(copy));
    if (write(to_child[1], &byte, 1) != 1) return 5;
    if (early) {
        if (read(to_parent[0], &byte, 1) != 1) return 6;
        CALL("cuEventDestroy_v2", cuEventDestroy(copy));
    }
    int status = 0;
    waitpid(child, &status, 0);
    return WIFEXITED(status) && WEXITSTATUS(status) == 0 ? 0 : 7;
}

/* `exporter-destroys-context`: the child allocates and exports in a context of its own, and
 * destroys that context while the parent has the memory open; the parent closes after. */
static int exporter_destroys_context(void) {
    pid_t child = fork_exporter();
    if (child < 0) return 2;
    CUipcMemHandle h;
    char byte = 0;
    if (child == 0) {
        CUdevice dev;
        CUcontext own;
        CUdeviceptr p;
        MUST(cuInit(0));
        MUST(cuDeviceGet(&dev, 0));
        MUST(cuCtxCreate(&own, NULL, 0, dev));
        MUST(cuMemAlloc(&p, BYTES));
        CALL("cuIpcGetMemHandle", cuIpcGetMemHandle(&h, p));
        if (write(to_parent[1], &h, sizeof h) != (ssize_t)sizeof h) _exit(4);
        memset(&h, 0, sizeof h);
        if (read(to_child[0], &byte, 1) != 1) _exit(5);
        CALL("cuCtxDestroy_v2", cuCtxDestroy(own));
        if (write(to_parent[1], &byte, 1) != 1) _exit(6);
        if (read(to_child[0], &byte, 1) != 1) _exit(7);
        exit(0);
    }
    setup();
    if (read(to_parent[0], &h, sizeof h) != (ssize_t)sizeof h) return 4;
    CUdeviceptr q = 0;
    CALL("cuIpcOpenMemHandle_v2", cuIpcOpenMemHandle_v2(&q, h, CU_IPC_MEM_LAZY_ENABLE_PEER_ACCESS));
    memset(&h, 0, sizeof h);
    if (write(to_child[1], &byte, 1) != 1) return 5;
    if (read(to_parent[0], &byte, 1) != 1) return 6;
    CALL("cuIpcCloseMemHandle", cuIpcCloseMemHandle(q));
    if (write(to_child[1], &byte, 1) != 1) return 7;
    int status = 0;
    waitpid(child, &status, 0);
    return WIFEXITED(status) && WEXITSTATUS(status) == 0 ? 0 : 8;
}

/* `second-context-other-allocation`: the child exports two allocations; the parent opens the
 * first in its primary context, then the second in a second context of the same device. */
static int second_context_other_allocation(void) {
    pid_t child = fork_exporter();
    if (child < 0) return 2;
    CUipcMemHandle h[2];
    char byte = 0;
    if (child == 0) {
        setup();
        CUdeviceptr p[2];
        for (int i = 0; i < 2; i++) {
            MUST(cuMemAlloc(&p[i], BYTES));
            CALL("cuIpcGetMemHandle", cuIpcGetMemHandle(&h[i], p[i]));
        }
        if (write(to_parent[1], h, sizeof h) != (ssize_t)sizeof h) _exit(4);
        memset(h, 0, sizeof h);
        if (read(to_child[0], &byte, 1) != 1) _exit(5);
        for (int i = 0; i < 2; i++) CALL("cuMemFree_v2", cuMemFree(p[i]));
        exit(0);
    }
    setup();
    if (read(to_parent[0], h, sizeof h) != (ssize_t)sizeof h) return 4;
    CUcontext primary, second;
    CUdeviceptr q = 0, q2 = 0;
    MUST(cuCtxGetCurrent(&primary));
    CALL("cuIpcOpenMemHandle_v2", cuIpcOpenMemHandle_v2(&q, h[0], CU_IPC_MEM_LAZY_ENABLE_PEER_ACCESS));
    MUST(cuCtxCreate(&second, NULL, 0, 0));
    CALL("cuIpcOpenMemHandle_v2", cuIpcOpenMemHandle_v2(&q2, h[1], CU_IPC_MEM_LAZY_ENABLE_PEER_ACCESS));
    memset(h, 0, sizeof h);
    MUST(cuCtxSetCurrent(primary));
    MUST(cuCtxDestroy(second));
    CALL("cuIpcCloseMemHandle", cuIpcCloseMemHandle(q));
    if (write(to_child[1], &byte, 1) != 1) return 5;
    int status = 0;
    waitpid(child, &status, 0);
    return WIFEXITED(status) && WEXITSTATUS(status) == 0 ? 0 : 8;
}

/* `open-unreachable`: the child exports memory of device 1; the parent opens it in device 0's
 * primary context (on a machine, or a simulator, where device 0 cannot access device 1). */
static int open_unreachable(void) {
    pid_t child = fork_exporter();
    if (child < 0) return 2;
    CUipcMemHandle h;
    char byte = 0;
    if (child == 0) {
        setup_on(1);
        CUdeviceptr p;
        MUST(cuMemAlloc(&p, BYTES));
        CALL("cuIpcGetMemHandle", cuIpcGetMemHandle(&h, p));
        if (write(to_parent[1], &h, sizeof h) != (ssize_t)sizeof h) _exit(4);
        memset(&h, 0, sizeof h);
        if (read(to_child[0], &byte, 1) != 1) _exit(5);
        CALL("cuMemFree_v2", cuMemFree(p));
        exit(0);
    }
    setup();
    if (read(to_parent[0], &h, sizeof h) != (ssize_t)sizeof h) return 4;
    CUdeviceptr q = 0;
    CUresult r = cuIpcOpenMemHandle_v2(&q, h, CU_IPC_MEM_LAZY_ENABLE_PEER_ACCESS);
    CALL("cuIpcOpenMemHandle_v2", r);
    memset(&h, 0, sizeof h);
    if (r == CUDA_SUCCESS) CALL("cuIpcCloseMemHandle", cuIpcCloseMemHandle(q));
    if (write(to_child[1], &byte, 1) != 1) return 5;
    int status = 0;
    waitpid(child, &status, 0);
    return WIFEXITED(status) && WEXITSTATUS(status) == 0 ? 0 : 8;
}

int main(int argc, char **argv) {
    if (argc != 2) return 2;
    const char *s = argv[1];
    if (!strcmp(s, "open-unreachable")) return open_unreachable();
    if (!strcmp(s, "second-context-other-allocation")) return second_context_other_allocation();
    if (!strcmp(s, "exporter-destroys-context")) return exporter_destroys_context();
    if (!strncmp(s, "event-exchange", 14) || !strcmp(s, "event-never-destroyed") ||
        !strcmp(s, "event-destroyed-early"))
        return event_exchange(s);
    if (!strcmp(s, "correct") || !strcmp(s, "close-twice") || !strcmp(s, "close-interior") ||
        !strcmp(s, "open-v1-again") || !strcmp(s, "free-early"))
        return exchange(s);
    if (!strcmp(s, "open-after-free") || !strcmp(s, "never-close") ||
        !strcmp(s, "exporter-exits") || !strcmp(s, "open-second-context") ||
        !strcmp(s, "destroy-context-open"))
        return open_once(s);
    setup();
    CUdeviceptr p, q = 0;
    CUipcMemHandle h;
    MUST(cuMemAlloc(&p, BYTES));
    if (!strcmp(s, "export-interior")) {
        CALL("cuIpcGetMemHandle", cuIpcGetMemHandle(&h, p + 256));
    } else if (!strcmp(s, "export-again")) {
        CALL("cuIpcGetMemHandle", cuIpcGetMemHandle(&h, p));
        CALL("cuIpcGetMemHandle", cuIpcGetMemHandle(&h, p));
        CALL("cuMemFree_v2", cuMemFree(p));
        MUST(cuMemAlloc(&p, BYTES));
        CALL("cuIpcGetMemHandle", cuIpcGetMemHandle(&h, p));
    } else if (!strcmp(s, "export-again-refused")) {
        /* The second export is remembered clean (the quick path); the third, with no handle to
         * write, fails there. */
        CALL("cuIpcGetMemHandle", cuIpcGetMemHandle(&h, p));
        CALL("cuIpcGetMemHandle", cuIpcGetMemHandle(&h, p));
        CALL("cuIpcGetMemHandle", cuIpcGetMemHandle(NULL, p));
    } else if (!strcmp(s, "open-flags")) {
        CALL("cuIpcGetMemHandle", cuIpcGetMemHandle(&h, p));
        CALL("cuIpcOpenMemHandle_v2", cuIpcOpenMemHandle_v2(&q, h, 0));
    } else if (!strcmp(s, "event-same-process")) {
        CUevent ev, opened;
        CUipcEventHandle eh;
        MUST(cuEventCreate(&ev, CU_EVENT_INTERPROCESS | CU_EVENT_DISABLE_TIMING));
        CALL("cuIpcGetEventHandle", cuIpcGetEventHandle(&eh, ev));
        CALL("cuIpcOpenEventHandle", cuIpcOpenEventHandle(&opened, eh));
        memset(&eh, 0, sizeof eh);
        MUST(cuEventDestroy(ev));
    } else if (!strcmp(s, "close-not-opened")) {
        CALL("cuIpcCloseMemHandle", cuIpcCloseMemHandle(p));
    } else if (!strcmp(s, "export-managed")) {
        CUdeviceptr m;
        MUST(cuMemAllocManaged(&m, BYTES, CU_MEM_ATTACH_GLOBAL));
        CALL("cuIpcGetMemHandle", cuIpcGetMemHandle(&h, m));
        CALL("cuMemFree_v2", cuMemFree(m));
    } else if (!strcmp(s, "export-pool")) {
        CUdeviceptr m;
        MUST(cuMemAllocAsync(&m, BYTES, 0));
        CALL("cuIpcGetMemHandle", cuIpcGetMemHandle(&h, m));
        MUST(cuMemFreeAsync(m, 0));
    } else if (!strcmp(s, "export-host")) {
        void *m;
        MUST(cuMemAllocHost(&m, BYTES));
        CALL("cuIpcGetMemHandle", cuIpcGetMemHandle(&h, (CUdeviceptr)m));
        MUST(cuMemFreeHost(m));
    } else if (!strcmp(s, "event-not-interprocess")) {
        CUevent ev;
        CUipcEventHandle eh;
        MUST(cuEventCreate(&ev, CU_EVENT_DISABLE_TIMING));
        CALL("cuIpcGetEventHandle", cuIpcGetEventHandle(&eh, ev));
        MUST(cuEventDestroy(ev));
    } else if (!strcmp(s, "open-same-process")) {
        CALL("cuIpcGetMemHandle", cuIpcGetMemHandle(&h, p));
        CALL("cuIpcOpenMemHandle_v2", cuIpcOpenMemHandle_v2(&q, h, CU_IPC_MEM_LAZY_ENABLE_PEER_ACCESS));
    } else if (!strcmp(s, "open-v1-flags")) {
        CALL("cuIpcGetMemHandle", cuIpcGetMemHandle(&h, p));
        CALL("cuIpcOpenMemHandle", cuIpcOpenMemHandle(&q, h, 3));
    } else {
        return 2;
    }
    memset(&h, 0, sizeof h);
    CALL("cuMemFree_v2", cuMemFree(p));
    return 0;
}
