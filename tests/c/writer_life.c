/* The trace writer against the ways a host program lives and dies. Each mode makes N covered calls
 * (cuDeviceCanAccessPeer(0, 1), a correct call) and then:
 *   segv N | abort N | underscore-exit N | kill9 N   end the process that way
 *   closefrom N FILE   closes every fd >= 3, opens FILE (it gets the trace's old number), makes N
 *                      more calls (the trace grows past its first chunk), writes a line to FILE
 *   fsize LIMIT N      sets RLIMIT_FSIZE to LIMIT bytes, makes N calls, writes 100 bytes to its
 *                      own stdout file and exits 7 (the host must not get SIGXFSZ)
 *   storm THREADS N    THREADS threads make N calls each
 *   storm-kill9 THREADS N  the same, then the process kills itself (SIGKILL): the records sit in
 *                      every lane's file and ring
 *   many THREADS N     THREADS threads (small stacks) are alive at once: each makes N calls, waits
 *                      for all the others, then makes N more
 *   live THREADS N     THREADS threads make N calls each and then wait, still alive when the
 *                      main thread, after N calls of its own, returns from main
 *   idle N             a thread makes 3 calls and then waits, idle, while the main thread makes N
 *                      (many times the ring); the idle thread ends after them
 *   linger N           makes one call, then sleeps N seconds and ends: a traced process still
 *                      running, which writes nothing more and ends by itself (a test that fails
 *                      leaves no process behind for long, and no growing trace)
 *   wrthread N         makes N calls, then prints WRITER_THREADS <threads named sharecheck-wr> and
 *                      SIGBLK <the first one's blocked-signal mask, hex, from /proc>
 *   findings N K       N calls, every K-th of them to device 9 (a finding, CUDA_ERROR_INVALID_DEVICE),
 *                      then an allocation freed (a call report-phase checks read)
 *   deep N DEPTH       N calls, each from DEPTH frames down and to device 9 (a finding, with its
 *                      stack: a record longer than a chunk of the ring when DEPTH is large), then
 *                      N correct calls
 *   forks THREADS K M  THREADS threads loop on calls while the main thread forks K times; each
 *                      child makes M calls and exits; prints HANGS h (children that did not end
 *                      within 10 s: killed and counted)
 *   sigstorm THREADS N THREADS threads make N calls each while a profiling timer (every 200 us of
 *                      CPU) interrupts them; its handler makes one call (counted) each time; DONE
 *                      counts the handler's calls too
 *   exitstorm THREADS N [signals]  THREADS threads (with the timer and handler of sigstorm if
 *                      `signals`) loop on calls forever; the main thread makes N calls and then
 *                      calls exit(0) while they run (prints no DONE: the count is not known)
 *   sigcheck THREADS N as sigstorm, but every other call of the handler is a misuse (device 9);
 *                      prints HANDLER_CALLS, HANDLER_MISUSES and the value the driver wrote
 *                      for the valid ones (CAN)
 *   malloc-storm THREADS N  THREADS threads call malloc/free N times under the sigcheck handler
 *   handler-exit N     N calls, then calls without end while a profiling timer's handler calls
 *                      exit(0) at its first tick, wherever it interrupted the thread (prints no DONE)
 *   errno N            sets errno to 1234, makes its first covered call (the trace opens then) and
 *                      prints ERRNO <errno after it>, then N-1 more calls
 *   errno-lanes N      one call on the main thread (lane 0 opens), then N threads one after the
 *                      other, each setting errno to 1234 before its first call (the second
 *                      thread's opens lane 1 where the process may run on two CPUs) and printing
 *                      ERRNO_LANE <errno after it>
 *   membarrier N       traps `membarrier` (a seccomp filter: SIGSYS, whose handler notes the
 *                      calling thread and the command and answers EPERM, as a host that refuses
 *                      it does), makes N calls, waits up to 2 s for the shim's registration and
 *                      prints MEMBARRIER_REGISTER_BY main|other|none (x86-64 Linux; elsewhere, or
 *                      where the filter cannot be installed, SECCOMP_UNAVAILABLE)
 * WRITER_LIFE_HANDLER_OUTSIDE=1 (sigstorm, exitstorm, sigcheck, malloc-storm): no handler call
 * while its thread is in a call, nor on a thread of the driver's (sigcheck prints
 * HANDLER_SKIPPED), for R580
 * Prints DONE <calls completed by this process> before ending (stdout is flushed first). */
