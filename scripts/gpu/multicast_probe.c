/* What R580 answers to cuMulticastGetGranularity (issue 25), before the simulator models the
 * multicast calls. NO MULTICAST OBJECT IS CREATED: cuMulticastCreate, cuMulticastAddDevice and
 * the binds are never called (the GPU machine's rule); only the device attribute and the
 * granularity query, which create nothing. Each line: "case<TAB>answer<TAB>name[<TAB>value]".
 * Build: gcc -O1 -o multicast_probe scripts/gpu/multicast_probe.c -I$CUDA_INC -l:libcuda.so.1 */
#include <cuda.h>
#include <stdio.h>
#include <string.h>

/* The answer is taken before say() reads the out-parameter (the order in which a call's
 * arguments are evaluated is unspecified in C). */

static void say(const char *what, CUresult r, long long value) {
    const char *name = "?";
    cuGetErrorName(r, &name);
    printf("%s\t%d\t%s\t%lld\n", what, (int)r, name, value);
    fflush(stdout);
}

static CUmulticastObjectProp prop(unsigned devices, size_t size, unsigned long long types, unsigned long long flags) {
    CUmulticastObjectProp p;
    memset(&p, 0, sizeof p);
    p.numDevices = devices;
    p.size = size;
    p.handleTypes = types;
    p.flags = flags;
    return p;
}

int main(void) {
    CUdevice dev;
    CUcontext ctx;
    if (cuInit(0) || cuDeviceGet(&dev, 0) || cuDevicePrimaryCtxRetain(&ctx, dev) || cuCtxSetCurrent(ctx)) {
        fprintf(stderr, "no device\n");
        return 2;
    }
    int count = 0;
    cuDeviceGetCount(&count);
    for (int d = 0; d < count; d++) {
        int v = -1;
        char what[64];
        snprintf(what, sizeof what, "attribute.multicast-supported.%d", d);
        CUresult r = cuDeviceGetAttribute(&v, CU_DEVICE_ATTRIBUTE_MULTICAST_SUPPORTED, d);
        say(what, r, v);
    }
    CUresult r;
    const unsigned long long fd = CU_MEM_HANDLE_TYPE_POSIX_FILE_DESCRIPTOR;
    size_t g = 0;
    CUmulticastObjectProp p = prop(2, 2 << 20, fd, 0);
    g = 0; r = cuMulticastGetGranularity(&g, &p, CU_MULTICAST_GRANULARITY_MINIMUM); say("granularity.minimum", r, (long long)g);
    g = 0; r = cuMulticastGetGranularity(&g, &p, CU_MULTICAST_GRANULARITY_RECOMMENDED); say("granularity.recommended", r, (long long)g);
    p = prop(1, 2 << 20, 0, 0);
    g = 0; r = cuMulticastGetGranularity(&g, &p, CU_MULTICAST_GRANULARITY_MINIMUM); say("granularity.one-device-no-types", r, (long long)g);
    p = prop(8, 1 << 30, fd, 0);
    g = 0; r = cuMulticastGetGranularity(&g, &p, CU_MULTICAST_GRANULARITY_RECOMMENDED); say("granularity.eight-devices-1GiB.recommended", r, (long long)g);
    p = prop(2, 4096, fd, 0);
    g = 0; r = cuMulticastGetGranularity(&g, &p, CU_MULTICAST_GRANULARITY_MINIMUM); say("granularity.size-4096", r, (long long)g);
    p = prop(0, 2 << 20, fd, 0);
    g = 0; r = cuMulticastGetGranularity(&g, &p, CU_MULTICAST_GRANULARITY_MINIMUM); say("granularity.zero-devices", r, (long long)g);
    p = prop(2, 0, fd, 0);
    g = 0; r = cuMulticastGetGranularity(&g, &p, CU_MULTICAST_GRANULARITY_MINIMUM); say("granularity.size-0", r, (long long)g);
    p = prop(2, 2 << 20, fd, 1);
    g = 0; r = cuMulticastGetGranularity(&g, &p, CU_MULTICAST_GRANULARITY_MINIMUM); say("granularity.flags-1", r, (long long)g);
    p = prop(2, 2 << 20, CU_MEM_HANDLE_TYPE_FABRIC, 0);
    g = 0; r = cuMulticastGetGranularity(&g, &p, CU_MULTICAST_GRANULARITY_MINIMUM); say("granularity.fabric", r, (long long)g);
    p = prop(2, 2 << 20, 0x100, 0);
    g = 0; r = cuMulticastGetGranularity(&g, &p, CU_MULTICAST_GRANULARITY_MINIMUM); say("granularity.unknown-type", r, (long long)g);
    p = prop(2, 2 << 20, fd, 0);
    g = 0; r = cuMulticastGetGranularity(&g, &p, (CUmulticastGranularity_flags)2); say("granularity.option-2", r, (long long)g);
    say("granularity.null-out", cuMulticastGetGranularity(NULL, &p, CU_MULTICAST_GRANULARITY_MINIMUM), 0);
    g = 0; r = cuMulticastGetGranularity(&g, NULL, CU_MULTICAST_GRANULARITY_MINIMUM); say("granularity.null-prop", r, (long long)g);
    return 0;
}
