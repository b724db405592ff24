/* An interposer of its own, layered before another library: it asks dlsym(RTLD_NEXT) for the next
 * definition, which must be relative to this library, not to the preloaded shim. */
#define _GNU_SOURCE
#include <dlfcn.h>
int layered_fn(int x) {
    int (*next)(int) = (int (*)(int))dlsym(RTLD_NEXT, "layered_fn");
    return next ? 100 + next(x) : -1;
}