#define _GNU_SOURCE
#include <cuda.h>
#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <pthread.h>
#include <signal.h>
#include <stdatomic.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/prctl.h>
#include <sys/resource.h>
#include <sys/syscall.h>
#include <sys/time.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>
#include "check.h"

static CUdevice d0, d1;

/* Set while this thread is in a driver call of `calls` (for WRITER_LIFE_HANDLER_OUTSIDE). */
static _Thread_local volatile sig_atomic_t in_call;
/* Set on this program's own threads (main and the ones it makes), not on the driver's: the
 * process's SIGPROF runs the handlers on those too, maybe inside the driver. */
static _Thread_local volatile sig_atomic_t own_thread;

static void calls(long n) {
    for (long i = 0; i < n; i++) {
        int can = -1;
        in_call = 1;
        CUresult r = cuDeviceCanAccessPeer(&can, d0, d1);
        in_call = 0;
        if (r != CUDA_SUCCESS) {
            fprintf(stderr, "CALL_FAILED %d\n", (int)r);
            exit(4);
        }
    }
}

static atomic_int stop_storm;
static long storm_calls;

static void *storm(void *arg) {
    (void)arg;
    own_thread = 1;
    CUcontext ctx;
    MUST(cuDevicePrimaryCtxRetain(&ctx, d0));
    MUST(cuCtxSetCurrent(ctx));
    if (storm_calls > 0) {
        calls(storm_calls);
    } else {
        while (!atomic_load(&stop_storm)) calls(10);
    }
    return NULL;
}

static atomic_long handler_calls;

/* storm_calls rounds of malloc and free of varied sizes (for malloc-storm). */
static void *malloc_storm(void *arg) {
    (void)arg;
    own_thread = 1;
    void *keep[16] = {0};
    unsigned x = (unsigned)(uintptr_t)&keep;
    for (long i = 0; i < storm_calls; i++) {
        x = x * 1103515245u + 12345u;
        int k = (int)(x >> 16) % 16;
        free(keep[k]);
        keep[k] = malloc(16 + (x >> 8) % 4096);
        if (keep[k]) ((volatile char *)keep[k])[0] = 1;
    }
    for (int k = 0; k < 16; k++) free(keep[k]);
    return NULL;
}

/* WRITER_LIFE_HANDLER_OUTSIDE=1 (any mode): the handlers make no call while their thread is in
 * one, nor on a thread of the driver's. R580 is not async-signal-safe: a handler's call into the
 * driver that interrupted a driver call of its own thread deadlocks on the driver's lock, with or
 * without a shim (measured). */
static int handler_outside;
static atomic_long handler_skipped;

static void call_in_handler(int sig) {
    (void)sig;
    if (handler_outside && (in_call || !own_thread)) {
        atomic_fetch_add(&handler_skipped, 1);
        return;
    }
    int saved = errno, can = -1;
    CUresult r = cuDeviceCanAccessPeer(&can, d0, d1);
    if (r != CUDA_SUCCESS) {
        char says[64];
        int n = snprintf(says, sizeof says, "HANDLER_FAILED %d\n", (int)r);
        if (write(2, says, (size_t)n) < 0) _exit(6);
        _exit(5);
    }
    atomic_fetch_add(&handler_calls, 1);
    errno = saved;
}

/* Every 200 us of the process's CPU time, SIGPROF runs `call_in_handler` on whichever thread. */
static atomic_long handler_misuses;
static atomic_int handler_can = -1;

static void check_in_handler(int sig) {
    (void)sig;
    if (handler_outside && (in_call || !own_thread)) {
        atomic_fetch_add(&handler_skipped, 1);
        return;
    }
    int saved = errno, can = -1;
    long k = atomic_fetch_add(&handler_calls, 1);
    if (k % 2) {
        if (cuDeviceCanAccessPeer(&can, d0, 9) != CUDA_ERROR_INVALID_DEVICE) _exit(7);
        atomic_fetch_add(&handler_misuses, 1);
    } else {
        if (cuDeviceCanAccessPeer(&can, d0, d1) != CUDA_SUCCESS) _exit(6);
        atomic_store(&handler_can, can);
    }
    errno = saved;
}

static void exit_in_handler(int sig) {
    (void)sig;
    exit(0);
}

