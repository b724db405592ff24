/* HIP peer-access scenarios for the rule tests: `peer_hip SCENARIO` (see peer_cuda.c). */
#define __HIP_PLATFORM_AMD__
#include <hip/hip_runtime_api.h>
#include <string.h>
#include "check.h"

#define BYTES (1 << 20)

static void *mem[2];

static void setup(void) {
    for (int d = 0; d < 2; d++) {
        MUST(hipSetDevice(d));
        MUST(hipMalloc(&mem[d], BYTES));
    }
    MUST(hipSetDevice(0));
}

static void enable(int from, int to) {
    MUST(hipSetDevice(from));
    CALL("hipDeviceEnablePeerAccess", hipDeviceEnablePeerAccess(to, 0));
}

static void disable(int from, int to) {
    MUST(hipSetDevice(from));
    CALL("hipDeviceDisablePeerAccess", hipDeviceDisablePeerAccess(to));
}

static void copy(int dst, int src, size_t bytes) {
    CALL("hipMemcpyPeer", hipMemcpyPeer(mem[dst], dst, mem[src], src, bytes));
}

static int correct(void) {
    int can = -1;
    CALL("hipDeviceCanAccessPeer", hipDeviceCanAccessPeer(&can, 0, 1));
    if (!can) return 0;
    enable(0, 1);
    enable(1, 0);
    hipStream_t stream;
    MUST(hipStreamCreate(&stream));
    copy(1, 0, BYTES);
    copy(0, 1, 4096);
    CALL("hipMemcpyPeerAsync", hipMemcpyPeerAsync(mem[0], 0, mem[1], 1, 4096, stream));
    CALL("hipMemcpyPeerAsync", hipMemcpyPeerAsync(mem[1], 1, mem[0], 0, 4096, 0));
    MUST(hipStreamSynchronize(stream));
    disable(0, 1);
    disable(1, 0);
    enable(0, 1);
    MUST(hipSetDevice(0));
    copy(1, 0, 4096);
    disable(0, 1);
    /* A device reset ends the access enabled from it. */
    enable(0, 1);
    MUST(hipSetDevice(0));
    CALL("hipDeviceReset", hipDeviceReset());
    enable(0, 1);
    MUST(hipStreamDestroy(stream));
    return 0;
}

int main(int argc, char **argv) {
    if (argc != 2) {
        fprintf(stderr, "usage: %s SCENARIO\n", argv[0]);
        return 2;
    }
    const char *s = argv[1];
    setup();
    int can = -1;
    if (!strcmp(s, "correct")) return correct();
    if (!strcmp(s, "can-access-invalid-device")) {
        CALL("hipDeviceCanAccessPeer", hipDeviceCanAccessPeer(&can, 0, 7));
    } else if (!strcmp(s, "can-access-same-device")) {
        CALL("hipDeviceCanAccessPeer", hipDeviceCanAccessPeer(&can, 1, 1));
    } else if (!strcmp(s, "enable-invalid-device")) {
        CALL("hipDeviceEnablePeerAccess", hipDeviceEnablePeerAccess(-1, 0));
    } else if (!strcmp(s, "enable-self")) {
        CALL("hipDeviceEnablePeerAccess", hipDeviceEnablePeerAccess(0, 0));
    } else if (!strcmp(s, "enable-flags")) {
        CALL("hipDeviceEnablePeerAccess", hipDeviceEnablePeerAccess(1, 2));
    } else if (!strcmp(s, "enable-twice")) {
        enable(0, 1);
        enable(0, 1);
    } else if (!strcmp(s, "enable-unsupported")) {
        enable(0, 1);
    } else if (!strcmp(s, "disable-invalid-device")) {
        CALL("hipDeviceDisablePeerAccess", hipDeviceDisablePeerAccess(9));
    } else if (!strcmp(s, "disable-not-enabled")) {
        disable(0, 1);
    } else if (!strcmp(s, "disable-self")) {
        disable(0, 0);
    } else if (!strcmp(s, "memcpy-invalid-device")) {
        CALL("hipMemcpyPeer", hipMemcpyPeer(mem[1], 5, mem[0], 0, 4096));
    } else if (!strcmp(s, "memcpy-range")) {
        copy(1, 0, BYTES + 1);
    } else if (!strcmp(s, "memcpy-wrong-device")) {
        CALL("hipMemcpyPeer", hipMemcpyPeer(mem[1], 0, mem[0], 1, 4096));
    } else if (!strcmp(s, "memcpy-destroyed-stream")) {
        hipStream_t gone;
        MUST(hipStreamCreate(&gone));
        MUST(hipStreamDestroy(gone));
        CALL("hipMemcpyPeerAsync", hipMemcpyPeerAsync(mem[1], 1, mem[0], 0, 4096, gone));
    } else if (!strcmp(s, "unidirectional")) {
        enable(0, 1);
        MUST(hipSetDevice(1));
        copy(0, 1, 4096);
    } else if (!strcmp(s, "last-error-kept")) {
        /* The program's own failed call leaves hipErrorInvalidDevice as the last error; the
         * shim's queries around the peer calls must neither clear nor replace it. */
        printf("SET %d\n", (int)hipSetDevice(99));
        CALL("hipDeviceCanAccessPeer", hipDeviceCanAccessPeer(&can, 0, 1));
        char host[16];
        CALL("hipMemcpyPeer", hipMemcpyPeer(host, 0, mem[0], 0, 0));
        printf("LAST %d\n", (int)hipGetLastError());
        /* Now hipSuccess; a query the shim makes about a host pointer fails inside the runtime,
         * which must not leave an error behind. */
        CALL("hipMemcpyPeer", hipMemcpyPeer(host, 0, mem[0], 0, 0));
        printf("PEEK %d\n", (int)hipPeekAtLastError());
    } else {
        fprintf(stderr, "unknown scenario %s\n", s);
        return 2;
    }
    return 0;
}
