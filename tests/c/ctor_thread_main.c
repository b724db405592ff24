/* dlopens ctor_thread_lib (argv[1]) and prints what its constructor's thread got. */
#include <dlfcn.h>
#include <stdio.h>

int main(int argc, char **argv) {
    if (argc != 2) return 2;
    void *lib = dlopen(argv[1], RTLD_NOW);
    if (!lib) {
        fprintf(stderr, "dlopen: %s\n", dlerror());
        return 3;
    }
    int *result = dlsym(lib, "ctor_thread_result");
    int *can = dlsym(lib, "ctor_thread_can");
    if (!result || !can) return 4;
    printf("RESULT %d %d\n", *result, *can);
    return 0;
}