static void start_signal_timer(void) {
    struct sigaction sa;
    memset(&sa, 0, sizeof sa);
    sa.sa_handler = call_in_handler;
    sa.sa_flags = SA_RESTART;
    sigaction(SIGPROF, &sa, NULL);
    /* WRITER_LIFE_TIMER_US: another period (the default, 200 us, of CPU time). */
    const char *us = getenv("WRITER_LIFE_TIMER_US");
    long period = us ? atol(us) : 200;
    struct itimerval every = {{0, period}, {0, period}};
    setitimer(ITIMER_PROF, &every, NULL);
}

static void stop_signal_timer(void) {
    struct itimerval off = {{0, 0}, {0, 0}};
    setitimer(ITIMER_PROF, &off, NULL);
    sigset_t prof;
    sigemptyset(&prof);
    sigaddset(&prof, SIGPROF);
    sigprocmask(SIG_BLOCK, &prof, NULL);
}

static pthread_mutex_t idle_lock = PTHREAD_MUTEX_INITIALIZER;
static pthread_cond_t idle_cond = PTHREAD_COND_INITIALIZER;
static int idle_release;

/* errno-lanes: a thread's first covered call with errno set before it; the errno after it, or -1
 * when the call failed. */
static void *errno_thread(void *arg) {
    int can = -1;
    errno = 1234;
    CUresult r = cuDeviceCanAccessPeer(&can, d0, d1);
    *(int *)arg = r == CUDA_SUCCESS ? errno : -1;
    return NULL;
}

static void *idle_thread(void *arg) {
    (void)arg;
    calls(3);
    pthread_mutex_lock(&idle_lock);
    while (!idle_release) pthread_cond_wait(&idle_cond, &idle_lock);
    pthread_mutex_unlock(&idle_lock);
    return NULL;
}

static pthread_barrier_t many_barrier;
static long many_calls;

static void *many_thread(void *arg) {
    (void)arg;
    calls(many_calls);
    pthread_barrier_wait(&many_barrier);
    calls(many_calls);
    return NULL;
}

static pthread_barrier_t live_barrier;
static long live_calls;

static void *live_thread(void *arg) {
    (void)arg;
    calls(live_calls);
    pthread_barrier_wait(&live_barrier);
    for (;;) pause();
    return NULL;
}

static void done(long n) {
    printf("DONE %ld\n", n);
    fflush(stdout);
}

/* A call to device 9 from `depth` frames further down (each its own frame: not inlined, not a
 * tail call). */
__attribute__((noinline)) static int deep_misuse(long depth) {
    if (depth > 0) {
        int r = deep_misuse(depth - 1);
        __asm__ volatile("" ::: "memory");
        return r;
    }
    int can = -1;
    return cuDeviceCanAccessPeer(&can, d0, 9) == CUDA_ERROR_INVALID_DEVICE ? 0 : 4;
}

/* THREADS threads running `worker` under the sigcheck handler; prints what the handler did and
 * DONE (each thread's `per_thread` calls, the handler's, and one made before when there were
 * none per thread). */
static int check_storm(int threads, void *(*worker)(void *), long per_thread) {
    pthread_t t[64];
    if (threads > 64) return 2;
    start_signal_timer();
    struct sigaction sa;
    memset(&sa, 0, sizeof sa);
    sa.sa_handler = check_in_handler;
    sa.sa_flags = SA_RESTART;
    sigaction(SIGPROF, &sa, NULL);
    for (int i = 0; i < threads; i++) pthread_create(&t[i], NULL, worker, NULL);
    for (int i = 0; i < threads; i++) pthread_join(t[i], NULL);
    stop_signal_timer();
    printf("HANDLER_CALLS %ld\n", atomic_load(&handler_calls));
    printf("HANDLER_MISUSES %ld\n", atomic_load(&handler_misuses));
    printf("CAN %d\n", atomic_load(&handler_can));
    printf("HANDLER_SKIPPED %ld\n", atomic_load(&handler_skipped));
    done(per_thread ? (long)threads * per_thread + atomic_load(&handler_calls)
                    : 1 + atomic_load(&handler_calls));
    return 0;
}

#if defined(__x86_64__) && defined(__linux__)
#include <linux/filter.h>
#include <linux/seccomp.h>
#include <stddef.h>
#include <ucontext.h>

static pid_t main_tid;
/* The thread of the first `membarrier` register command: 0 none, else its id. */
static _Atomic pid_t register_tid;

