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
	"strings"
	"time"

	"miotool/internal/conv"
	"miotool/internal/finddb"
	"miotool/internal/handle"
	"miotool/internal/hip"
)

// Mode is the find mode, as MIOpen defines them: normal benchmarks; fast
// takes a find-db hit and on a miss falls back to immediate mode (the
// heuristic) without benchmarking; hybrid and dynamic-hybrid take a hit and
// benchmark on a miss. (MIOpen's dynamic hybrid benchmarks only solvers
// that need no tuning; miotool's all need none, so it equals hybrid here.)
type Mode string

// Find modes.
const (
	ModeNormal        Mode = "normal"
	ModeFast          Mode = "fast"
	ModeHybrid        Mode = "hybrid"
	ModeDynamicHybrid Mode = "dynamic-hybrid"
)

// Modes lists the find modes.
var Modes = []Mode{ModeNormal, ModeFast, ModeHybrid, ModeDynamicHybrid}

// ParseMode accepts a mode's name in any case ("_" for "-" too) or
// MIOpen's number for it (1, 2, 3, 5).
func ParseMode(s string) (Mode, error) {
	switch strings.ReplaceAll(strings.ToLower(strings.TrimSpace(s)), "_", "-") {
	case "normal", "1":
		return ModeNormal, nil
	case "fast", "2":
		return ModeFast, nil
	case "hybrid", "3":
		return ModeHybrid, nil
	case "dynamic-hybrid", "5":
		return ModeDynamicHybrid, nil
	}
	return "", fmt.Errorf("unknown find mode %q (want normal, fast, hybrid or dynamic-hybrid; or 1, 2, 3, 5)", s)
}

// usesDB reports whether the mode takes a find-db hit instead of benchmarking.
func (m Mode) usesDB() bool { return m != ModeNormal }

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
	// Immediate ranks solver names best first for p, as MIOpen's
	// immediate mode does with its heuristic (TunaNet); fast mode uses it
	// on a find-db miss. It returns an error wrapping ErrNoHeuristic when
	// the heuristic does not cover p; nil takes the first applicable solver.
	Immediate func(p conv.Problem) ([]string, error)
	// Log, when set, receives one line per step.
	Log func(format string, args ...any)
	// Warn, when set, receives each warning as it happens (the result's
	// Warnings keep them too).
	Warn func(format string, args ...any)
}

// ErrNoHeuristic marks a problem the immediate-mode heuristic does not cover.
var ErrNoHeuristic = errors.New("the heuristic does not cover this problem")

// dbLockTimeout bounds the wait for another writer's find-db lock, as
// MIOpen's 60 s file lock does.
const dbLockTimeout = 60 * time.Second

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
	Mode    Mode
	// FromDB: the chosen solver came from a find-db hit, not benchmarked.
	FromDB bool
	// Immediate: fast mode missed the find-db and the immediate-mode
	// heuristic chose, without benchmarking; ImmediateRank is its ranking
	// of miotool's applicable solvers (nil: it did not cover the problem).
	Immediate     bool
	ImmediateRank []string
	// Lookup says what the find-db held for the key when the mode looked.
	Lookup string
	// Verified is true when the chosen solver's output matched the reference.
	Verified bool
	// NaiveDeadlineMs is the naive deadline (0 when the timed path did
	// not run); NaiveWaitMs is how long find waited on naive.
	NaiveDeadlineMs float64
	NaiveWaitMs     float64
	NaiveAbandoned  bool
	Elapsed         time.Duration
	DBPath          string
	// DBRecord is the record used (a hit) or merged into the find-db.
	DBRecord string
	// DBWritten: DBRecord was merged into the file at DBPath.
	DBWritten bool
	// DBWarnings are lines and items of the file that miotool keeps but
	// does not use (at most a few, then a count).
	DBWarnings []string
	// DBErr is why the find-db could not be read or written; the result
	// stands without it.
	DBErr error
	// Warnings is every warning, in order, each a sentence.
	Warnings []string
}

// maxDBWarnings is how many lines of a damaged find-db are named.
const maxDBWarnings = 5

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

