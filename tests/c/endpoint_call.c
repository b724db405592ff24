/* Calls a logical endpoint function through the shim on a driver that does not export it. */
#include <cuda.h>
#include "check.h"

int main(void) {
    CUlogicalEndpointId id = 0;
    CALL("cuLogicalEndpointIdReserve", cuLogicalEndpointIdReserve(&id, 1));
    CALL("cuLogicalEndpointIdReserve", cuLogicalEndpointIdReserve(&id, 1));
    int can = -1;
    CALL("cuDeviceCanAccessPeer", cuDeviceCanAccessPeer(&can, 0, 1));
    return 0;
}
