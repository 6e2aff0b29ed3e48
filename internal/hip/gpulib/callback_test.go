package gpulib

import (
	"sync"
	"sync/atomic"
	"testing"

	"miotool/internal/dl"
)

func TestTicketOneShot(t *testing.T) {
	tab := NewTicketTable()
	var runs atomic.Int32
	tk := tab.Register(func() { runs.Add(1) }, OneShot)
	if tk == 0 {
		t.Fatal("ticket zero issued")
	}
	tab.Fire(uintptr(tk))
	tab.Fire(uintptr(tk)) // fired twice: ignored, counted stale
	tab.Fire(0)           // never issued
	tab.Fire(uintptr(tk) + 1000)
	if runs.Load() != 1 {
		t.Fatalf("one-shot ran %d times", runs.Load())
	}
	st := tab.Stats()
	if st.Fired != 1 || st.Stale != 1 || st.Unknown != 2 || st.Live != 0 {
		t.Fatalf("stats %+v", st)
	}
}

func TestTicketRepeatingAndForget(t *testing.T) {
	tab := NewTicketTable()
	var runs atomic.Int32
	tk := tab.Register(func() { runs.Add(1) }, Repeating)
	for range 3 {
		tab.Fire(uintptr(tk))
	}
	if !tab.Forget(tk) {
		t.Fatal("Forget of a live ticket reported false")
	}
	if tab.Forget(tk) {
		t.Fatal("second Forget reported true")
	}
	tab.Fire(uintptr(tk))
	if runs.Load() != 3 {
		t.Fatalf("repeating ticket ran %d times, want 3", runs.Load())
	}
	if st := tab.Stats(); st.Fired != 3 || st.Stale != 1 || st.Live != 0 {
		t.Fatalf("stats %+v", st)
	}
}

func TestTicketPanicIsContained(t *testing.T) {
	tab := NewTicketTable()
	tk := tab.Register(func() { panic("host function failed") }, OneShot)
	tab.Fire(uintptr(tk))
	if st := tab.Stats(); st.Panicked != 1 || st.Fired != 1 {
		t.Fatalf("stats %+v", st)
	}
	if tab.LastPanic() != "host function failed" {
		t.Fatalf("LastPanic %q", tab.LastPanic())
	}
}

// TestTicketsConcurrent registers, fires (through the real C trampoline
// for half of the goroutines) and forgets tickets from many goroutines at
// once; run it under -race.
func TestTicketsConcurrent(t *testing.T) {
	const workers, perWorker = 8, 500
	before := HostFuncs.Stats()
	tramp := HostFnTrampoline()
	if tramp == 0 || HostFnTrampoline() != tramp {
		t.Fatal("the trampoline must be one stable pointer")
	}
	var runs atomic.Int64
	var wg sync.WaitGroup
	for w := range workers {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for i := range perWorker {
				tk := HostFuncs.Register(func() { runs.Add(1) }, OneShot)
				switch i % 4 {
				case 0: // fired once
					fire(w, tramp, tk)
				case 1: // fired twice
					fire(w, tramp, tk)
					fire(w, tramp, tk)
				case 2: // launch failed: forgotten, then a stray fire
					HostFuncs.Forget(tk)
					fire(w, tramp, tk)
				case 3: // forgotten after firing
					fire(w, tramp, tk)
					HostFuncs.Forget(tk)
				}
			}
		}()
	}
	wg.Wait()
	after := HostFuncs.Stats()
	per := int64(workers * perWorker / 4)
	if runs.Load() != 3*per {
		t.Fatalf("functions ran %d times, want %d", runs.Load(), 3*per)
	}
	if got := int64(after.Fired - before.Fired); got != 3*per {
		t.Errorf("Fired grew by %d, want %d", got, 3*per)
	}
	if got := int64(after.Stale - before.Stale); got != 2*per {
		t.Errorf("Stale grew by %d, want %d", got, 2*per)
	}
	if after.Unknown != before.Unknown || after.Live != before.Live {
		t.Errorf("stats before %+v after %+v", before, after)
	}
}

func fire(worker int, tramp uintptr, tk Ticket) {
	if worker%2 == 0 {
		dl.CallPtr(tramp, uintptr(tk))
		return
	}
	HostFuncs.Fire(uintptr(tk))
}

func TestCaptureTickets(t *testing.T) {
	tab := NewTicketTable()
	c := NewCaptureTickets(tab)
	noop := func() {}
	const capture, graph, exec1, exec2 = 7, 0x1000, 0x2000, 0x3000

	a := tab.Register(noop, Repeating)
	b := tab.Register(noop, Repeating)
	c.Add(capture, a)
	c.Add(capture, b)
	c.Ended(capture, graph)
	c.Instantiated(graph, exec1)
	c.Instantiated(graph, exec2)
	if c.Tracked() != 2 {
		t.Fatalf("tracked %d", c.Tracked())
	}
	c.GraphDestroyed(graph)
	c.ExecDestroyed(exec1)
	if tab.Stats().Live != 2 {
		t.Fatal("tickets forgotten while an executable graph still holds them")
	}
	tab.Fire(uintptr(a)) // a replay of exec2
	c.ExecDestroyed(exec2)
	c.ExecDestroyed(exec2) // twice: harmless
	if st := tab.Stats(); st.Live != 0 || st.Fired != 1 {
		t.Fatalf("after the last holder went: %+v", st)
	}

	// A failed capture forgets its tickets at once.
	d := tab.Register(noop, Repeating)
	c.Add(9, d)
	c.Ended(9, 0)
	if tab.Stats().Live != 0 || c.Tracked() != 0 {
		t.Fatal("failed capture kept its tickets")
	}

	// Remove takes back one ticket; Close forgets everything else.
	e := tab.Register(noop, Repeating)
	f := tab.Register(noop, Repeating)
	c.Add(11, e)
	c.Add(11, f)
	c.Remove(11, e)
	if c.Tracked() != 1 || tab.Stats().Live != 1 {
		t.Fatalf("after Remove: tracked %d live %d", c.Tracked(), tab.Stats().Live)
	}
	c.Ended(11, graph)
	c.Instantiated(graph, exec1)
	c.Close()
	if c.Tracked() != 0 || tab.Stats().Live != 0 {
		t.Fatal("Close left tickets behind")
	}
}
