package miopen

import (
	"miotool/internal/dl"
	"miotool/internal/dnn/dnnlib"
	"miotool/internal/hip"
	"miotool/internal/hip/gpulib"
)

// RuntimeSoname is the HIP runtime DeviceSelector binds when the device
// does not name the one it loaded.
const RuntimeSoname = "libamdhip64.so.7"

// RuntimePath is the HIP runtime dev loaded (its "libamdhip64" library
// record), or RuntimeSoname when it names none. MIOpen links the runtime
// by soname, so both resolve to the one instance in the process.
func RuntimePath(dev hip.Device) string { return dnnlib.LoadedPath(dev, "libamdhip64", RuntimeSoname) }

// DeviceSelector selects one HIP device on OS threads (hipSetDevice is per
// host thread), as MIOpen calls on miotool's HIP backend need.
type DeviceSelector struct {
	setDevice uintptr
	st        gpulib.StatusMapper
	Ordinal   int
}

// OpenDeviceSelector opens the HIP runtime at path (opening a library
// already loaded returns the same instance) and binds hipSetDevice.
func OpenDeviceSelector(path string, ordinal int) (*DeviceSelector, error) {
	s := &DeviceSelector{Ordinal: ordinal, st: gpulib.StatusMapper{Dialect: hip.DialectHIP}}
	if err := dnnlib.BindRuntime("the HIP runtime", path, ordinal, s.symbols()); err != nil {
		return nil, err
	}
	return s, nil
}

func (s *DeviceSelector) symbols() []dl.Symbol {
	return []dl.Symbol{{Name: "hipSetDevice", Addr: &s.setDevice}}
}

// Select makes the device current on the calling OS thread; the caller has
// locked its goroutine to the thread.
func (s *DeviceSelector) Select() error {
	return s.st.Err("SetDevice", dl.Call(s.setDevice, uintptr(s.Ordinal)))
}
