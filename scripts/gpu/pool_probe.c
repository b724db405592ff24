/* What R580 answers to the stream-ordered pool calls, within a process and across two (issue 25),
 * before the simulator models them. No multicast object is created. Each line:
 * "who.case<TAB>answer<TAB>name"; values as "value<TAB>who.what<TAB>number".
 * The exporter (parent) makes an exportable pool (POSIX fd), allocates from it and exports the
 * pool and one pointer; the importer (a forked child, which initializes CUDA only after the fork)
 * imports both over a unix socket (SCM_RIGHTS). Then the exporter frees the pointer while the
 * importer still holds it, and the importer uses and frees it afterwards; a second pointer is
 * exported and freed before the importer imports it.
 * "fabric": what R580 answers to pools of the FABRIC handle type (alone and with POSIX fd), where
 * the host may have no IMEX channel: a pool, an allocation, an export of the pool (none, FABRIC or
 * POSIX fd) and of the pointer, each case in a forked child whose end (signal) is printed.
 * Build: gcc -O1 -o pool_probe scripts/gpu/pool_probe.c -I$CUDA_INC -l:libcuda.so.1
 * Usage: pool_probe [fabric] */
#include <cuda.h>
#include <stdint.h>
#include <stdio.h>
#include <string.h>
#include <sys/socket.h>
#include <sys/wait.h>
#include <unistd.h>

static const char *who = "exporter";

static void say(const char *what, CUresult r) {
    const char *name = "?";
    cuGetErrorName(r, &name);
    printf("%s.%s\t%d\t%s\n", who, what, (int)r, name);
    fflush(stdout);
}

static void value(const char *what, long long v) {
    printf("value\t%s.%s\t%lld\n", who, what, v);
    fflush(stdout);
}

static CUmemPoolProps props_of(int types) {
    CUmemPoolProps p;
    memset(&p, 0, sizeof p);
    p.allocType = CU_MEM_ALLOCATION_TYPE_PINNED;
    p.handleTypes = (CUmemAllocationHandleType)types;
    p.location.type = CU_MEM_LOCATION_TYPE_DEVICE;
    p.location.id = 0;
    return p;
}

/* One message: a byte, with an fd when fd >= 0, and a payload. */
static int send_msg(int sock, int fd, const void *data, size_t len) {
    struct msghdr m;
    struct iovec io = {(void *)data, len};
    char ctl[CMSG_SPACE(sizeof(int))];
    memset(&m, 0, sizeof m);
    m.msg_iov = &io;
    m.msg_iovlen = 1;
    if (fd >= 0) {
        memset(ctl, 0, sizeof ctl);
        m.msg_control = ctl;
        m.msg_controllen = sizeof ctl;
        struct cmsghdr *c = CMSG_FIRSTHDR(&m);
        c->cmsg_level = SOL_SOCKET;
        c->cmsg_type = SCM_RIGHTS;
        c->cmsg_len = CMSG_LEN(sizeof(int));
        memcpy(CMSG_DATA(c), &fd, sizeof fd);
    }
    return sendmsg(sock, &m, 0) == (ssize_t)len ? 0 : -1;
}

static int recv_msg(int sock, int *fd, void *data, size_t len) {
    struct msghdr m;
    struct iovec io = {data, len};
    char ctl[CMSG_SPACE(sizeof(int))];
    memset(&m, 0, sizeof m);
    m.msg_iov = &io;
    m.msg_iovlen = 1;
    m.msg_control = ctl;
    m.msg_controllen = sizeof ctl;
    if (recvmsg(sock, &m, 0) != (ssize_t)len)
        return -1;
    struct cmsghdr *c = CMSG_FIRSTHDR(&m);
    if (fd) {
        *fd = -1;
        if (c && c->cmsg_type == SCM_RIGHTS)
            memcpy(fd, CMSG_DATA(c), sizeof *fd);
    }
    return 0;
}

static int init(CUstream *stream) {
    CUdevice dev;
    CUcontext ctx;
    if (cuInit(0) || cuDeviceGet(&dev, 0) || cuDevicePrimaryCtxRetain(&ctx, dev) || cuCtxSetCurrent(ctx) ||
        cuStreamCreate(stream, CU_STREAM_NON_BLOCKING)) {
        fprintf(stderr, "no device\n");
        return -1;
    }
    return 0;
}

