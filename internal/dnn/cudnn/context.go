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
	drv     driverAPI
	st      gpulib.StatusMapper
	dev     int32
	ctx     uintptr
	Ordinal int
}

// driverAPI holds the address of every driver function Context calls.
type driverAPI struct {
	init, deviceGet, retain, release, setCurrent uintptr
}

func (d *driverAPI) symbols() []dl.Symbol {
	return []dl.Symbol{
		{Name: "cuInit", Addr: &d.init},
		{Name: "cuDeviceGet", Addr: &d.deviceGet},
		{Name: "cuDevicePrimaryCtxRetain", Addr: &d.retain},
		{Name: "cuDevicePrimaryCtxRelease_v2", Addr: &d.release},
		{Name: "cuCtxSetCurrent", Addr: &d.setCurrent},
	}
}

// DriverPath is the CUDA driver dev loaded (its "libcuda" library record),
// or DriverSoname when it names none.
func DriverPath(dev hip.Device) string { return dnnlib.LoadedPath(dev, "libcuda", DriverSoname) }

// OpenContext opens the driver at path (opening a library already loaded
// returns the same instance), initialises it and retains the primary
// context of device ordinal. Errors are *hip.Error values in the CUDA
// dialect, or the loader's message for a library that does not open.
func OpenContext(path string, ordinal int) (*Context, error) {
	c := &Context{Ordinal: ordinal, st: gpulib.StatusMapper{Dialect: hip.DialectCUDA}}
	if err := dnnlib.BindRuntime("the CUDA driver", path, ordinal, c.drv.symbols()); err != nil {
		return nil, err
	}
	if st := dl.Call(c.drv.init, 0); st != 0 {
		return nil, c.st.Err("Init", st)
	}
	if st := dl.Call(c.drv.deviceGet, uintptr(unsafe.Pointer(&c.dev)), uintptr(ordinal)); st != 0 {
		return nil, c.st.Err("DeviceGet", st)
	}
	if st := dl.Call(c.drv.retain, uintptr(unsafe.Pointer(&c.ctx)), uintptr(c.dev)); st != 0 {
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
	return c.st.Err("CtxSetCurrent", dl.Call(c.drv.setCurrent, c.ctx))
}

// Close releases the reference OpenContext retained.
func (c *Context) Close() error {
	if c == nil || c.ctx == 0 {
		return nil
	}
	c.ctx = 0
	return c.st.Err("DevicePrimaryCtxRelease", dl.Call(c.drv.release, uintptr(c.dev)))
}
