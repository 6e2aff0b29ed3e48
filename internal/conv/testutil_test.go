package conv

import (
	"fmt"
	"math"
	"os"
	"path/filepath"
	"sync"
	"testing"

	"miotool/internal/hip"
	"miotool/internal/testutil"
)

// sliceMemory is a hip.Memory over Go slices: each allocation is a
// []float32 that the twins write through, so tests read results directly.
type sliceMemory struct {
	mu     sync.Mutex
	allocs map[hip.DevPtr][]float32
	next   hip.DevPtr
}

func newSliceMemory() *sliceMemory {
	return &sliceMemory{allocs: map[hip.DevPtr][]float32{}, next: 1 << 20}
}

// add registers v as an allocation (aliased, not copied) and returns its address.
func (m *sliceMemory) add(v []float32) hip.DevPtr {
	m.mu.Lock()
	defer m.mu.Unlock()
	p := m.next
	m.allocs[p] = v
	m.next += hip.DevPtr(4*len(v)+4096) &^ 255 // a gap, so overruns do not land in a neighbour
	return p
}

func (m *sliceMemory) Float32s(p hip.DevPtr, n int) ([]float32, error) {
	m.mu.Lock()
	defer m.mu.Unlock()
	for base, v := range m.allocs {
		if p >= base && p < base+hip.DevPtr(4*len(v)) || p == base {
			off := int(p - base)
			if off%4 != 0 {
				return nil, &hip.Error{Op: "Memory", Code: hip.ErrInvalidValue, Detail: "misaligned float32 access"}
			}
			if off/4+n > len(v) || n < 0 {
				return nil, &hip.Error{Op: "Memory", Code: hip.ErrIllegalAddress,
					Detail: fmt.Sprintf("%d floats at offset %d overrun a %d-float allocation", n, off/4, len(v))}
			}
			return v[off/4 : off/4+n], nil
		}
	}
	return nil, &hip.Error{Op: "Memory", Code: hip.ErrIllegalAddress, Detail: fmt.Sprintf("no allocation at %#x", uint64(p))}
}

func (m *sliceMemory) Bytes(p hip.DevPtr, n int) ([]byte, error) {
	return nil, &hip.Error{Op: "Memory", Code: hip.ErrNotSupported, Detail: "byte views are not used by the conv twins"}
}

// poisoned returns n NaNs: any output element a kernel fails to write stays
// NaN and fails the check.
func poisoned(n int) []float32 {
	v := make([]float32, n)
	for i := range v {
		v[i] = float32(math.NaN())
	}
	return v
}

// moduleRoot is the directory holding go.mod.
func moduleRoot(t testing.TB) string {
	t.Helper()
	return testutil.ModuleRoot(t)
}

// sharedFile is <module root>/../shared/<rel>; the test is skipped when absent.
func sharedFile(t testing.TB, rel string) string {
	t.Helper()
	path := filepath.Join(moduleRoot(t), "..", "shared", rel)
	if _, err := os.Stat(path); err != nil {
		t.Skipf("shared data %s is not available here: %v", path, err)
	}
	return path
}
