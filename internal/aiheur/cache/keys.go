package cache

import (
	"reflect"
	"unsafe"
)

// Keys compared by their bytes.
//
// A hit compares the caller's key with the snapshot's. Callers build their
// keys from the same strings call after call (a handle's arch, a solver
// name from a table), so the two are usually the same bytes: the same
// string pointers and lengths. Comparing those words settles such a hit
// with no call to compare string contents, which was most of a hit's cost
// besides its count. Keys that are equal without being the same bytes
// (strings built anew) are found by the usual comparison after that.

// bytesImplyEqual reports whether two values of t that are the same bytes
// are always equal under ==: true unless t holds a float or a complex (NaN
// is not equal to itself) or an interface (which may hold one).
func bytesImplyEqual(t reflect.Type) bool {
	switch t.Kind() {
	case reflect.Float32, reflect.Float64, reflect.Complex64, reflect.Complex128, reflect.Interface:
		return false
	case reflect.Array:
		return bytesImplyEqual(t.Elem())
	case reflect.Struct:
		for i := range t.NumField() {
			if !bytesImplyEqual(t.Field(i).Type) {
				return false
			}
		}
	}
	return true
}

// keysByBytes reports whether K's keys may be matched by sameBytes.
func keysByBytes[K comparable]() bool {
	return bytesImplyEqual(reflect.TypeFor[K]())
}

// sameBytes reports whether *a and *b are the same bytes. Padding between
// fields may differ between equal keys; it only makes sameBytes false.
func sameBytes[K any](a, b *K) bool {
	n := unsafe.Sizeof(*a)
	pa, pb := unsafe.Pointer(a), unsafe.Pointer(b)
	off := uintptr(0)
	for ; off+8 <= n; off += 8 {
		if *(*uint64)(unsafe.Add(pa, off)) != *(*uint64)(unsafe.Add(pb, off)) {
			return false
		}
	}
	for ; off < n; off++ {
		if *(*byte)(unsafe.Add(pa, off)) != *(*byte)(unsafe.Add(pb, off)) {
			return false
		}
	}
	return true
}
