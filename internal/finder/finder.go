// Package finder is find for a forward convolution: every applicable solver
// timed with events (a warm-up plus samples, high outliers dropped), the
// naive solver last on a disposable tracker stream with a deadline relative
// to the best time so far and abandoned on timeout, results ranked, outputs
// checked against the CPU reference, and the record kept in a find-db.
package finder

import (
	"context"
	"errors"
	"fmt"
	"runtime"
	"sort"
	"time"

	"miotool/internal/conv"
	"miotool/internal/finddb"
	"miotool/internal/handle"
	"miotool/internal/hip"
)

// Mode is the find mode.
type Mode string

// Find modes: normal benchmarks; fast takes a find-db hit and skips it.
const (
	ModeNormal Mode = "normal"
	ModeFast   Mode = "fast"
)

// ParseMode accepts normal or fast (and MIOpen's numbers 1 and 2).
func ParseMode(s string) (Mode, error) {
	switch s {
	case "normal", "NORMAL", "1":
		return ModeNormal, nil
	case "fast", "FAST", "2":
		return ModeFast, nil
	}
	return "", fmt.Errorf("unknown find mode %q (want normal or fast)", s)
}

// DefaultNaiveTimeoutPct is MIOpen's default naive deadline, in percent of
// the best time so far.
const DefaultNaiveTimeoutPct = 300

// Status is a solver's outcome.
type Status string

// Solver outcomes, as the find table prints them.
const (
	StatusOK                 Status = "ok"
	StatusTimedOut           Status = "timed out and abandoned"
	StatusNotApplicable      Status = "not applicable"
	StatusFailedVerification Status = "failed verification"
	StatusFailed             Status = "failed"
)

// Options configure one find.
type Options struct {
	// NaiveTimeoutPct is the naive deadline in percent of the best time so
	// far; 0 switches the timed path off and naive is timed in full.
	NaiveTimeoutPct int
	// Samples is the number of timed runs after the warm-up (7 if zero).
	Samples int
	Mode    Mode
	// UserDB is the user find-db file; empty keeps results in memory only.
	UserDB string
	// Solvers to consider; conv.Solvers() when nil.
	Solvers []*conv.Solver
	// Verify checks outputs against the CPU reference (on when true).
	Verify bool
	// Log, when set, receives one line per step.
	Log func(format string, args ...any)
}

// Entry is one solver's line in the result.
type Entry struct {
	Solver    string
	Algorithm string
	TimeMs    float64
	Samples   int
	Dropped   int
	Workspace int
	Status    Status
	Detail    string
	Check     *conv.CheckResult
}

// Result is what a find produced.
type Result struct {
	Problem conv.Problem
	Key     string
	Entries []Entry // ranked: ok by time, then the rest
	Chosen  string
	FromDB  bool
	// Verified is true when the chosen solver's output matched the reference.
	Verified bool
	// NaiveDeadlineMs is the naive deadline (0 when the timed path did
	// not run); NaiveWaitMs is how long find waited on naive.
	NaiveDeadlineMs float64
	NaiveWaitMs     float64
	NaiveAbandoned  bool
	Elapsed         time.Duration
	DBPath          string
	DBRecord        string
	DBWarnings      []string
}

// WithinBound reports whether find waited on naive no longer than its
// deadline plus a margin for polling and scheduling (the deadline again, at
// least 100 ms): what it guards against is find waiting for the naive
// kernel to finish, which takes many deadlines.
func (r *Result) WithinBound() bool {
	if r.NaiveDeadlineMs == 0 {
		return true
	}
	margin := max(100, r.NaiveDeadlineMs)
	return r.NaiveWaitMs <= r.NaiveDeadlineMs+margin
}

// ChosenEntry returns the chosen solver's entry.
func (r *Result) ChosenEntry() (Entry, bool) {
	for _, e := range r.Entries {
		if e.Solver == r.Chosen {
			return e, true
		}
	}
	return Entry{}, false
}

// FailedVerification lists solvers whose output did not match.
func (r *Result) FailedVerification() []string {
	var out []string
	for _, e := range r.Entries {
		if e.Status == StatusFailedVerification {
			out = append(out, e.Solver)
		}
	}
	return out
}

