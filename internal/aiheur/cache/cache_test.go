package cache

import (
	"errors"
	"fmt"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"
)

// fakeModel records its release without freeing anything, so tests can
// check replace-and-release logic without crashing.
type fakeModel struct {
	id       int
	released atomic.Bool
}

func (m *fakeModel) Release() bool { return m.released.CompareAndSwap(false, true) }

// wait receives from ch or fails the test after a wide deadline.
func wait(t *testing.T, ch <-chan struct{}, what string) {
	t.Helper()
	select {
	case <-ch:
	case <-time.After(30 * time.Second):
		t.Fatalf("timed out waiting for %s", what)
	}
}

// closeOnce closes ch if it is still open (for t.Cleanup on every path).
func closeOnce(ch chan struct{}) {
	select {
	case <-ch:
	default:
		close(ch)
	}
}

func newCache(t *testing.T, p Policy, o Options) Cache[SetKey, *fakeModel] {
	t.Helper()
	c, err := New[SetKey, *fakeModel](p, o)
	if err != nil {
		t.Fatal(err)
	}
	return c
}

func TestParsePolicy(t *testing.T) {
	tests := []struct {
		in      string
		want    Policy
		wantErr bool
	}{
		{"unlocked", Unlocked, false},
		{"locked", Locked, false},
		{"lockfree", LockFree, false},
		{"Lock-Free", LockFree, false},
		{" locked ", Locked, false},
		{"mutex", "", true},
		{"", "", true},
	}
	for _, tc := range tests {
		got, err := ParsePolicy(tc.in)
		if (err != nil) != tc.wantErr || got != tc.want {
			t.Errorf("ParsePolicy(%q) = %q, %v; want %q, error %v", tc.in, got, err, tc.want, tc.wantErr)
		}
		if err != nil && !strings.Contains(err.Error(), fmt.Sprintf("%q", tc.in)) {
			t.Errorf("ParsePolicy(%q) error %q does not name the value", tc.in, err)
		}
	}
}

func TestNewRejectsBadOptions(t *testing.T) {
	if _, err := New[SetKey, *fakeModel]("spinlock", Options{}); err == nil {
		t.Error("New accepted an unknown policy")
	}
	if _, err := New[SetKey, *fakeModel](Locked, Options{RaceWindow: -time.Second}); err == nil {
		t.Error("New accepted a negative race window")
	}
}

func TestDescribe(t *testing.T) {
	for _, p := range Policies {
		plain := newCache(t, p, Options{})
		widened := newCache(t, p, Options{RaceWindow: 3 * time.Millisecond})
		if plain.Policy() != p {
			t.Errorf("Policy() = %q, want %q", plain.Policy(), p)
		}
		if d := plain.Describe(); !strings.HasPrefix(d, string(p)+":") || !strings.Contains(d, "not widened") {
			t.Errorf("%s Describe() = %q", p, d)
		}
		if d := widened.Describe(); !strings.Contains(d, "widened by 3ms") {
			t.Errorf("%s Describe() with a window = %q", p, d)
		}
	}
}

func TestKeyStrings(t *testing.T) {
	if s := (SetKey{Arch: "gfx942"}).String(); s != "gfx942/TunaNet" {
		t.Errorf("TunaNet key = %q", s)
	}
	if s := (SetKey{Arch: "gfx90a", Solver: "ConvHipIgemmGroupXdlops"}).String(); s != "gfx90a/ConvHipIgemmGroupXdlops" {
		t.Errorf("KTN key = %q", s)
	}
	if s := (FileKey{Path: "/db/gfx942.tn.model", Key: "tn"}).String(); s != "/db/gfx942.tn.model#tn" {
		t.Errorf("file key = %q", s)
	}
}

// Sequential use: a hit after a miss, counters, load errors not cached.
func TestSequentialGet(t *testing.T) {
	for _, p := range Policies {
		t.Run(string(p), func(t *testing.T) {
			c := newCache(t, p, Options{})
			key := SetKey{Arch: "gfx942"}
			boom := errors.New("disk on fire")
			if _, err := c.Get(key, func() (*fakeModel, error) { return nil, boom }); !errors.Is(err, boom) {
				t.Fatalf("failing load: err = %v", err)
			}
			a := &fakeModel{id: 1}
			got, err := c.Get(key, func() (*fakeModel, error) { return a, nil })
			if err != nil || got != a {
				t.Fatalf("Get = %v, %v; want model 1", got, err)
			}
			got, err = c.Get(key, func() (*fakeModel, error) { t.Error("load called on a hit"); return nil, nil })
			if err != nil || got != a {
				t.Fatalf("second Get = %v, %v; want model 1", got, err)
			}
			want := Stats{Hits: 1, Misses: 2, Loads: 2, LoadErrors: 1}
			if s := c.Stats(); s != want {
				t.Errorf("Stats() = %v, want %v", s, want)
			}
			if a.released.Load() {
				t.Error("cached model was released")
			}
		})
	}
}

