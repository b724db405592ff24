/* IPC across processes: the parent exports device memory and an event, a child process (exec)
 * imports them and checks the bytes; the parent frees the memory after the child closed it, or
 * with `early` while the child still has it open (after it opened and read it, before it closes).
 * Usage: ipc_pair [early] | ipc_pair import HANDLEFILE OPENED_FD GO_FD */
#include <cuda.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>
#include <unistd.h>
#include "check.h"

static void setup(CUcontext *ctx, int device) {
    CUdevice dev;
    MUST(cuInit(0));
    MUST(cuDeviceGet(&dev, device));
    MUST(cuDevicePrimaryCtxRetain(ctx, dev));
    MUST(cuCtxSetCurrent(*ctx));
}

static void print_hex(const char *key, const void *bytes, size_t n) {
    printf("%s ", key);
    for (size_t i = 0; i < n; i++) printf("%02x", ((const unsigned char *)bytes)[i]);
    printf("\n");
}

int main(int argc, char **argv) {
    CUcontext ctx;
    if (argc == 5 && strcmp(argv[1], "import") == 0) {
        int opened_fd = atoi(argv[3]), go_fd = atoi(argv[4]);
        setup(&ctx, 1);
        CUipcMemHandle mem;
        CUipcEventHandle event_handle;
        FILE *f = fopen(argv[2], "rb");
        if (!f || fread(&mem, sizeof mem, 1, f) != 1 || fread(&event_handle, sizeof event_handle, 1, f) != 1) return 4;
        fclose(f);
        CUdeviceptr p = 0;
        CALL("cuIpcOpenMemHandle_v2", cuIpcOpenMemHandle(&p, mem, CU_IPC_MEM_LAZY_ENABLE_PEER_ACCESS));
        unsigned char data[256];
        MUST(cuMemcpyDtoH(data, p, sizeof data));
        int ok = 1;
        for (int i = 0; i < 256; i++) ok &= data[i] == (unsigned char)(i ^ 0x5a);
        printf("DATA %d\n", ok);
        CUevent ev;
        CALL("cuIpcOpenEventHandle", cuIpcOpenEventHandle(&ev, event_handle));
        char byte = 'o';
        if (write(opened_fd, &byte, 1) != 1 || read(go_fd, &byte, 1) != 1) return 6;
        CALL("cuIpcCloseMemHandle", cuIpcCloseMemHandle(p));
        return ok ? 0 : 5;
    }
    setup(&ctx, 0);
    CUdeviceptr p;
    MUST(cuMemAlloc(&p, 1 << 20));
    unsigned char data[256];
    for (int i = 0; i < 256; i++) data[i] = (unsigned char)(i ^ 0x5a);
    MUST(cuMemcpyHtoD(p, data, sizeof data));
    CUipcMemHandle mem;
    CALL("cuIpcGetMemHandle", cuIpcGetMemHandle(&mem, p));
    CUevent ev;
    MUST(cuEventCreate(&ev, CU_EVENT_INTERPROCESS | CU_EVENT_DISABLE_TIMING));
    CUipcEventHandle event_handle;
    CALL("cuIpcGetEventHandle", cuIpcGetEventHandle(&event_handle, ev));
    print_hex("HANDLE", &mem, sizeof mem);
    const char *path = "ipc_handles.bin";
    FILE *f = fopen(path, "wb");
    fwrite(&mem, sizeof mem, 1, f);
    fwrite(&event_handle, sizeof event_handle, 1, f);
    fclose(f);
    int early = argc == 2 && strcmp(argv[1], "early") == 0;
    int opened[2], go[2];
    if (pipe(opened) != 0 || pipe(go) != 0) return 7;
    fflush(stdout);
    pid_t child = fork();
    if (child == 0) {
        char opened_fd[16], go_fd[16];
        snprintf(opened_fd, sizeof opened_fd, "%d", opened[1]);
        snprintf(go_fd, sizeof go_fd, "%d", go[0]);
        execl(argv[0], argv[0], "import", path, opened_fd, go_fd, (char *)NULL);
        _exit(127);
    }
    char byte;
    if (read(opened[0], &byte, 1) != 1) return 8;
    if (early) CALL("cuMemFree_v2", cuMemFree(p));
    if (write(go[1], &byte, 1) != 1) return 9;
    int status = 0;
    waitpid(child, &status, 0);
    if (!early) CALL("cuMemFree_v2", cuMemFree(p));
    return WIFEXITED(status) ? WEXITSTATUS(status) : 1;
}
