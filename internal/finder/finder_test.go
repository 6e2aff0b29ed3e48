package finder

import (
	"context"
	"fmt"
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
	for in, want := range map[string]Mode{"normal": ModeNormal, "FAST": ModeFast, "1": ModeNormal, "2": ModeFast,
		"hybrid": ModeHybrid, "3": ModeHybrid, "DYNAMIC_HYBRID": ModeDynamicHybrid, "dynamic-hybrid": ModeDynamicHybrid, "5": ModeDynamicHybrid} {
		if got, err := ParseMode(in); err != nil || got != want {
			t.Errorf("ParseMode(%q) = %q, %v; want %q", in, got, err, want)
		}
	}
	for _, bad := range []string{"4", "", "quick"} {
		if _, err := ParseMode(bad); err == nil {
			t.Errorf("ParseMode accepted %q", bad)
		}
	}
}

// A find-db that cannot be written costs the user nothing of the result.
func TestFindWithAnUnwritableDB(t *testing.T) {
	d := newSim(t)
	h := newHandle(t, d, streams.Worker)
	ts := newTensors(t, d, small)
	f := filepath.Join(t.TempDir(), "file")
	if err := os.WriteFile(f, nil, 0o644); err != nil {
		t.Fatal(err)
	}
	var warned []string
	res, err := Find(context.Background(), h, ts, Options{Samples: 1, Verify: true, UserDB: filepath.Join(f, "u.ufdb.txt"),
		Warn: func(format string, args ...any) { warned = append(warned, fmt.Sprintf(format, args...)) }})
	if err != nil {
		t.Fatalf("a db error failed the find: %v", err)
	}
	if res.Chosen == "" || !res.Verified || res.DBErr == nil || res.DBWritten {
		t.Fatalf("want a verified result with a db error: %+v", res)
	}
	if len(warned) != 1 || !strings.Contains(warned[0], "find-db not written") || len(res.Warnings) != 1 || res.Warnings[0] != warned[0] {
		t.Fatalf("warnings %q, result's %q", warned, res.Warnings)
	}
}

// writeDB writes a user find-db for the tests of the find modes.
func writeDB(t *testing.T, body string) string {
	t.Helper()
	path := filepath.Join(t.TempDir(), "u.ufdb.txt")
	if err := os.WriteFile(path, []byte(body), 0o644); err != nil {
		t.Fatal(err)
	}
	return path
}

// miopenLine is what MIOpen may hold for small's key: solvers miotool
// does not have.
var miopenLine = small.Key() + "=GemmFwdRest:0.0516391234,0,miopenConvolutionFwdAlgoGEMM;ConvBinWinogradRxSf3x2:0.103077,0,miopenConvolutionFwdAlgoWinograd\n"

