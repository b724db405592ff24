/* HIP IPC scenarios for the rule tests: `ipc_hip SCENARIO` (see ipc_cuda.c).
 *   export-interior   exports a pointer 4 KiB into its allocation
 *   export-base       exports the allocation's base (correct)
 *   open-flags        opens its own handle with flags 3 (no HIP version's lazy flag)
 *   open-same-process opens its own handle
 *   close-not-opened  closes memory of its own (no open returned it)
 *   event-same-process opens the handle of its own interprocess event
 *   export-managed    exports managed memory (hipMallocManaged)
 *   event-not-interprocess exports an event created with hipEventDisableTiming only
 * and across two processes (a child, forked before the runtime starts, exports; the parent
 * imports), as ipc_cuda.c:
 *   exchange          done right: the parent opens, closes, then the child frees
 *   free-early        the child frees before the parent closes
 *   open-after-free   the child frees before the parent opens
 *   never-close       the parent exits with its mapping open (the child outlives it and frees
 *                     the memory after)
 *   exporter-exits    the child exits (without freeing) while the parent's mapping is open;
 *                     the parent closes it after
 *   open-unreachable  the child exports memory of device 1; the parent opens it on device 0
 *   event-exchange, event-never-destroyed, event-destroyed-early: an interprocess event's
 *                     handle exchanged, as in ipc_cuda.c */
#define __HIP_PLATFORM_AMD__
#include <hip/hip_runtime_api.h>
#include <string.h>
#include <sys/wait.h>
#include <unistd.h>
#include "check.h"

/* 1: the simulated runtime's value of hipIpcMemLazyEnablePeerAccess (0 in HIP 5.x headers). */
#define LAZY 1

static int two_processes(const char *how) {
    int to_parent[2], to_child[2];
    if (pipe(to_parent) != 0 || pipe(to_child) != 0) return 2;
    pid_t child = fork();
    if (child < 0) return 2;
    hipIpcMemHandle_t h;
    char byte = 0;
    int free_early = !strcmp(how, "free-early"), after = !strcmp(how, "open-after-free");
    int never = !strcmp(how, "never-close"), exits = !strcmp(how, "exporter-exits");
    if (child == 0) {
        close(to_child[1]);
        void *p;
        MUST(hipSetDevice(0));
        MUST(hipMalloc(&p, 1 << 16));
        CALL("hipIpcGetMemHandle", hipIpcGetMemHandle(&h, p));
        if (after) CALL("hipFree", hipFree(p));
        if (write(to_parent[1], &h, sizeof h) != (ssize_t)sizeof h) _exit(4);
        memset(&h, 0, sizeof h);
        /* never-close: the parent's exit ends the pipe (read returns 0). */
        if (read(to_child[0], &byte, 1) != (never ? 0 : 1)) _exit(5);
        /* never-close: freed once the importer is gone (its exit unmapped it). */
        if (!after && !exits) CALL("hipFree", hipFree(p));
        exit(0);
    }
    MUST(hipSetDevice(0));
    if (read(to_parent[0], &h, sizeof h) != (ssize_t)sizeof h) return 4;
    void *q = NULL;
    CALL("hipIpcOpenMemHandle", hipIpcOpenMemHandle(&q, h, LAZY));
    memset(&h, 0, sizeof h);
    int status = 0;
    if (never) return 0;
    if (free_early || exits) {
        if (write(to_child[1], &byte, 1) != 1) return 5;
        waitpid(child, &status, 0);
    }
    if (!after && !never) CALL("hipIpcCloseMemHandle", hipIpcCloseMemHandle(q));
    if (!free_early && !exits) {
        if (write(to_child[1], &byte, 1) != 1) return 5;
        waitpid(child, &status, 0);
    }
    return WIFEXITED(status) && WEXITSTATUS(status) == 0 ? 0 : 6;
}

/* `open-unreachable`: the child exports memory of device 1; the parent opens it on device 0. */
static int open_unreachable(void) {
    int to_parent[2], to_child[2];
    if (pipe(to_parent) != 0 || pipe(to_child) != 0) return 2;
    pid_t child = fork();
    if (child < 0) return 2;
    hipIpcMemHandle_t h;
    char byte = 0;
    if (child == 0) {
        void *p;
        MUST(hipSetDevice(1));
        MUST(hipMalloc(&p, 1 << 16));
        CALL("hipIpcGetMemHandle", hipIpcGetMemHandle(&h, p));
        if (write(to_parent[1], &h, sizeof h) != (ssize_t)sizeof h) _exit(4);
        memset(&h, 0, sizeof h);
        if (read(to_child[0], &byte, 1) != 1) _exit(5);
        CALL("hipFree", hipFree(p));
        exit(0);
    }
    MUST(hipSetDevice(0));
    if (read(to_parent[0], &h, sizeof h) != (ssize_t)sizeof h) return 4;
    void *q = NULL;
    hipError_t r = hipIpcOpenMemHandle(&q, h, LAZY);
    CALL("hipIpcOpenMemHandle", r);
    memset(&h, 0, sizeof h);
    if (r == hipSuccess) CALL("hipIpcCloseMemHandle", hipIpcCloseMemHandle(q));
    if (write(to_child[1], &byte, 1) != 1) return 5;
    int status = 0;
    waitpid(child, &status, 0);
    return WIFEXITED(status) && WEXITSTATUS(status) == 0 ? 0 : 8;
}

