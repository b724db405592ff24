/* A plain forwarder of cuMemMap and cuMemUnmap, preloaded in place of the shim, that waits
 * DELAY_NS (busy, on CLOCK_MONOTONIC) before each call: what a gap of that many ns between a
 * thread's driver calls costs when 16 threads map and unmap at once (scripts/gpu/vmm-contention.sh,
 * issue 24). Nothing else: no state, no lock. */
#define _GNU_SOURCE
#include <dlfcn.h>
#include <stdlib.h>
#include <stddef.h>
#include <time.h>
typedef int (*map_t)(unsigned long long, size_t, size_t, unsigned long long, unsigned long long);
typedef int (*unmap_t)(unsigned long long, size_t);
static map_t real_map; static unmap_t real_unmap; static long delay_ns = -1;
static void wait_ns(void) {
    if (delay_ns < 0) { const char *e = getenv("DELAY_NS"); delay_ns = e ? atol(e) : 0; }
    if (!delay_ns) return;
    struct timespec a, b; clock_gettime(CLOCK_MONOTONIC, &a);
    do { clock_gettime(CLOCK_MONOTONIC, &b); } while ((b.tv_sec - a.tv_sec) * 1000000000L + (b.tv_nsec - a.tv_nsec) < delay_ns);
}
int cuMemMap(unsigned long long p, size_t s, size_t o, unsigned long long h, unsigned long long f) {
    if (!real_map) real_map = (map_t)dlsym(RTLD_NEXT, "cuMemMap");
    wait_ns(); return real_map(p, s, o, h, f);
}
int cuMemUnmap(unsigned long long p, size_t s) {
    if (!real_unmap) real_unmap = (unmap_t)dlsym(RTLD_NEXT, "cuMemUnmap");
    wait_ns(); return real_unmap(p, s);
}