// Find evaluates the problem's solvers on h with the data in ts.
func Find(ctx context.Context, h *handle.Handle, ts *Tensors, opts Options) (*Result, error) {
	start := time.Now()
	if opts.Samples <= 0 {
		opts.Samples = 7
	}
	if opts.Mode == "" {
		opts.Mode = ModeNormal
	}
	if opts.NaiveTimeoutPct < 0 {
		return nil, fmt.Errorf("naive timeout must be >= 0 percent, got %d", opts.NaiveTimeoutPct)
	}
	solvers := opts.Solvers
	if solvers == nil {
		solvers = conv.Solvers()
	}
	logf := opts.Log
	if logf == nil {
		logf = func(string, ...any) {}
	}
	p := ts.Problem
	res := &Result{Problem: p, Key: p.Key(), DBPath: opts.UserDB}

	if opts.Mode == ModeFast && opts.UserDB != "" {
		ok, err := findFromDB(ctx, h, ts, solvers, opts, res, logf)
		if err != nil {
			return nil, err
		}
		if ok {
			res.Elapsed = time.Since(start)
			return res, nil
		}
		logf("fast mode: no find-db record for %s; benchmarking", res.Key)
	}

	var naive []*conv.Solver
	best := 0.0
	for _, s := range solvers {
		if !s.IsApplicable(p) {
			res.Entries = append(res.Entries, Entry{Solver: s.Name, Algorithm: s.Algorithm, Status: StatusNotApplicable, Workspace: 0})
			continue
		}
		if s.IsNaive() {
			naive = append(naive, s)
			continue
		}
		e, err := timeSolver(ctx, h, ts, s, opts, 1, logf)
		if err != nil {
			return nil, err
		}
		if e.Status == StatusOK && (best == 0 || e.TimeMs < best) {
			best = e.TimeMs
		}
		res.Entries = append(res.Entries, e)
	}
	for _, s := range naive {
		if opts.NaiveTimeoutPct == 0 || best == 0 {
			e, err := timeSolver(ctx, h, ts, s, opts, 1, logf)
			if err != nil {
				return nil, err
			}
			res.Entries = append(res.Entries, e)
			continue
		}
		deadline := best * float64(opts.NaiveTimeoutPct) / 100
		e, waited, abandoned, err := tryNaiveWithTimeout(ctx, h, ts, s, deadline, opts, logf)
		res.NaiveDeadlineMs, res.NaiveWaitMs = deadline, waited
		res.NaiveAbandoned = res.NaiveAbandoned || abandoned
		if err != nil {
			return nil, err
		}
		res.Entries = append(res.Entries, e)
	}
	if err := h.DropScratchCache(); err != nil {
		return nil, fmt.Errorf("drop the scratch cache: %w", err)
	}
	rank(res.Entries)
	if len(res.Entries) > 0 && res.Entries[0].Status == StatusOK {
		res.Chosen = res.Entries[0].Solver
		res.Verified = !opts.Verify || res.Entries[0].Check != nil && res.Entries[0].Check.OK
	}
	res.Elapsed = time.Since(start)
	if res.Chosen != "" && opts.UserDB != "" {
		rec := finddb.Record{Key: res.Key}
		for _, e := range res.Entries {
			if e.Status == StatusOK {
				rec.Entries = append(rec.Entries, finddb.Entry{Solver: e.Solver, TimeMs: e.TimeMs, Workspace: int64(e.Workspace), Algorithm: e.Algorithm})
			}
		}
		warns, err := finddb.StoreFile(opts.UserDB, rec, 60*time.Second)
		for _, w := range warns {
			res.DBWarnings = append(res.DBWarnings, w.String())
		}
		if err != nil {
			return res, err
		}
		res.DBRecord = rec.Line()
	}
	return res, nil
}

// rank orders ok entries by time, then timed-out, failed and inapplicable ones.
func rank(es []Entry) {
	order := map[Status]int{StatusOK: 0, StatusFailedVerification: 1, StatusTimedOut: 2, StatusFailed: 3, StatusNotApplicable: 4}
	sort.SliceStable(es, func(i, j int) bool {
		if order[es[i].Status] != order[es[j].Status] {
			return order[es[i].Status] < order[es[j].Status]
		}
		if es[i].Status == StatusOK {
			return es[i].TimeMs < es[j].TimeMs
		}
		return false
	})
}