/* `event-exchange`, `event-never-destroyed` and `event-destroyed-early`, as ipc_cuda.c. */
static int event_exchange(const char *how) {
    int to_parent[2], to_child[2];
    if (pipe(to_parent) != 0 || pipe(to_child) != 0) return 2;
    pid_t child = fork();
    if (child < 0) return 2;
    hipIpcEventHandle_t h;
    char byte = 0;
    int never = !strcmp(how, "event-never-destroyed"), early = !strcmp(how, "event-destroyed-early");
    if (child == 0) {
        close(to_child[1]);
        hipEvent_t ev;
        MUST(hipSetDevice(0));
        CALL("hipEventCreateWithFlags",
             hipEventCreateWithFlags(&ev, hipEventInterprocess | hipEventDisableTiming));
        CALL("hipIpcGetEventHandle", hipIpcGetEventHandle(&h, ev));
        if (write(to_parent[1], &h, sizeof h) != (ssize_t)sizeof h) _exit(4);
        memset(&h, 0, sizeof h);
        if (read(to_child[0], &byte, 1) != (never ? 0 : 1)) _exit(5);
        CALL("hipEventDestroy", hipEventDestroy(ev));
        if (early && write(to_parent[1], &byte, 1) != 1) _exit(6);
        exit(0);
    }
    MUST(hipSetDevice(0));
    if (read(to_parent[0], &h, sizeof h) != (ssize_t)sizeof h) return 4;
    hipEvent_t copy;
    CALL("hipIpcOpenEventHandle", hipIpcOpenEventHandle(&copy, h));
    memset(&h, 0, sizeof h);
    if (never) return 0;
    if (!early) CALL("hipEventDestroy", hipEventDestroy(copy));
    if (write(to_child[1], &byte, 1) != 1) return 5;
    if (early) {
        if (read(to_parent[0], &byte, 1) != 1) return 6;
        CALL("hipEventDestroy", hipEventDestroy(copy));
    }
    int status = 0;
    waitpid(child, &status, 0);
    return WIFEXITED(status) && WEXITSTATUS(status) == 0 ? 0 : 7;
}

int main(int argc, char **argv) {
    if (argc == 2 && !strcmp(argv[1], "open-unreachable")) return open_unreachable();
    if (argc == 2 && (!strcmp(argv[1], "event-exchange") ||
                      !strcmp(argv[1], "event-never-destroyed") ||
                      !strcmp(argv[1], "event-destroyed-early")))
        return event_exchange(argv[1]);
    if (argc != 2) return 2;
    if (!strcmp(argv[1], "exchange") || !strcmp(argv[1], "free-early") ||
        !strcmp(argv[1], "open-after-free") || !strcmp(argv[1], "never-close") ||
        !strcmp(argv[1], "exporter-exits"))
        return two_processes(argv[1]);
    void *p;
    hipIpcMemHandle_t h;
    MUST(hipSetDevice(0));
    MUST(hipMalloc(&p, 1 << 16));
    if (!strcmp(argv[1], "export-interior")) {
        CALL("hipIpcGetMemHandle", hipIpcGetMemHandle(&h, (char *)p + 4096));
    } else if (!strcmp(argv[1], "open-flags")) {
        void *q = NULL;
        CALL("hipIpcGetMemHandle", hipIpcGetMemHandle(&h, p));
        CALL("hipIpcOpenMemHandle", hipIpcOpenMemHandle(&q, h, 3));
    } else if (!strcmp(argv[1], "open-flags-rocm5")) {
        /* hipIpcMemLazyEnablePeerAccess of ROCm 5's headers (0) on a ROCm 6 runtime (the
         * simulator's: 0x1). */
        void *q = NULL;
        CALL("hipIpcGetMemHandle", hipIpcGetMemHandle(&h, p));
        CALL("hipIpcOpenMemHandle", hipIpcOpenMemHandle(&q, h, 0));
    } else if (!strcmp(argv[1], "open-same-process")) {
        void *q = NULL;
        CALL("hipIpcGetMemHandle", hipIpcGetMemHandle(&h, p));
        CALL("hipIpcOpenMemHandle", hipIpcOpenMemHandle(&q, h, LAZY));
    } else if (!strcmp(argv[1], "event-same-process")) {
        hipEvent_t ev, opened;
        hipIpcEventHandle_t eh;
        MUST(hipEventCreateWithFlags(&ev, hipEventInterprocess | hipEventDisableTiming));
        CALL("hipIpcGetEventHandle", hipIpcGetEventHandle(&eh, ev));
        CALL("hipIpcOpenEventHandle", hipIpcOpenEventHandle(&opened, eh));
        memset(&eh, 0, sizeof eh);
        MUST(hipEventDestroy(ev));
    } else if (!strcmp(argv[1], "close-not-opened")) {
        CALL("hipIpcCloseMemHandle", hipIpcCloseMemHandle(p));
    } else if (!strcmp(argv[1], "export-managed")) {
        void *m;
        MUST(hipMallocManaged(&m, 1 << 16, hipMemAttachGlobal));
        CALL("hipIpcGetMemHandle", hipIpcGetMemHandle(&h, m));
        MUST(hipFree(m));
    } else if (!strcmp(argv[1], "event-not-interprocess")) {
        hipEvent_t ev;
        hipIpcEventHandle_t eh;
        MUST(hipEventCreateWithFlags(&ev, hipEventDisableTiming));
        CALL("hipIpcGetEventHandle", hipIpcGetEventHandle(&eh, ev));
        MUST(hipEventDestroy(ev));
    } else if (!strcmp(argv[1], "export-base")) {
        CALL("hipIpcGetMemHandle", hipIpcGetMemHandle(&h, p));
    } else {
        return 2;
    }
    memset(&h, 0, sizeof h);
    MUST(hipFree(p));
    return 0;
}