// The pre-fix race, made deterministic with gates: A and B both miss, A
// inserts and returns its model, then B inserts over it and releases it
// while A still holds it. Every map access is ordered by the gates, so
// this runs under the race detector too.
func TestUnlockedReplacesAndReleasesOnConcurrentMiss(t *testing.T) {
	c := newCache(t, Unlocked, Options{})
	key := SetKey{Arch: "gfx942", Solver: "ConvHipIgemmGroupFwdXdlops"}
	a, b := &fakeModel{id: 1}, &fakeModel{id: 2}
	aLoading, bLoading, aReturned := make(chan struct{}), make(chan struct{}), make(chan struct{})
	for _, ch := range []chan struct{}{aLoading, bLoading, aReturned} {
		t.Cleanup(func() { closeOnce(ch) })
	}
	gotA := make(chan *fakeModel, 1)
	go func() {
		m, _ := c.Get(key, func() (*fakeModel, error) {
			close(aLoading)
			<-bLoading // B has missed too
			return a, nil
		})
		gotA <- m
		close(aReturned)
	}()
	wait(t, aLoading, "A to miss")
	gotB := make(chan *fakeModel, 1)
	go func() {
		m, _ := c.Get(key, func() (*fakeModel, error) {
			close(bLoading)
			<-aReturned // A inserted and is using its model
			return b, nil
		})
		gotB <- m
	}()
	var ma, mb *fakeModel
	select {
	case ma = <-gotA:
	case <-time.After(30 * time.Second):
		t.Fatal("A never returned")
	}
	select {
	case mb = <-gotB:
	case <-time.After(30 * time.Second):
		t.Fatal("B never returned")
	}
	if ma != a || mb != b {
		t.Fatalf("A got model %d, B got model %d; want 1 and 2", ma.id, mb.id)
	}
	if !a.released.Load() {
		t.Error("A's model is still live; the pre-fix insert must release the model it replaces")
	}
	if b.released.Load() {
		t.Error("B's model was released")
	}
	want := Stats{Misses: 2, Loads: 2, Replaced: 1}
	if s := c.Stats(); s != want {
		t.Errorf("Stats() = %v, want %v", s, want)
	}
	if m, _ := c.Get(key, nil); m != b {
		t.Errorf("after the race the cache holds model %d, want 2", m.id)
	}
}

// The same arrival order against the fixed caches: B arrives while A is
// loading, and must get A's model without loading or replacing anything.
func TestFixedCachesDoNotReplaceOnConcurrentMiss(t *testing.T) {
	for _, p := range []Policy{Locked, LockFree} {
		t.Run(string(p), func(t *testing.T) {
			c := newCache(t, p, Options{})
			key := SetKey{Arch: "gfx90a"}
			a := &fakeModel{id: 1}
			aLoading, bArriving := make(chan struct{}), make(chan struct{})
			t.Cleanup(func() { closeOnce(aLoading); closeOnce(bArriving) })
			gotA := make(chan *fakeModel, 1)
			go func() {
				m, _ := c.Get(key, func() (*fakeModel, error) {
					close(aLoading)
					<-bArriving
					return a, nil
				})
				gotA <- m
			}()
			wait(t, aLoading, "A to start loading")
			gotB := make(chan *fakeModel, 1)
			go func() {
				close(bArriving)
				m, _ := c.Get(key, func() (*fakeModel, error) {
					t.Error("B loaded although A's load was in flight or done")
					return &fakeModel{id: 2}, nil
				})
				gotB <- m
			}()
			for i, ch := range []chan *fakeModel{gotA, gotB} {
				select {
				case m := <-ch:
					if m != a {
						t.Errorf("caller %d got model %v, want A's", i, m)
					}
				case <-time.After(30 * time.Second):
					t.Fatalf("caller %d never returned", i)
				}
			}
			if a.released.Load() {
				t.Error("A's model was released")
			}
			if s := c.Stats(); s.Loads != 1 || s.Replaced != 0 || s.Hits+s.Misses != 2 {
				t.Errorf("Stats() = %v, want 1 load, 2 gets, nothing replaced", s)
			}
		})
	}
}