// Find evaluates the problem's solvers on h with the data in ts. A find-db
// that cannot be read or written does not fail it: the result stands, with
// the reason in DBErr and Warnings.
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
	if opts.Solvers == nil {
		opts.Solvers = conv.Solvers()
	}
	f := &search{ctx: ctx, h: h, ts: ts, opts: opts, logf: opts.Log, start: start}
	if f.logf == nil {
		f.logf = func(string, ...any) {}
	}
	p := ts.Problem
	f.res = &Result{Problem: p, Key: p.Key(), DBPath: opts.UserDB, Mode: opts.Mode}
	if err := f.run(); err != nil {
		return nil, err
	}
	if f.res.Elapsed == 0 { // set before the find-db write when there is one
		f.res.Elapsed = time.Since(start)
	}
	return f.res, nil
}

// search is one find: its inputs, its result so far, and the hooks every
// step reports through.
type search struct {
	ctx  context.Context
	h    *handle.Handle
	ts   *Tensors
	opts Options
	res  *Result
	logf func(format string, args ...any)
	// start is when Find began.
	start time.Time
	// dbWarned: the find-db's warnings were noted (once per find, however
	// often the file is read).
	dbWarned bool
}

// warn notes a warning in the result and passes it to the Warn hook.
func (f *search) warn(format string, args ...any) {
	msg := fmt.Sprintf(format, args...)
	f.res.Warnings = append(f.res.Warnings, msg)
	if f.opts.Warn != nil {
		f.opts.Warn("%s", msg)
	}
}

// noteDB keeps the first few warnings of the find-db as read, once.
func (f *search) noteDB(ws []finddb.Warning) {
	if f.dbWarned || len(ws) == 0 {
		return
	}
	f.dbWarned = true
	f.res.DBWarnings = finddb.Summary(ws, maxDBWarnings)
	for _, w := range f.res.DBWarnings {
		f.warn("find-db: %s", w)
	}
}

// run is the find in its mode: a find-db hit, fast mode's immediate
// fallback, or the benchmark.
func (f *search) run() error {
	opts, res := f.opts, f.res
	if opts.Mode.usesDB() {
		hit, err := f.lookupDB()
		if err != nil {
			res.DBErr = err
			f.warn("find-db not read (%v); treated as a miss", err)
		}
		if hit != nil {
			return f.runFromDB(hit)
		}
		if opts.Mode == ModeFast {
			return f.runImmediate()
		}
		f.logf("%s mode: find-db: %s; benchmarking", opts.Mode, res.Lookup)
	}
	return f.benchmark()
}

// benchmark times every applicable solver, naive last with its deadline,
// ranks them and writes the record to the find-db.
func (f *search) benchmark() error {
	opts, res, p := f.opts, f.res, f.ts.Problem
	var naive []*conv.Solver
	best := 0.0
	for _, s := range opts.Solvers {
		if !s.IsApplicable(p) {
			res.Entries = append(res.Entries, Entry{Solver: s.Name, Algorithm: s.Algorithm, Status: StatusNotApplicable, Workspace: 0})
			continue
		}
		if s.IsNaive() {
			naive = append(naive, s)
			continue
		}
		e, err := f.timeSolver(s, 1)
		if err != nil {
			return err
		}
		if e.Status == StatusOK && (best == 0 || e.TimeMs < best) {
			best = e.TimeMs
		}
		res.Entries = append(res.Entries, e)
	}
	for _, s := range naive {
		if opts.NaiveTimeoutPct == 0 || best == 0 {
			e, err := f.timeSolver(s, 1)
			if err != nil {
				return err
			}
			res.Entries = append(res.Entries, e)
			continue
		}
		deadline := best * float64(opts.NaiveTimeoutPct) / 100
		e, waited, abandoned, err := f.tryNaiveWithTimeout(s, deadline)
		res.NaiveDeadlineMs, res.NaiveWaitMs = deadline, waited
		res.NaiveAbandoned = res.NaiveAbandoned || abandoned
		if err != nil {
			return err
		}
		res.Entries = append(res.Entries, e)
	}
	if err := f.h.DropScratchCache(); err != nil {
		return fmt.Errorf("drop the scratch cache: %w", err)
	}
	rank(res.Entries)
	if len(res.Entries) > 0 && res.Entries[0].Status == StatusOK {
		res.Chosen = res.Entries[0].Solver
		res.Verified = !opts.Verify || res.Entries[0].Check != nil && res.Entries[0].Check.OK
	}
	res.Elapsed = time.Since(f.start)
	if res.Chosen != "" && opts.UserDB != "" {
		f.storeDB()
	}
	return nil
}

