/* How a program finds the CUDA 13.3 logical endpoint functions, printed path by path, so that a
 * run without the shim and one under it can be compared line for line (tests/driver_missing.rs
 * on a stub "13.0 driver"; scripts/gpu-endpoint.sh on R580). Needs no 13.3 header: only names.
 *   DRIVER v                        cuDriverGetVersion
 *   DLSYM name default|handle found|absent
 *   GPA name version rc status pfn   cuGetProcAddress_v2 (pfn: null|set)
 *   PROBE available|fallback         what a program that probes and falls back would do */
#define _GNU_SOURCE
#include <dlfcn.h>
#include <stdio.h>

static const char *NAMES[] = {
    "cuLogicalEndpointIdReserve", "cuLogicalEndpointIdRelease", "cuLogicalEndpointCreate",
    "cuLogicalEndpointAddDevice", "cuLogicalEndpointDestroy",   "cuLogicalEndpointBindAddr",
    "cuLogicalEndpointBindMem",   "cuLogicalEndpointUnbind",    "cuLogicalEndpointExport",
    "cuLogicalEndpointImport",    "cuLogicalEndpointQuery",     "cuLogicalEndpointGetLimits",
};

typedef int (*gpa_t)(const char *, void **, int, unsigned long long, int *);

int main(void) {
    void *h = dlopen("libcuda.so.1", RTLD_NOW | RTLD_LOCAL);
    if (!h) {
        fprintf(stderr, "dlopen: %s\n", dlerror());
        return 3;
    }
    int (*init)(unsigned) = (int (*)(unsigned))dlsym(h, "cuInit");
    int (*version)(int *) = (int (*)(int *))dlsym(h, "cuDriverGetVersion");
    gpa_t gpa = (gpa_t)dlsym(h, "cuGetProcAddress_v2");
    if (!init || !gpa) return 3;
    init(0);
    int v = -1;
    if (version) version(&v);
    printf("DRIVER %d\n", v);
    int available = 1;
    for (unsigned i = 0; i < sizeof NAMES / sizeof *NAMES; i++) {
        const char *n = NAMES[i];
        printf("DLSYM %s default %s\n", n, dlsym(RTLD_DEFAULT, n) ? "found" : "absent");
        void *by_handle = dlsym(h, n);
        printf("DLSYM %s handle %s\n", n, by_handle ? "found" : "absent");
        const int versions[] = {13000, 13030};
        for (int k = 0; k < 2; k++) {
            void *pfn = (void *)1;
            int status = -7;
            int rc = gpa(n, &pfn, versions[k], 0, &status);
            printf("GPA %s %d %d %d %s\n", n, versions[k], rc, status, pfn ? "set" : "null");
            if (versions[k] == 13030 && (rc != 0 || !pfn)) available = 0;
        }
    }
    printf("PROBE %s\n", available ? "available" : "fallback");
    return 0;
}