// The find modes as MIOpen documents them: a hit is used by every mode but
// normal; on a miss fast falls back to the immediate-mode heuristic without
// benchmarking or writing, and the hybrids benchmark and write.
func TestFindModes(t *testing.T) {
	hitLine := small.Key() + "=" + conv.SolverNaive + ":0.5,0,miopenConvolutionFwdAlgoDirect;GemmFwdRest:0.01,0,miopenConvolutionFwdAlgoGEMM\n"
	ranker := func(p conv.Problem) ([]string, error) {
		return []string{"SomeMIOpenSolver", conv.SolverNaive, conv.SolverImplicitGemm}, nil
	}
	uncovered := func(p conv.Problem) ([]string, error) { return nil, fmt.Errorf("%w: no", ErrNoHeuristic) }
	for _, tt := range []struct {
		name      string
		mode      Mode
		db        string // "-": no db
		immediate func(conv.Problem) ([]string, error)
		// want
		fromDB, imm, benchmarked, written bool
		chosen                            string
		lookup                            string
	}{
		{"fast hit", ModeFast, hitLine, ranker, true, false, false, false, conv.SolverNaive, "2 entries for this key, " + conv.SolverNaive + " used"},
		{"hybrid hit", ModeHybrid, hitLine, ranker, true, false, false, false, conv.SolverNaive, "2 entries"},
		{"fast miss on MIOpen's solvers", ModeFast, miopenLine, ranker, false, true, false, false, conv.SolverNaive, "2 entries for this key, none for miotool's solvers"},
		{"fast miss, no record", ModeFast, "other=A:1,0,x\n", ranker, false, true, false, false, conv.SolverNaive, "no record for this key"},
		{"fast miss, no db", ModeFast, "-", ranker, false, true, false, false, conv.SolverNaive, "no user find-db"},
		{"fast miss, heuristic does not cover", ModeFast, miopenLine, uncovered, false, true, false, false, conv.SolverImplicitGemm, "none for miotool's"},
		{"hybrid miss benchmarks and merges", ModeHybrid, miopenLine, ranker, false, false, true, true, "", "none for miotool's"},
		{"dynamic hybrid miss benchmarks", ModeDynamicHybrid, "", ranker, false, false, true, true, "", "no record"},
		{"normal ignores a hit", ModeNormal, hitLine, ranker, false, false, true, true, "", ""},
	} {
		t.Run(tt.name, func(t *testing.T) {
			d := newSim(t)
			h := newHandle(t, d, streams.Worker)
			ts := newTensors(t, d, small)
			db := ""
			if tt.db != "-" {
				db = writeDB(t, tt.db)
			}
			var warned []string
			res, err := Find(context.Background(), h, ts, Options{Mode: tt.mode, Samples: 1, Verify: true, UserDB: db, Immediate: tt.immediate,
				Warn: func(format string, args ...any) { warned = append(warned, fmt.Sprintf(format, args...)) }})
			if err != nil {
				t.Fatal(err)
			}
			benchmarked := len(res.Entries) > 1
			if res.FromDB != tt.fromDB || res.Immediate != tt.imm || benchmarked != tt.benchmarked || res.DBWritten != tt.written || !res.Verified {
				t.Fatalf("fromDB %v immediate %v benchmarked %v written %v verified %v; entries %+v", res.FromDB, res.Immediate, benchmarked, res.DBWritten, res.Verified, res.Entries)
			}
			if tt.chosen != "" && res.Chosen != tt.chosen {
				t.Errorf("chose %s, want %s", res.Chosen, tt.chosen)
			}
			if !strings.Contains(res.Lookup, tt.lookup) {
				t.Errorf("lookup %q lacks %q", res.Lookup, tt.lookup)
			}
			if tt.imm {
				want := "find-db: " + res.Lookup + ": immediate-mode fallback chose " + res.Chosen
				if len(warned) != 1 || !strings.HasPrefix(warned[0], want) || !strings.Contains(res.Entries[0].Detail, "immediate mode") {
					t.Errorf("warned %q, want %q...; detail %q", warned, want, res.Entries[0].Detail)
				}
			}
			if db == "" {
				return
			}
			got, _ := os.ReadFile(db)
			switch {
			case !tt.written && string(got) != tt.db:
				t.Errorf("the find-db changed without a write: %q", got)
			case tt.written:
				_, items, _ := strings.Cut(strings.TrimSuffix(tt.db, "\n"), "=")
				for _, it := range strings.Split(items, ";") {
					if _, ours := conv.SolverByName(strings.Split(it, ":")[0]); !ours && !strings.Contains(string(got), it) {
						t.Errorf("the merge lost MIOpen's item %q: %q", it, got)
					}
				}
			}
		})
	}
}

// A find-db that cannot be read is a warning: fast mode falls back.
func TestFastModeWithAnUnreadableDB(t *testing.T) {
	d := newSim(t)
	h := newHandle(t, d, streams.Worker)
	ts := newTensors(t, d, small)
	res, err := Find(context.Background(), h, ts, Options{Mode: ModeFast, Verify: true, UserDB: t.TempDir()}) // a folder
	if err != nil {
		t.Fatal(err)
	}
	if res.DBErr == nil || !res.Immediate || !res.Verified || len(res.Warnings) != 2 || !strings.Contains(res.Warnings[0], "find-db not read") {
		t.Fatalf("%+v", res)
	}
}

// The user's garbage lines are warned about once, however often the file
// is read, and named at most maxDBWarnings times.
func TestDamagedDBIsWarnedAboutOnce(t *testing.T) {
	d := newSim(t)
	h := newHandle(t, d, streams.Worker)
	ts := newTensors(t, d, small)
	body := strings.Repeat("garbage\n", 8) + miopenLine
	db := writeDB(t, body)
	res, err := Find(context.Background(), h, ts, Options{Mode: ModeHybrid, Samples: 1, UserDB: db})
	if err != nil {
		t.Fatal(err)
	}
	if len(res.DBWarnings) != maxDBWarnings+1 || !strings.Contains(res.DBWarnings[maxDBWarnings], "3 more") {
		t.Fatalf("db warnings %q", res.DBWarnings)
	}
	if len(res.Warnings) != len(res.DBWarnings) {
		t.Fatalf("warnings %q", res.Warnings)
	}
	got, _ := os.ReadFile(db)
	if !strings.HasPrefix(string(got), body[:len(body)-1]+";") {
		t.Fatalf("file %q", got)
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
