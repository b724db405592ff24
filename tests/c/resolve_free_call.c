/* One direct call of a covered function (linked with -lcuda). */
#include <cuda.h>
#include "check.h"

int main(void) {
    MUST(cuInit(0));
    int can = -1;
    CALL("cuDeviceCanAccessPeer", cuDeviceCanAccessPeer(&can, 0, 1));
    return 0;
}
