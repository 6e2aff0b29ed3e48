package targettest

import (
	"testing"

	"miotool/internal/dnn/target"
	"miotool/internal/hip"
	"miotool/internal/hip/cuda"
)

// OpenCUDNNDevice opens the first CUDA device for a test of the cudnn
// target on a real GPU, and skips the test where there is no CUDA device
// or no cuDNN 9.
func OpenCUDNNDevice(t *testing.T) hip.Device {
	t.Helper()
	dev, err := cuda.Open(hip.OpenOptions{})
	if err != nil {
		t.Skipf("no CUDA device: %v", err)
	}
	t.Cleanup(func() { _ = dev.Close() })
	if err := target.Available(target.CUDNN); err != nil {
		t.Skipf("%v", err)
	}
	return dev
}
