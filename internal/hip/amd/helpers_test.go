package amd

import (
	"testing"

	"miotool/internal/hip"
	"miotool/internal/hip/gpulib/gputest"
)

func TestMain(m *testing.M) { gputest.Main(m, gpu.Close, standIns.Remove) }

// testKernels builds with hiprtc for the GPU tests: the shared kernels, and
// probe, whose arguments the stand-in records.
const testKernels = gputest.KernelText + `
extern "C" __global__ void probe(float* out, int a, unsigned b, long long c, unsigned long long d, float e, double f) {
    if (threadIdx.x == 0 && blockIdx.x == 0) out[0] = a + b + c + d + e + f;
}
`

func testSource() *hip.KernelSource {
	return &hip.KernelSource{Name: "hip-test", Text: testKernels, Kernels: []string{"vadd", "inc", "probe"}}
}

// kit is d as the shared scenarios see it.
func kit(d *device) gputest.Kit {
	return gputest.Kit{Device: d, Source: testSource, CompileLog: "broken.hip:"}
}

var (
	must     = gputest.Must
	wantCode = gputest.WantCode
)
