// Package cuda is miotool's NVIDIA backend: the CUDA driver API
// (libcuda.so.1) and NVRTC, called through purego with no cgo.
//
// The device itself is gpulib.Device, the implementation the AMD backend
// shares; this package supplies libcuda's symbol names and attribute
// numbers, the primary context as the thing each call makes current
// (cuCtxSetCurrent), the architecture from the compute capability, and
// how kernels are loaded: a source's precompiled cubin for the device's
// exact architecture, else NVRTC with its CUBIN and PTX choices, else the
// source's precompiled PTX. Errors are
// *hip.Error values in the CUDA dialect.
package cuda

import (
	"fmt"
	"unsafe"

	"miotool/internal/dl"
	"miotool/internal/hip"
	"miotool/internal/hip/gpulib"
)

const backendName = "cuda"

func init() {
	hip.Register(hip.Registration{Name: backendName, GPU: true, Order: 20, Open: Open})
}

// Open binds device opts.Ordinal through the driver API. A missing library
// or symbol, a failing cuInit or a missing device is a *hip.UnavailableError.
func Open(opts hip.OpenOptions) (hip.Device, error) {
	drv, err := defaultDriver()
	if err != nil {
		return nil, err
	}
	return openDevice(opts, drv, defaultNVRTC())
}

// device is the shared device core with the CUDA handles it was opened
// with.
type device struct {
	*gpulib.Device
	drv *driverLib
	nv  *nvrtcLib
	dev int32   // CUdevice
	ctx uintptr // the retained primary context
	// useCubins: ModuleLoad takes a source's precompiled cubin for the
	// device's architecture (EnvCubin).
	useCubins bool
}

func openDevice(opts hip.OpenOptions, drv *driverLib, nv *nvrtcLib) (*device, error) {
	libs := []hip.Library{drv.Lib, nv.Lib}
	if err := drv.CheckOrdinal(opts.Ordinal, libs...); err != nil {
		return nil, err
	}
	d := &device{drv: drv, nv: nv, useCubins: cubinsWanted()}
	if st := dl.Call(drv.api.deviceGet, uintptr(unsafe.Pointer(&d.dev)), uintptr(opts.Ordinal)); st != 0 {
		return nil, drv.Unavailable(drv.Status.Err("DeviceGet", st).Error(), libs...)
	}
	if st := dl.Call(drv.api.primaryCtxRetain, uintptr(unsafe.Pointer(&d.ctx)), uintptr(d.dev)); st != 0 {
		return nil, drv.Unavailable(drv.Status.Err("DevicePrimaryCtxRetain", st).Error(), libs...)
	}
	props := drv.ReadProps(uintptr(d.dev), opts.Ordinal)
	props.Arch = fmt.Sprintf("sm_%d%d", drv.Attribute(attrCCMajor, uintptr(d.dev)), drv.Attribute(attrCCMinor, uintptr(d.dev)))
	d.Device = gpulib.NewDevice(gpulib.DeviceConfig{
		Runtime:   &drv.Runtime,
		SelectArg: d.ctx,
		Props:     props,
		Modules:   nv.modules(),
		Libraries: libs,
		Release: func() error {
			return drv.Status.Err("DevicePrimaryCtxRelease", dl.Call(drv.api.primaryCtxRelease, uintptr(d.dev)))
		},
	})
	return d, nil
}

var _ hip.Device = (*device)(nil)
