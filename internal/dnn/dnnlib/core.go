package dnnlib

import (
	"fmt"
	"unsafe"

	"miotool/internal/dl"
	"miotool/internal/hip"
)

// Core is what a binding keeps of a loaded library the same way for every
// vendor: its report label, where it loaded from and its version, how a
// failed status becomes an *Error[S], and the calls every library makes
// alike to create, free and query its objects (handles and descriptors,
// which are C pointers).
type Core[S Status] struct {
	name    string
	info    hip.Library
	version Version
	explain func(status int32) string
}

// NewCore is the core of a library Load found: name is its report label,
// rec the search record, and explain the library's own text for a failed
// status, "" when it has none worth adding.
func NewCore[S Status](name string, rec hip.Library, explain func(status int32) string) Core[S] {
	return Core[S]{name: name, info: rec, explain: explain}
}

// SetVersion records the library's version, in the search record too.
func (c *Core[S]) SetVersion(v Version) {
	c.version = v
	c.info.Version = v.String()
}

// Info is where the library loaded from and its version.
func (c *Core[S]) Info() hip.Library { return c.info }

// Version is the library's version; zero when the library did not say.
func (c *Core[S]) Version() Version { return c.version }

// String names the library for reports: "libcudnn 9.14.0 (/usr/lib/...)".
func (c *Core[S]) String() string {
	return fmt.Sprintf("%s %s (%s)", c.name, c.version, c.info.Loaded)
}

// Check maps the status a call of op returned to nil for success, else
// to an *Error[S] carrying the library's text for it.
func (c *Core[S]) Check(op string, status int32) error {
	if status == 0 {
		return nil
	}
	e := &Error[S]{Op: op, Status: S(status)}
	if c.explain != nil {
		e.Message = c.explain(status)
	}
	return e
}

// Create makes an object with the library's create call fn(&obj).
func (c *Core[S]) Create(op string, fn uintptr) (uintptr, error) {
	var obj uintptr
	if err := c.Check(op, dl.Call(fn, uintptr(unsafe.Pointer(&obj)))); err != nil {
		return 0, err
	}
	return obj, nil
}

// Destroy frees *obj with the library's destroy call fn and zeroes it,
// failed or not, so that a second Destroy does nothing; a zero *obj (never
// made, or freed already) is left alone.
func (c *Core[S]) Destroy(op string, fn uintptr, obj *uintptr) error {
	if *obj == 0 {
		return nil
	}
	err := c.Check(op, dl.Call(fn, *obj))
	*obj = 0
	return err
}

// Configured returns obj when configuring it, which returned err, worked;
// otherwise it destroys obj again and returns err, so that a constructor
// hands out only objects that are ready.
func Configured[T interface{ Destroy() error }](obj T, err error) (T, error) {
	if err != nil {
		_ = obj.Destroy()
		var none T
		return none, err
	}
	return obj, nil
}

// Stream is the stream a handle's work goes to, read with the library's
// call fn(handle, &stream).
func (c *Core[S]) Stream(op string, fn, handle uintptr) (hip.Stream, error) {
	var s uintptr
	err := c.Check(op, dl.Call(fn, handle, uintptr(unsafe.Pointer(&s))))
	return hip.Stream(s), err
}

// OutputDims is the output shape, n, c, h, w, that the library's call
// fn(conv, x, w, &n, &c, &h, &w) computes for convolution conv over
// tensor x with filter w.
func (c *Core[S]) OutputDims(op string, fn, conv, x, w uintptr) ([4]int, error) {
	var n, ch, h, wd int32
	err := c.Check(op, dl.Call(fn, conv, x, w,
		uintptr(unsafe.Pointer(&n)), uintptr(unsafe.Pointer(&ch)), uintptr(unsafe.Pointer(&h)), uintptr(unsafe.Pointer(&wd))))
	return [4]int{int(n), int(ch), int(h), int(wd)}, err
}

// ScaleTensor enqueues y *= alpha on handle's stream with the library's
// call fn(handle, yDesc, y, &alpha).
func (c *Core[S]) ScaleTensor(op string, fn, handle, yDesc uintptr, y hip.DevPtr, alpha float32) error {
	return c.Check(op, dl.Call(fn, handle, yDesc, uintptr(y), uintptr(unsafe.Pointer(&alpha))))
}