static int importer(int sock) {
    who = "importer";
    CUstream s;
    if (init(&s))
        return 2;
    int fd = -1;
    CUmemPoolPtrExportData sent[2], data, freed;
    if (recv_msg(sock, &fd, sent, sizeof sent))
        return 3;
    data = sent[0];
    freed = sent[1];
    value("received-fd", fd);
    CUmemoryPool pool = 0, again = 0;
    /* A FABRIC import reads a CUmemFabricHandle through the pointer: a zeroed one. */
    CUmemFabricHandle fabric;
    memset(&fabric, 0, sizeof fabric);
    say("import-pool.fabric-type", cuMemPoolImportFromShareableHandle(&again, &fabric, CU_MEM_HANDLE_TYPE_FABRIC, 0));
    say("import-pool.flags-1", cuMemPoolImportFromShareableHandle(&again, (void *)(uintptr_t)fd, CU_MEM_HANDLE_TYPE_POSIX_FILE_DESCRIPTOR, 1));
    say("import-pool.ok", cuMemPoolImportFromShareableHandle(&pool, (void *)(uintptr_t)fd, CU_MEM_HANDLE_TYPE_POSIX_FILE_DESCRIPTOR, 0));
    say("import-pool.again", cuMemPoolImportFromShareableHandle(&again, (void *)(uintptr_t)fd, CU_MEM_HANDLE_TYPE_POSIX_FILE_DESCRIPTOR, 0));
    value("import-pool.again-same-pool", pool == again);
    CUdeviceptr p = 0, p2 = 0, x = 0;
    say("import-pointer.ok", cuMemPoolImportPointer(&p, pool, &data));
    say("import-pointer.again", cuMemPoolImportPointer(&p2, pool, &data));
    value("import-pointer.again-same-address", p != 0 && p == p2);
    if (p2 && p2 != p)
        say("free.second-import", cuMemFree(p2));
    CUdeviceptr gone = 0;
    say("import-pointer.exporter-freed-first", cuMemPoolImportPointer(&gone, pool, &freed));
    say("alloc-from-imported-pool", cuMemAllocFromPoolAsync(&x, 1 << 20, pool, s));
    cuStreamSynchronize(s);
    CUmemAccessDesc rw;
    memset(&rw, 0, sizeof rw);
    rw.location.type = CU_MEM_LOCATION_TYPE_DEVICE;
    rw.location.id = 0;
    rw.flags = CU_MEM_ACCESS_FLAGS_PROT_READWRITE;
    say("pool-set-access.imported", cuMemPoolSetAccess(pool, &rw, 1));
    say("memset.imported", cuMemsetD8(p, 1, 4096));
    say("sync.imported", cuCtxSynchronize());
    char b = 'i';
    send_msg(sock, -1, &b, 1); /* imported: the exporter frees now */
    if (recv_msg(sock, NULL, &b, 1))
        return 4;
    say("memset.after-exporter-free", cuMemsetD8(p, 2, 4096));
    say("sync.after-exporter-free", cuCtxSynchronize());
    say("free.after-exporter-free", cuMemFree(p));
    say("free.again", cuMemFree(p));
    say("pool-destroy.imported", cuMemPoolDestroy(pool));
    close(fd);
    return 0;
}

/* One FABRIC case, in a process of its own (a forked child that initializes CUDA itself): a
 * pool of `types`, an allocation, an export of the pool as `export_type` (0: none), then the
 * pointer's export. */
static int fabric_case(const char *name, int types, int export_type) {
    CUstream s;
    if (init(&s))
        return 2;
    char what[128];
    CUmemPoolProps props = props_of(types);
    CUmemoryPool pool = 0;
    snprintf(what, sizeof what, "%s.pool-create", name);
    CUresult r = cuMemPoolCreate(&pool, &props);
    say(what, r);
    if (r != CUDA_SUCCESS)
        return 0;
    CUdeviceptr p = 0;
    snprintf(what, sizeof what, "%s.alloc", name);
    say(what, cuMemAllocFromPoolAsync(&p, 1 << 20, pool, s));
    cuStreamSynchronize(s);
    if (export_type == CU_MEM_HANDLE_TYPE_FABRIC) {
        CUmemFabricHandle fh;
        memset(&fh, 0, sizeof fh);
        snprintf(what, sizeof what, "%s.export-pool-fabric", name);
        say(what, cuMemPoolExportToShareableHandle(&fh, pool, CU_MEM_HANDLE_TYPE_FABRIC, 0));
    } else if (export_type == CU_MEM_HANDLE_TYPE_POSIX_FILE_DESCRIPTOR) {
        int fd = -1;
        snprintf(what, sizeof what, "%s.export-pool-fd", name);
        say(what, cuMemPoolExportToShareableHandle(&fd, pool, CU_MEM_HANDLE_TYPE_POSIX_FILE_DESCRIPTOR, 0));
    }
    CUmemPoolPtrExportData data;
    memset(&data, 0, sizeof data);
    snprintf(what, sizeof what, "%s.export-pointer", name);
    say(what, cuMemPoolExportPointer(&data, p));
    snprintf(what, sizeof what, "%s.free", name);
    say(what, cuMemFreeAsync(p, s));
    snprintf(what, sizeof what, "%s.sync", name);
    say(what, cuStreamSynchronize(s));
    snprintf(what, sizeof what, "%s.pool-destroy", name);
    say(what, cuMemPoolDestroy(pool));
    return 0;
}

