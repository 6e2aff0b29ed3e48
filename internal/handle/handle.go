// Package handle is the library handle: a device and a stream, the kernel
// launch path (Run), a mutex-guarded scratch-buffer cache, a replaceable
// allocator, and the stream tracker that find's naive evaluations use.
package handle

import (
	"fmt"
	"sync"
	"time"

	"miotool/internal/hip"
	"miotool/internal/streams"
)

// Options configure a Handle.
type Options struct {
	// Stream is the stream Run launches on; zero makes the handle create
	// (and own) a non-blocking stream.
	Stream hip.Stream
	// Policy is the tracker's reclaim policy (worker when empty).
	Policy streams.Policy
	// MaxDraining is the tracker's backlog cap; 0 derives it from
	// GPU_MAX_HW_QUEUES.
	MaxDraining int
	// Allocator replaces the runtime's malloc/free for scratch buffers.
	Allocator *Allocator
	// CloseTimeout bounds Close: the tracker's teardown and the wait for
	// the handle's own stream (streams.DefaultCloseTimeout when zero).
	CloseTimeout time.Duration
}

// Handle is bound to one device and one stream.
type Handle struct {
	dev       hip.Device
	stream    hip.Stream
	ownStream hip.Stream // created by New; zero when the caller gave one
	alloc     Allocator
	tracker   *streams.Tracker
	closeWait time.Duration

	scratchMu sync.Mutex
	scratch   *Scratch

	modMu   sync.Mutex
	modules map[*hip.KernelSource]hip.Module
	funcs   map[funcKey]hip.Function
}

type funcKey struct {
	src  *hip.KernelSource
	name string
}

// New makes a handle on dev.
func New(dev hip.Device, opts Options) (*Handle, error) {
	if opts.Allocator != nil && (opts.Allocator.Alloc == nil || opts.Allocator.Free == nil) {
		return nil, fmt.Errorf("allocator needs both Alloc and Free (Alloc set: %t, Free set: %t)",
			opts.Allocator.Alloc != nil, opts.Allocator.Free != nil)
	}
	if opts.CloseTimeout <= 0 {
		opts.CloseTimeout = streams.DefaultCloseTimeout
	}
	tr, err := streams.New(dev, streams.Options{Policy: opts.Policy, MaxDraining: opts.MaxDraining, CloseTimeout: opts.CloseTimeout})
	if err != nil {
		return nil, err
	}
	h := &Handle{
		dev:       dev,
		stream:    opts.Stream,
		tracker:   tr,
		closeWait: opts.CloseTimeout,
		modules:   map[*hip.KernelSource]hip.Module{},
		funcs:     map[funcKey]hip.Function{},
	}
	if opts.Allocator != nil {
		h.alloc = *opts.Allocator
	} else {
		h.alloc = DeviceAllocator(dev)
	}
	if h.stream == 0 {
		s, err := dev.StreamCreate(hip.StreamNonBlocking)
		if err != nil {
			_ = tr.Close()
			return nil, fmt.Errorf("create the handle's stream: %w", err)
		}
		h.stream, h.ownStream = s, s
	}
	return h, nil
}

// Device is the handle's device.
func (h *Handle) Device() hip.Device { return h.dev }

// Stream is the stream Run launches on.
func (h *Handle) Stream() hip.Stream { return h.stream }

// SetStream makes Run launch on s (miopenSetStream). The handle does not
// take ownership of s.
func (h *Handle) SetStream(s hip.Stream) {
	h.stream = s
}

// Tracker is the handle's stream tracker.
func (h *Handle) Tracker() *streams.Tracker { return h.tracker }

// CloseTimeout bounds each wait of Close (see Options.CloseTimeout).
func (h *Handle) CloseTimeout() time.Duration { return h.closeWait }