static void on_sigsys(int sig, siginfo_t *info, void *context) {
    (void)sig;
    ucontext_t *uc = context;
    /* MEMBARRIER_CMD_REGISTER_PRIVATE_EXPEDITED: 1 << 4. */
    if (info->si_syscall == SYS_membarrier && uc->uc_mcontext.gregs[REG_RDI] == (1 << 4)) {
        pid_t none = 0;
        atomic_compare_exchange_strong(&register_tid, &none, (pid_t)syscall(SYS_gettid));
    }
    uc->uc_mcontext.gregs[REG_RAX] = -EPERM;
}

/* Every `membarrier` of every thread made after it traps (SIGSYS); 0 when installed. */
static int trap_membarrier(void) {
    struct sigaction sa;
    memset(&sa, 0, sizeof sa);
    sa.sa_sigaction = on_sigsys;
    sa.sa_flags = SA_SIGINFO;
    if (sigaction(SIGSYS, &sa, NULL)) return -1;
    struct sock_filter filter[] = {
        BPF_STMT(BPF_LD | BPF_W | BPF_ABS, offsetof(struct seccomp_data, nr)),
        BPF_JUMP(BPF_JMP | BPF_JEQ | BPF_K, SYS_membarrier, 0, 1),
        BPF_STMT(BPF_RET | BPF_K, SECCOMP_RET_TRAP),
        BPF_STMT(BPF_RET | BPF_K, SECCOMP_RET_ALLOW),
    };
    struct sock_fprog prog = {.len = sizeof filter / sizeof filter[0], .filter = filter};
    if (prctl(PR_SET_NO_NEW_PRIVS, 1, 0, 0, 0)) return -1;
    if (prctl(PR_SET_SECCOMP, SECCOMP_MODE_FILTER, &prog)) return -1;
    main_tid = (pid_t)syscall(SYS_gettid);
    return 0;
}

static int membarrier_mode(long n) {
    if (trap_membarrier()) {
        printf("SECCOMP_UNAVAILABLE\n");
        return 0;
    }
    calls(n);
    for (int tries = 0; tries < 200 && !atomic_load(&register_tid); tries++) usleep(10000);
    pid_t by = atomic_load(&register_tid);
    printf("MEMBARRIER_REGISTER_BY %s\n", !by ? "none" : by == main_tid ? "main" : "other");
    done(n);
    return 0;
}
#else
static int membarrier_mode(long n) {
    (void)n;
    printf("SECCOMP_UNAVAILABLE\n");
    return 0;
}
#endif

