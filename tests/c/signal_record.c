/* A thread's first traced record made inside a signal handler: the shim must not allocate there
 * (a handler may interrupt malloc itself). The main thread makes one call first (the process's
 * first record opens the trace); then a new thread, which has made no covered call, gets SIGUSR1
 * and its handler makes one. Prints HANDLER_HEAP <bytes the heap grew by during the handler's call>
 * (mallinfo2: libc's heap, where the shim's own lock-free heap does not show; the interrupted
 * thread is not in malloc, so asking is safe here), then DONE.
 *
 * `signal_record first N`: the process's first covered call is the handler's (the main thread
 * raises SIGUSR1 before any call): HANDLER_HEAP as above, WRITER_AFTER_HANDLER <threads named
 * sharecheck-wr right after it>, then N calls outside any handler and WRITER_THREADS <the same,
 * waited for up to 2 s>, and DONE N + 1.
 *
 * `signal_record sigwait N`: the main thread keeps SIGUSR2 blocked, with no handler (as a program
 * that takes it with sigwait or a signalfd), makes N calls, then prints WRITER_THREADS (waited for
 * up to 2 s) and DONE N. */
#define _GNU_SOURCE
#include <cuda.h>
#include <malloc.h>
#include <pthread.h>
#include <signal.h>
#include <stdatomic.h>
#include <dirent.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>
#include "check.h"

static CUdevice d0, d1;
static atomic_int handled;
static long grew;

static void on_usr1(int sig) {
    (void)sig;
    struct mallinfo2 before = mallinfo2();
    int can = -1;
    CUresult r = cuDeviceCanAccessPeer(&can, d0, d1);
    struct mallinfo2 after = mallinfo2();
    grew = (long)after.uordblks - (long)before.uordblks;
    atomic_store(&handled, r == CUDA_SUCCESS ? 1 : 2);
}

static void *waiter(void *arg) {
    (void)arg;
    while (!atomic_load(&handled)) {
    }
    return NULL;
}

static int first_in_handler(long n) {
    struct sigaction sa = {0};
    sa.sa_handler = on_usr1;
    sigemptyset(&sa.sa_mask);
    sigaction(SIGUSR1, &sa, NULL);
    raise(SIGUSR1);
    if (atomic_load(&handled) != 1) return 4;
    printf("HANDLER_HEAP %ld\nWRITER_AFTER_HANDLER %d\n", grew, writer_threads(NULL, 0));
    for (long i = 0; i < n; i++) {
        int can = -1;
        MUST(cuDeviceCanAccessPeer(&can, d0, d1));
    }
    int found = 0;
    for (int tries = 0; tries < 200 && !(found = writer_threads(NULL, 0)); tries++) usleep(10000);
    printf("WRITER_THREADS %d\nDONE %ld\n", found, n + 1);
    return 0;
}

static int blocked_without_handler(long n) {
    sigset_t usr2;
    sigemptyset(&usr2);
    sigaddset(&usr2, SIGUSR2);
    pthread_sigmask(SIG_BLOCK, &usr2, NULL);
    for (long i = 0; i < n; i++) {
        int can = -1;
        MUST(cuDeviceCanAccessPeer(&can, d0, d1));
    }
    int found = 0;
    for (int tries = 0; tries < 200 && !(found = writer_threads(NULL, 0)); tries++) usleep(10000);
    printf("WRITER_THREADS %d\nDONE %ld\n", found, n);
    return 0;
}

int main(int argc, char **argv) {
    MUST(cuInit(0));
    MUST(cuDeviceGet(&d0, 0));
    MUST(cuDeviceGet(&d1, 1));
    if (argc == 3 && !strcmp(argv[1], "first")) return first_in_handler(atol(argv[2]));
    if (argc == 3 && !strcmp(argv[1], "sigwait")) return blocked_without_handler(atol(argv[2]));
    int can = -1;
    MUST(cuDeviceCanAccessPeer(&can, d0, d1));
    struct sigaction sa = {0};
    sa.sa_handler = on_usr1;
    sigemptyset(&sa.sa_mask);
    sigaction(SIGUSR1, &sa, NULL);
    pthread_t t;
    pthread_create(&t, NULL, waiter, NULL);
    pthread_kill(t, SIGUSR1);
    pthread_join(t, NULL);
    if (atomic_load(&handled) != 1) return 4;
    printf("HANDLER_HEAP %ld\nDONE 2\n", grew);
    return 0;
}
