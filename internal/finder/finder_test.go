package finder

import (
	"context"
	"errors"
	"math"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"miotool/internal/conv"
	"miotool/internal/finddb"
	"miotool/internal/handle"
	"miotool/internal/hip"
	"miotool/internal/hip/sim"
	"miotool/internal/streams"
)

func newSim(t *testing.T) *sim.Device {
	t.Helper()
	d, err := sim.New(hip.OpenOptions{Dialect: hip.DialectHIP, HWQueues: 4})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = d.Close() })
	return d
}

func newHandle(t *testing.T, d hip.Device, p streams.Policy) *handle.Handle {
	t.Helper()
	h, err := handle.New(d, handle.Options{Policy: p, MaxDraining: 2})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = h.Close() })
	return h
}

func newTensors(t *testing.T, d hip.Device, p conv.Problem) *Tensors {
	t.Helper()
	ts, err := NewTensors(d, p, nil, 1)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = ts.Free() })
	return ts
}

// naiveTimesOut is large enough that the naive twin (one goroutine) runs
// many times longer than the tiled twin's deadline.
var naiveTimesOut = conv.Problem{N: 1, C: 32, H: 48, W: 48, K: 32, R: 3, S: 3, PadH: 1, PadW: 1, StrideH: 1, StrideW: 1, DilH: 1, DilW: 1, Groups: 1}

var small = conv.Problem{N: 2, C: 4, H: 9, W: 7, K: 6, R: 3, S: 3, PadH: 1, PadW: 0, StrideH: 2, StrideW: 1, DilH: 1, DilW: 2, Groups: 2}

func TestFindTimesEverySolverWhenTheTimeoutIsOff(t *testing.T) {
	d := newSim(t)
	h := newHandle(t, d, streams.Worker)
	ts := newTensors(t, d, small)
	db := filepath.Join(t.TempDir(), "u.ufdb.txt")
	res, err := Find(context.Background(), h, ts, Options{NaiveTimeoutPct: 0, Samples: 3, Verify: true, UserDB: db})
	if err != nil {
		t.Fatal(err)
	}
	if res.Chosen == "" || !res.Verified || res.NaiveAbandoned || res.NaiveDeadlineMs != 0 {
		t.Fatalf("result %+v", res)
	}
	var naive *Entry
	for i, e := range res.Entries {
		if e.Solver == conv.SolverNaive {
			naive = &res.Entries[i]
		}
		if e.Status == StatusOK && (e.Samples != 3 || e.Check == nil || !e.Check.OK) {
			t.Errorf("%s: %+v", e.Solver, e)
		}
	}
	if naive == nil || naive.Status != StatusOK {
		t.Fatalf("naive must be timed in full with the timeout off: %+v", naive)
	}
	for i := 1; i < len(res.Entries); i++ {
		a, b := res.Entries[i-1], res.Entries[i]
		if a.Status == StatusOK && b.Status == StatusOK && a.TimeMs > b.TimeMs {
			t.Errorf("not ranked: %s %.4g before %s %.4g", a.Solver, a.TimeMs, b.Solver, b.TimeMs)
		}
	}
	got, err := finddb.Load(db)
	if err != nil {
		t.Fatal(err)
	}
	rec, ok := got.Lookup(small.Key())
	if !ok || rec.Line() != res.DBRecord {
		t.Fatalf("find-db record %q, result says %q", rec.Line(), res.DBRecord)
	}

	// Fast mode takes the record and does not benchmark.
	fast, err := Find(context.Background(), h, ts, Options{Mode: ModeFast, Verify: true, UserDB: db})
	if err != nil {
		t.Fatal(err)
	}
	if !fast.FromDB || fast.Chosen != res.Chosen || !fast.Verified || len(fast.Entries) != 1 {
		t.Fatalf("fast mode: %+v", fast)
	}
}

func TestNaiveOverrunningItsDeadlineIsAbandoned(t *testing.T) {
	d := newSim(t)
	h := newHandle(t, d, streams.Worker)
	ts := newTensors(t, d, naiveTimesOut)
	res, err := Find(context.Background(), h, ts, Options{NaiveTimeoutPct: 50, Samples: 2, Verify: true})
	if err != nil {
		t.Fatal(err)
	}
	if !res.NaiveAbandoned || !res.WithinBound() || !res.Verified {
		t.Fatalf("result %+v", res)
	}
	var naive Entry
	for _, e := range res.Entries {
		if e.Solver == conv.SolverNaive {
			naive = e
		}
	}
	if naive.Status != StatusTimedOut || !strings.Contains(naive.Detail, "exceeded 50%") {
		t.Fatalf("naive entry %+v", naive)
	}
	c := h.Tracker().Counters()
	if c.Abandoned != 1 || c.Acquired != 1 {
		t.Fatalf("counters %+v", c)
	}
	// The abandoned evaluation's scratch is freed once its kernel retires,
	// with no further call: wait for it with a wide deadline.
	deadline := time.Now().Add(60 * time.Second)
	for h.Tracker().Counters().ScratchFreed == 0 {
		if time.Now().After(deadline) {
			t.Fatalf("scratch not freed: %+v", h.Tracker().Counters())
		}
		time.Sleep(5 * time.Millisecond)
	}
}

