// launch_loop: a launch-bound loop, for the observer's cost: N launches of
// an empty kernel on one stream (default 200,000), then one synchronize.
// No capture: every launch costs the observer what a call outside any
// capture costs it.
#include <cstdio>
#include <cstdlib>
#include <cuda_runtime.h>

__global__ void empty_kernel(int *p) {
    if (p && threadIdx.x == 1024) *p = 0; // never: keeps the kernel a kernel
}

int main(int argc, char **argv) {
    long n = argc > 1 ? atol(argv[1]) : 200000;
    cudaStream_t s;
    if (cudaStreamCreateWithFlags(&s, cudaStreamNonBlocking) != cudaSuccess) {
        fprintf(stderr, "launch_loop: no stream\n");
        return 3;
    }
    for (long i = 0; i < n; i++)
        empty_kernel<<<1, 32, 0, s>>>(nullptr);
    cudaError_t err = cudaStreamSynchronize(s);
    if (err != cudaSuccess) {
        fprintf(stderr, "launch_loop: %s\n", cudaGetErrorString(err));
        return 3;
    }
    printf("launch_loop: %ld launches\n", n);
    return 0;
}
