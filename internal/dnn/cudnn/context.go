package cudnn

import (
	"errors"
	"unsafe"

	"miotool/internal/dl"
	"miotool/internal/dnn/dnnlib"
	"miotool/internal/hip"
	"miotool/internal/hip/gpulib"
)

// DriverSoname is the CUDA driver library Context binds when the device
// does not name the one it loaded.
const DriverSoname = "libcuda.so.1"

// Context holds a retained reference to one device's primary context and
// makes it current on OS threads. miotool's CUDA backend works in the same
// primary context, so buffers and streams from a hip.Device of that backend
// are valid in cuDNN calls made after MakeCurrent.
type Context struct {
	setCurrent, release uintptr
	st                  gpulib.StatusMapper
	dev                 int32
	ctx                 uintptr
	Ordinal             int
}

// DriverPath is the CUDA driver dev loaded (its "libcuda" library record),
// or DriverSoname when it names none.
func DriverPath(dev hip.Device) string { return dnnlib.LoadedPath(dev, "libcuda", DriverSoname) }

// OpenContext opens the driver at path (opening a library already loaded
// returns the same instance), initialises it and retains the primary
// context of device ordinal. Errors are *hip.Error values in the CUDA
// dialect, or the loader's message for a library that does not open.
func OpenContext(path string, ordinal int) (*Context, error) {
	var initFn, deviceGet, retain uintptr
	c := &Context{Ordinal: ordinal, st: gpulib.StatusMapper{Dialect: hip.DialectCUDA}}
	if err := dnnlib.BindRuntime("the CUDA driver", path, ordinal, []dl.Symbol{
		{Name: "cuInit", Addr: &initFn},
		{Name: "cuDeviceGet", Addr: &deviceGet},
		{Name: "cuDevicePrimaryCtxRetain", Addr: &retain},
		{Name: "cuDevicePrimaryCtxRelease_v2", Addr: &c.release},
		{Name: "cuCtxSetCurrent", Addr: &c.setCurrent},
	}); err != nil {
		return nil, err
	}
	if st := dl.Call(initFn, 0); st != 0 {
		return nil, c.st.Err("Init", st)
	}
	if st := dl.Call(deviceGet, uintptr(unsafe.Pointer(&c.dev)), uintptr(ordinal)); st != 0 {
		return nil, c.st.Err("DeviceGet", st)
	}
	if st := dl.Call(retain, uintptr(unsafe.Pointer(&c.ctx)), uintptr(c.dev)); st != 0 {
		return nil, c.st.Err("DevicePrimaryCtxRetain", st)
	}
	return c, nil
}

// MakeCurrent makes the primary context current on the calling OS thread;
// the caller has locked its goroutine to the thread.
func (c *Context) MakeCurrent() error {
	if c.ctx == 0 {
		return errors.New("the CUDA context was released")
	}
	return c.st.Err("CtxSetCurrent", dl.Call(c.setCurrent, c.ctx))
}

// Close releases the reference OpenContext retained.
func (c *Context) Close() error {
	if c == nil || c.ctx == 0 {
		return nil
	}
	c.ctx = 0
	return c.st.Err("DevicePrimaryCtxRelease", dl.Call(c.release, uintptr(c.dev)))
}
