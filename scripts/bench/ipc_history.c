/* Long IPC histories for scripts/bench-history.sh (issue 27): correct programs whose report-phase
 * review must stay linear in the number of steps one handle goes through.
 *
 *   ipc_history reopen N    a child exports one allocation; the parent opens and closes it N
 *                           times; then the child frees it
 *   ipc_history realloc N   N rounds of: the child allocates (the driver hands the same address
 *                           out again, as a caching allocator does), exports, the parent opens and
 *                           closes, the child frees
 *
 * Two processes forked before cuInit, handles and acknowledgements passed through two pipes.
 * Exits 0 when every call succeeded. */
#include <cuda.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>
#include <unistd.h>

#define BYTES (1 << 16)

static int to_parent[2], to_child[2];

static void must(CUresult r, const char *what) {
    if (r != CUDA_SUCCESS) {
        fprintf(stderr, "ipc_history: %s failed: %d\n", what, (int)r);
        _exit(3);
    }
}

static void setup(void) {
    CUdevice dev;
    CUcontext ctx;
    must(cuInit(0), "cuInit");
    must(cuDeviceGet(&dev, 0), "cuDeviceGet");
    must(cuDevicePrimaryCtxRetain(&ctx, dev), "cuDevicePrimaryCtxRetain");
    must(cuCtxSetCurrent(ctx), "cuCtxSetCurrent");
}

static void put(int fd, const void *p, size_t n) {
    if (write(fd, p, n) != (ssize_t)n) _exit(4);
}

static void get(int fd, void *p, size_t n) {
    if (read(fd, p, n) != (ssize_t)n) _exit(5);
}

int main(int argc, char **argv) {
    if (argc != 3 || (strcmp(argv[1], "reopen") && strcmp(argv[1], "realloc"))) {
        fprintf(stderr, "usage: ipc_history reopen|realloc N\n");
        return 2;
    }
    int realloc_rounds = !strcmp(argv[1], "realloc");
    long n = atol(argv[2]);
    if (pipe(to_parent) != 0 || pipe(to_child) != 0) return 2;
    pid_t child = fork();
    if (child < 0) return 2;
    CUipcMemHandle h;
    char byte = 0;
    long rounds = realloc_rounds ? n : 1;
    if (child == 0) {
        setup();
        for (long r = 0; r < rounds; r++) {
            CUdeviceptr p;
            must(cuMemAlloc(&p, BYTES), "cuMemAlloc");
            must(cuIpcGetMemHandle(&h, p), "cuIpcGetMemHandle");
            put(to_parent[1], &h, sizeof h);
            get(to_child[0], &byte, 1);
            must(cuMemFree(p), "cuMemFree");
        }
        exit(0);
    }
    setup();
    for (long r = 0; r < rounds; r++) {
        get(to_parent[0], &h, sizeof h);
        long opens = realloc_rounds ? 1 : n;
        for (long k = 0; k < opens; k++) {
            CUdeviceptr q = 0;
            must(cuIpcOpenMemHandle(&q, h, CU_IPC_MEM_LAZY_ENABLE_PEER_ACCESS), "cuIpcOpenMemHandle");
            must(cuIpcCloseMemHandle(q), "cuIpcCloseMemHandle");
        }
        put(to_child[1], &byte, 1);
    }
    int status = 0;
    waitpid(child, &status, 0);
    return WIFEXITED(status) && WEXITSTATUS(status) == 0 ? 0 : 6;
}