/* FABRIC pools: each case in a child, whose end (exit status or signal) is printed. */
static int fabric(void) {
    const int FD = CU_MEM_HANDLE_TYPE_POSIX_FILE_DESCRIPTOR, FAB = CU_MEM_HANDLE_TYPE_FABRIC;
    const struct { const char *name; int types, export_type; } cases[] = {
        {"fabric-not-exported", FAB, 0},
        {"fabric-export-refused", FAB, FAB},
        {"fabric-fd-not-exported", FAB | FD, 0},
        {"fabric-fd-exported-fd", FAB | FD, FD},
        {"fabric-fd-export-refused", FAB | FD, FAB},
        {"fd-not-exported", FD, 0},
        {"fd-exported-fd", FD, FD},
    };
    for (unsigned k = 0; k < sizeof cases / sizeof cases[0]; k++) {
        pid_t child = fork();
        if (child == 0)
            _exit(fabric_case(cases[k].name, cases[k].types, cases[k].export_type));
        int status = 0;
        waitpid(child, &status, 0);
        if (WIFSIGNALED(status))
            printf("%s.end\tsignal %d\n", cases[k].name, WTERMSIG(status));
        else
            printf("%s.end\texit %d\n", cases[k].name, WEXITSTATUS(status));
        fflush(stdout);
    }
    return 0;
}

