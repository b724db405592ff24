/* HIP stream-ordered pool scenarios for the rule tests: `pool_hip SCENARIO`.
 *   export-flags     hipMemPoolExportToShareableHandle with flags 1 (refused)
 *   import-flags     hipMemPoolImportFromShareableHandle with flags 1 (refused)
 *   export-not-ipc   the export of a pool created with hipMemHandleTypeNone (refused)
 *   alloc-imported   hipMallocFromPoolAsync from a pool imported from this process's own export
 *                    (the ROCm 6.2 runtime does not look, and allocates)
 *   correct          a shareable pool: allocated from, exported, imported back, its pointer
 *                    exported and imported, freed, both pools destroyed
 *   shared           the pool and its pointer imported by a child process (re-executed, the
 *                    pool's fd inherited), which frees its import before the exporter frees
 *   freed-while-imported
 *                    the same, but the exporter frees while the child still holds its import
 *                    (found by the report phase only)
 * Pools of device 0; allocations of 1 MiB on the null stream. */
#define __HIP_PLATFORM_AMD__
#include <hip/hip_runtime_api.h>
#include <stdint.h>
#include <string.h>
#include <stdio.h>
#include <sys/wait.h>
#include <unistd.h>
#include "check.h"

static hipMemPool_t create(hipMemAllocationHandleType types) {
    hipMemPoolProps props;
    memset(&props, 0, sizeof props);
    props.allocType = hipMemAllocationTypePinned;
    props.handleTypes = types;
    props.location.type = hipMemLocationTypeDevice;
    props.location.id = 0;
    hipMemPool_t pool = NULL;
    CALL("hipMemPoolCreate", hipMemPoolCreate(&pool, &props));
    return pool;
}

/* The importing process: the pool from the inherited fd, the pointer from the export data (hex),
 * freed; with `pipes` ("to_parent,from_parent"), it tells the exporter it holds the import and
 * waits for the exporter's free before its own. */
static int import_child(int fd, const char *hex, const char *pipes) {
    hipMemPoolPtrExportData data;
    for (int i = 0; i < 64; i++) {
        unsigned v = 0;
        if (sscanf(hex + 2 * i, "%2x", &v) != 1) return 5;
        data.reserved[i] = (unsigned char)v;
    }
    hipMemPool_t pool = NULL;
    CALL("hipMemPoolImportFromShareableHandle",
         hipMemPoolImportFromShareableHandle(&pool, (void *)(intptr_t)fd,
                                             hipMemHandleTypePosixFileDescriptor, 0));
    void *q = NULL;
    CALL("hipMemPoolImportPointer", hipMemPoolImportPointer(&q, pool, &data));
    if (pipes) {
        int to_parent = -1, from_parent = -1;
        char b = 'i';
        sscanf(pipes, "%d,%d", &to_parent, &from_parent);
        if (write(to_parent, &b, 1) != 1 || read(from_parent, &b, 1) != 1) return 5;
    }
    CALL("hipFree", hipFree(q));
    CALL("hipMemPoolDestroy", hipMemPoolDestroy(pool));
    return 0;
}

