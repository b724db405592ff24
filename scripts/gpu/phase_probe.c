/* Where a short CUDA program's time goes, process by process (issue 25: the cuda-samples ran
 * longer under the shim). Preloaded before libsharecheck.so (or alone, for the plain runs), it
 * writes one line per process to the file named by PROBE_OUT at the process's end:
 *   PROBE pid ctor <ns> init <ns> <ns> exit <ns> dtor <ns> last <ns> [NAME <ns> <ns>]...
 * all CLOCK_REALTIME: its constructor, cuInit's start and end (when the program calls cuInit by
 * name: the driver-API programs do), the first call of each marked function (below), `exit` (the first of the program's atexit handlers to run:
 * registered by the first cuInit's return, so after the program's libraries registered theirs),
 * its destructor, and its last atexit handler (registered in the constructor, before
 * `__libc_start_main` registers the loader's destructors: it runs after every other exit
 * handler and every destructor, the driver's teardown included), which writes the line. scripts/gpu/startup-cost.sh
 * subtracts the launch time to split a run into loading, init, the program, and the exit.
 * Build: gcc -O2 -shared -fPIC -o phase_probe.so phase_probe.c -ldl */
#define _GNU_SOURCE
#include <dlfcn.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

static long long t_ctor, t_init0, t_init1, t_exit, t_dtor;

static long long now(void) {
    struct timespec ts;
    clock_gettime(CLOCK_REALTIME, &ts);
    return ts.tv_sec * 1000000000LL + ts.tv_nsec;
}

static void first_exit(void) { t_exit = now(); }

/* Marks: the first call of a few driver functions the samples make, its entry and return, to
 * split a program's time between its calls (forwarded to the next definition: the shim's when
 * it is preloaded after this probe, else the driver's). */
#define MARKS 3
static const char *mark_names[MARKS] = {"cuDeviceCanAccessPeer", "cuMemAddressReserve",
                                        "cuCtxDestroy_v2"};
static long long mark_t[MARKS][2];

static void *next(int i, void **slot) {
    if (!*slot) *slot = dlsym(RTLD_NEXT, mark_names[i]);
    return *slot;
}

#define MARKED(i, call)                                   \
    long long t0 = now();                                 \
    int rc = (call);                                      \
    if (!mark_t[i][0]) {                                  \
        mark_t[i][0] = t0;                                \
        mark_t[i][1] = now();                             \
    }                                                     \
    return rc;

int cuDeviceCanAccessPeer(int *can, int dev, int peer) {
    static void *f;
    if (!next(0, &f)) return 3;
    MARKED(0, ((int (*)(int *, int, int))f)(can, dev, peer))
}

int cuMemAddressReserve(unsigned long long *ptr, size_t size, size_t align, unsigned long long addr,
                        unsigned long long flags) {
    static void *f;
    if (!next(1, &f)) return 3;
    MARKED(1, ((int (*)(unsigned long long *, size_t, size_t, unsigned long long,
                        unsigned long long))f)(ptr, size, align, addr, flags))
}

int cuCtxDestroy_v2(void *ctx) {
    static void *f;
    if (!next(2, &f)) return 3;
    MARKED(2, ((int (*)(void *))f)(ctx))
}

static void last_exit(void);

int cuInit(unsigned int flags) {
    static int (*real)(unsigned int);
    if (!real) real = (int (*)(unsigned int))dlsym(RTLD_NEXT, "cuInit");
    if (!real) return 3; /* CUDA_ERROR_NOT_INITIALIZED */
    long long t0 = now();
    int rc = real(flags);
    if (!t_init0) {
        t_init0 = t0;
        t_init1 = now();
        atexit(first_exit);
    }
    return rc;
}

__attribute__((constructor)) static void probe_ctor(void) {
    t_ctor = now();
    atexit(last_exit);
}

__attribute__((destructor)) static void probe_dtor(void) { t_dtor = now(); }

static void last_exit(void) {
    long long t_last = now();
    const char *path = getenv("PROBE_OUT");
    if (!path) return;
    int fd = open(path, O_WRONLY | O_APPEND | O_CREAT | O_CLOEXEC, 0644);
    if (fd < 0) return;
    char line[512];
    int n = snprintf(line, sizeof line, "PROBE %d ctor %lld init %lld %lld exit %lld dtor %lld last %lld",
                     (int)getpid(), t_ctor, t_init0, t_init1, t_exit, t_dtor, t_last);
    for (int i = 0; i < MARKS && n > 0 && (size_t)n < sizeof line; i++)
        n += snprintf(line + n, sizeof line - (size_t)n, " %s %lld %lld", mark_names[i], mark_t[i][0],
                      mark_t[i][1]);
    if (n > 0 && (size_t)n < sizeof line - 1) {
        line[n++] = '\n';
        (void)!write(fd, line, (size_t)n);
    }
    close(fd);
}