// Function loads src once per handle and returns the named entry point.
func (h *Handle) Function(src *hip.KernelSource, name string) (hip.Function, error) {
	h.modMu.Lock()
	defer h.modMu.Unlock()
	if f, ok := h.funcs[funcKey{src, name}]; ok {
		return f, nil
	}
	m, ok := h.modules[src]
	if !ok {
		var err error
		if m, err = h.dev.ModuleLoad(src); err != nil {
			return 0, fmt.Errorf("load kernels %s: %w", src.Name, err)
		}
		h.modules[src] = m
	}
	f, err := h.dev.ModuleGetFunction(m, name)
	if err != nil {
		return 0, fmt.Errorf("kernel %s: %w", name, err)
	}
	h.funcs[funcKey{src, name}] = f
	return f, nil
}

// Run launches a kernel on the handle's stream. It is the launch path every
// convolution takes, so under the worker and poller policies it does no
// tracker work; the lazy and guarded policies sweep abandoned streams here
// first.
func (h *Handle) Run(f hip.Function, grid, block hip.Dim3, shared uint32, args ...hip.KernelArg) error {
	return h.RunOn(h.stream, f, grid, block, shared, args...)
}

// RunOn is Run on another stream (a tracker slot's, during find). The
// tracker's policy decides what else the launch path does (see
// streams.Tracker.BeforeLaunch).
func (h *Handle) RunOn(s hip.Stream, f hip.Function, grid, block hip.Dim3, shared uint32, args ...hip.KernelArg) error {
	h.tracker.BeforeLaunch(h.stream)
	if err := h.dev.LaunchKernel(f, grid, block, shared, s, args...); err != nil {
		return fmt.Errorf("failed to launch kernel: %w", err)
	}
	return nil
}

// ScratchBuffer returns a reference to a scratch buffer of at least bytes,
// growing the cached one when it is too small. The caller releases its
// reference (or hands it to the tracker with Pin).
func (h *Handle) ScratchBuffer(bytes int) (*Scratch, error) {
	if bytes <= 0 {
		return nil, fmt.Errorf("scratch buffer size must be positive, got %d", bytes)
	}
	h.scratchMu.Lock()
	if h.scratch != nil && h.scratch.Bytes() >= bytes {
		defer h.scratchMu.Unlock()
		return h.scratch.Retain(), nil
	}
	s, err := newScratch(h.alloc, bytes)
	if err != nil {
		h.scratchMu.Unlock()
		return nil, err
	}
	old := h.scratch
	h.scratch = s
	ref := s.Retain()
	h.scratchMu.Unlock()
	// The smaller buffer may still be pinned elsewhere; drop only the
	// cache's reference, outside the lock (a free may wait for the device).
	if old != nil {
		if err := old.Release(); err != nil {
			return ref, fmt.Errorf("free the smaller scratch buffer: %w", err)
		}
	}
	return ref, nil
}

// DropScratchCache releases the cache's reference; buffers still pinned by
// abandoned evaluations stay alive until their streams drain.
func (h *Handle) DropScratchCache() error {
	h.scratchMu.Lock()
	s := h.scratch
	h.scratch = nil
	h.scratchMu.Unlock()
	if s == nil {
		return nil
	}
	return s.Release()
}

// Close tears down the tracker, the scratch cache, the modules and the
// handle's own stream. Each wait is bounded by CloseTimeout: work that
// never finishes makes Close return an error naming what it left (the
// stream, and what the tracker still pins) instead of hanging.
func (h *Handle) Close() error {
	var first error
	keep := func(err error) {
		if err != nil && first == nil {
			first = err
		}
	}
	keep(h.tracker.Close())
	keep(h.DropScratchCache())
	if h.ownStream != 0 {
		synced := make(chan error, 1)
		go func() { synced <- h.dev.StreamSynchronize(h.ownStream) }()
		timer := time.NewTimer(h.closeWait)
		select {
		case err := <-synced:
			keep(err)
			keep(h.dev.StreamDestroy(h.ownStream))
		case <-timer.C:
			keep(fmt.Errorf("handle teardown stopped waiting after %v: its stream %#x is still busy and was left", h.closeWait, uintptr(h.ownStream)))
		}
		timer.Stop()
	}
	h.modMu.Lock()
	for _, m := range h.modules {
		keep(h.dev.ModuleUnload(m))
	}
	h.modules, h.funcs = nil, nil
	h.modMu.Unlock()
	return first
}
