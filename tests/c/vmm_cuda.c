/* Virtual memory management scenarios for the rule tests: `vmm_cuda SCENARIO`. Every covered
 * call is printed as `CALL symbol result` (check.h); set-up calls that must succeed are not.
 * Covered set-up calls are printed too (SETUP). Each negative scenario breaks one rule once
 * (named in the table of tests/vmm_rules.rs); the
 * correct one is:
 *   correct    two granules created with POSIX fd handles, four reserved, mapped whole
 *              (R580 answers NOT_SUPPORTED to a map of part of an allocation), access set, a
 *              reference retained (at an address inside the mapping) and released, the memory
 *              exported to an fd and imported back (a second handle), the import mapped whole
 *              beside it and unmapped, every handle released (one while still mapped),
 *              unmapped, freed.
 *   fabric-no-imex  a create that requests FABRIC handles (refused without an IMEX channel:
 *              SHARECHECK_SIM_FABRIC_CHANNEL=none on the simulator; a host without a channel file
 *              on R580)
 *   leak       mapped memory the process exits holding: its handle, reservation and mapping
 *              (found by the report phase).
 *   remap      one handle mapped (access set), unmapped and mapped again at the same address
 *              twice (the later maps and unmaps are the clean path's), then mapped at the next
 *              two granules and left so: the process exits holding the handle, the reservation
 *              and that last mapping (found by the report phase).
 *   fd-leak    a granule exported to a POSIX fd that is never closed (its handle released):
 *              the process exits holding the fd (found at exit).
 *   fd-closed  the same with the fd closed, then a buffer allocated (cuMemAlloc) and kept to the
 *              end (the driver's own descriptors take no number the close freed): nothing held.
 *   fabric-export  a granule created with FABRIC handles, mapped, given access and set to 42,
 *              exported as a FABRIC handle printed as `HANDLE <128 hex digits>`; the process then
 *              waits for its stdin to close before it gives everything back (an importer reaches
 *              the memory while the exporter runs).
 *   fabric-import HEX  that handle imported; where the import succeeds, mapped, given access
 *              and its first byte printed as `VALUE <n>`, then given back. */
#include <cuda.h>
#include <stdint.h>
#include <string.h>
#include <unistd.h>
#include "check.h"

/* A covered set-up call: printed (the trace has it too) and required to succeed. */
#define SETUP(symbol, expr)                                  \
    do {                                                     \
        int setup_result_ = (int)(expr);                     \
        printf("CALL %s %d\n", symbol, setup_result_);      \
        fflush(stdout);                                      \
        if (setup_result_ != 0) exit(3);                     \
    } while (0)

static size_t G; /* the minimum granularity */
static CUmemAllocationProp prop;
static CUmemAccessDesc rw;

static CUresult create(CUmemGenericAllocationHandle *h, size_t size) {
    return cuMemCreate(h, size, &prop, 0);
}

/* After a negative scenario: what it set up is given back (SETUP), so that the only findings are
 * the misuse's (the report phase finds what a process leaves at exit). */
static void give_back(CUmemGenericAllocationHandle h, CUdeviceptr va, size_t mapped, size_t reserved) {
    if (mapped) SETUP("cuMemUnmap", cuMemUnmap(va, mapped));
    if (reserved) SETUP("cuMemAddressFree", cuMemAddressFree(va, reserved));
    if (h) SETUP("cuMemRelease", cuMemRelease(h));
}

/* Two granules created, four reserved at *va, the first two mapped. */
static CUmemGenericAllocationHandle mapped(CUdeviceptr *va) {
    CUmemGenericAllocationHandle h;
    SETUP("cuMemCreate", create(&h, 2 * G));
    SETUP("cuMemAddressReserve", cuMemAddressReserve(va, 4 * G, 0, 0, 0));
    SETUP("cuMemMap", cuMemMap(*va, 2 * G, 0, h, 0));
    return h;
}