int main(int argc, char **argv) {
    if (argc < 3) return 2;
    const char *mode = argv[1];
    MUST(cuInit(0));
    MUST(cuDeviceGet(&d0, 0));
    int devices = 0;
    MUST(cuDeviceGetCount(&devices));
    MUST(cuDeviceGet(&d1, devices > 1 ? 1 : 0)); /* one GPU: its own peer (answered 0) */
    own_thread = 1;
    long n = atol(argv[2]);
    const char *outside = getenv("WRITER_LIFE_HANDLER_OUTSIDE");
    handler_outside = outside && !strcmp(outside, "1");
    if (!strcmp(mode, "segv") || !strcmp(mode, "abort") || !strcmp(mode, "underscore-exit") ||
        !strcmp(mode, "kill9")) {
        calls(n);
        done(n);
        if (!strcmp(mode, "segv")) {
            volatile int *nowhere = NULL;
            return *nowhere;
        }
        if (!strcmp(mode, "abort")) abort();
        if (!strcmp(mode, "underscore-exit")) _exit(0);
        raise(SIGKILL);
        return 5;
    }
    if (!strcmp(mode, "errno-lanes") && n > 0) {
        int can = -1;
        if (cuDeviceCanAccessPeer(&can, d0, d1) != CUDA_SUCCESS) return 4;
        for (int i = 0; i < n; i++) {
            pthread_t t;
            int after = 0;
            if (pthread_create(&t, NULL, errno_thread, &after) != 0) return 9;
            pthread_join(t, NULL);
            if (after < 0) return 4;
            printf("ERRNO_LANE %d\n", after);
        }
        done(n + 1);
        return 0;
    }
    if (!strcmp(mode, "errno") && n > 0) {
        int can = -1;
        errno = 1234;
        CUresult r = cuDeviceCanAccessPeer(&can, d0, d1);
        int after = errno;
        if (r != CUDA_SUCCESS) return 4;
        printf("ERRNO %d\n", after);
        calls(n - 1);
        done(n);
        return 0;
    }
    if (!strcmp(mode, "membarrier")) return membarrier_mode(n);
    if (!strcmp(mode, "closefrom") && argc == 4) {
        calls(n);
        for (int fd = 3; fd < 1024; fd++) close(fd);
        int data = open(argv[3], O_WRONLY | O_CREAT | O_TRUNC, 0600);
        if (data < 0) return 6;
        printf("DATAFD %d\n", data);
        calls(n);
        const char line[] = "the program's own data\n";
        if (write(data, line, sizeof line - 1) != (ssize_t)(sizeof line - 1)) return 7;
        close(data);
        done(2 * n);
        return 0;
    }
    if (!strcmp(mode, "fsize") && argc == 4) {
        struct rlimit limit = {(rlim_t)n, (rlim_t)n};
        if (setrlimit(RLIMIT_FSIZE, &limit) != 0) return 6;
        long count = atol(argv[3]);
        calls(count);
        char out[100];
        memset(out, 'x', sizeof out);
        out[sizeof out - 1] = '\n';
        if (write(1, out, sizeof out) != (ssize_t)sizeof out) return 8;
        done(count);
        return 7;
    }
    if ((!strcmp(mode, "storm") || !strcmp(mode, "storm-kill9")) && argc == 4) {
        int threads = (int)n;
        storm_calls = atol(argv[3]);
        pthread_t t[256];
        if (threads > 256) return 2;
        for (int i = 0; i < threads; i++) pthread_create(&t[i], NULL, storm, NULL);
        for (int i = 0; i < threads; i++) pthread_join(t[i], NULL);
        done((long)threads * storm_calls);
        if (!strcmp(mode, "storm-kill9")) raise(SIGKILL);
        return 0;
    }
    if (!strcmp(mode, "sigstorm") && argc == 4) {
        int threads = (int)n;
        storm_calls = atol(argv[3]);
        pthread_t t[256];
        if (threads > 256) return 2;
        start_signal_timer();
        for (int i = 0; i < threads; i++) pthread_create(&t[i], NULL, storm, NULL);
        for (int i = 0; i < threads; i++) pthread_join(t[i], NULL);
        stop_signal_timer();
        long in_handlers = atomic_load(&handler_calls);
        printf("HANDLER_CALLS %ld\n", in_handlers);
        done((long)threads * storm_calls + in_handlers);
        return 0;
    }
    if (!strcmp(mode, "sigcheck") && argc == 4) {
        storm_calls = atol(argv[3]);
        return check_storm((int)n, storm, storm_calls);
    }
    if (!strcmp(mode, "malloc-storm") && argc == 4) {
        /* THREADS threads call malloc and free N times each (no driver call) while the sigcheck
         * handler makes calls, every other one a misuse: a handler that interrupts malloc, whose
         * call's finding the shim reports in the handler. One covered call outside a handler
         * first (LD_PRELOAD.md: the process's first traced record opens the trace and starts the
         * writer thread, which is not async-signal-safe). */
        storm_calls = atol(argv[3]);
        calls(1);
        return check_storm((int)n, malloc_storm, 0);
    }
    if (!strcmp(mode, "exitstorm") && (argc == 4 || argc == 5)) {
        int threads = (int)n;
        storm_calls = 0;
        pthread_t t[256];
        if (threads > 256) return 2;
        if (argc == 5 && !strcmp(argv[4], "signals")) start_signal_timer();
        for (int i = 0; i < threads; i++) pthread_create(&t[i], NULL, storm, NULL);
        calls(atol(argv[3]));
        exit(0);
    }
    if (!strcmp(mode, "handler-exit") && argc == 3) {
        calls(n);
        struct sigaction sa;
        memset(&sa, 0, sizeof sa);
        sa.sa_handler = exit_in_handler;
        sigaction(SIGPROF, &sa, NULL);
        struct itimerval every = {{0, 1000}, {0, 1000}};
        setitimer(ITIMER_PROF, &every, NULL);
        for (;;) calls(1);
    }
    if (!strcmp(mode, "many") && argc == 4) {
        int threads = (int)n;
        many_calls = atol(argv[3]);
        pthread_t *t = calloc((size_t)threads, sizeof *t);
        pthread_attr_t attr;
        pthread_attr_init(&attr);
        pthread_attr_setstacksize(&attr, 128 << 10);
        pthread_barrier_init(&many_barrier, NULL, (unsigned)threads);
        for (int i = 0; i < threads; i++)
            if (pthread_create(&t[i], &attr, many_thread, NULL) != 0) return 9;
        for (int i = 0; i < threads; i++) pthread_join(t[i], NULL);
        done((long)threads * 2 * many_calls);
        return 0;
    }
    if (!strcmp(mode, "live") && argc == 4) {
        int threads = (int)n;
        live_calls = atol(argv[3]);
        pthread_barrier_init(&live_barrier, NULL, (unsigned)threads + 1);
        for (int i = 0; i < threads; i++) {
            pthread_t t;
            if (pthread_create(&t, NULL, live_thread, NULL) != 0) return 9;
        }
        pthread_barrier_wait(&live_barrier);
        calls(live_calls);
        done((long)(threads + 1) * live_calls);
        return 0;
    }
    if (!strcmp(mode, "findings") && argc == 4) {
        long every = atol(argv[3]);
        for (long i = 1; i <= n; i++) {
            int can = -1;
            CUresult want = i % every ? CUDA_SUCCESS : CUDA_ERROR_INVALID_DEVICE;
            if (cuDeviceCanAccessPeer(&can, d0, i % every ? d1 : 9) != want) exit(4);
        }
        CUcontext ctx;
        CUdeviceptr p;
        MUST(cuDevicePrimaryCtxRetain(&ctx, d0));
        MUST(cuCtxSetCurrent(ctx));
        MUST(cuMemAlloc(&p, 256));
        MUST(cuMemFree(p));
        done(n);
        return 0;
    }
    if (!strcmp(mode, "deep") && argc == 4) {
        for (long i = 0; i < n; i++)
            if (deep_misuse(atol(argv[3]))) exit(4);
        calls(n);
        done(2 * n);
        return 0;
    }
    if (!strcmp(mode, "idle")) {
        pthread_t t;
        pthread_create(&t, NULL, idle_thread, NULL);
        usleep(100000); /* its 3 calls are made, and it waits */
        calls(n);
        pthread_mutex_lock(&idle_lock);
        idle_release = 1;
        pthread_cond_signal(&idle_cond);
        pthread_mutex_unlock(&idle_lock);
        pthread_join(t, NULL);
        done(n + 3);
        return 0;
    }
    if (!strcmp(mode, "linger")) {
        calls(1);
        sleep((unsigned)n);
        done(1);
        return 0;
    }
    if (!strcmp(mode, "wrthread")) {
        calls(n);
        int found = 0;
        char sigblk[64] = "";
        /* The thread names itself when it starts: look for up to 2 s. */
        for (int tries = 0; tries < 200 && !(found = writer_threads(sigblk, sizeof sigblk)); tries++)
            usleep(10000);
        printf("WRITER_THREADS %d\nSIGBLK %s\n", found, sigblk);
        done(n);
        return 0;
    }
    if (!strcmp(mode, "forks") && argc == 5) {
        int threads = (int)n;
        long forks = atol(argv[3]), child_calls = atol(argv[4]);
        pthread_t t[64];
        if (threads > 64) return 2;
        storm_calls = 0;
        for (int i = 0; i < threads; i++) pthread_create(&t[i], NULL, storm, NULL);
        int hangs = 0, failed = 0;
        for (long k = 0; k < forks; k++) {
            fflush(stdout);
            pid_t child = fork();
            if (child == 0) {
                calls(child_calls);
                exit(0);
            }
            if (child < 0) return 9;
            int status = 0;
            struct timespec start, now;
            clock_gettime(CLOCK_MONOTONIC, &start);
            for (;;) {
                pid_t r = waitpid(child, &status, WNOHANG);
                if (r == child) {
                    if (!WIFEXITED(status) || WEXITSTATUS(status) != 0) failed++;
                    break;
                }
                clock_gettime(CLOCK_MONOTONIC, &now);
                if (now.tv_sec - start.tv_sec >= 10) {
                    kill(child, SIGKILL);
                    waitpid(child, &status, 0);
                    hangs++;
                    break;
                }
                usleep(200);
            }
        }
        atomic_store(&stop_storm, 1);
        for (int i = 0; i < threads; i++) pthread_join(t[i], NULL);
        printf("HANGS %d\nFAILED %d\n", hangs, failed);
        done(0);
        return 0;
    }
    return 2;
}
