package finder

import (
	"context"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"reflect"
	"strings"
	"sync/atomic"
	"syscall"
	"testing"

	"miotool/internal/conv"
	"miotool/internal/finddb"
	"miotool/internal/handle"
	"miotool/internal/hip"
	"miotool/internal/streams"
)

// withoutNaive is every solver but the naive one.
func withoutNaive() []*conv.Solver {
	var out []*conv.Solver
	for _, s := range conv.Solvers() {
		if !s.IsNaive() {
			out = append(out, s)
		}
	}
	return out
}

func onlyNaive() []*conv.Solver {
	s, _ := conv.SolverByName(conv.SolverNaive)
	return []*conv.Solver{s}
}

// The result says whether the naive evaluation was abandoned and, when it
// was not, why not: what a check of the bound needs to say that its
// precondition did not hold.
func TestTheResultSaysWhatBecameOfTheNaiveEvaluation(t *testing.T) {
	hitLine := small.Key() + "=" + conv.SolverImplicitGemm + ":0.5,0,miopenConvolutionFwdAlgoImplicitGEMM\n"
	for _, tt := range []struct {
		name    string
		p       conv.Problem
		opts    Options
		db      string // a user find-db's content, "" for none
		faulted bool   // the naive evaluation's start event fails to record
		want    NaiveOutcome
	}{
		{"abandoned at its deadline", naiveTimesOut, Options{NaiveTimeoutPct: 50}, "", false, NaiveAbandoned},
		{"finished within its deadline", small, Options{NaiveTimeoutPct: 10_000_000}, "", false, NaiveWithinDeadline},
		{"timeout off", small, Options{NaiveTimeoutPct: 0}, "", false, NaiveTimeoutOff},
		{"no other solver, no deadline", small, Options{NaiveTimeoutPct: 300, Solvers: onlyNaive()}, "", false, NaiveNoDeadline},
		{"not among the solvers", small, Options{NaiveTimeoutPct: 300, Solvers: withoutNaive()}, "", false, NaiveNotConsidered},
		{"the find-db chose", small, Options{NaiveTimeoutPct: 300, Mode: ModeHybrid}, hitLine, false, NaiveFromDB},
		{"the heuristic chose", small, Options{NaiveTimeoutPct: 300, Mode: ModeFast}, "", false, NaiveImmediate},
		{"failed to launch", small, Options{NaiveTimeoutPct: 300}, "", true, NaiveFailed},
	} {
		t.Run(tt.name, func(t *testing.T) {
			d := newSim(t)
			h := newHandle(t, d, streams.Worker)
			ts := newTensors(t, d, tt.p)
			if tt.db != "" {
				tt.opts.UserDB = writeDB(t, tt.db)
			}
			if tt.faulted {
				var onSlot atomic.Int32
				if err := d.Faults().FailEventRecords(1, hip.ErrInvalidValue, func(s hip.Stream) bool {
					return s != h.Stream() && onSlot.Add(1) == 1
				}); err != nil {
					t.Fatal(err)
				}
			}
			tt.opts.Samples = 1
			res, err := Find(context.Background(), h, ts, tt.opts)
			if err != nil {
				t.Fatal(err)
			}
			if res.Naive != tt.want || res.Naive.Abandoned() != (tt.want == NaiveAbandoned) {
				t.Fatalf("naive %q, want %q", res.Naive, tt.want)
			}
			// What the result says of naive agrees with its table: an
			// outcome that says naive did not run has no naive time.
			for _, e := range res.Entries {
				if s, _ := conv.SolverByName(e.Solver); s != nil && s.IsNaive() && e.TimeMs > 0 && strings.HasPrefix(string(res.Naive), "did not run") {
					t.Errorf("naive %q, but %s was timed: %.4g ms, %s", res.Naive, e.Solver, e.TimeMs, e.Status)
				}
			}
			if res.Naive.Abandoned() && (!res.NaiveAbandoned || res.NaiveAbandonedAt.IsZero()) {
				t.Fatalf("abandoned, but the result says %v at %v", res.NaiveAbandoned, res.NaiveAbandonedAt)
			}
		})
	}
}

