/* The trace writer against the ways a host program lives and dies. Each mode makes N covered calls
 * (cuDeviceCanAccessPeer(0, 1), a correct call) and then:
 *   segv N | abort N | underscore-exit N | kill9 N   end the process that way
 *   closefrom N FILE   closes every fd >= 3, opens FILE (it gets the trace's old number), makes N
 *                      more calls (the trace grows past its first chunk), writes a line to FILE
 *   fsize LIMIT N      sets RLIMIT_FSIZE to LIMIT bytes, makes N calls, writes 100 bytes to its
 *                      own stdout file and exits 7 (the host must not get SIGXFSZ)
 *   storm THREADS N    THREADS threads make N calls each
 *   forks THREADS K M  THREADS threads loop on calls while the main thread forks K times; each
 *                      child makes M calls and exits; prints HANGS h (children that did not end
 *                      within 10 s: killed and counted)
 * Prints DONE <calls completed by this process> before ending (stdout is flushed first). */
#define _GNU_SOURCE
#include <cuda.h>
#include <errno.h>
#include <fcntl.h>
#include <pthread.h>
#include <signal.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/resource.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>
#include "check.h"

static CUdevice d0, d1;

static void calls(long n) {
    for (long i = 0; i < n; i++) {
        int can = -1;
        if (cuDeviceCanAccessPeer(&can, d0, d1) != CUDA_SUCCESS) exit(4);
    }
}

static atomic_int stop_storm;
static long storm_calls;

static void *storm(void *arg) {
    (void)arg;
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

static void done(long n) {
    printf("DONE %ld\n", n);
    fflush(stdout);
}

int main(int argc, char **argv) {
    if (argc < 3) return 2;
    const char *mode = argv[1];
    MUST(cuInit(0));
    MUST(cuDeviceGet(&d0, 0));
    MUST(cuDeviceGet(&d1, 1));
    long n = atol(argv[2]);
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
    if (!strcmp(mode, "storm") && argc == 4) {
        int threads = (int)n;
        storm_calls = atol(argv[3]);
        pthread_t t[256];
        if (threads > 256) return 2;
        for (int i = 0; i < threads; i++) pthread_create(&t[i], NULL, storm, NULL);
        for (int i = 0; i < threads; i++) pthread_join(t[i], NULL);
        done((long)threads * storm_calls);
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
