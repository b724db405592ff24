/* A second copy of the shim in one process: the program (run with the shim preloaded) dlopens
 * another copy from another path and calls through both. Usage: second_copy SECOND_SHIM_PATH */
#define _GNU_SOURCE
#include <cuda.h>
#include <dlfcn.h>
#include "check.h"

int main(int argc, char **argv) {
    if (argc != 2) return 2;
    void *second = dlopen(argv[1], RTLD_NOW | RTLD_LOCAL);
    if (!second) {
        fprintf(stderr, "dlopen: %s\n", dlerror());
        return 3;
    }
    CUresult (*can_access)(int *, CUdevice, CUdevice) =
        (CUresult (*)(int *, CUdevice, CUdevice))dlsym(second, "cuDeviceCanAccessPeer");
    if (!can_access) return 4;
    MUST(cuInit(0));
    int can = -1;
    CALL("cuDeviceCanAccessPeer", cuDeviceCanAccessPeer(&can, 0, 1));
    printf("CAN %d\n", can);
    can = -1;
    /* Through the second copy: forwarded to the driver, untraced. */
    int rc = (int)can_access(&can, 0, 1);
    printf("SECOND %d %d\n", rc, can);
    CALL("cuDeviceCanAccessPeer", cuDeviceCanAccessPeer(&can, 1, 0));
    return 0;
}
