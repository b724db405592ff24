// A correct multi-stream managed-memory program (the pattern stream attach exists for): TASKS
// tasks, each with its own stream and its own managed buffer, attached to that stream alone
// (cudaMemAttachSingle) before each round's kernel; the host reads a task's buffer only after
// synchronizing the task's stream. ROUNDS rounds, so TASKS x ROUNDS attaches. Every call is a
// correct use: sharecheck must report nothing, and the program must print the same lines with
// and without it.
//
// Usage: attach_tasks [TASKS] [ROUNDS]    (default 8 tasks, 500 rounds; 256 KiB a task)
// Prints `SUM <task> <value>` per task, then `ATTACHES <n>` and `SECONDS <wall time of the rounds>`
// (the last line is the only one that may differ between runs).
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <cuda_runtime.h>
#include <vector>

__global__ void step(unsigned *data, size_t n, unsigned round) {
    for (size_t i = blockIdx.x * blockDim.x + threadIdx.x; i < n; i += gridDim.x * blockDim.x)
        data[i] = data[i] * 1664525u + 1013904223u + round + (unsigned)i;
}

#define CHECK(x)                                                                       \
    do {                                                                               \
        cudaError_t e_ = (x);                                                          \
        if (e_ != cudaSuccess) {                                                       \
            std::fprintf(stderr, "%s: %s\n", #x, cudaGetErrorString(e_));              \
            return 3;                                                                  \
        }                                                                              \
    } while (0)

int main(int argc, char **argv) {
    int tasks = argc > 1 ? std::atoi(argv[1]) : 8;
    int rounds = argc > 2 ? std::atoi(argv[2]) : 500;
    const size_t n = (256 << 10) / sizeof(unsigned);
    std::vector<cudaStream_t> streams(tasks);
    std::vector<unsigned *> bufs(tasks);
    for (int t = 0; t < tasks; t++) {
        CHECK(cudaStreamCreateWithFlags(&streams[t], cudaStreamNonBlocking));
        CHECK(cudaMallocManaged(&bufs[t], n * sizeof(unsigned), cudaMemAttachGlobal));
        for (size_t i = 0; i < n; i++) bufs[t][i] = (unsigned)(t * 7 + i);
    }
    CHECK(cudaDeviceSynchronize());
    std::vector<unsigned long long> sums(tasks, 0);
    long attaches = 0;
    auto start = std::chrono::steady_clock::now();
    for (int r = 0; r < rounds; r++) {
        for (int t = 0; t < tasks; t++) {
            // The whole allocation (length 0), to the task's own stream.
            CHECK(cudaStreamAttachMemAsync(streams[t], bufs[t], 0, cudaMemAttachSingle));
            attaches++;
            step<<<64, 256, 0, streams[t]>>>(bufs[t], n, (unsigned)r);
        }
        for (int t = 0; t < tasks; t++) {
            CHECK(cudaStreamSynchronize(streams[t]));
            // The stream is idle: its memory is the host's to read.
            sums[t] += bufs[t][r % n];
        }
    }
    double seconds =
        std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
    for (int t = 0; t < tasks; t++) {
        std::printf("SUM %d %llu\n", t, sums[t]);
        // Freed before its stream is destroyed: nothing stays attached to a destroyed stream.
        CHECK(cudaFree(bufs[t]));
        CHECK(cudaStreamDestroy(streams[t]));
    }
    std::printf("ATTACHES %ld\nSECONDS %.4f\n", attaches, seconds);
    return 0;
}
