package handle

import (
	"fmt"
	"sync"
	"sync/atomic"

	"miotool/internal/hip"
)

// Allocator is the allocate/deallocate pair a caller may install (the
// counterpart of miopenSetAllocator). Under the worker and poller reclaim
// policies the deallocator is called from the stream tracker's own thread,
// possibly while another thread captures: it must not make calls that
// invalidate every capture in the process (synchronous memset/memcpy,
// device sync).
type Allocator struct {
	Alloc func(bytes int) (hip.DevPtr, error)
	Free  func(p hip.DevPtr) error
}

// DeviceAllocator is the default pair: the runtime's own malloc and free.
func DeviceAllocator(d hip.Device) Allocator {
	return Allocator{Alloc: d.Malloc, Free: d.Free}
}

// Scratch is a reference-counted device buffer. The handle's cache holds one
// reference; an abandoned evaluation holds another until its stream drains.
// The last Release frees the memory with the allocator it came from.
type Scratch struct {
	ptr   hip.DevPtr
	bytes int
	free  func(hip.DevPtr) error
	refs  atomic.Int64
	freed chan struct{}

	mu      sync.Mutex
	tried   bool // the last reference was released and free called
	freeErr error
}

func newScratch(a Allocator, bytes int) (*Scratch, error) {
	p, err := a.Alloc(bytes)
	if err != nil {
		return nil, fmt.Errorf("allocate %d bytes of scratch: %w", bytes, err)
	}
	s := &Scratch{ptr: p, bytes: bytes, free: a.Free, freed: make(chan struct{})}
	s.refs.Store(1)
	return s, nil
}

// Ptr is the buffer's device address.
func (s *Scratch) Ptr() hip.DevPtr { return s.ptr }

// Bytes is the buffer's size.
func (s *Scratch) Bytes() int { return s.bytes }

// Retain adds a reference.
func (s *Scratch) Retain() *Scratch {
	if s.refs.Add(1) <= 1 {
		panic("handle: Retain on a released scratch buffer")
	}
	return s
}

// Release drops a reference; the last one frees the buffer on the calling
// goroutine and returns the deallocator's error. Once the references are
// gone, Release retries a free that failed (the tracker does, at Close).
func (s *Scratch) Release() error {
	n := s.refs.Add(-1)
	if n > 0 {
		return nil
	}
	if n < 0 {
		s.refs.Add(1)
		s.mu.Lock()
		defer s.mu.Unlock()
		if !s.tried || s.freeErr == nil {
			panic("handle: scratch buffer released more often than retained")
		}
		s.freeErr = s.free(s.ptr)
		return s.freeErr
	}
	s.mu.Lock()
	err := s.free(s.ptr)
	s.tried, s.freeErr = true, err
	s.mu.Unlock()
	close(s.freed)
	return err
}

// Freed is closed once the deallocator has first returned (see FreeErr).
func (s *Scratch) Freed() <-chan struct{} { return s.freed }

// FreeErr is the last deallocator's result once Freed is closed.
func (s *Scratch) FreeErr() error {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.freeErr
}