// 64 goroutines ask for the same keys at once: each key is loaded exactly
// once, every caller gets that key's model, and nothing is released.
func TestFixedCachesLoadEachKeyOnceUnderContention(t *testing.T) {
	const goroutines = 64
	for _, p := range []Policy{Locked, LockFree} {
		for _, keys := range []int{1, 4} {
			t.Run(fmt.Sprintf("%s/%d-keys", p, keys), func(t *testing.T) {
				c := newCache(t, p, Options{})
				var loads atomic.Int64
				var entered atomic.Int64
				allEntered := make(chan struct{})
				t.Cleanup(func() { closeOnce(allEntered) })
				models := make([]*fakeModel, keys)
				for i := range models {
					models[i] = &fakeModel{id: i}
				}
				results := make([]*fakeModel, goroutines)
				errs := make([]error, goroutines)
				start := make(chan struct{})
				var wg sync.WaitGroup
				for g := 0; g < goroutines; g++ {
					wg.Add(1)
					go func() {
						defer wg.Done()
						<-start
						k := g % keys
						if entered.Add(1) == goroutines {
							close(allEntered)
						}
						results[g], errs[g] = c.Get(SetKey{Arch: "gfx942", Solver: fmt.Sprint(k)}, func() (*fakeModel, error) {
							loads.Add(1)
							// Hold the load open until every goroutine has
							// set off, so they really contend for the key.
							select {
							case <-allEntered:
							case <-time.After(30 * time.Second):
								return nil, errors.New("not every goroutine arrived")
							}
							return models[k], nil
						})
					}()
				}
				close(start)
				wg.Wait()
				if n := loads.Load(); n != int64(keys) {
					t.Errorf("%d loads for %d keys", n, keys)
				}
				for g := range results {
					if errs[g] != nil || results[g] != models[g%keys] {
						t.Fatalf("goroutine %d got %v, %v; want model %d", g, results[g], errs[g], g%keys)
					}
				}
				for _, m := range models {
					if m.released.Load() {
						t.Errorf("model %d was released", m.id)
					}
				}
				s := c.Stats()
				if s.Hits+s.Misses != goroutines || s.Loads != uint64(keys) || s.Replaced != 0 {
					t.Errorf("Stats() = %v, want %d gets, %d loads, nothing replaced", s, goroutines, keys)
				}
			})
		}
	}
}

// A panicking load must not leave other callers of the key waiting forever.
func TestLockFreeLoadPanicDoesNotWedgeKey(t *testing.T) {
	c := newCache(t, LockFree, Options{})
	key := SetKey{Arch: "gfx942"}
	func() {
		defer func() {
			if recover() == nil {
				t.Error("the load's panic did not reach its caller")
			}
		}()
		_, _ = c.Get(key, func() (*fakeModel, error) { panic("corrupt model") })
	}()
	done := make(chan *fakeModel, 1)
	go func() {
		m, _ := c.Get(key, func() (*fakeModel, error) { return &fakeModel{id: 7}, nil })
		done <- m
	}()
	select {
	case m := <-done:
		if m == nil || m.id != 7 {
			t.Errorf("Get after a panicked load = %v, want model 7", m)
		}
	case <-time.After(30 * time.Second):
		t.Fatal("Get after a panicked load hung")
	}
}

// With the race window the fixed caches still load once per key; the
// window only lengthens each miss.
func TestRaceWindowKeepsFixedCachesCorrect(t *testing.T) {
	for _, p := range []Policy{Locked, LockFree} {
		c := newCache(t, p, Options{RaceWindow: time.Millisecond})
		var loads atomic.Int64
		var wg sync.WaitGroup
		for g := 0; g < 8; g++ {
			wg.Add(1)
			go func() {
				defer wg.Done()
				_, _ = c.Get(SetKey{Arch: "gfx908"}, func() (*fakeModel, error) {
					loads.Add(1)
					return &fakeModel{}, nil
				})
			}()
		}
		wg.Wait()
		if loads.Load() != 1 {
			t.Errorf("%s with a race window: %d loads, want 1", p, loads.Load())
		}
	}
}

// Peek is Get's hit alone: a miss returns false and counts nothing (no
// load, no miss); a hit returns the cached model and counts as Get's.
func TestPeekHitsWithoutLoadingAndMissesWithoutCounting(t *testing.T) {
	for _, p := range Policies {
		t.Run(string(p), func(t *testing.T) {
			c := newCache(t, p, Options{})
			key := SetKey{Arch: "gfx942"}
			if m, ok := c.Peek(key); ok || m != nil {
				t.Fatalf("Peek on an empty cache = %v, %t", m, ok)
			}
			if s := c.Stats(); s != (Stats{}) {
				t.Fatalf("a Peek that missed counted %v", s)
			}
			want := &fakeModel{id: 1}
			if _, err := c.Get(key, modelLoader(want)); err != nil {
				t.Fatal(err)
			}
			if m, ok := c.Peek(key); !ok || m != want {
				t.Fatalf("Peek after Get = %v, %t; want the cached model", m, ok)
			}
			if s := c.Stats(); s != (Stats{Hits: 1, Misses: 1, Loads: 1}) {
				t.Errorf("stats %v; want one miss, one load, one hit", s)
			}
		})
	}
}
