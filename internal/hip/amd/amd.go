// Package amd is miotool's AMD backend: the HIP runtime (libamdhip64) and
// hiprtc, called through purego with no cgo.
//
// The device itself is gpulib.Device, the implementation the NVIDIA
// backend shares, so that runs on either vendor's GPU exercise the same
// code; this package supplies libamdhip64's symbol names and attribute
// numbers, the ordinal as what each call makes current (hipSetDevice: the
// current device is per host thread), the architecture from the device
// properties, and hiprtc's options. Errors are *hip.Error values in the
// HIP dialect.
package amd

import (
	"errors"
	"runtime"
	"unsafe"

	"miotool/internal/dl"
	"miotool/internal/hip"
	"miotool/internal/hip/gpulib"
)

const backendName = "hip"

func init() {
	hip.Register(hip.Registration{Name: backendName, GPU: true, Order: 10, Open: Open})
}

// Open binds device opts.Ordinal through the HIP runtime. A missing library
// or symbol, a failing hipInit or a missing device is a
// *hip.UnavailableError.
func Open(opts hip.OpenOptions) (hip.Device, error) {
	rt, err := defaultRuntime()
	if err != nil {
		return nil, err
	}
	return openDevice(opts, rt, defaultHIPRTC(rt.Lib.Loaded))
}

// device is the shared device core with what HIP told about it.
type device struct {
	*gpulib.Device
	rt      *runtimeLib
	rtc     *hiprtcLib
	gcnArch string // as the runtime names it, e.g. gfx942:sramecc+:xnack-
}

func openDevice(opts hip.OpenOptions, rt *runtimeLib, rtc *hiprtcLib) (*device, error) {
	libs := []hip.Library{rt.Lib, rtc.Lib}
	if err := rt.CheckOrdinal(opts.Ordinal, libs...); err != nil {
		return nil, err
	}
	runtime.LockOSThread()
	defer runtime.UnlockOSThread()
	if st := dl.Call(rt.Funcs.Select, uintptr(opts.Ordinal)); st != 0 {
		return nil, rt.Unavailable(rt.Status.Err("SetDevice", st).Error(), libs...)
	}
	d := &device{rt: rt, rtc: rtc}
	props, archErr := d.readProps(opts.Ordinal)
	d.Device = gpulib.NewDevice(gpulib.DeviceConfig{
		Runtime:   &rt.Runtime,
		SelectArg: uintptr(opts.Ordinal),
		Props:     props,
		ArchErr:   archErr,
		Modules:   rtc.modules(),
		Libraries: libs,
	})
	return d, nil
}

// readProps adds to the shared Props the architecture, from the R0600
// properties (the name too, where hipDeviceGetName gives none). An
// architecture the runtime will not give leaves Arch empty and the reason
// for ModuleLoad to refuse with.
func (d *device) readProps(ordinal int) (hip.Props, error) {
	props := d.rt.ReadProps(uintptr(ordinal), ordinal)
	// uint64 words keep the buffer aligned for the struct's size_t fields.
	words := make([]uint64, propsBufferSize/8)
	buf := unsafe.Slice((*byte)(unsafe.Pointer(&words[0])), propsBufferSize)
	var archErr error
	if st := dl.Call(d.rt.api.getDeviceProperties, uintptr(unsafe.Pointer(&words[0])), uintptr(ordinal)); st != 0 {
		archErr = d.rt.Status.Err("GetDeviceProperties", st)
	} else if d.gcnArch = archFromProps(buf); d.gcnArch == "" {
		archErr = errors.New("hipGetDevicePropertiesR0600 gave no gcnArchName of the form gfxNNN")
	}
	if archErr == nil {
		props.Arch, archErr = baseArch(d.gcnArch)
	}
	if props.Name == "" {
		props.Name = dl.GoStringBytes(buf[:256]) // hipDeviceProp_t.name
	}
	return props, archErr
}

var _ hip.Device = (*device)(nil)
