package gpulib

import (
	"os"
	"testing"
	"unsafe"
)

// realLibrary finds a shared library every glibc system has, to stand in
// for a runtime that loads.
func realLibrary(t *testing.T) string {
	t.Helper()
	for _, p := range []string{
		"/lib/x86_64-linux-gnu/libm.so.6", "/usr/lib/x86_64-linux-gnu/libm.so.6",
		"/lib64/libm.so.6", "/usr/lib64/libm.so.6", "/lib/aarch64-linux-gnu/libm.so.6",
	} {
		if _, err := os.Stat(p); err == nil {
			return p
		}
	}
	t.Skip("no libm.so.6 found to stand in for a loadable library")
	return ""
}

// pointerAt turns a C address (or one of Go memory the test keeps alive)
// into an unsafe.Pointer, for the fake runtimes' out-parameters.
func pointerAt(p uintptr) unsafe.Pointer {
	return *(*unsafe.Pointer)(unsafe.Pointer(&p))
}