/* The exporter of `shared` and `freed-while-imported`. */
static int share(int late) {
    hipMemPool_t pool = create(hipMemHandleTypePosixFileDescriptor);
    int fd = -1;
    CALL("hipMemPoolExportToShareableHandle",
         hipMemPoolExportToShareableHandle(&fd, pool, hipMemHandleTypePosixFileDescriptor, 0));
    void *p = NULL;
    CALL("hipMallocFromPoolAsync", hipMallocFromPoolAsync(&p, 1 << 20, pool, NULL));
    hipMemPoolPtrExportData data;
    CALL("hipMemPoolExportPointer", hipMemPoolExportPointer(&data, p));
    char hex[129], fdtext[16], pipes[32];
    for (int i = 0; i < 64; i++) sprintf(hex + 2 * i, "%02x", data.reserved[i]);
    /* The child inherits a copy without close-on-exec. */
    int inherited = dup(fd);
    close(fd);
    fd = inherited;
    snprintf(fdtext, sizeof fdtext, "%d", fd);
    int up[2], down[2];
    if (pipe(up) || pipe(down)) return 6;
    snprintf(pipes, sizeof pipes, "%d,%d", up[1], down[0]);
    fflush(stdout);
    pid_t pid = fork();
    if (pid == 0) {
        execl("/proc/self/exe", "pool_hip", "import-child", fdtext, hex, late ? pipes : (char *)NULL,
              (char *)NULL);
        _exit(127);
    }
    char b = 'f';
    if (late) {
        /* The child holds the pointer: the exporter frees first (the misuse). */
        if (read(up[0], &b, 1) != 1) return 7;
        CALL("hipFree", hipFree(p));
        if (write(down[1], &b, 1) != 1) return 7;
    }
    int status = 0;
    if (pid < 0 || waitpid(pid, &status, 0) != pid || !WIFEXITED(status) || WEXITSTATUS(status) != 0) {
        fprintf(stderr, "import-child failed (%d)\n", status);
        return 4;
    }
    close(fd);
    if (!late) CALL("hipFree", hipFree(p));
    CALL("hipMemPoolDestroy", hipMemPoolDestroy(pool));
    return 0;
}

int main(int argc, char **argv) {
    if (argc < 2) return 2;
    const char *s = argv[1];
    MUST(hipSetDevice(0));
    if (argc >= 4 && !strcmp(s, "import-child")) return import_child(atoi(argv[2]), argv[3], argc > 4 ? argv[4] : NULL);
    if (argc != 2) return 2;
    if (!strcmp(s, "shared")) return share(0);
    if (!strcmp(s, "freed-while-imported")) return share(1);
    const hipMemAllocationHandleType fd_type = hipMemHandleTypePosixFileDescriptor;
    int fd = -1;
    if (!strcmp(s, "export-not-ipc")) {
        hipMemPool_t plain = create(hipMemHandleTypeNone);
        CALL("hipMemPoolExportToShareableHandle",
             hipMemPoolExportToShareableHandle(&fd, plain, fd_type, 0));
        CALL("hipMemPoolDestroy", hipMemPoolDestroy(plain));
        return 0;
    }
    hipMemPool_t pool = create(fd_type);
    if (!strcmp(s, "export-flags")) {
        CALL("hipMemPoolExportToShareableHandle",
             hipMemPoolExportToShareableHandle(&fd, pool, fd_type, 1));
        CALL("hipMemPoolDestroy", hipMemPoolDestroy(pool));
        return 0;
    }
    CALL("hipMemPoolExportToShareableHandle",
         hipMemPoolExportToShareableHandle(&fd, pool, fd_type, 0));
    hipMemPool_t imported = NULL;
    if (!strcmp(s, "import-flags")) {
        CALL("hipMemPoolImportFromShareableHandle",
             hipMemPoolImportFromShareableHandle(&imported, (void *)(intptr_t)fd, fd_type, 1));
        close(fd);
        CALL("hipMemPoolDestroy", hipMemPoolDestroy(pool));
        return 0;
    }
    CALL("hipMemPoolImportFromShareableHandle",
         hipMemPoolImportFromShareableHandle(&imported, (void *)(intptr_t)fd, fd_type, 0));
    close(fd);
    void *p = NULL;
    if (!strcmp(s, "alloc-imported")) {
        CALL("hipMallocFromPoolAsync", hipMallocFromPoolAsync(&p, 1 << 20, imported, NULL));
        MUST(hipFree(p));
    } else if (!strcmp(s, "correct")) {
        CALL("hipMallocFromPoolAsync", hipMallocFromPoolAsync(&p, 1 << 20, pool, NULL));
        hipMemPoolPtrExportData data;
        CALL("hipMemPoolExportPointer", hipMemPoolExportPointer(&data, p));
        void *q = NULL;
        CALL("hipMemPoolImportPointer", hipMemPoolImportPointer(&q, imported, &data));
        MUST(hipFree(q));
        MUST(hipFree(p));
    } else {
        return 2;
    }
    CALL("hipMemPoolDestroy", hipMemPoolDestroy(imported));
    CALL("hipMemPoolDestroy", hipMemPoolDestroy(pool));
    return 0;
}