// cancelOnRecord cancels the find's context at the n-th event record that
// match accepts, and never fails a record.
func cancelOnRecord(t *testing.T, d interface {
	FailEventRecords(int, hip.Code, func(hip.Stream) bool) error
}, n int32, match func(hip.Stream) bool, cancel func()) {
	t.Helper()
	var seen atomic.Int32
	if err := d.FailEventRecords(1, hip.ErrInvalidValue, func(s hip.Stream) bool {
		if match(s) && seen.Add(1) == n {
			cancel()
		}
		return false
	}); err != nil {
		t.Fatal(err)
	}
}

// An interrupted find returns what it measured, marked interrupted: the
// solvers timed, the samples of the one that was running, the solvers not
// reached; nothing is chosen or written.
func TestAnInterruptedFindKeepsWhatItMeasured(t *testing.T) {
	d := newSim(t)
	h := newHandle(t, d, streams.Worker)
	ts := newTensors(t, d, small)
	db := filepath.Join(t.TempDir(), "u.ufdb.txt")
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	// The first solver's timer records a start and a stop per run: a
	// warm-up, then samples. The 6th record is the second sample's stop:
	// the find sees its context end before the third.
	cancelOnRecord(t, d.Faults(), 6, func(s hip.Stream) bool { return s == h.Stream() }, cancel)
	res, err := Find(ctx, h, ts, Options{NaiveTimeoutPct: 300, Samples: 5, Verify: true, UserDB: db})
	if !errors.Is(err, ErrInterrupted) || !errors.Is(err, context.Canceled) {
		t.Fatalf("want an interruption, got %v", err)
	}
	if res == nil || !res.Interrupted || res.Chosen != "" || res.DBWritten {
		t.Fatalf("result %+v", res)
	}
	first := conv.Solvers()[0].Name
	byName := map[string]Entry{}
	for _, e := range res.Entries {
		byName[e.Solver] = e
	}
	if e := byName[first]; e.Status != StatusInterrupted || e.Samples != 2 || e.TimeMs <= 0 || !strings.Contains(e.Detail, "after 2 of 5 samples") {
		t.Errorf("the solver that was running: %+v", e)
	}
	for _, s := range conv.Solvers()[1:] {
		want := StatusNotRun
		if !s.IsApplicable(small) {
			want = StatusNotApplicable
		}
		if e := byName[s.Name]; e.Status != want {
			t.Errorf("%s, not reached: %+v, want %s", s.Name, e, want)
		}
	}
	if res.Naive != NaiveInterrupted || res.Naive.Abandoned() {
		t.Errorf("naive %q", res.Naive)
	}
	if _, err := os.Stat(db); !errors.Is(err, os.ErrNotExist) {
		t.Errorf("an interrupted find wrote the find-db: %v", err)
	}
}

// Interrupted during the naive evaluation, the find abandons it as at its
// deadline (the tracker reclaims it as usual) and keeps the solvers timed.
func TestAFindInterruptedDuringTheNaiveEvaluation(t *testing.T) {
	d := newSim(t)
	h, err := handle.New(d, handle.Options{Policy: streams.Worker, MaxDraining: 2})
	if err != nil {
		t.Fatal(err)
	}
	ts, err := NewTensors(d, naiveTimesOut, nil, 1)
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	// The naive evaluation records a start and a stop event on its
	// tracker stream: cancel at the stop.
	cancelOnRecord(t, d.Faults(), 2, func(s hip.Stream) bool { return s != h.Stream() }, cancel)
	res, err := Find(ctx, h, ts, Options{NaiveTimeoutPct: 10_000_000, Samples: 1, Verify: true})
	if !errors.Is(err, ErrInterrupted) || res == nil || !res.Interrupted {
		t.Fatalf("want an interrupted result, got %+v, %v", res, err)
	}
	if !res.NaiveAbandoned {
		t.Error("the interrupted naive evaluation was waited for, not abandoned")
	}
	ok := 0
	for _, e := range res.Entries {
		switch {
		case e.Solver == conv.SolverNaive && (e.Status != StatusInterrupted || !strings.Contains(e.Detail, "abandoned")):
			t.Errorf("naive: %+v", e)
		case e.Status == StatusOK:
			ok++
		}
	}
	if ok == 0 || res.Naive != NaiveInterrupted {
		t.Fatalf("%d solvers timed before naive, naive %q: %+v", ok, res.Naive, res.Entries)
	}
	teardown(t, d, []*handle.Handle{h}, []*Tensors{ts})
	if c := h.Tracker().Counters(); c.Draining != 0 || c.ScratchBytesPinned != 0 || c.Abandoned != 1 || c.ScratchFreed != 1 {
		t.Errorf("tracker after teardown: %+v; want the abandoned slot reclaimed and its scratch freed", c)
	}
}