int main(int argc, char **argv) {
    if (argc < 2) return 2;
    const char *s = argv[1];
    USE_PRIMARY_CONTEXT(0);
    memset(&prop, 0, sizeof prop);
    prop.type = CU_MEM_ALLOCATION_TYPE_PINNED;
    prop.location.type = CU_MEM_LOCATION_TYPE_DEVICE;
    prop.location.id = 0;
    prop.requestedHandleTypes = CU_MEM_HANDLE_TYPE_POSIX_FILE_DESCRIPTOR;
    MUST(cuMemGetAllocationGranularity(&G, &prop, CU_MEM_ALLOC_GRANULARITY_MINIMUM));
    memset(&rw, 0, sizeof rw);
    rw.location.type = CU_MEM_LOCATION_TYPE_DEVICE;
    rw.location.id = 0;
    rw.flags = CU_MEM_ACCESS_FLAGS_PROT_READWRITE;
    CUmemGenericAllocationHandle h = 0;
    CUdeviceptr va = 0;
    if (!strcmp(s, "create-size")) {
        CALL("cuMemCreate", create(&h, G / 2));
    } else if (!strcmp(s, "map-not-granular")) {
        SETUP("cuMemCreate", create(&h, 2 * G));
        SETUP("cuMemAddressReserve", cuMemAddressReserve(&va, 4 * G, 0, 0, 0));
        CALL("cuMemMap", cuMemMap(va + 4096, G, 0, h, 0));
        give_back(h, va, 0, 4 * G);
    } else if (!strcmp(s, "map-past-allocation")) {
        SETUP("cuMemCreate", create(&h, 2 * G));
        SETUP("cuMemAddressReserve", cuMemAddressReserve(&va, 4 * G, 0, 0, 0));
        CALL("cuMemMap", cuMemMap(va, 3 * G, 0, h, 0));
        give_back(h, va, 0, 4 * G);
    } else if (!strcmp(s, "map-not-reserved")) {
        SETUP("cuMemCreate", create(&h, 2 * G));
        SETUP("cuMemAddressReserve", cuMemAddressReserve(&va, 4 * G, 0, 0, 0));
        SETUP("cuMemAddressFree", cuMemAddressFree(va, 4 * G));
        CALL("cuMemMap", cuMemMap(va, G, 0, h, 0));
        give_back(h, 0, 0, 0);
    } else if (!strcmp(s, "map-already-mapped")) {
        h = mapped(&va);
        CALL("cuMemMap", cuMemMap(va + G, 2 * G, 0, h, 0));
        give_back(h, va, 2 * G, 4 * G);
    } else if (!strcmp(s, "unmap-sub-range")) {
        h = mapped(&va);
        CALL("cuMemUnmap", cuMemUnmap(va, G));
        give_back(h, va, 2 * G, 4 * G);
    } else if (!strcmp(s, "unmap-nothing")) {
        h = mapped(&va);
        CALL("cuMemUnmap", cuMemUnmap(va + 2 * G, G));
        give_back(h, va, 2 * G, 4 * G);
    } else if (!strcmp(s, "set-access-not-mapped")) {
        h = mapped(&va);
        CALL("cuMemSetAccess", cuMemSetAccess(va, 3 * G, &rw, 1));
        give_back(h, va, 2 * G, 4 * G);
    } else if (!strcmp(s, "address-free-part")) {
        SETUP("cuMemAddressReserve", cuMemAddressReserve(&va, 4 * G, 0, 0, 0));
        CALL("cuMemAddressFree", cuMemAddressFree(va, 2 * G));
        give_back(0, va, 0, 4 * G);
    } else if (!strcmp(s, "export-not-requested")) {
        CUmemAllocationProp none = prop;
        none.requestedHandleTypes = CU_MEM_HANDLE_TYPE_NONE;
        SETUP("cuMemCreate", cuMemCreate(&h, G, &none, 0));
        int fd = -1;
        CALL("cuMemExportToShareableHandle",
             cuMemExportToShareableHandle(&fd, h, CU_MEM_HANDLE_TYPE_POSIX_FILE_DESCRIPTOR, 0));
        give_back(h, 0, 0, 0);
    } else if (!strcmp(s, "memset-before-access")) {
        h = mapped(&va);
        CALL("cuMemsetD8_v2", cuMemsetD8(va, 1, 64));
        give_back(h, va, 2 * G, 4 * G);
    } else if (!strcmp(s, "fabric-no-imex")) {
        CUmemAllocationProp fabric = prop;
        fabric.requestedHandleTypes = CU_MEM_HANDLE_TYPE_FABRIC;
        CUresult r = cuMemCreate(&h, G, &fabric, 0);
        CALL("cuMemCreate", r);
        if (r == CUDA_SUCCESS) give_back(h, 0, 0, 0); /* a host with an IMEX channel */
    } else if (!strcmp(s, "fabric-export")) {
        CUmemAllocationProp fabric = prop;
        fabric.requestedHandleTypes = CU_MEM_HANDLE_TYPE_FABRIC;
        SETUP("cuMemCreate", cuMemCreate(&h, G, &fabric, 0));
        SETUP("cuMemAddressReserve", cuMemAddressReserve(&va, G, 0, 0, 0));
        SETUP("cuMemMap", cuMemMap(va, G, 0, h, 0));
        SETUP("cuMemSetAccess", cuMemSetAccess(va, G, &rw, 1));
        MUST(cuMemsetD8(va, 42, 64));
        CUmemFabricHandle shared;
        CALL("cuMemExportToShareableHandle",
             cuMemExportToShareableHandle(&shared, h, CU_MEM_HANDLE_TYPE_FABRIC, 0));
        printf("HANDLE ");
        for (size_t i = 0; i < sizeof shared.data; i++) printf("%02x", shared.data[i]);
        printf("\n");
        fflush(stdout);
        char line[64];
        while (fgets(line, sizeof line, stdin)) {
        }
        give_back(h, va, G, G);
    } else if (!strcmp(s, "fabric-import") && argc > 2) {
        CUmemFabricHandle shared;
        for (size_t i = 0; i < sizeof shared.data; i++) {
            unsigned int byte = 0;
            if (sscanf(argv[2] + 2 * i, "%2x", &byte) != 1) return 2;
            shared.data[i] = (unsigned char)byte;
        }
        CUresult r = cuMemImportFromShareableHandle(&h, &shared, CU_MEM_HANDLE_TYPE_FABRIC);
        CALL("cuMemImportFromShareableHandle", r);
        if (r == CUDA_SUCCESS) {
            SETUP("cuMemAddressReserve", cuMemAddressReserve(&va, G, 0, 0, 0));
            SETUP("cuMemMap", cuMemMap(va, G, 0, h, 0));
            SETUP("cuMemSetAccess", cuMemSetAccess(va, G, &rw, 1));
            unsigned char first = 0;
            MUST(cuMemcpyDtoH(&first, va, 1));
            printf("VALUE %d\n", first);
            give_back(h, va, G, G);
        }
    } else if (!strcmp(s, "leak")) {
        /* Exits holding the handle, the reservation and the mapping (the report phase). */
        h = mapped(&va);
        SETUP("cuMemSetAccess", cuMemSetAccess(va, 2 * G, &rw, 1));
    } else if (!strcmp(s, "remap")) {
        h = mapped(&va);
        SETUP("cuMemSetAccess", cuMemSetAccess(va, 2 * G, &rw, 1));
        for (int i = 0; i < 2; i++) {
            SETUP("cuMemUnmap", cuMemUnmap(va, 2 * G));
            SETUP("cuMemMap", cuMemMap(va, 2 * G, 0, h, 0));
        }
        SETUP("cuMemUnmap", cuMemUnmap(va, 2 * G));
        SETUP("cuMemMap", cuMemMap(va + 2 * G, 2 * G, 0, h, 0));
    } else if (!strcmp(s, "release-twice")) {
        SETUP("cuMemCreate", create(&h, 2 * G));
        CALL("cuMemRelease", cuMemRelease(h));
        CALL("cuMemRelease", cuMemRelease(h));
    } else if (!strcmp(s, "fd-leak") || !strcmp(s, "fd-closed")) {
        SETUP("cuMemCreate", create(&h, G));
        int fd = -1;
        CALL("cuMemExportToShareableHandle",
             cuMemExportToShareableHandle(&fd, h, CU_MEM_HANDLE_TYPE_POSIX_FILE_DESCRIPTOR, 0));
        printf("FD %d\n", fd);
        if (!strcmp(s, "fd-closed")) {
            /* The lowest free number is the fd's again: the driver's next descriptor would take
             * it, and the simulator's are of an export's kind (memfds). The buffer is kept to the
             * end, as programs do. */
            close(fd);
            CUdeviceptr kept;
            MUST(cuMemAlloc(&kept, 64));
        }
        give_back(h, 0, 0, 0);
    } else if (!strcmp(s, "correct")) {
        CALL("cuMemCreate", create(&h, 2 * G));
        CALL("cuMemAddressReserve", cuMemAddressReserve(&va, 4 * G, 0, 0, 0));
        CALL("cuMemMap", cuMemMap(va, 2 * G, 0, h, 0));
        CALL("cuMemSetAccess", cuMemSetAccess(va, 2 * G, &rw, 1));
        CUmemGenericAllocationHandle kept = 0;
        CALL("cuMemRetainAllocationHandle", cuMemRetainAllocationHandle(&kept, (void *)(uintptr_t)(va + 64)));
        CALL("cuMemRelease", cuMemRelease(kept));
        int fd = -1;
        CALL("cuMemExportToShareableHandle",
             cuMemExportToShareableHandle(&fd, h, CU_MEM_HANDLE_TYPE_POSIX_FILE_DESCRIPTOR, 0));
        CUmemGenericAllocationHandle imported = 0;
        CALL("cuMemImportFromShareableHandle",
             cuMemImportFromShareableHandle(&imported, (void *)(uintptr_t)fd,
                                            CU_MEM_HANDLE_TYPE_POSIX_FILE_DESCRIPTOR));
        close(fd);
        CALL("cuMemMap", cuMemMap(va + 2 * G, 2 * G, 0, imported, 0));
        CALL("cuMemSetAccess", cuMemSetAccess(va + 2 * G, 2 * G, &rw, 1));
        CALL("cuMemsetD8Async", cuMemsetD8Async(va + 2 * G, 7, 64, 0));
        unsigned char back = 0;
        MUST(cuCtxSynchronize());
        MUST(cuMemcpyDtoH(&back, va, 1));
        printf("SAME %d\n", back == 7);
        CALL("cuMemUnmap", cuMemUnmap(va + 2 * G, 2 * G));
        CALL("cuMemRelease", cuMemRelease(imported));
        CALL("cuMemRelease", cuMemRelease(h));
        CALL("cuMemUnmap", cuMemUnmap(va, 2 * G));
        CALL("cuMemAddressFree", cuMemAddressFree(va, 4 * G));
    } else {
        fprintf(stderr, "unknown scenario %s\n", s);
        return 2;
    }
    return 0;
}
