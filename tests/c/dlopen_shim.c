/* Loads the shim with dlopen (argv[1]), unloads it with dlclose, and prints MAPPED <1 if the
 * shim's file is still mapped, else 0>: the shim is linked -z nodelete, so that a writer thread it
 * started never runs unmapped code. */
#define _GNU_SOURCE
#include <dlfcn.h>
#include <stdio.h>
#include <string.h>

int main(int argc, char **argv) {
    if (argc != 2) return 2;
    void *h = dlopen(argv[1], RTLD_NOW | RTLD_LOCAL);
    if (!h) {
        fprintf(stderr, "dlopen: %s\n", dlerror());
        return 3;
    }
    if (dlclose(h) != 0) return 4;
    FILE *maps = fopen("/proc/self/maps", "r");
    if (!maps) return 5;
    char line[4096];
    int mapped = 0;
    while (fgets(line, sizeof line, maps))
        if (strstr(line, "libsharecheck.so")) mapped = 1;
    fclose(maps);
    printf("MAPPED %d\n", mapped);
    return 0;
}
