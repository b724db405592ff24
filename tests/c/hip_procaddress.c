/* hipGetProcAddress (ROCm 6.2+): the program dlopens HIP and resolves through it. */
#define _GNU_SOURCE
#include <dlfcn.h>
#include <string.h>
#include "object_of.h"

typedef int (*resolve_t)(const char *, void **, int, unsigned long long, int *);

int main(void) {
    void *h = dlopen("libamdhip64.so", RTLD_NOW | RTLD_LOCAL);
    if (!h) { fprintf(stderr, "dlopen: %s\n", dlerror()); return 3; }
    resolve_t resolve = (resolve_t)dlsym(h, "hipGetProcAddress");
    printf("OBJECT hipGetProcAddress %s\n", object_of((void *)resolve));
    void *can = NULL, *enable = NULL, *malloc_fn = NULL, *missing = (void *)1;
    int status = -1;
    printf("RESOLVE hipDeviceCanAccessPeer %d\n", resolve("hipDeviceCanAccessPeer", &can, 602, 0, &status));
    printf("RESOLVE hipDeviceEnablePeerAccess %d\n", resolve("hipDeviceEnablePeerAccess", &enable, 602, 0, &status));
    printf("RESOLVE hipMalloc %d\n", resolve("hipMalloc", &malloc_fn, 602, 0, &status));
    int missing_rc = resolve("hipNoSuchFunction", &missing, 602, 0, &status);
    printf("MISSING %d %d\n", missing_rc, status);
    printf("OBJECT hipDeviceCanAccessPeer %s\n", object_of(can));
    printf("OBJECT hipMalloc %s\n", object_of(malloc_fn));
    printf("SAME hipMalloc %d\n", malloc_fn == dlsym(h, "hipMalloc"));
    int answer = -1;
    CALL("hipDeviceCanAccessPeer", ((int (*)(int *, int, int))can)(&answer, 0, 1));
    CALL("hipDeviceEnablePeerAccess", ((int (*)(int, unsigned))enable)(1, 0));
    CALL("hipDeviceEnablePeerAccess", ((int (*)(int, unsigned))enable)(1, 0));
    return 0;
}
