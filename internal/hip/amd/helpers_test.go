package amd

import (
	"encoding/binary"
	"math"
	"os"
	"runtime"
	"testing"
	"time"

	"miotool/internal/hip"
)

func TestMain(m *testing.M) {
	code := m.Run()
	closeGPU()
	removeMocks()
	os.Exit(code)
}

// testKernels builds with hiprtc for the GPU tests; the stand-in runtime
// knows vadd, inc and probe by name.
const testKernels = `
extern "C" __global__ void vadd(const float* a, const float* b, float* c, int n) {
    int i = blockIdx.x * blockDim.x + threadIdx.x;
    if (i < n) c[i] = a[i] + b[i];
}
extern "C" __global__ void inc(float* x, int n) {
    int i = blockIdx.x * blockDim.x + threadIdx.x;
    if (i < n) x[i] += 1.0f;
}
extern "C" __global__ void probe(float* out, int a, unsigned b, long long c, unsigned long long d, float e, double f) {
    if (threadIdx.x == 0 && blockIdx.x == 0) out[0] = a + b + c + d + e + f;
}
`

func testSource() *hip.KernelSource {
	return &hip.KernelSource{Name: "hip-test", Text: testKernels, Kernels: []string{"vadd", "inc", "probe"}}
}

func floatsToBytes(v []float32) []byte {
	b := make([]byte, 4*len(v))
	for i, f := range v {
		binary.LittleEndian.PutUint32(b[4*i:], math.Float32bits(f))
	}
	return b
}

func bytesToFloats(b []byte) []float32 {
	v := make([]float32, len(b)/4)
	for i := range v {
		v[i] = math.Float32frombits(binary.LittleEndian.Uint32(b[4*i:]))
	}
	return v
}

// waitTimeout bounds every wait on the device or a callback: a lost
// callback fails the test instead of hanging it.
const waitTimeout = 30 * time.Second

func waitClosed(t testing.TB, ch <-chan struct{}, what string) {
	t.Helper()
	select {
	case <-ch:
	case <-time.After(waitTimeout):
		t.Fatalf("timed out after %v waiting for %s", waitTimeout, what)
	}
}

func must(t testing.TB, err error) {
	t.Helper()
	if err != nil {
		t.Fatal(err)
	}
}

// onLockedThread runs fn on a new goroutine locked to its OS thread and
// waits for it.
func onLockedThread(t testing.TB, fn func()) {
	t.Helper()
	done := make(chan struct{})
	go func() {
		defer close(done)
		runtime.LockOSThread()
		defer runtime.UnlockOSThread()
		fn()
	}()
	waitClosed(t, done, "work on another OS thread")
}

func wantCode(t testing.TB, err error, want hip.Code, what string) {
	t.Helper()
	if got := hip.CodeOf(err); got != want {
		t.Fatalf("%s: got %v (code %d), want code %d", what, err, got, want)
	}
}
