/* Load for scripts/bench-report.sh: N calls of cuDeviceCanAccessPeer, correct (0, 1) or, with a
 * second argument, each with a finding (device 7 does not exist). Loads the driver by dlopen. */
#include <dlfcn.h>
#include <stdio.h>
#include <stdlib.h>

int main(int argc, char **argv) {
    if (argc < 2) return 2;
    void *lib = dlopen("libcuda.so.1", RTLD_NOW);
    if (!lib) {
        fprintf(stderr, "report_load: %s\n", dlerror());
        return 2;
    }
    int (*init)(unsigned) = (int (*)(unsigned))dlsym(lib, "cuInit");
    int (*can)(int *, int, int) = (int (*)(int *, int, int))dlsym(lib, "cuDeviceCanAccessPeer");
    if (!init || !can || init(0) != 0) return 3;
    long n = atol(argv[1]);
    int peer = argc > 2 ? 7 : 1, v;
    for (long i = 0; i < n; i++) can(&v, 0, peer);
    return 0;
}
