// Package cache holds loaded AI-heuristic models under one of three
// locking policies, the subject of MIOpen's model-cache race (ROCM-27477).
//
// MIOpen caches its models in function-local static maps. Before the fix,
// GetModel and GetFdeepModel looked a key up without a lock, built the
// model on a miss and stored it with an assignment; two threads missing the
// same key at once both built a model, and the second assignment destroyed
// the model the first thread was already running: a use-after-free that
// crashed inside fdeep. The policies here are that code and its fixes:
//
//   - Unlocked is the pre-fix pattern, faithfully: a plain Go map read and
//     written with no lock; a miss loads, then assigns, and an assignment
//     over an existing entry releases the model it replaces. Released fdeep
//     models unmap their weights (see package fdeep), so a goroutine still
//     predicting with the replaced model reads unmapped memory and the
//     process dies with the runtime's "unexpected fault address", as the
//     C++ process died with SIGSEGV. The map itself may also die first with
//     Go's "concurrent map writes" fatal error. Nothing here prints or
//     fakes a crash; whether one happens is up to the scheduler.
//   - Locked is the fix: one mutex held across find, load and insert; the
//     insert never replaces (emplace), so a returned model lives for the
//     rest of the process.
//   - LockFree reads an immutable snapshot through an atomic pointer with
//     no lock on a hit; a miss takes a mutex only to join or start the
//     single in-flight load of that key, publishes a new snapshot after the
//     load (copy on write; model sets are small) and never replaces. A hit
//     scans the few keys of a small snapshot instead of hashing, settling
//     a key that is a cached key's very bytes (callers reuse their strings)
//     by comparing words rather than string contents, and counts itself
//     with one atomic add on a counter cell picked by its stack, not a
//     random draw.
//
// Crashes are luck, so every cache also records, as a happens-before race
// detector would, what makes the pre-fix pattern wrong in every run: an
// access that none of the cache's own synchronization orders after another
// goroutine's conflicting one (a race), a published model released by an
// insert, and a model released while a reader holds it (Hold, Held.Done).
// The unlocked cache records a race whenever two goroutines share it; the
// fixed caches record nothing, at no measurable cost on their hit path. See
// Detections, Records and Barrier, and detect.go for the rules.
//
// Options.RaceWindow, off by default, waits a random time of up to the
// window between a miss's load and its insert. That widens the window in
// which another goroutine misses the same key, and staggers the inserts of
// goroutines that missed together, so that a replacement lands at a random
// point of the other goroutine's use of its model rather than right after
// its own insert. The wait spins instead of sleeping: a sleeping goroutine
// can wake to find every CPU busy (with the simulated device's kernels, say)
// and insert only once the others have stopped using their models, which
// would hide the race it is meant to show. Describe reports the window so
// results printed with a cache say how it ran.
//
// Keys follow the fix: (arch, solver) for TunaNet and KTN model sets, and
// (path, key) for single fdeep models.
package cache

import (
	"fmt"
	"math/rand/v2"
	"strings"
	"time"
)

// Policy selects a cache's locking discipline.
type Policy string

// The three policies.
const (
	Unlocked Policy = "unlocked"
	Locked   Policy = "locked"
	LockFree Policy = "lockfree"
)

// Policies lists every policy, pre-fix first.
var Policies = []Policy{Unlocked, Locked, LockFree}

// ParsePolicy accepts unlocked, locked and lockfree (or lock-free).
func ParsePolicy(s string) (Policy, error) {
	switch strings.ToLower(strings.TrimSpace(s)) {
	case "unlocked":
		return Unlocked, nil
	case "locked":
		return Locked, nil
	case "lockfree", "lock-free":
		return LockFree, nil
	}
	return "", fmt.Errorf("unknown model cache policy %q (want unlocked, locked or lockfree)", s)
}

// Releaser is a cached model: Release frees it (for fdeep models, unmaps
// the weights) and reports whether this call did.
type Releaser interface {
	Release() bool
}

// SetKey identifies a TunaNet or KTN model set.
type SetKey struct {
	Arch   string
	Solver string // "" for an arch's TunaNet
}

func (k SetKey) String() string {
	if k.Solver == "" {
		return k.Arch + "/TunaNet"
	}
	return k.Arch + "/" + k.Solver
}

