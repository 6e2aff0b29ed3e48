// launch_loop: a launch-bound loop, for the observer's cost: N launches of
// an empty kernel on one stream (default 200,000), then one synchronize.
// No capture: every launch costs the observer what a call outside any
// capture costs it. It prints the launches' own time (from the first
// launch to the end of the synchronize) and the CUDA start before them,
// so that a cost of the trace per launch can be told from one paid once.
#include <cstdio>
#include <cstdlib>
#include <ctime>
#include <cuda_runtime.h>

__global__ void empty_kernel(int *p) {
    if (p && threadIdx.x == 1024) *p = 0; // never: keeps the kernel a kernel
}

static double now_ms() {
    timespec t;
    clock_gettime(CLOCK_MONOTONIC, &t);
    return t.tv_sec * 1e3 + t.tv_nsec / 1e6;
}

int main(int argc, char **argv) {
    double start = now_ms();
    long n = argc > 1 ? atol(argv[1]) : 200000;
    cudaStream_t s;
    if (cudaStreamCreateWithFlags(&s, cudaStreamNonBlocking) != cudaSuccess) {
        fprintf(stderr, "launch_loop: no stream\n");
        return 3;
    }
    double ready = now_ms();
    for (long i = 0; i < n; i++)
        empty_kernel<<<1, 32, 0, s>>>(nullptr);
    cudaError_t err = cudaStreamSynchronize(s);
    if (err != cudaSuccess) {
        fprintf(stderr, "launch_loop: %s\n", cudaGetErrorString(err));
        return 3;
    }
    double done = now_ms();
    printf("launch_loop: %ld launches in %.1f ms, after %.1f ms of CUDA start\n", n, done - ready, ready - start);
    return 0;
}
