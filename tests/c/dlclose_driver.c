/* The program loads the driver, looks a covered function up, calls it, then unloads the driver:
 * the shim keeps the driver's function addresses, so the library must stay loaded. */
#include <dlfcn.h>
#include <stdio.h>

int main(void) {
    void *h = dlopen("libcuda.so.1", RTLD_NOW | RTLD_LOCAL);
    if (!h) return 3;
    int (*init)(unsigned) = (int (*)(unsigned))dlsym(h, "cuInit");
    int (*can_access)(int *, int, int) = (int (*)(int *, int, int))dlsym(h, "cuDeviceCanAccessPeer");
    if (!init || !can_access) return 4;
    int can = -1;
    if (init(0) != 0 || can_access(&can, 0, 1) != 0) return 5;
    dlclose(h);
    printf("STILL_LOADED %d\n", dlopen("libcuda.so.1", RTLD_NOW | RTLD_NOLOAD) != NULL);
    can = -1;
    int rc = can_access(&can, 0, 1);
    printf("AGAIN %d %d\n", rc, can);
    return 0;
}
