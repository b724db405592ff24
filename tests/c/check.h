/* Helpers of the C test programs: every interposed call prints `CALL <symbol> <result>` so the
 * Rust side can compare what the program saw with what the trace recorded. */
#ifndef SHARECHECK_TEST_CHECK_H
#define SHARECHECK_TEST_CHECK_H
#include <stdio.h>
#include <stdlib.h>

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

#endif