int main(int argc, char **argv) {
    if (argc > 1 && !strcmp(argv[1], "fabric"))
        return fabric();
    int sv[2];
    if (socketpair(AF_UNIX, SOCK_STREAM, 0, sv))
        return 2;
    pid_t child = fork();
    if (child == 0) {
        close(sv[0]);
        int rc = importer(sv[1]);
        _exit(rc);
    }
    close(sv[1]);
    CUstream s;
    if (init(&s))
        return 2;
    CUmemPoolProps fd_props = props_of(CU_MEM_HANDLE_TYPE_POSIX_FILE_DESCRIPTOR);
    CUmemPoolProps none_props = props_of(CU_MEM_HANDLE_TYPE_NONE);
    CUmemoryPool pool = 0, plain = 0, spare = 0;
    say("pool-create.fd", cuMemPoolCreate(&pool, &fd_props));
    say("pool-create.none", cuMemPoolCreate(&plain, &none_props));
    int fd = -1, bad = -1;
    say("export-pool.none-pool", cuMemPoolExportToShareableHandle(&bad, plain, CU_MEM_HANDLE_TYPE_POSIX_FILE_DESCRIPTOR, 0));
    say("export-pool.type-not-requested", cuMemPoolExportToShareableHandle(&bad, pool, CU_MEM_HANDLE_TYPE_FABRIC, 0));
    say("export-pool.flags-1", cuMemPoolExportToShareableHandle(&bad, pool, CU_MEM_HANDLE_TYPE_POSIX_FILE_DESCRIPTOR, 1));
    say("export-pool.ok", cuMemPoolExportToShareableHandle(&fd, pool, CU_MEM_HANDLE_TYPE_POSIX_FILE_DESCRIPTOR, 0));
    int fd2 = -1;
    say("export-pool.again", cuMemPoolExportToShareableHandle(&fd2, pool, CU_MEM_HANDLE_TYPE_POSIX_FILE_DESCRIPTOR, 0));
    CUmemoryPool own = 0;
    say("import-pool.own-export", cuMemPoolImportFromShareableHandle(&own, (void *)(uintptr_t)fd2, CU_MEM_HANDLE_TYPE_POSIX_FILE_DESCRIPTOR, 0));
    value("import-pool.own-export-is-pool", own == pool);
    CUdeviceptr p = 0, q = 0, d = 0;
    say("alloc-from-pool.ok", cuMemAllocFromPoolAsync(&p, 1 << 20, pool, s));
    say("alloc-from-pool.none", cuMemAllocFromPoolAsync(&q, 1 << 20, plain, s));
    say("alloc-async.default", cuMemAllocAsync(&d, 1 << 20, s));
    say("sync.allocs", cuStreamSynchronize(s));
    CUmemPoolPtrExportData data, other;
    memset(&data, 0, sizeof data);
    say("export-pointer.ok", cuMemPoolExportPointer(&data, p));
    say("export-pointer.interior", cuMemPoolExportPointer(&other, p + 4096));
    say("export-pointer.none-pool", cuMemPoolExportPointer(&other, q));
    say("export-pointer.default-pool", cuMemPoolExportPointer(&other, d));
    CUdeviceptr plain_alloc = 0;
    cuMemAlloc(&plain_alloc, 1 << 20);
    say("export-pointer.cuMemAlloc", cuMemPoolExportPointer(&other, plain_alloc));
    cuMemFree(plain_alloc);
    /* A pool not exported yet: its pointers export only once the pool itself is shared. */
    CUmemoryPool later = 0;
    CUdeviceptr lp = 0;
    int lfd = -1;
    say("pool-create.later", cuMemPoolCreate(&later, &fd_props));
    say("alloc-from-pool.later", cuMemAllocFromPoolAsync(&lp, 1 << 20, later, s));
    cuStreamSynchronize(s);
    say("export-pointer.pool-not-exported", cuMemPoolExportPointer(&other, lp));
    say("export-pool.later", cuMemPoolExportToShareableHandle(&lfd, later, CU_MEM_HANDLE_TYPE_POSIX_FILE_DESCRIPTOR, 0));
    say("export-pointer.pool-exported-later", cuMemPoolExportPointer(&other, lp));
    say("free-async.later", cuMemFreeAsync(lp, s));
    cuStreamSynchronize(s);
    say("pool-destroy.later", cuMemPoolDestroy(later));
    close(lfd);
    CUmemPoolPtrExportData again;
    cuMemPoolExportPointer(&again, p);
    value("export-pointer.again-same-data", memcmp(&again, &data, sizeof data) == 0);
    CUdeviceptr own_ptr = 0;
    say("import-pointer.own", cuMemPoolImportPointer(&own_ptr, pool, &data));
    value("import-pointer.own-is-ptr", own_ptr == p);
    /* A second pointer, exported and freed before the importer imports it. */
    CUdeviceptr p2 = 0;
    CUmemPoolPtrExportData sent[2];
    sent[0] = data;
    say("alloc-from-pool.second", cuMemAllocFromPoolAsync(&p2, 1 << 20, pool, s));
    say("export-pointer.second", cuMemPoolExportPointer(&sent[1], p2));
    say("free-async.second-before-import", cuMemFreeAsync(p2, s));
    cuStreamSynchronize(s);
    if (send_msg(sv[0], fd, sent, sizeof sent))
        return 3;
    char b;
    if (recv_msg(sv[0], NULL, &b, 1))
        return 4;
    /* The importer holds the pointer: the exporter frees it first. */
    say("free-async.while-imported", cuMemFreeAsync(p, s));
    say("sync.free-while-imported", cuStreamSynchronize(s));
    send_msg(sv[0], -1, &b, 1);
    int status = 0;
    waitpid(child, &status, 0);
    value("importer-exit", WIFEXITED(status) ? WEXITSTATUS(status) : 128 + WTERMSIG(status));
    say("free.sync-of-pool-memory", cuMemFree(q));
    CUdeviceptr r = 0;
    say("pool-create.spare", cuMemPoolCreate(&spare, &fd_props));
    say("alloc-from-pool.spare", cuMemAllocFromPoolAsync(&r, 1 << 20, spare, s));
    cuStreamSynchronize(s);
    say("pool-destroy.outstanding", cuMemPoolDestroy(spare));
    say("free.after-pool-destroy", cuMemFreeAsync(r, s));
    say("sync.after-pool-destroy", cuStreamSynchronize(s));
    say("free-async.default", cuMemFreeAsync(d, s));
    say("pool-destroy.none", cuMemPoolDestroy(plain));
    say("pool-destroy.fd", cuMemPoolDestroy(pool));
    say("pool-destroy.again", cuMemPoolDestroy(pool));
    close(fd);
    close(fd2);
    return 0;
}
