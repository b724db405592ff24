/* Helpers of the C test programs: every interposed call prints `CALL <symbol> <result>` so the
 * Rust side can compare what the program saw with what the trace recorded. */
#ifndef SHARECHECK_TEST_CHECK_H
#define SHARECHECK_TEST_CHECK_H
#include <dirent.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#define CALL(symbol, expr)                                  \
    do {                                                    \
        int call_result_ = (int)(expr);                     \
        printf("CALL %s %d\n", symbol, call_result_);      \
        fflush(stdout);                                     \
    } while (0)

/* Set-up calls that must succeed (not interposed; not printed). */
#define MUST(expr)                                                              \
    do {                                                                        \
        int must_result_ = (int)(expr);                                         \
        if (must_result_ != 0) {                                                \
            fprintf(stderr, "%s:%d: %s returned %d\n", __FILE__, __LINE__, #expr, \
                    must_result_);                                              \
            exit(3);                                                            \
        }                                                                       \
    } while (0)

/* Device `ordinal`'s primary context, retained and made current, after cuInit (not interposed;
 * CUDA programs only: cuda.h first). */
#define USE_PRIMARY_CONTEXT(ordinal)                          \
    do {                                                      \
        CUdevice use_dev_;                                    \
        CUcontext use_ctx_;                                   \
        MUST(cuInit(0));                                      \
        MUST(cuDeviceGet(&use_dev_, (ordinal)));              \
        MUST(cuDevicePrimaryCtxRetain(&use_ctx_, use_dev_));  \
        MUST(cuCtxSetCurrent(use_ctx_));                      \
    } while (0)

/* The threads of this process named sharecheck-wr (the shim's writer thread); the first one's
 * blocked-signal mask (its `SigBlk:` line in /proc) into `sigblk` when not NULL. */
static inline int writer_threads(char *sigblk, size_t sigblk_len) {
    int found = 0;
    DIR *tasks = opendir("/proc/self/task");
    struct dirent *e;
    while (tasks && (e = readdir(tasks))) {
        if (e->d_name[0] == '.') continue;
        char path[300], line[256];
        snprintf(path, sizeof path, "/proc/self/task/%s/comm", e->d_name);
        FILE *f = fopen(path, "r");
        if (!f) continue;
        int ours = fgets(line, sizeof line, f) && !strcmp(line, "sharecheck-wr\n");
        fclose(f);
        if (!ours) continue;
        if (found++ == 0 && sigblk) {
            snprintf(path, sizeof path, "/proc/self/task/%s/status", e->d_name);
            f = fopen(path, "r");
            while (f && fgets(line, sizeof line, f))
                if (!strncmp(line, "SigBlk:", 7) && sigblk_len > 0) {
                    const char *v = line + 7;
                    size_t k = 0;
                    while (*v == ' ' || *v == '\t') v++;
                    while (k + 1 < sigblk_len && v[k] && v[k] != '\n') sigblk[k] = v[k], k++;
                    sigblk[k] = 0;
                }
            if (f) fclose(f);
        }
    }
    if (tasks) closedir(tasks);
    return found;
}

#endif
