//go:build linux || darwin

package fdeep

import (
	"fmt"
	"os"
	"sync/atomic"
	"syscall"
	"unsafe"
)

// weightArena is the memory holding one model's weights: an anonymous
// mapping of its own, so that releasing the model returns the pages to the
// kernel and any later read faults instead of quietly seeing stale data.
type weightArena struct {
	mem      []byte
	released atomic.Bool
}

// weightsAreMapped reports whether released weights are really unmapped on
// this platform.
const weightsAreMapped = true

func newWeightArena(count int) (*weightArena, []float32, error) {
	size := count * 4
	if size == 0 {
		size = 4
	}
	page := os.Getpagesize()
	size = (size + page - 1) / page * page
	mem, err := syscall.Mmap(-1, 0, size, syscall.PROT_READ|syscall.PROT_WRITE, syscall.MAP_ANON|syscall.MAP_PRIVATE)
	if err != nil {
		return nil, nil, fmt.Errorf("mapping %d bytes for weights: %w", size, err)
	}
	floats := unsafe.Slice((*float32)(unsafe.Pointer(&mem[0])), count)
	return &weightArena{mem: mem}, floats, nil
}

// seal makes the filled weights read-only, so a stray write faults too.
func (a *weightArena) seal() error {
	if err := syscall.Mprotect(a.mem, syscall.PROT_READ); err != nil {
		return fmt.Errorf("protecting weights: %w", err)
	}
	return nil
}

// release unmaps the weights once; it reports whether this call did it.
func (a *weightArena) release() bool {
	if !a.released.CompareAndSwap(false, true) {
		return false
	}
	// An error here would mean the mapping is already gone; nothing to do.
	_ = syscall.Munmap(a.mem)
	return true
}

func (a *weightArena) isReleased() bool { return a.released.Load() }