// storeDB merges the ok entries into the user find-db.
func (f *search) storeDB() {
	res := f.res
	rec := finddb.Record{Key: res.Key}
	for _, e := range res.Entries {
		if e.Status == StatusOK {
			rec.Entries = append(rec.Entries, finddb.Entry{Solver: e.Solver, TimeMs: e.TimeMs, Workspace: int64(e.Workspace), Algorithm: e.Algorithm})
		}
	}
	res.DBRecord = rec.Line()
	st, err := finddb.Store(f.ctx, f.opts.UserDB, rec, finddb.StoreOptions{LockTimeout: dbLockTimeout})
	f.noteDB(st.Warnings)
	if err != nil {
		res.DBErr = err
		f.warn("find-db not written (%v); the result stands without it", err)
	} else {
		res.DBWritten = true
	}
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

// dbHit is the find-db entry a hit uses.
type dbHit struct {
	solver *conv.Solver
	entry  finddb.Entry
	rec    finddb.Record
}

// lookupDB reads the user find-db for p's key and returns the fastest
// entry of one of miotool's applicable solvers, or nil on a miss (a key
// whose entries name none of them is a miss too). It sets res.Lookup.
func (f *search) lookupDB() (*dbHit, error) {
	path, p, solvers, res := f.opts.UserDB, f.ts.Problem, f.opts.Solvers, f.res
	if path == "" {
		res.Lookup = "no user find-db"
		return nil, nil
	}
	db, err := finddb.Load(path)
	if err != nil {
		res.Lookup = "not read"
		return nil, err
	}
	f.noteDB(db.Warnings)
	rec, ok := db.Lookup(res.Key)
	if !ok {
		res.Lookup = "no record for this key"
		return nil, nil
	}
	byName := map[string]*conv.Solver{}
	for _, s := range solvers {
		byName[s.Name] = s
	}
	known := 0
	for _, de := range rec.Sorted() {
		s := byName[de.Solver]
		if s == nil {
			continue
		}
		known++
		if s.IsApplicable(p) {
			res.Lookup = fmt.Sprintf("%s for this key, %s used", plural(len(rec.Entries), "entry", "entries"), s.Name)
			return &dbHit{solver: s, entry: de, rec: rec}, nil
		}
	}
	switch {
	case len(rec.Entries) == 0:
		res.Lookup = "no usable entries for this key"
	case known == 0:
		res.Lookup = fmt.Sprintf("%s for this key, none for miotool's solvers", plural(len(rec.Entries), "entry", "entries"))
	default:
		res.Lookup = fmt.Sprintf("%s for this key, none of miotool's applicable", plural(len(rec.Entries), "entry", "entries"))
	}
	return nil, nil
}

func plural(n int, one, many string) string {
	if n == 1 {
		return "1 " + one
	}
	return fmt.Sprintf("%d %s", n, many)
}

// runFromDB serves a find-db hit: the recorded solver, run once and
// verified, with its recorded time; nothing is benchmarked.
func (f *search) runFromDB(hit *dbHit) error {
	opts, res, s := f.opts, f.res, hit.solver
	f.logf("%s mode: find-db names %s (%.4g ms)", opts.Mode, s.Name, hit.entry.TimeMs)
	e, err := f.runOnce(s)
	if err != nil {
		return err
	}
	e.TimeMs, e.Samples, e.Detail = hit.entry.TimeMs, 0, joinDetail("from find-db", e.Detail)
	res.Entries = append(res.Entries, e)
	res.Chosen, res.FromDB, res.DBRecord = s.Name, true, hit.rec.Line()
	res.Verified = e.Status == StatusOK && (!opts.Verify || e.Check != nil && e.Check.OK)
	return nil
}

// runImmediate is fast mode's fallback on a miss, as MIOpen's immediate
// mode: rank the applicable solvers with the heuristic, run the top one
// once (timed, not benchmarked) and verify it. Nothing is written to the
// find-db, as MIOpen writes none for immediate mode.
func (f *search) runImmediate() error {
	opts, res, p := f.opts, f.res, f.ts.Problem
	var applicable []*conv.Solver
	for _, s := range opts.Solvers {
		if s.IsApplicable(p) {
			applicable = append(applicable, s)
		}
	}
	if len(applicable) == 0 {
		f.warn("find-db: %s: immediate-mode fallback found no applicable solver", res.Lookup)
		return nil
	}
	chosen, how := applicable[0], "first applicable solver, no heuristic"
	if opts.Immediate != nil {
		names, err := opts.Immediate(p)
		switch {
		case errors.Is(err, ErrNoHeuristic):
			how = fmt.Sprintf("first applicable solver: %v", err)
		case err != nil:
			return fmt.Errorf("immediate-mode heuristic: %w", err)
		default:
			for _, n := range names {
				for _, s := range applicable {
					if s.Name == n {
						res.ImmediateRank = append(res.ImmediateRank, n)
					}
				}
			}
			if len(res.ImmediateRank) > 0 {
				chosen, _ = conv.SolverByName(res.ImmediateRank[0])
				how = fmt.Sprintf("TunaNet's first of %d applicable", len(applicable))
			} else {
				how = "first applicable solver: TunaNet ranked none of them"
			}
		}
	}
	f.warn("find-db: %s: immediate-mode fallback chose %s (%s), not benchmarked", res.Lookup, chosen.Name, how)
	f.logf("fast mode: running %s once", chosen.Name)
	e, err := f.runOnce(chosen)
	if err != nil {
		return err
	}
	e.Detail = joinDetail("immediate mode: "+how+", one run", e.Detail)
	res.Entries = append(res.Entries, e)
	res.Chosen, res.Immediate = chosen.Name, true
	res.Verified = e.Status == StatusOK && (!opts.Verify || e.Check != nil && e.Check.OK)
	return nil
}

// runOnce runs s once on the handle's stream, timed with events, and
// verifies its output.
func (f *search) runOnce(s *conv.Solver) (Entry, error) {
	h, ts := f.h, f.ts
	e := Entry{Solver: s.Name, Algorithm: s.Algorithm, Workspace: s.Workspace(ts.Problem)}
	if err := f.ctx.Err(); err != nil {
		return e, err
	}
	if err := ts.ClearOutput(); err != nil {
		return e, err
	}
	tm, err := newTimer(h.Device())
	if err != nil {
		return e, err
	}
	defer tm.close()
	ms, err := tm.time(h.Stream(), func() error { return runPlan(h, h.Stream(), s, ts, ts.Y) })
	if err != nil {
		if isSticky(err) {
			return e, err
		}
		e.Status, e.Detail = StatusFailed, err.Error()
		return e, nil
	}
	e.TimeMs, e.Samples, e.Status = ms, 1, StatusOK
	if f.opts.Verify {
		if err := verify(ts, &e); err != nil {
			return e, err
		}
	}
	return e, nil
}

func joinDetail(a, b string) string {
	switch {
	case a == "":
		return b
	case b == "":
		return a
	}
	return a + "; " + b
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
func (f *search) timeSolver(s *conv.Solver, warmups int) (Entry, error) {
	h, ts, opts := f.h, f.ts, f.opts
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
		if err := f.ctx.Err(); err != nil {
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
	f.logf("%s: %.4g ms (%d samples, %d dropped)", s.Name, e.TimeMs, e.Samples, e.Dropped)
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
func (f *search) tryNaiveWithTimeout(s *conv.Solver, deadlineMs float64) (e Entry, waitedMs float64, abandoned bool, err error) {
	h, ts := f.h, f.ts
	e = Entry{Solver: s.Name, Algorithm: s.Algorithm, Workspace: s.Workspace(ts.Problem)}
	dev, tr := h.Device(), h.Tracker()
	scratch, err := h.ScratchBuffer(ts.OutputBytes())
	if err != nil {
		return e, 0, false, err
	}
	slot, err := tr.Acquire(f.ctx)
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
			e.Detail = fmt.Sprintf("exceeded %d%% of the best time (%.4g ms): abandoned after %.4g ms", f.opts.NaiveTimeoutPct, deadlineMs, waited)
			f.logf("%s: %s", s.Name, e.Detail)
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
	f.logf("%s: warm-up finished in %.4g ms, within the %.4g ms deadline", s.Name, warm, deadlineMs)
	// It made the deadline: time it like any other solver, the warm-up
	// already done.
	te, err := f.timeSolver(s, 0)
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
