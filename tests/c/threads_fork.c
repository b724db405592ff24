/* Many threads calling at once, then fork: every record whole, none lost, the child in its own
 * trace file. Usage: threads_fork THREADS CALLS_PER_THREAD CHILD_CALLS */
#include <cuda.h>
#include <pthread.h>
#include <sys/wait.h>
#include <unistd.h>
#include "check.h"

static int calls_per_thread;

static void *worker(void *arg) {
    (void)arg;
    for (int i = 0; i < calls_per_thread; i++) {
        int can = -1;
        cuDeviceCanAccessPeer(&can, 0, 1);
    }
    return NULL;
}

int main(int argc, char **argv) {
    if (argc != 4) return 2;
    int threads = atoi(argv[1]);
    calls_per_thread = atoi(argv[2]);
    int child_calls = atoi(argv[3]);
    MUST(cuInit(0));
    pthread_t ids[64];
    for (int t = 0; t < threads; t++) pthread_create(&ids[t], NULL, worker, NULL);
    for (int t = 0; t < threads; t++) pthread_join(ids[t], NULL);
    pid_t child = fork();
    if (child == 0) {
        for (int i = 0; i < child_calls; i++) {
            int can = -1;
            cuDeviceCanAccessPeer(&can, 1, 0);
        }
        exit(0);
    }
    int status = 0;
    waitpid(child, &status, 0);
    printf("CHILD %d\n", (int)child);
    /* One more call after fork, from the parent. */
    int can = -1;
    cuDeviceCanAccessPeer(&can, 0, 0);
    return WIFEXITED(status) ? WEXITSTATUS(status) : 1;
}
