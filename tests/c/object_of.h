/* The file name of the loaded object that contains an address: where a function pointer came
 * from (the shim or the driver). Needs _GNU_SOURCE before any include. */
#ifndef SHARECHECK_TEST_OBJECT_OF_H
#define SHARECHECK_TEST_OBJECT_OF_H
#include <dlfcn.h>
#include <string.h>
#include "check.h"

static const char *object_of(void *p) {
    Dl_info info;
    if (!p || !dladdr(p, &info) || !info.dli_fname) return "?";
    const char *slash = strrchr(info.dli_fname, '/');
    return slash ? slash + 1 : info.dli_fname;
}

#endif
