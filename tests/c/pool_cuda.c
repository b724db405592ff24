/* Stream-ordered memory pool scenarios for the rule tests: `pool_cuda SCENARIO`. Every covered
 * call is printed as `CALL symbol result` (check.h). Each negative scenario breaks one rule once
 * (named in the table of tests/pool_rules.rs) and gives back what it set up; the correct one is:
 *   correct    a pool created with POSIX fd handles and exported, a megabyte allocated from it
 *              and exported; a second process (this program again, `import-child`) imports the
 *              pool and the pointer, writes the memory, frees the pointer and destroys its pool
 *              before the exporter frees; the exporter reads what the child wrote, frees and
 *              destroys. */
#include <cuda.h>
#include <stdint.h>
#include <string.h>
#include <sys/wait.h>
#include <unistd.h>
#include "check.h"

static CUmemPoolProps props;
static CUstream stream;

static CUmemoryPool create(unsigned types) {
    CUmemoryPool pool = 0;
    props.handleTypes = (CUmemAllocationHandleType)types;
    CALL("cuMemPoolCreate", cuMemPoolCreate(&pool, &props));
    return pool;
}

static CUdeviceptr alloc_from(CUmemoryPool pool) {
    CUdeviceptr p = 0;
    CALL("cuMemAllocFromPoolAsync", cuMemAllocFromPoolAsync(&p, 1 << 20, pool, stream));
    return p;
}

static int export_pool(CUmemoryPool pool, unsigned type) {
    int fd = -1;
    CALL("cuMemPoolExportToShareableHandle", cuMemPoolExportToShareableHandle(&fd, pool, (CUmemAllocationHandleType)type, 0));
    return fd;
}

static void release(CUdeviceptr p, CUmemoryPool pool) {
    if (p) CALL("cuMemFreeAsync", cuMemFreeAsync(p, stream));
    MUST(cuStreamSynchronize(stream));
    if (pool) CALL("cuMemPoolDestroy", cuMemPoolDestroy(pool));
}

/* The second process: imports the pool (fd inherited) and the pointer, writes it, and frees it;
 * with `late` (the fds of two pipes), it says when it has imported and frees only once the
 * exporter says it freed. */
static int import_child(int fd, const char *hex, const char *late) {
    CUmemPoolPtrExportData data;
    for (int i = 0; i < 64; i++) {
        unsigned v = 0;
        sscanf(hex + 2 * i, "%2x", &v);
        data.reserved[i] = (unsigned char)v;
    }
    CUmemoryPool pool = 0;
    CALL("cuMemPoolImportFromShareableHandle",
         cuMemPoolImportFromShareableHandle(&pool, (void *)(uintptr_t)fd, CU_MEM_HANDLE_TYPE_POSIX_FILE_DESCRIPTOR, 0));
    close(fd);
    CUdeviceptr p = 0;
    CALL("cuMemPoolImportPointer", cuMemPoolImportPointer(&p, pool, &data));
    MUST(cuMemsetD8(p, 9, 4096));
    MUST(cuCtxSynchronize());
    if (late) {
        int to_parent = -1, from_parent = -1;
        char b = 'i';
        sscanf(late, "%d,%d", &to_parent, &from_parent);
        if (write(to_parent, &b, 1) != 1 || read(from_parent, &b, 1) != 1) return 5;
    }
    CALL("cuMemFree_v2", cuMemFree(p));
    CALL("cuMemPoolDestroy", cuMemPoolDestroy(pool));
    return 0;
}

