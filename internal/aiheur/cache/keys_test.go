package cache

import (
	"reflect"
	"strings"
	"testing"
)

func TestBytesImplyEqualOnlyWithoutFloatsOrInterfaces(t *testing.T) {
	type withFloat struct {
		Arch string
		Perf float64
	}
	type nested struct {
		K   SetKey
		Ids [2]uint16
	}
	for _, c := range []struct {
		typ  reflect.Type
		want bool
	}{
		{reflect.TypeFor[SetKey](), true},
		{reflect.TypeFor[FileKey](), true},
		{reflect.TypeFor[nested](), true},
		{reflect.TypeFor[*int](), true},
		{reflect.TypeFor[withFloat](), false},
		{reflect.TypeFor[[3]complex64](), false},
		{reflect.TypeFor[any](), false},
		{reflect.TypeFor[struct{ K [1]any }](), false},
	} {
		if got := bytesImplyEqual(c.typ); got != c.want {
			t.Errorf("bytesImplyEqual(%v) = %t, want %t", c.typ, got, c.want)
		}
	}
}

func TestSameBytes(t *testing.T) {
	arch := "gfx942"
	a, b := SetKey{Arch: arch}, SetKey{Arch: arch}
	if !sameBytes(&a, &b) {
		t.Error("keys built from the same string are not the same bytes")
	}
	c := SetKey{Arch: strings.Clone(arch)}
	if sameBytes(&a, &c) {
		t.Error("keys whose strings lie apart are the same bytes")
	}
	type odd struct {
		A uint64
		B [3]byte
	}
	x, y := odd{1, [3]byte{1, 2, 3}}, odd{1, [3]byte{1, 2, 4}}
	if sameBytes(&x, &y) {
		t.Error("keys that differ in their last byte are the same bytes")
	}
}

// A key equal to a cached one but not its very bytes (strings built anew)
// is still a hit, with no load; so is one that is.
func TestLockFreeHitsEqualKeysThatAreNotTheSameBytes(t *testing.T) {
	c := newCache(t, LockFree, Options{})
	loads := 0
	load := func() (*fakeModel, error) { loads++; return &fakeModel{id: loads}, nil }
	keys := []SetKey{{Arch: "gfx942"}, {Arch: "gfx942", Solver: "ConvHipIgemmGroupFwdXdlops"}, {Arch: "gfx90a"}}
	for _, k := range keys {
		if _, err := c.Get(k, load); err != nil {
			t.Fatal(err)
		}
	}
	for i, k := range keys {
		for _, q := range []SetKey{k, {Arch: strings.Clone(k.Arch), Solver: strings.Clone(k.Solver)}} {
			m, err := c.Get(q, load)
			if err != nil || m.id != i+1 {
				t.Errorf("Get(%v) = model %v, %v; want model %d", q, m, err, i+1)
			}
			h, err := c.Hold(q, load)
			if err != nil || h.Model.id != i+1 {
				t.Errorf("Hold(%v) = model %v, %v; want model %d", q, h.Model, err, i+1)
			}
			h.Done()
		}
	}
	if s := c.Stats(); loads != len(keys) || s.Hits != 4*uint64(len(keys)) || s.Misses != uint64(len(keys)) {
		t.Errorf("%d loads, stats %v; want %d loads and misses, %d hits", loads, s, len(keys), 4*len(keys))
	}
}

// Keys that may be equal without being the same bytes the other way round
// (a NaN is the same bytes as itself, yet unequal) are never matched by
// their bytes: a NaN key never hits.
func TestLockFreeFloatKeysAreComparedNotMatchedByBytes(t *testing.T) {
	c, err := New[float64, *fakeModel](LockFree, Options{})
	if err != nil {
		t.Fatal(err)
	}
	if c.(*lockFree[float64, *fakeModel]).byBytes {
		t.Fatal("float keys are matched by their bytes")
	}
	nan := func() float64 { var z float64; return z / z }()
	loads := 0
	load := func() (*fakeModel, error) { loads++; return &fakeModel{id: loads}, nil }
	for range 2 {
		if _, err := c.Get(nan, load); err != nil {
			t.Fatal(err)
		}
	}
	if loads != 2 {
		t.Errorf("a NaN key loaded %d times in two Gets, want 2 (NaN equals nothing)", loads)
	}
}
