package rules_test

import (
	"sync"
	"testing"
	"time"

	"miotool/internal/hip"
	"miotool/internal/rules"
)

// The calls of the newer actions may be refused like any other; whatever
// they answer, the cell gives back what it took: pinned memory freed,
// registrations undone, the module unloaded, and host pages unmapped once
// they are no longer registered (never while they still are).
func TestAddedActionsCleanUpWhateverTheyAnswer(t *testing.T) {
	var mu sync.Mutex
	mapped := map[*byte]bool{}
	defer rules.SetMapHostPages(func(n int) ([]byte, func() error, error) {
		b := make([]byte, n)
		mu.Lock()
		mapped[&b[0]] = true
		mu.Unlock()
		return b, func() error {
			mu.Lock()
			defer mu.Unlock()
			delete(mapped, &b[0])
			return nil
		}, nil
	})()
	added := []rules.Action{rules.HostAlloc, rules.HostFree, rules.HostRegister, rules.HostUnregister, rules.ModuleUnload,
		rules.LegacyStreamLaunch, rules.LegacyStreamLaunchBlockingCapture}
	for _, refused := range []bool{false, true} {
		f := newFake()
		if refused {
			f.refuse = func(c call, _ int) hip.Code {
				switch c.op {
				case "HostAlloc", "HostFree", "HostRegister", "HostUnregister", "ModuleUnload", "LaunchKernel":
					return hip.ErrStreamCaptureUnsupported
				}
				return hip.Success
			}
		}
		m := probe(t, f, rules.Options{Spin: time.Hour, Cells: rules.CellsFor(added...)})
		for _, o := range m.Outcomes {
			want := hip.Success
			if refused {
				want = hip.ErrStreamCaptureUnsupported
			}
			if !o.Valid() || o.Returns != want || len(o.Cleanup) > 0 {
				t.Errorf("refused=%v %s: outcome %+v", refused, o.Key, o)
			}
		}
		if left := f.leaked(); len(left) > 0 {
			t.Errorf("refused=%v: not released: %v", refused, left)
		}
		mu.Lock()
		if len(mapped) > 0 {
			t.Errorf("refused=%v: %d host mappings left", refused, len(mapped))
		}
		mu.Unlock()
	}
}

// Host pages that will not unregister stay mapped: the runtime may still
// use them. The clean-up says so.
func TestRegisteredPagesThatWillNotUnregisterStayMapped(t *testing.T) {
	unmapped := 0
	defer rules.SetMapHostPages(func(n int) ([]byte, func() error, error) {
		return make([]byte, n), func() error { unmapped++; return nil }, nil
	})()
	f := newFake()
	f.failUnregister = true
	key := rules.CellKey{Action: rules.HostRegister, Capture: hip.CaptureModeGlobal}
	m := probe(t, f, rules.Options{Spin: time.Hour, Cells: []rules.CellKey{key}})
	o := m.Outcomes[0]
	if len(o.Cleanup) != 1 || unmapped != 0 {
		t.Fatalf("clean-up %q, %d unmapped; want the failed unregistration named and nothing unmapped", o.Cleanup, unmapped)
	}
}
