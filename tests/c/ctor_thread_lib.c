/* A library whose constructor (run by dlopen, under the loader lock) starts a thread that makes a
 * covered call, and joins it: the shim must not need the loader lock on that thread's first call. */
#include <cuda.h>
#include <pthread.h>
#include <stdio.h>

int ctor_thread_result = -1;
int ctor_thread_can = -1;

static void *worker(void *arg) {
    (void)arg;
    cuInit(0);
    ctor_thread_result = (int)cuDeviceCanAccessPeer(&ctor_thread_can, 0, 1);
    return NULL;
}

__attribute__((constructor)) static void start_and_join(void) {
    pthread_t t;
    if (pthread_create(&t, NULL, worker, NULL) == 0) pthread_join(t, NULL);
}
