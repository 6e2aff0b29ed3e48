package dl

import (
	"unsafe"

	"github.com/ebitengine/purego"
)

// Call invokes the C function fn with integer or pointer arguments and
// returns the low 32 bits of its result, which is how every status-returning
// runtime call (CUresult, hipError_t, nvrtcResult) comes back. Pointers must
// be converted in the call expression itself, uintptr(unsafe.Pointer(&x)),
// so that the compiler keeps their targets alive and in place.
//
//go:uintptrescapes
func Call(fn uintptr, args ...uintptr) int32 {
	r, _, _ := purego.SyscallN(fn, args...)
	return int32(uint32(r))
}

// CallPtr is Call for C functions that return a pointer (const char*).
//
//go:uintptrescapes
func CallPtr(fn uintptr, args ...uintptr) uintptr {
	r, _, _ := purego.SyscallN(fn, args...)
	return r
}

// CString returns s as a NUL-terminated byte slice for a const char*
// argument.
func CString(s string) []byte {
	b := make([]byte, len(s)+1)
	copy(b, s)
	return b
}

// GoString copies the NUL-terminated C string at p. A zero p gives "".
func GoString(p uintptr) string {
	if p == 0 {
		return ""
	}
	base := pointerAt(p)
	n := 0
	for *(*byte)(unsafe.Add(base, n)) != 0 {
		n++
	}
	return string(unsafe.Slice((*byte)(base), n))
}

// GoStringBytes is the NUL-terminated C string at the start of b (a
// buffer the runtime filled); b without a NUL yields "".
func GoStringBytes(b []byte) string {
	for i, c := range b {
		if c == 0 {
			return string(b[:i])
		}
	}
	return ""
}

// pointerAt turns a C address into an unsafe.Pointer. The address is C
// memory (or Go memory that the caller keeps alive), never a moved Go object.
func pointerAt(p uintptr) unsafe.Pointer {
	return *(*unsafe.Pointer)(unsafe.Pointer(&p))
}
