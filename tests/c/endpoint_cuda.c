/* Logical endpoint scenarios for the rule tests: `endpoint_cuda SCENARIO`. Every covered call is
 * printed as `CALL symbol result` (check.h); set-up calls that must succeed are not.
 *   release-unreserved  release of ids never reserved
 *   release-live        release of a range whose endpoint was not destroyed (then done right)
 *   create-unreserved   create on the id after a reserved range
 *   import-unreserved   import into an id never reserved
 *   correct             reserve two ranges, create and query an endpoint, destroy it, release
 *                       the ranges (one whole, one in two parts) */
#include <cuda.h>
#include <string.h>
#include "check.h"

static CUlogicalEndpointProp unicast(cuuint64_t size) {
    CUlogicalEndpointProp p;
    memset(&p, 0, sizeof p);
    p.type = CU_LOGICAL_ENDPOINT_TYPE_UNICAST;
    p.unicast.device = 0;
    p.size = size;
    return p;
}

int main(int argc, char **argv) {
    if (argc != 2) return 2;
    const char *s = argv[1];
    CUdevice dev;
    CUcontext ctx;
    CUlogicalEndpointId base = 0;
    cuuint64_t align = 0, max = 0;
    MUST(cuInit(0));
    MUST(cuDeviceGet(&dev, 0));
    MUST(cuDevicePrimaryCtxRetain(&ctx, dev));
    MUST(cuCtxSetCurrent(ctx));
    CUlogicalEndpointProp p = unicast(0);
    CALL("cuLogicalEndpointGetLimits", cuLogicalEndpointGetLimits(&align, &max, &p));
    p = unicast(align);
    CALL("cuLogicalEndpointIdReserve", cuLogicalEndpointIdReserve(&base, 4));
    if (!strcmp(s, "release-unreserved")) {
        CALL("cuLogicalEndpointIdRelease", cuLogicalEndpointIdRelease(base + 100, 2));
    } else if (!strcmp(s, "release-live")) {
        CALL("cuLogicalEndpointCreate", cuLogicalEndpointCreate(base + 1, &p));
        CALL("cuLogicalEndpointIdRelease", cuLogicalEndpointIdRelease(base, 4));
        CALL("cuLogicalEndpointDestroy", cuLogicalEndpointDestroy(base + 1));
    } else if (!strcmp(s, "create-unreserved")) {
        CALL("cuLogicalEndpointCreate", cuLogicalEndpointCreate(base + 4, &p));
    } else if (!strcmp(s, "import-unreserved")) {
        unsigned char handle[64];
        memset(handle, 0, sizeof handle);
        CALL("cuLogicalEndpointImport",
             cuLogicalEndpointImport(base + 50, handle, CU_LOGICAL_ENDPOINT_IPC_HANDLE_TYPE_FABRIC));
    } else if (!strcmp(s, "correct")) {
        CUlogicalEndpointId second = 0;
        int status = -1;
        CALL("cuLogicalEndpointIdReserve", cuLogicalEndpointIdReserve(&second, 4));
        CALL("cuLogicalEndpointCreate", cuLogicalEndpointCreate(second + 2, &p));
        CALL("cuLogicalEndpointQuery", cuLogicalEndpointQuery(second + 2, 1, &status));
        CALL("cuLogicalEndpointDestroy", cuLogicalEndpointDestroy(second + 2));
        CALL("cuLogicalEndpointIdRelease", cuLogicalEndpointIdRelease(second, 2));
        CALL("cuLogicalEndpointIdRelease", cuLogicalEndpointIdRelease(second + 2, 2));
    } else {
        return 2;
    }
    CALL("cuLogicalEndpointIdRelease", cuLogicalEndpointIdRelease(base, 4));
    return 0;
}