// The find-db facts of the write reach the result and the warnings: the
// malformed item it replaced, and the lock it waited for.
func TestFindDBWriteFacts(t *testing.T) {
	d := newSim(t)
	h := newHandle(t, d, streams.Worker)
	ts := newTensors(t, d, small)
	broken := conv.SolverImplicitGemm + ":notanumber,0,miopenConvolutionFwdAlgoImplicitGEMM"
	body := small.Key() + "=GemmFwdRest:0.0516391234,0,miopenConvolutionFwdAlgoGEMM;" + broken + ";ConvBinWinogradRxSf3x2:0.103077,0,miopenConvolutionFwdAlgoWinograd\n"
	db := writeDB(t, body)
	// Another writer holds miotool's lock: the find is told, and releases it.
	lock, err := os.OpenFile(db+".lock", os.O_RDWR|os.O_CREATE, 0o644)
	if err != nil {
		t.Fatal(err)
	}
	defer lock.Close()
	if err := syscall.Flock(int(lock.Fd()), syscall.LOCK_EX); err != nil {
		t.Fatal(err)
	}
	var waits []finddb.LockWait
	var warned []string
	res, err := Find(context.Background(), h, ts, Options{Samples: 1, Verify: true, UserDB: db,
		DBLockWait: func(w finddb.LockWait) {
			waits = append(waits, w)
			_ = syscall.Flock(int(lock.Fd()), syscall.LOCK_UN)
		},
		Warn: func(format string, args ...any) { warned = append(warned, fmt.Sprintf(format, args...)) }})
	if err != nil {
		t.Fatal(err)
	}
	if len(waits) != 1 || waits[0].Lock != db+".lock" || !reflect.DeepEqual(res.DBWaited, waits) {
		t.Errorf("waits %+v, result's %+v", waits, res.DBWaited)
	}
	if !res.DBWritten || len(res.DBReplaced) != 1 || res.DBReplaced[0].Old != broken {
		t.Fatalf("written %v, replaced %+v", res.DBWritten, res.DBReplaced)
	}
	if len(warned) != 1 || !strings.HasPrefix(warned[0], "find-db: replaced the malformed item ") {
		t.Errorf("warnings %q", warned)
	}
	got, _ := os.ReadFile(db)
	rec, _ := finddb.Parse(db, got).Lookup(small.Key())
	mine := 0
	for _, e := range rec.Entries {
		if _, ours := conv.SolverByName(e.Solver); ours {
			mine++
		}
	}
	if !strings.HasPrefix(string(got), small.Key()+"=GemmFwdRest:0.0516391234,0,miopenConvolutionFwdAlgoGEMM;"+conv.SolverImplicitGemm+":") || strings.Contains(string(got), "notanumber") || mine < 2 {
		t.Errorf("file %q", got)
	}
}

// Fast mode reads a duplicate solver as MIOpen does: the first item, which
// is malformed, so the record holds nothing of miotool's and the find
// falls back to the heuristic rather than use the later item.
func TestFastModeReadsADuplicateAsMIOpenDoes(t *testing.T) {
	d := newSim(t)
	h := newHandle(t, d, streams.Worker)
	ts := newTensors(t, d, small)
	db := writeDB(t, small.Key()+"="+conv.SolverImplicitGemm+":bad,0,x;"+conv.SolverImplicitGemm+":0.1,0,miopenConvolutionFwdAlgoImplicitGEMM\n")
	res, err := Find(context.Background(), h, ts, Options{Mode: ModeFast, Verify: true, UserDB: db})
	if err != nil {
		t.Fatal(err)
	}
	if res.FromDB || !res.Immediate {
		t.Fatalf("fast mode used the later duplicate: from db %v, immediate %v, lookup %q", res.FromDB, res.Immediate, res.Lookup)
	}
}
