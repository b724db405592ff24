/* Measures what the driver does with CUDA IPC where its documentation says nothing or "undefined
 * behaviour": two processes on device 0 (and device 1 where there is one), an exporter (E, a
 * child forked before cuInit) and an importer (I, the parent), in lockstep over a socketpair.
 * Every line it prints is `FACT <case> <name>=<value> ...`; return codes are the driver's
 * CUresult numbers. It makes no multicast object, asks for a few MiB of device memory and no
 * managed memory, and never writes a handle's bytes anywhere (it compares them in memory only).
 *
 * Build: gcc -O1 -o ipc_probe scripts/gpu/ipc_probe.c -I/usr/local/cuda/include -lcuda -ldl
 * (on the simulated driver: -I.deps/cuda/nvidia/cu13/include -L<dir of libcuda.so> -lcuda).
 * Cases, in order (the names of the FACT lines):
 *   open                  I opens E's handle in its primary context (device 0)
 *   close_other_ctx       I closes that mapping with another context of device 0 current, then
 *                         with the opening one
 *   second_ctx_open       a second context of device 0 in I opens the same handle, and a handle
 *                         of another allocation of E ("one context per device per other process")
 *   free_while_open       E frees memory I still has open: E's result, then what I reads, writes
 *                         and closes
 *   stale                 E frees and allocates again at the same address: the handles compared,
 *                         I opening the old one and the new one
 *   event_flags           cuEventCreate with INTERPROCESS alone, cuIpcGetEventHandle on it
 *   event_handle          two cuIpcGetEventHandle of one event compared; I opens it twice
 *   event_use             I queries, records, waits on and synchronizes its copy; elapsed time
 *   event_after_destroy   E destroys the event; I uses its copy, then destroys both copies
 *   ctx_destroyed         E destroys the context an exported allocation lives in while I has it
 *                         open: what I reads and closes
 *   vmm_export            cuIpcGetMemHandle on cuMemCreate/cuMemMap memory (in E)
 *   other_device          (2 GPUs) I opens in device 1's context and closes with device 0's
 *   exporter_exited       E exits with one allocation open in I and one not opened: I reads and
 *                         closes the first, opens the second
 */
#define _GNU_SOURCE
#include <cuda.h>
#include <dlfcn.h>
#include <signal.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <sys/wait.h>
#include <unistd.h>

#define MIB (1 << 20)

static int chan; /* this side's end of the socketpair */

