package cuda

import (
	"testing"

	"miotool/internal/hip"
	"miotool/internal/hip/gpulib/gputest"
)

func TestMain(m *testing.M) { gputest.Main(m, gpu.Close, standIns.Remove) }

// testKernels builds with NVRTC for the GPU tests: the shared kernels, and
// spin, which the stream and event tests time.
const testKernels = gputest.KernelText + `
extern "C" __global__ void spin(unsigned long long ns) {
    unsigned long long start, now;
    asm volatile("mov.u64 %0, %%globaltimer;" : "=l"(start));
    do {
        asm volatile("mov.u64 %0, %%globaltimer;" : "=l"(now));
    } while (now - start < ns);
}
`

func testSource() *hip.KernelSource {
	return &hip.KernelSource{Name: "cuda-test", Text: testKernels, Kernels: []string{"vadd", "inc", "spin"}}
}

// kit is d as the shared scenarios see it. CUDA tears a failed capture
// down: the stream reads none afterwards.
func kit(d *device) gputest.Kit {
	return gputest.Kit{
		Device:     d,
		Source:     testSource,
		CompileLog: "broken.cu(",
		AfterFailedCapture: func(t testing.TB, st hip.CaptureStatus) {
			if st != hip.CaptureStatusNone {
				t.Fatalf("stream status after the failed capture: %v, want none", st)
			}
		},
	}
}

var (
	must     = gputest.Must
	wantCode = gputest.WantCode
)
