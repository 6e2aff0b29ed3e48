// miotool stress-threads kernels.
//
// One source for NVRTC and hiprtc, written as internal/conv's kernels are: no
// headers, extern "C" entry points, built-in thread indices only. Each entry
// point has a Go twin in stress_kernels.go for the simulated device: change
// both together. (The division by 4 of the PyTorch test is the convolution's
// alpha = 1/4, fused into internal/conv's kernels.)

// PyTorch's torch.ones / torch.full on the device: y[i] = value for i < n.
// A 1-D grid of 256-thread blocks, striding by the grid's size, so any grid
// fills all n elements. value may be a NaN, whose bits are stored as given.
extern "C" __global__ void __launch_bounds__(256)
fill_f32(float* __restrict__ y, unsigned n, float value)
{
    const unsigned stride = gridDim.x * blockDim.x;
    for (unsigned i = blockIdx.x * blockDim.x + threadIdx.x; i < n; i += stride)
        y[i] = value;
}

// The stress check's guard before each convolution: the first, middle and
// last of the n elements the convolution must write, and the one after them
// that it must not, set to value (a NaN). A convolution that does not run,
// runs short, or writes elsewhere leaves a NaN behind, which every later
// iteration spreads into the final output. One block of at least 4 threads.
extern "C" __global__ void __launch_bounds__(256)
guard_f32(float* __restrict__ y, unsigned n, float value)
{
    const unsigned t = threadIdx.x;
    if (blockIdx.x != 0 || n == 0 || t >= 4)
        return;
    const unsigned at = t == 0 ? 0u : t == 1 ? n / 2 : t == 2 ? n - 1 : n;
    y[at] = value;
}