func TestStickyDeviceErrorEndsFind(t *testing.T) {
	d := newSim(t)
	h := newHandle(t, d, streams.Worker)
	ts := newTensors(t, d, naiveTimesOut)
	if err := d.Faults().FailQueries(1, hip.ErrIllegalAddress); err != nil {
		t.Fatal(err)
	}
	done := make(chan error, 1)
	go func() {
		_, err := Find(context.Background(), h, ts, Options{NaiveTimeoutPct: DefaultNaiveTimeoutPct, Samples: 1})
		done <- err
	}()
	select {
	case err := <-done:
		if hip.CodeOf(err) != hip.ErrIllegalAddress {
			t.Fatalf("want the sticky error, got %v", err)
		}
	case <-time.After(60 * time.Second):
		t.Fatal("find hung on a sticky device error")
	}
}

func TestFindRejectsBadOptions(t *testing.T) {
	d := newSim(t)
	h := newHandle(t, d, streams.Worker)
	ts := newTensors(t, d, small)
	if _, err := Find(context.Background(), h, ts, Options{NaiveTimeoutPct: -1}); err == nil {
		t.Fatal("negative timeout accepted")
	}
	if _, err := NewTensors(d, conv.Problem{N: 1}, nil, 1); err == nil {
		t.Fatal("invalid problem accepted")
	}
	for _, s := range []string{"normal", "fast", "1", "2"} {
		if _, err := ParseMode(s); err != nil {
			t.Errorf("ParseMode(%q): %v", s, err)
		}
	}
	if _, err := ParseMode("hybrid"); err == nil {
		t.Error("ParseMode accepted hybrid")
	}
}

func TestFindWithAnUnwritableDB(t *testing.T) {
	d := newSim(t)
	h := newHandle(t, d, streams.Worker)
	ts := newTensors(t, d, small)
	f := filepath.Join(t.TempDir(), "file")
	if err := os.WriteFile(f, nil, 0o644); err != nil {
		t.Fatal(err)
	}
	_, err := Find(context.Background(), h, ts, Options{Samples: 1, UserDB: filepath.Join(f, "u.ufdb.txt")})
	if err == nil || errors.Is(err, context.Canceled) {
		t.Fatalf("want a find-db error, got %v", err)
	}
}

func TestRobustMean(t *testing.T) {
	for _, tt := range []struct {
		in      []float64
		mean    float64
		dropped int
	}{
		{[]float64{1, 1, 1, 1}, 1, 0},
		{[]float64{1, 1.1, 0.9, 1, 10}, 1, 1},
		{[]float64{1, 1.1, 0.9, 1, 0.01}, 0.802, 0}, // low outliers stay
		{[]float64{2}, 2, 0},
	} {
		m, d := RobustMean(tt.in)
		if math.Abs(m-tt.mean) > 1e-9 || d != tt.dropped {
			t.Errorf("RobustMean(%v) = %v, %d; want %v, %d", tt.in, m, d, tt.mean, tt.dropped)
		}
	}
	if m, _ := RobustMean(nil); !math.IsNaN(m) {
		t.Error("empty input must give NaN")
	}
}

func TestLargeProblemsAreCheckedOnASample(t *testing.T) {
	saved := sampledAbove
	sampledAbove = 1e5
	t.Cleanup(func() { sampledAbove = saved })
	d := newSim(t)
	h := newHandle(t, d, streams.Worker)
	ts := newTensors(t, d, naiveTimesOut)
	res, err := Find(context.Background(), h, ts, Options{NaiveTimeoutPct: 50, Samples: 1, Verify: true})
	if err != nil {
		t.Fatal(err)
	}
	e, _ := res.ChosenEntry()
	if !res.Verified || e.Check == nil || e.Check.Elements != sampleSize || !strings.Contains(e.Check.Note, "sampled") {
		t.Fatalf("want a sampled check of %d elements: %+v", sampleSize, e.Check)
	}
	// A corrupted output fails the sampled check.
	got, err := ts.Output()
	if err != nil {
		t.Fatal(err)
	}
	for i := range got {
		got[i] += 1
	}
	if c := ts.Check(got); c.OK {
		t.Fatal("a corrupted output passed the sampled check")
	}
}