// FileKey identifies one fdeep model file.
type FileKey struct {
	Path string
	Key  string
}

func (k FileKey) String() string { return k.Path + "#" + k.Key }

// Options tune a cache.
type Options struct {
	// RaceWindow, when positive, waits (spinning) a random time of up to
	// this long between a miss's load and its insert. For demonstrations
	// only; zero (off) is the default.
	RaceWindow time.Duration
	// Name names the cache in records ("TunaNet").
	Name string
	// Records collects the cache's detections; caches that share one
	// report together. Nil: the cache keeps its own.
	Records *Records
}

// Stats are a cache's counters since it was made.
type Stats struct {
	Hits       uint64 // Gets that found the model
	Misses     uint64 // Gets that did not, and loaded or waited for a load
	Loads      uint64 // calls of a load function
	LoadErrors uint64 // loads that returned an error (nothing is cached)
	Waits      uint64 // misses served by another goroutine's load (lockfree)
	Replaced   uint64 // inserts that replaced and released a model (unlocked)
}

func (s Stats) String() string {
	return fmt.Sprintf("hits %d, misses %d, loads %d, load errors %d, waits %d, replaced %d",
		s.Hits, s.Misses, s.Loads, s.LoadErrors, s.Waits, s.Replaced)
}

// Cache maps keys to loaded models.
type Cache[K comparable, V Releaser] interface {
	// Get returns the model for key, calling load on a miss. A load error
	// is returned and nothing is cached.
	Get(key K, load func() (V, error)) (V, error)
	// Hold is Get for a caller that says when it has finished with the
	// model (Held.Done), so that a release in between is recorded as a
	// use-after-free.
	Hold(key K, load func() (V, error)) (Held[V], error)
	// Peek is Get's hit alone: the model for key and true if the cache
	// has it (a hit, counted and watched as Get's), else false and nothing
	// counted, for the caller to go on to Get. A caller whose loader is a
	// closure then makes it only on a miss: a closure passed to Get is
	// allocated on every call, hit or not.
	Peek(key K) (V, bool)
	// Barrier declares a point at which every goroutine that used the
	// cache has synchronized with the caller (all joined, or all met at a
	// barrier) and none is inside it: accesses before it are ordered
	// before accesses after it.
	Barrier()
	// Records holds what the cache detected (see Detections).
	Records() *Records
	Stats() Stats
	// Describe is a one-line account of the policy and options.
	Describe() string
	Policy() Policy
}

// New makes an empty cache with the given policy.
func New[K comparable, V Releaser](p Policy, o Options) (Cache[K, V], error) {
	if o.RaceWindow < 0 {
		return nil, fmt.Errorf("model cache race window must not be negative, got %v", o.RaceWindow)
	}
	switch p {
	case Unlocked:
		return &unlocked[K, V]{models: map[K]*entry[K, V]{}, opts: o, d: newDetector(o)}, nil
	case Locked:
		return &locked[K, V]{models: map[K]*entry[K, V]{}, opts: o, d: newDetector(o)}, nil
	case LockFree:
		return newLockFree[K, V](o), nil
	}
	return nil, fmt.Errorf("unknown model cache policy %q (want unlocked, locked or lockfree)", p)
}

var policyAccounts = map[Policy]string{
	Unlocked: "unlocked: pre-fix pattern (plain map, no lock; a miss loads, then assigns over any model inserted meanwhile and releases it)",
	Locked:   "locked: the fix (one mutex over find, load and insert; insert never replaces; models live for the process)",
	LockFree: "lockfree: hits read an atomic snapshot without a lock; one load per key, others wait for it; insert never replaces",
}

func describe(p Policy, o Options) string {
	window := "race window not widened"
	if o.RaceWindow > 0 {
		window = fmt.Sprintf("race window widened by %v (a random wait of up to that between miss and insert)", o.RaceWindow)
	}
	return policyAccounts[p] + "; " + window
}

// widen waits for a random part of the demonstration race window, if any,
// spinning so that the insert follows the wait at once.
func widen(o Options) {
	if o.RaceWindow <= 0 {
		return
	}
	until := time.Now().Add(rand.N(o.RaceWindow + 1))
	for time.Now().Before(until) {
	}
}
