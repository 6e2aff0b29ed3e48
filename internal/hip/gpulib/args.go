package gpulib

import (
	"fmt"
	"math"
	"sync"
	"unsafe"

	"miotool/internal/hip"
)

// ArgError is a kernel argument of a type no backend can pass.
type ArgError struct {
	Index int
	Value any
}

func (e *ArgError) Error() string {
	if e.Value == nil {
		return fmt.Sprintf("kernel argument %d is nil", e.Index)
	}
	return fmt.Sprintf("kernel argument %d has type %T; want hip.DevPtr, int32, uint32, int64, uint64, float32 or float64", e.Index, e.Value)
}

// ArgSize is the size in bytes a kernel argument occupies in the kernel's
// parameter block (also its alignment).
func ArgSize(a hip.KernelArg) (int, bool) {
	switch a.(type) {
	case hip.DevPtr, int64, uint64, float64:
		return 8, true
	case int32, uint32, float32:
		return 4, true
	}
	return 0, false
}

// argBits is the value of a as the low bytes of a little-endian uint64.
func argBits(a hip.KernelArg) (uint64, bool) {
	switch v := a.(type) {
	case hip.DevPtr:
		return uint64(v), true
	case int32:
		return uint64(uint32(v)), true
	case uint32:
		return uint64(v), true
	case int64:
		return uint64(v), true
	case uint64:
		return v, true
	case float32:
		return uint64(math.Float32bits(v)), true
	case float64:
		return math.Float64bits(v), true
	}
	return 0, false
}

// KernelArgs is one launch's arguments in the form cuLaunchKernel and
// hipModuleLaunchKernel read as kernelParams: a void* array with one entry
// per argument, each pointing at that argument's value. Array and values sit
// in one Go allocation of 8-byte slots, so every value is 8-byte aligned
// (enough for every accepted type) and nothing in it is a Go pointer the
// garbage collector must know about. Keep the KernelArgs reachable until the
// launch call returns (Release after it does).
type KernelArgs struct {
	slots []uint64 // [0,n): addresses of the values; [n,2n): the values
	n     int
}

var argPool = sync.Pool{New: func() any { return new(KernelArgs) }}

// PackKernelArgs marshals args. It returns an *ArgError for a type outside
// the set hip.KernelArg documents.
func PackKernelArgs(args []hip.KernelArg) (*KernelArgs, error) {
	k := argPool.Get().(*KernelArgs)
	n := len(args)
	if cap(k.slots) < 2*n {
		k.slots = make([]uint64, 2*n)
	}
	k.slots = k.slots[:2*n]
	k.n = n
	for i, a := range args {
		bits, ok := argBits(a)
		if !ok {
			k.Release()
			return nil, &ArgError{Index: i, Value: a}
		}
		k.slots[n+i] = bits
		k.slots[i] = uint64(uintptr(unsafe.Pointer(&k.slots[n+i])))
	}
	return k, nil
}

// Pointer is the void** to pass as kernelParams; zero when there are no
// arguments.
func (k *KernelArgs) Pointer() uintptr {
	if k.n == 0 {
		return 0
	}
	return uintptr(unsafe.Pointer(&k.slots[0]))
}

// Len is the number of arguments.
func (k *KernelArgs) Len() int { return k.n }

// ValueAddr is the address argument i's value was stored at.
func (k *KernelArgs) ValueAddr(i int) uintptr { return uintptr(k.slots[i]) }

// Release returns k for reuse; k must not be used afterwards.
func (k *KernelArgs) Release() {
	if k == nil {
		return
	}
	clear(k.slots)
	k.n = 0
	argPool.Put(k)
}
