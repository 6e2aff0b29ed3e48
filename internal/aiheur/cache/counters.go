package cache

import (
	"sync/atomic"
	"unsafe"
)

// Counting on the hit path must not become the contention the lock-free
// policy avoids, nor cost a random draw: counters are striped over cells of
// their own cache line, and a caller picks its cell from the address of its
// own stack. Goroutines have separate stacks, so concurrent callers mostly
// land on different cells; any cell counts correctly, the choice only
// spreads the writes.

const (
	stripeBits = 6
	stripes    = 1 << stripeBits
)

// stripe is the calling goroutine's cell index.
func stripe() uint32 {
	var here byte
	sp := uint64(uintptr(unsafe.Pointer(&here)))
	// Stacks are at least 2 KiB apart; a multiplicative hash spreads them.
	return uint32(((sp >> 10) * 0x9E3779B97F4A7C15) >> (64 - stripeBits))
}

type stripedCounter [stripes]struct {
	n atomic.Uint64
	_ [56]byte // one cache line per cell
}

func (s *stripedCounter) inc() { s[stripe()].n.Add(1) }

func (s *stripedCounter) sum() uint64 {
	var total uint64
	for i := range s {
		total += s[i].n.Load()
	}
	return total
}

// readerCount is an entry's count of holders, striped like the hit
// counter: a hold adds one to its cell and Done takes it off the same cell.
type readerCount [stripes]readerCell

type readerCell struct {
	n atomic.Int64
	_ [56]byte
}

func (r *readerCount) cell() *readerCell { return &r[stripe()] }

func (r *readerCount) sum() int64 {
	var total int64
	for i := range r {
		total += r[i].n.Load()
	}
	return total
}

// counters are shared by all policies so their costs compare fairly.
type counters struct {
	hits                  stripedCounter
	misses                atomic.Uint64 // rare after warm-up: one word is enough
	loads, loadErrors     atomic.Uint64
	waits, replacedModels atomic.Uint64
}

func (c *counters) stats() Stats {
	return Stats{
		Hits:       c.hits.sum(),
		Misses:     c.misses.Load(),
		Loads:      c.loads.Load(),
		LoadErrors: c.loadErrors.Load(),
		Waits:      c.waits.Load(),
		Replaced:   c.replacedModels.Load(),
	}
}

// countedLoad calls fn and counts it.
func countedLoad[V any](c *counters, fn func() (V, error)) (V, error) {
	c.loads.Add(1)
	v, err := fn()
	if err != nil {
		c.loadErrors.Add(1)
	}
	return v, err
}