static void die(const char *what, int rc) {
    fprintf(stderr, "ipc_probe[%d]: %s: %d\n", (int)getpid(), what, rc);
    exit(3);
}
#define MUST(expr)                                 \
    do {                                           \
        int must_rc_ = (int)(expr);                \
        if (must_rc_ != 0) die(#expr, must_rc_);   \
    } while (0)

static void fact(const char *fmt, ...) __attribute__((format(printf, 1, 2)));
static void fact(const char *fmt, ...) {
    va_list ap;
    va_start(ap, fmt);
    printf("FACT ");
    vprintf(fmt, ap);
    printf("\n");
    fflush(stdout);
    va_end(ap);
}

/* Messages: a tag and up to 64 bytes (a handle), kept in memory only. */
struct msg {
    char tag[16];
    unsigned char data[64];
};
static void send_msg(const char *tag, const void *data, size_t n) {
    struct msg m;
    memset(&m, 0, sizeof m);
    strncpy(m.tag, tag, sizeof m.tag - 1);
    if (n) memcpy(m.data, data, n);
    if (write(chan, &m, sizeof m) != (ssize_t)sizeof m) die("write", -1);
}
static void recv_msg(const char *tag, void *data, size_t n) {
    struct msg m;
    if (read(chan, &m, sizeof m) != (ssize_t)sizeof m) die("read", -1);
    if (strncmp(m.tag, tag, sizeof m.tag) != 0) {
        fprintf(stderr, "ipc_probe: expected %s, got %s\n", tag, m.tag);
        exit(3);
    }
    if (n) memcpy(data, m.data, n);
    memset(&m, 0, sizeof m);
}

typedef CUresult (*event_fn)(CUevent);
typedef CUresult (*wait_fn)(CUstream, CUevent, unsigned int);
typedef CUresult (*elapsed_fn)(float *, CUevent, CUevent);
typedef CUresult (*memset_fn)(CUdeviceptr, unsigned char, size_t);

static void *sym(const char *name) { return dlsym(RTLD_DEFAULT, name); }

/* Fills `n` bytes at `p` with `byte` (cuMemsetD8 where the driver has it). */
static int fill(CUdeviceptr p, unsigned char byte, size_t n) {
    memset_fn set = (memset_fn)sym("cuMemsetD8_v2");
    if (set) return set(p, byte, n);
    unsigned char *host = malloc(n);
    memset(host, byte, n);
    int rc = cuMemcpyHtoD(p, host, n);
    free(host);
    return rc;
}

/* Reads 4 KiB at `p`: the result, and whether every byte is `byte`. */
static int check(CUdeviceptr p, unsigned char byte, int *same) {
    unsigned char host[4096];
    memset(host, 0, sizeof host);
    int rc = cuMemcpyDtoH(host, p, sizeof host);
    *same = 1;
    for (size_t i = 0; i < sizeof host; i++) *same &= host[i] == byte;
    return rc;
}

static CUcontext primary(int ordinal) {
    CUdevice dev;
    CUcontext ctx;
    MUST(cuDeviceGet(&dev, ordinal));
    MUST(cuDevicePrimaryCtxRetain(&ctx, dev));
    return ctx;
}

static int devices(void) {
    int n = 0;
    MUST(cuDeviceGetCount(&n));
    return n;
}

/* ---------------------------------------------------------------------------------------- */

static void exporter(void) {
    MUST(cuInit(0));
    CUcontext ctx0 = primary(0);
    MUST(cuCtxSetCurrent(ctx0));
    CUdeviceptr a, b;
    CUipcMemHandle h;

    /* open, close_other_ctx, second_ctx_open */
    MUST(cuMemAlloc(&a, MIB));
    MUST(fill(a, 0x11, MIB));
    MUST(cuCtxSynchronize());
    MUST(cuIpcGetMemHandle(&h, a));
    send_msg("a", &h, sizeof h);
    MUST(cuMemAlloc(&b, MIB));
    MUST(cuIpcGetMemHandle(&h, b));
    send_msg("b", &h, sizeof h);

    /* free_while_open */
    recv_msg("a-held", NULL, 0);
    MUST(fill(a, 0xa5, MIB));
    MUST(cuCtxSynchronize());
    fact("free_while_open exporter_free=%d", cuMemFree(a));
    send_msg("a-freed", NULL, 0);

    /* stale */
    CUdeviceptr c, d;
    CUipcMemHandle hc, hd;
    MUST(cuMemAlloc(&c, MIB));
    MUST(cuIpcGetMemHandle(&hc, c));
    MUST(cuMemFree(c));
    MUST(cuMemAlloc(&d, MIB));
    MUST(cuIpcGetMemHandle(&hd, d));
    fact("stale same_address=%d handles_equal=%d", c == d, memcmp(&hc, &hd, sizeof hc) == 0);
    send_msg("stale", &hc, sizeof hc);
    send_msg("fresh", &hd, sizeof hd);
    recv_msg("stale-done", NULL, 0);

    /* event_flags, event_handle */
    CUevent e0, ev;
    CUipcEventHandle he, he2;
    int rc = cuEventCreate(&e0, CU_EVENT_INTERPROCESS);
    fact("event_flags create_interprocess_without_disable_timing=%d", rc);
    if (rc == 0) {
        fact("event_flags get_handle_of_it=%d", cuIpcGetEventHandle(&he, e0));
        cuEventDestroy(e0);
    }
    MUST(cuEventCreate(&ev, CU_EVENT_INTERPROCESS | CU_EVENT_DISABLE_TIMING));
    MUST(cuIpcGetEventHandle(&he, ev));
    MUST(cuIpcGetEventHandle(&he2, ev));
    fact("event_handle two_gets_equal=%d", memcmp(&he, &he2, sizeof he) == 0);
    MUST(cuEventRecord(ev, 0));
    MUST(cuCtxSynchronize());
    send_msg("event", &he, sizeof he);
    recv_msg("event-used", NULL, 0);
    fact("event_after_destroy exporter_destroy=%d", cuEventDestroy(ev));
    send_msg("event-gone", NULL, 0);

    /* ctx_destroyed */
    CUcontext c2;
    CUdevice dev0;
    MUST(cuDeviceGet(&dev0, 0));
    MUST(cuCtxCreate(&c2, NULL, 0, dev0));
    CUdeviceptr x;
    MUST(cuMemAlloc(&x, MIB));
    MUST(fill(x, 0x5c, MIB));
    MUST(cuCtxSynchronize());
    MUST(cuIpcGetMemHandle(&h, x));
    send_msg("x", &h, sizeof h);
    recv_msg("x-held", NULL, 0);
    fact("ctx_destroyed exporter_ctx_destroy=%d", cuCtxDestroy(c2));
    send_msg("x-ctx-gone", NULL, 0);
    MUST(cuCtxSetCurrent(ctx0));

    /* vmm_export */
    CUmemAllocationProp prop;
    memset(&prop, 0, sizeof prop);
    prop.type = CU_MEM_ALLOCATION_TYPE_PINNED;
    prop.location.type = CU_MEM_LOCATION_TYPE_DEVICE;
    prop.location.id = 0;
    size_t gran = 0;
    MUST(cuMemGetAllocationGranularity(&gran, &prop, CU_MEM_ALLOC_GRANULARITY_MINIMUM));
    CUmemGenericAllocationHandle vh;
    CUdeviceptr vp;
    MUST(cuMemCreate(&vh, gran, &prop, 0));
    MUST(cuMemAddressReserve(&vp, gran, 0, 0, 0));
    MUST(cuMemMap(vp, gran, 0, vh, 0));
    CUmemAccessDesc access;
    memset(&access, 0, sizeof access);
    access.location = prop.location;
    access.flags = CU_MEM_ACCESS_FLAGS_PROT_READWRITE;
    MUST(cuMemSetAccess(vp, gran, &access, 1));
    fact("vmm_export get_handle=%d", cuIpcGetMemHandle(&h, vp));
    MUST(cuMemUnmap(vp, gran));
    MUST(cuMemRelease(vh));
    MUST(cuMemAddressFree(vp, gran));

    /* other_device: an allocation on device 0 for I's device-1 context */
    CUdeviceptr o;
    MUST(cuMemAlloc(&o, MIB));
    MUST(fill(o, 0x3c, MIB));
    MUST(cuCtxSynchronize());
    MUST(cuIpcGetMemHandle(&h, o));
    send_msg("o", &h, sizeof h);
    recv_msg("o-done", NULL, 0);

    /* exporter_exited */
    CUdeviceptr g, f;
    MUST(cuMemAlloc(&g, MIB));
    MUST(fill(g, 0x77, MIB));
    MUST(cuCtxSynchronize());
    MUST(cuIpcGetMemHandle(&h, g));
    send_msg("g", &h, sizeof h);
    MUST(cuMemAlloc(&f, MIB));
    MUST(cuIpcGetMemHandle(&h, f));
    send_msg("f", &h, sizeof h);
    recv_msg("g-held", NULL, 0);
    memset(&h, 0, sizeof h);
    exit(0); /* with g and f allocated, g open in I */
}

static void importer(pid_t exporter_pid) {
    MUST(cuInit(0));
    CUcontext ctxA = primary(0);
    MUST(cuCtxSetCurrent(ctxA));
    CUdevice dev0;
    MUST(cuDeviceGet(&dev0, 0));
    CUipcMemHandle ha, hb, h;
    CUdeviceptr pa = 0, pb = 0, p2 = 0;
    int rc, same;
    recv_msg("a", &ha, sizeof ha);
    recv_msg("b", &hb, sizeof hb);

    /* open */
    rc = cuIpcOpenMemHandle(&pa, ha, CU_IPC_MEM_LAZY_ENABLE_PEER_ACCESS);
    fact("open rc=%d", rc);
    rc = check(pa, 0x11, &same);
    fact("open read=%d data_matches=%d", rc, same);

    /* close_other_ctx */
    CUcontext ctxB;
    MUST(cuCtxCreate(&ctxB, NULL, 0, dev0));
    MUST(cuCtxSetCurrent(ctxB));
    int other = cuIpcCloseMemHandle(pa);
    MUST(cuCtxSetCurrent(ctxA));
    int own = cuIpcCloseMemHandle(pa);
    fact("close_other_ctx with_other_ctx_current=%d then_with_opening_ctx=%d", other, own);
    if (own != 0 && other != 0) die("close", own);

    /* second_ctx_open: A holds a; B opens a, then b */
    MUST(cuIpcOpenMemHandle(&pa, ha, CU_IPC_MEM_LAZY_ENABLE_PEER_ACCESS));
    MUST(cuCtxSetCurrent(ctxB));
    int same_handle = cuIpcOpenMemHandle(&p2, ha, CU_IPC_MEM_LAZY_ENABLE_PEER_ACCESS);
    int other_handle = cuIpcOpenMemHandle(&pb, hb, CU_IPC_MEM_LAZY_ENABLE_PEER_ACCESS);
    fact("second_ctx_open same_handle=%d same_pointer=%d other_allocation=%d", same_handle,
         same_handle == 0 && p2 == pa, other_handle);
    if (same_handle == 0) fact("second_ctx_open close_second=%d", cuIpcCloseMemHandle(p2));
    if (other_handle == 0) fact("second_ctx_open close_other=%d", cuIpcCloseMemHandle(pb));
    MUST(cuCtxSetCurrent(ctxA));
    MUST(cuCtxDestroy(ctxB));
    MUST(cuCtxSetCurrent(ctxA));

    /* free_while_open: A holds a */
    send_msg("a-held", NULL, 0);
    recv_msg("a-freed", NULL, 0);
    rc = check(pa, 0xa5, &same);
    fact("free_while_open importer_read=%d data_still_there=%d", rc, same);
    fact("free_while_open importer_write=%d", fill(pa, 0x22, MIB));
    fact("free_while_open importer_sync=%d", cuCtxSynchronize());
    rc = check(pa, 0x22, &same);
    fact("free_while_open importer_read_back=%d wrote=%d", rc, same);
    fact("free_while_open importer_close=%d", cuIpcCloseMemHandle(pa));
    fact("free_while_open importer_close_again=%d", cuIpcCloseMemHandle(pa));

    /* stale */
    CUipcMemHandle hc, hd;
    recv_msg("stale", &hc, sizeof hc);
    recv_msg("fresh", &hd, sizeof hd);
    CUdeviceptr pc = 0, pd = 0;
    rc = cuIpcOpenMemHandle(&pc, hc, CU_IPC_MEM_LAZY_ENABLE_PEER_ACCESS);
    int rd = cuIpcOpenMemHandle(&pd, hd, CU_IPC_MEM_LAZY_ENABLE_PEER_ACCESS);
    fact("stale open_old=%d open_new=%d", rc, rd);
    if (rc == 0) cuIpcCloseMemHandle(pc);
    if (rd == 0) cuIpcCloseMemHandle(pd);
    memset(&hc, 0, sizeof hc);
    memset(&hd, 0, sizeof hd);
    send_msg("stale-done", NULL, 0);

    /* event_handle, event_use */
    CUipcEventHandle he;
    recv_msg("event", &he, sizeof he);
    CUevent e1 = NULL, e2 = NULL;
    int o1 = cuIpcOpenEventHandle(&e1, he);
    int o2 = cuIpcOpenEventHandle(&e2, he);
    fact("event_handle open=%d open_again=%d same_event=%d", o1, o2, o1 == 0 && o2 == 0 && e1 == e2);
    event_fn query = (event_fn)sym("cuEventQuery");
    wait_fn wait = (wait_fn)sym("cuStreamWaitEvent");
    elapsed_fn elapsed = (elapsed_fn)sym("cuEventElapsedTime_v2");
    if (o1 == 0) {
        if (query) fact("event_use query=%d", query(e1));
        fact("event_use record=%d", cuEventRecord(e1, 0));
        if (wait) fact("event_use stream_wait=%d", wait(0, e1, 0));
        fact("event_use synchronize=%d", cuEventSynchronize(e1));
        float ms = 0;
        if (elapsed) fact("event_use elapsed_time=%d", elapsed(&ms, e1, e1));
        CUcontext ctxC;
        MUST(cuCtxCreate(&ctxC, NULL, 0, dev0));
        CUevent e3 = NULL;
        int o3 = cuIpcOpenEventHandle(&e3, he);
        fact("event_use open_in_second_ctx=%d", o3);
        if (o3 == 0) cuEventDestroy(e3);
        MUST(cuCtxSetCurrent(ctxA));
        MUST(cuCtxDestroy(ctxC));
        MUST(cuCtxSetCurrent(ctxA));
    }
    memset(&he, 0, sizeof he);
    send_msg("event-used", NULL, 0);
    recv_msg("event-gone", NULL, 0);
    if (o1 == 0) {
        if (query) fact("event_after_destroy query=%d", query(e1));
        fact("event_after_destroy record=%d", cuEventRecord(e1, 0));
        if (wait) fact("event_after_destroy stream_wait=%d", wait(0, e1, 0));
        fact("event_after_destroy synchronize=%d", cuEventSynchronize(e1));
        fact("event_after_destroy ctx_sync=%d", cuCtxSynchronize());
        fact("event_after_destroy importer_destroy=%d", cuEventDestroy(e1));
        if (o2 == 0) fact("event_after_destroy importer_destroy_second_copy=%d", cuEventDestroy(e2));
    }

    /* ctx_destroyed */
    CUdeviceptr px = 0;
    recv_msg("x", &h, sizeof h);
    MUST(cuIpcOpenMemHandle(&px, h, CU_IPC_MEM_LAZY_ENABLE_PEER_ACCESS));
    send_msg("x-held", NULL, 0);
    recv_msg("x-ctx-gone", NULL, 0);
    rc = check(px, 0x5c, &same);
    fact("ctx_destroyed importer_read=%d data_still_there=%d", rc, same);
    fact("ctx_destroyed importer_close=%d", cuIpcCloseMemHandle(px));

    /* other_device */
    CUdeviceptr po = 0;
    recv_msg("o", &h, sizeof h);
    if (devices() >= 2) {
        CUcontext ctx1 = primary(1);
        MUST(cuCtxSetCurrent(ctx1));
        rc = cuIpcOpenMemHandle(&po, h, CU_IPC_MEM_LAZY_ENABLE_PEER_ACCESS);
        fact("other_device open_in_device1_ctx=%d", rc);
        if (rc == 0) {
            int read_rc = check(po, 0x3c, &same);
            fact("other_device read=%d data_matches=%d", read_rc, same);
            MUST(cuCtxSetCurrent(ctxA));
            int wrong = cuIpcCloseMemHandle(po);
            MUST(cuCtxSetCurrent(ctx1));
            int right = wrong == 0 ? -1 : (int)cuIpcCloseMemHandle(po);
            fact("other_device close_with_device0_ctx=%d then_with_device1_ctx=%d", wrong, right);
        }
        MUST(cuCtxSetCurrent(ctxA));
    } else {
        fact("other_device skipped=one_device");
    }
    send_msg("o-done", NULL, 0);

    /* exporter_exited */
    CUipcMemHandle hg, hf;
    CUdeviceptr pg = 0, pf = 0;
    recv_msg("g", &hg, sizeof hg);
    recv_msg("f", &hf, sizeof hf);
    MUST(cuIpcOpenMemHandle(&pg, hg, CU_IPC_MEM_LAZY_ENABLE_PEER_ACCESS));
    send_msg("g-held", NULL, 0);
    int status = 0;
    waitpid(exporter_pid, &status, 0);
    fact("exporter_exited exporter_status=%d", WIFEXITED(status) ? WEXITSTATUS(status) : -1);
    rc = check(pg, 0x77, &same);
    fact("exporter_exited read=%d data_still_there=%d", rc, same);
    fact("exporter_exited close=%d", cuIpcCloseMemHandle(pg));
    rc = cuIpcOpenMemHandle(&pf, hf, CU_IPC_MEM_LAZY_ENABLE_PEER_ACCESS);
    fact("exporter_exited open_after_exit=%d", rc);
    if (rc == 0) cuIpcCloseMemHandle(pf);
    memset(&hg, 0, sizeof hg);
    memset(&hf, 0, sizeof hf);
    memset(&ha, 0, sizeof ha);
    memset(&hb, 0, sizeof hb);
    memset(&h, 0, sizeof h);
    fact("done ok=1");
}

int main(void) {
    int sv[2];
    if (socketpair(AF_UNIX, SOCK_STREAM, 0, sv) != 0) return 2;
    pid_t pid = fork(); /* before cuInit: each process has a driver of its own */
    if (pid < 0) return 2;
    if (pid == 0) {
        close(sv[0]);
        chan = sv[1];
        exporter();
        return 0;
    }
    close(sv[1]);
    chan = sv[0];
    alarm(120);
    importer(pid);
    return 0;
}