// findFromDB serves fast mode: the best applicable solver of the user
// find-db record, run once and verified, without benchmarking.
func findFromDB(ctx context.Context, h *handle.Handle, ts *Tensors, solvers []*conv.Solver, opts Options, res *Result, logf func(string, ...any)) (bool, error) {
	db, err := finddb.Load(opts.UserDB)
	if err != nil {
		return false, fmt.Errorf("read the find-db: %w", err)
	}
	for _, w := range db.Warnings {
		res.DBWarnings = append(res.DBWarnings, w.String())
	}
	rec, ok := db.Lookup(res.Key)
	if !ok {
		return false, nil
	}
	byName := map[string]*conv.Solver{}
	for _, s := range solvers {
		byName[s.Name] = s
	}
	for _, de := range rec.Sorted() {
		s := byName[de.Solver]
		if s == nil || !s.IsApplicable(ts.Problem) {
			continue
		}
		logf("fast mode: find-db names %s (%.4g ms)", s.Name, de.TimeMs)
		e := Entry{Solver: s.Name, Algorithm: s.Algorithm, TimeMs: de.TimeMs, Workspace: s.Workspace(ts.Problem), Status: StatusOK, Detail: "from find-db"}
		if err := runPlan(h, h.Stream(), s, ts, ts.Y); err != nil {
			return false, err
		}
		if err := h.Device().StreamSynchronize(h.Stream()); err != nil {
			return false, err
		}
		if opts.Verify {
			if err := verify(ts, &e); err != nil {
				return false, err
			}
		}
		res.Entries = append(res.Entries, e)
		res.Chosen, res.FromDB, res.DBRecord = s.Name, true, rec.Line()
		res.Verified = !opts.Verify || e.Check.OK
		return true, nil
	}
	return false, nil
}

// runPlan launches a solver's kernels on stream s with output y.
func runPlan(h *handle.Handle, s hip.Stream, sol *conv.Solver, ts *Tensors, y hip.DevPtr) error {
	for _, l := range sol.Plan(ts.Problem, conv.Buffers{X: ts.X, W: ts.W, Y: y, Workspace: ts.Workspace}) {
		f, err := h.Function(conv.Source(), l.Kernel)
		if err != nil {
			return err
		}
		if err := h.RunOn(s, f, l.Grid, l.Block, l.SharedMem, l.Args...); err != nil {
			return fmt.Errorf("%s: %w", sol.Name, err)
		}
	}
	return nil
}

// timeSolver runs warmups untimed runs and the timed samples on the
// handle's stream and checks the output.
func timeSolver(ctx context.Context, h *handle.Handle, ts *Tensors, s *conv.Solver, opts Options, warmups int, logf func(string, ...any)) (Entry, error) {
	e := Entry{Solver: s.Name, Algorithm: s.Algorithm, Workspace: s.Workspace(ts.Problem)}
	if e.Workspace > ts.WorkspaceBytes {
		e.Status, e.Detail = StatusFailed, fmt.Sprintf("needs %d bytes of workspace, %d available", e.Workspace, ts.WorkspaceBytes)
		return e, nil
	}
	tm, err := newTimer(h.Device())
	if err != nil {
		return e, err
	}
	defer tm.close()
	var samples []float64
	for i := 0; i < warmups+opts.Samples; i++ {
		if err := ctx.Err(); err != nil {
			return e, err
		}
		ms, err := tm.time(h.Stream(), func() error { return runPlan(h, h.Stream(), s, ts, ts.Y) })
		if err != nil {
			if isSticky(err) {
				return e, err
			}
			e.Status, e.Detail = StatusFailed, err.Error()
			return e, nil
		}
		if i >= warmups {
			samples = append(samples, ms)
		}
	}
	e.TimeMs, e.Dropped = RobustMean(samples)
	e.Samples = len(samples)
	e.Status = StatusOK
	logf("%s: %.4g ms (%d samples, %d dropped)", s.Name, e.TimeMs, e.Samples, e.Dropped)
	if opts.Verify {
		if err := verify(ts, &e); err != nil {
			return e, err
		}
	}
	return e, nil
}

func verify(ts *Tensors, e *Entry) error {
	got, err := ts.Output()
	if err != nil {
		return fmt.Errorf("read %s's output: %w", e.Solver, err)
	}
	c := ts.Check(got)
	e.Check = &c
	if !c.OK {
		e.Status = StatusFailedVerification
		e.Detail = c.String()
	}
	return nil
}

