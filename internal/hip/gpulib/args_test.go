package gpulib

import (
	"errors"
	"math"
	"strings"
	"testing"
	"unsafe"

	"miotool/internal/hip"
)

func TestPackKernelArgs(t *testing.T) {
	args := []hip.KernelArg{
		hip.DevPtr(0x7f0000001000), int32(-5), uint32(0xdeadbeef), int64(-1 << 40),
		uint64(1 << 63), float32(1.5), float64(-2.25),
	}
	wantSize := []int{8, 4, 4, 8, 8, 4, 8}
	k, err := PackKernelArgs(args)
	if err != nil {
		t.Fatal(err)
	}
	defer k.Release()
	if k.Len() != len(args) || k.Pointer() == 0 {
		t.Fatalf("Len %d Pointer %#x", k.Len(), k.Pointer())
	}
	// Read the block the way the driver does: kernelParams[i] is a pointer
	// to argument i's value.
	params := unsafe.Slice((*uintptr)(pointerAt(k.Pointer())), k.Len())
	for i, a := range args {
		size, ok := ArgSize(a)
		if !ok || size != wantSize[i] {
			t.Errorf("ArgSize(%T) = %d, %v; want %d", a, size, ok, wantSize[i])
		}
		p := params[i]
		if p != k.ValueAddr(i) {
			t.Errorf("arg %d: pointer %#x, ValueAddr %#x", i, p, k.ValueAddr(i))
		}
		if p%8 != 0 || p%uintptr(size) != 0 {
			t.Errorf("arg %d (%T) at %#x is not aligned", i, a, p)
		}
		v := pointerAt(p)
		var got any
		switch a.(type) {
		case hip.DevPtr:
			got = *(*hip.DevPtr)(v)
		case int32:
			got = *(*int32)(v)
		case uint32:
			got = *(*uint32)(v)
		case int64:
			got = *(*int64)(v)
		case uint64:
			got = *(*uint64)(v)
		case float32:
			got = *(*float32)(v)
		case float64:
			got = *(*float64)(v)
		}
		if got != a {
			t.Errorf("arg %d: read back %v (%T), want %v", i, got, got, a)
		}
	}
	// Values do not overlap: each 4-byte value sits alone in its slot.
	for i := 1; i < len(params); i++ {
		if params[i]-params[i-1] != 8 {
			t.Errorf("args %d and %d are %d bytes apart", i-1, i, params[i]-params[i-1])
		}
	}
}

func TestPackKernelArgsNaNBits(t *testing.T) {
	nan := math.Float32frombits(0x7fc00001)
	k, err := PackKernelArgs([]hip.KernelArg{nan})
	if err != nil {
		t.Fatal(err)
	}
	defer k.Release()
	if bits := *(*uint32)(pointerAt(k.ValueAddr(0))); bits != 0x7fc00001 {
		t.Fatalf("float32 bits %#x", bits)
	}
}

func TestPackKernelArgsEmpty(t *testing.T) {
	k, err := PackKernelArgs(nil)
	if err != nil {
		t.Fatal(err)
	}
	if k.Pointer() != 0 || k.Len() != 0 {
		t.Fatalf("empty pack: Pointer %#x Len %d", k.Pointer(), k.Len())
	}
	k.Release()
}

func TestPackKernelArgsRejects(t *testing.T) {
	type myInt32 int32
	tests := []struct {
		arg  hip.KernelArg
		want string
	}{
		{42, "type int;"},
		{uintptr(1), "type uintptr;"},
		{"x", "type string;"},
		{[]byte{1}, "type []uint8;"},
		{nil, "is nil"},
		{myInt32(1), "myInt32"},
		{int16(1), "type int16;"},
		{&struct{}{}, "type *struct {}"},
	}
	for _, tt := range tests {
		k, err := PackKernelArgs([]hip.KernelArg{int32(1), tt.arg})
		var ae *ArgError
		if !errors.As(err, &ae) {
			t.Errorf("%T accepted (pack %v)", tt.arg, k)
			continue
		}
		if ae.Index != 1 || !strings.Contains(err.Error(), tt.want) || !strings.HasPrefix(err.Error(), "kernel argument 1 ") {
			t.Errorf("%T: error %q (index %d), want it to mention %q", tt.arg, err, ae.Index, tt.want)
		}
		if _, ok := ArgSize(tt.arg); ok {
			t.Errorf("ArgSize accepted %T", tt.arg)
		}
	}
}

func BenchmarkPackKernelArgs(b *testing.B) {
	args := []hip.KernelArg{hip.DevPtr(1), hip.DevPtr(2), hip.DevPtr(3), int32(4), float32(5)}
	b.ReportAllocs()
	for b.Loop() {
		k, err := PackKernelArgs(args)
		if err != nil {
			b.Fatal(err)
		}
		k.Release()
	}
}
