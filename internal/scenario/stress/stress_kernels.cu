// miotool stress-threads kernels.
//
// One source for NVRTC and hiprtc, written as internal/conv's kernels are: no
// headers, extern "C" entry points, built-in thread indices only. Each entry
// point has a Go twin in stress_kernels.go for the simulated device: change
// both together.

// The PyTorch test's results[t].div_(4.0): every element of y divided, in
// place, by divisor. A 1-D grid of 256-thread blocks covering n elements.
extern "C" __global__ void __launch_bounds__(256)
div_scalar_inplace_f32(float* __restrict__ y, unsigned n, float divisor)
{
    const unsigned i = blockIdx.x * blockDim.x + threadIdx.x;
    if (i < n)
        y[i] = y[i] / divisor;
}