// tryNaiveWithTimeout is the bounded naive evaluation: the output goes to
// a handle scratch buffer on a tracker stream; find polls the stop event
// until deadlineMs and, if the kernel is still running, abandons the stream
// with the stop event as its done event and moves on.
func tryNaiveWithTimeout(ctx context.Context, h *handle.Handle, ts *Tensors, s *conv.Solver, deadlineMs float64, opts Options, logf func(string, ...any)) (e Entry, waitedMs float64, abandoned bool, err error) {
	e = Entry{Solver: s.Name, Algorithm: s.Algorithm, Workspace: s.Workspace(ts.Problem)}
	dev, tr := h.Device(), h.Tracker()
	scratch, err := h.ScratchBuffer(ts.OutputBytes())
	if err != nil {
		return e, 0, false, err
	}
	slot, err := tr.Acquire(ctx)
	if err != nil {
		_ = scratch.Release()
		return e, 0, false, fmt.Errorf("acquire a stream for the naive evaluation: %w", err)
	}
	tr.Pin(slot, scratch)
	startEv, err := dev.EventCreate(hip.EventDefault)
	if err != nil {
		tr.Release(slot)
		return e, 0, false, err
	}
	defer dev.EventDestroy(startEv)
	stopEv, err := dev.EventCreate(hip.EventDefault)
	if err != nil {
		tr.Release(slot)
		return e, 0, false, err
	}
	st := slot.Stream()
	t0 := time.Now()
	runErr := dev.EventRecord(startEv, st)
	if runErr == nil {
		runErr = runPlan(h, st, s, ts, scratch.Ptr())
	}
	if runErr != nil {
		// Hand the stop event over if it can still be recorded, so the slot
		// is reclaimable without its callback.
		if dev.EventRecord(stopEv, st) == nil {
			tr.Abandon(slot, stopEv)
		} else {
			_ = dev.EventDestroy(stopEv)
			tr.Abandon(slot, 0)
		}
		if isSticky(runErr) {
			return e, 0, true, runErr
		}
		e.Status, e.Detail = StatusFailed, runErr.Error()
		return e, 0, true, nil
	}
	if err := dev.EventRecord(stopEv, st); err != nil {
		_ = dev.EventDestroy(stopEv)
		tr.Abandon(slot, 0)
		return e, 0, true, err
	}
	deadline := t0.Add(time.Duration(deadlineMs * float64(time.Millisecond)))
	for {
		qerr := dev.EventQuery(stopEv)
		if qerr == nil {
			break
		}
		if !hip.IsNotReady(qerr) {
			tr.Abandon(slot, stopEv)
			return e, msSince(t0), true, fmt.Errorf("naive evaluation: %w", qerr)
		}
		if time.Now().After(deadline) {
			waited := msSince(t0)
			tr.Abandon(slot, stopEv)
			e.Status = StatusTimedOut
			e.Detail = fmt.Sprintf("exceeded %d%% of the best time (%.4g ms): abandoned after %.4g ms", opts.NaiveTimeoutPct, deadlineMs, waited)
			logf("%s: %s", s.Name, e.Detail)
			return e, waited, true, nil
		}
		runtime.Gosched()
	}
	waited := msSince(t0)
	warm, err := dev.EventElapsedTime(startEv, stopEv)
	_ = dev.EventDestroy(stopEv)
	tr.Release(slot)
	if err != nil {
		return e, waited, false, err
	}
	logf("%s: warm-up finished in %.4g ms, within the %.4g ms deadline", s.Name, warm, deadlineMs)
	// It made the deadline: time it like any other solver, the warm-up
	// already done.
	te, err := timeSolver(ctx, h, ts, s, opts, 0, logf)
	return te, waited, false, err
}

func msSince(t time.Time) float64 { return float64(time.Since(t)) / float64(time.Millisecond) }

// isSticky reports a device error after which nothing on the device can be
// trusted: find stops instead of marking one solver failed.
func isSticky(err error) bool {
	switch hip.CodeOf(err) {
	case hip.ErrIllegalAddress, hip.ErrLaunchFailure, hip.ErrLaunchTimeout, hip.ErrDeinitialized:
		return true
	}
	return errors.Is(err, context.Canceled) || errors.Is(err, context.DeadlineExceeded)
}

// timer times work on a stream with a start/stop event pair.
type timer struct {
	dev         hip.Device
	start, stop hip.Event
}

func newTimer(dev hip.Device) (*timer, error) {
	a, err := dev.EventCreate(hip.EventDefault)
	if err != nil {
		return nil, err
	}
	b, err := dev.EventCreate(hip.EventDefault)
	if err != nil {
		_ = dev.EventDestroy(a)
		return nil, err
	}
	return &timer{dev, a, b}, nil
}

func (t *timer) time(s hip.Stream, work func() error) (float64, error) {
	if err := t.dev.EventRecord(t.start, s); err != nil {
		return 0, err
	}
	if err := work(); err != nil {
		return 0, err
	}
	if err := t.dev.EventRecord(t.stop, s); err != nil {
		return 0, err
	}
	if err := t.dev.EventSynchronize(t.stop); err != nil {
		return 0, err
	}
	ms, err := t.dev.EventElapsedTime(t.start, t.stop)
	return float64(ms), err
}

func (t *timer) close() {
	_ = t.dev.EventDestroy(t.start)
	_ = t.dev.EventDestroy(t.stop)
}