int main(int argc, char **argv) {
    if (argc < 2) return 2;
    const char *s = argv[1];
    USE_PRIMARY_CONTEXT(0);
    MUST(cuStreamCreate(&stream, CU_STREAM_NON_BLOCKING));
    if (argc >= 4 && !strcmp(s, "import-child")) return import_child(atoi(argv[2]), argv[3], argc > 4 ? argv[4] : NULL);
    memset(&props, 0, sizeof props);
    props.allocType = CU_MEM_ALLOCATION_TYPE_PINNED;
    props.location.type = CU_MEM_LOCATION_TYPE_DEVICE;
    props.location.id = 0;
    CUmemPoolPtrExportData data;
    if (!strcmp(s, "export-none")) {
        CUmemoryPool pool = create(CU_MEM_HANDLE_TYPE_NONE);
        export_pool(pool, CU_MEM_HANDLE_TYPE_POSIX_FILE_DESCRIPTOR);
        release(0, pool);
    } else if (!strcmp(s, "export-fabric")) {
        CUmemoryPool pool = create(CU_MEM_HANDLE_TYPE_POSIX_FILE_DESCRIPTOR);
        export_pool(pool, CU_MEM_HANDLE_TYPE_FABRIC);
        release(0, pool);
    } else if (!strcmp(s, "export-fabric-pool")) {
        /* A FABRIC pool: R580 makes it without an IMEX channel, and refuses its export. */
        CUmemoryPool pool = create(CU_MEM_HANDLE_TYPE_FABRIC);
        CUmemFabricHandle fh;
        CALL("cuMemPoolExportToShareableHandle", cuMemPoolExportToShareableHandle(&fh, pool, CU_MEM_HANDLE_TYPE_FABRIC, 0));
        release(0, pool);
    } else if (!strcmp(s, "export-fd-of-fabric-fd-pool")) {
        CUmemoryPool pool = create(CU_MEM_HANDLE_TYPE_FABRIC | CU_MEM_HANDLE_TYPE_POSIX_FILE_DESCRIPTOR);
        int fd = export_pool(pool, CU_MEM_HANDLE_TYPE_POSIX_FILE_DESCRIPTOR);
        if (fd >= 0) close(fd);
        release(0, pool);
    } else if (!strcmp(s, "alloc-imported")) {
        /* The exporter importing its own export gets a pool of its own (R580): an imported one. */
        CUmemoryPool pool = create(CU_MEM_HANDLE_TYPE_POSIX_FILE_DESCRIPTOR);
        int fd = export_pool(pool, CU_MEM_HANDLE_TYPE_POSIX_FILE_DESCRIPTOR);
        CUmemoryPool imported = 0;
        CALL("cuMemPoolImportFromShareableHandle",
             cuMemPoolImportFromShareableHandle(&imported, (void *)(uintptr_t)fd, CU_MEM_HANDLE_TYPE_POSIX_FILE_DESCRIPTOR, 0));
        close(fd);
        alloc_from(imported);
        CALL("cuMemPoolDestroy", cuMemPoolDestroy(imported));
        release(0, pool);
    } else if (!strcmp(s, "export-pointer-none")) {
        CUmemoryPool pool = create(CU_MEM_HANDLE_TYPE_NONE);
        CUdeviceptr p = alloc_from(pool);
        CALL("cuMemPoolExportPointer", cuMemPoolExportPointer(&data, p));
        release(p, pool);
    } else if (!strcmp(s, "export-pointer-not-exported")) {
        /* A pool shared only once exported: R580 refuses its pointers until then. */
        CUmemoryPool pool = create(CU_MEM_HANDLE_TYPE_POSIX_FILE_DESCRIPTOR);
        CUdeviceptr p = alloc_from(pool);
        CALL("cuMemPoolExportPointer", cuMemPoolExportPointer(&data, p));
        release(p, pool);
    } else if (!strcmp(s, "export-pointer-default")) {
        CUdeviceptr p = 0;
        CALL("cuMemAllocAsync", cuMemAllocAsync(&p, 1 << 20, stream));
        CALL("cuMemPoolExportPointer", cuMemPoolExportPointer(&data, p));
        release(p, 0);
    } else if (!strcmp(s, "export-pointer-interior")) {
        CUmemoryPool pool = create(CU_MEM_HANDLE_TYPE_POSIX_FILE_DESCRIPTOR);
        close(export_pool(pool, CU_MEM_HANDLE_TYPE_POSIX_FILE_DESCRIPTOR));
        CUdeviceptr p = alloc_from(pool);
        CALL("cuMemPoolExportPointer", cuMemPoolExportPointer(&data, p + 4096));
        release(p, pool);
    } else if (!strcmp(s, "import-pointer-own-pool")) {
        CUmemoryPool pool = create(CU_MEM_HANDLE_TYPE_POSIX_FILE_DESCRIPTOR);
        close(export_pool(pool, CU_MEM_HANDLE_TYPE_POSIX_FILE_DESCRIPTOR));
        CUdeviceptr p = alloc_from(pool), q = 0;
        CALL("cuMemPoolExportPointer", cuMemPoolExportPointer(&data, p));
        CALL("cuMemPoolImportPointer", cuMemPoolImportPointer(&q, pool, &data));
        release(p, pool);
    } else if (!strcmp(s, "correct") || !strcmp(s, "freed-while-imported")) {
        int late = !strcmp(s, "freed-while-imported");
        CUmemoryPool pool = create(CU_MEM_HANDLE_TYPE_POSIX_FILE_DESCRIPTOR);
        int fd = export_pool(pool, CU_MEM_HANDLE_TYPE_POSIX_FILE_DESCRIPTOR);
        CUdeviceptr p = alloc_from(pool);
        MUST(cuStreamSynchronize(stream));
        CALL("cuMemPoolExportPointer", cuMemPoolExportPointer(&data, p));
        char hex[129], fdtext[16], pipes[32];
        for (int i = 0; i < 64; i++) sprintf(hex + 2 * i, "%02x", data.reserved[i]);
        /* The child inherits a copy without close-on-exec. */
        int inherited = dup(fd);
        close(fd);
        snprintf(fdtext, sizeof fdtext, "%d", inherited);
        int up[2], down[2];
        if (pipe(up) || pipe(down)) return 6;
        snprintf(pipes, sizeof pipes, "%d,%d", up[1], down[0]);
        fflush(stdout);
        pid_t pid = fork();
        if (pid == 0) {
            execl("/proc/self/exe", "pool_cuda", "import-child", fdtext, hex, late ? pipes : (char *)NULL, (char *)NULL);
            _exit(127);
        }
        char b = 'f';
        if (late) {
            /* The child imported and holds the pointer: the exporter frees first (the misuse). */
            if (read(up[0], &b, 1) != 1) return 7;
            release(p, 0);
            if (write(down[1], &b, 1) != 1) return 7;
        }
        int status = 0;
        if (pid < 0 || waitpid(pid, &status, 0) != pid || !WIFEXITED(status) || WEXITSTATUS(status) != 0) {
            fprintf(stderr, "import-child failed (%d)\n", status);
            return 4;
        }
        close(inherited);
        if (!late) {
            unsigned char back = 0;
            MUST(cuMemcpyDtoH(&back, p, 1));
            printf("SEEN %d\n", back == 9);
        }
        release(late ? 0 : p, pool);
    } else {
        fprintf(stderr, "unknown scenario %s\n", s);
        return 2;
    }
    return 0;
}
