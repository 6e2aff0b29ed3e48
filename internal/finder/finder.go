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
	"miotool/internal/streams"
	"miotool/internal/words"
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
	// StatusInterrupted: the find was interrupted while this solver ran;
	// the entry holds the samples it took.
	StatusInterrupted Status = "interrupted"
	// StatusNotRun: the find was interrupted before this solver's turn.
	StatusNotRun Status = "not run"
)

// NaiveOutcome says what became of the bounded naive evaluation in a find:
// whether it was abandoned at its deadline and, when it was not, why not.
type NaiveOutcome string

// Naive outcomes; each reads after "the naive evaluation ".
const (
	NaiveAbandoned      NaiveOutcome = "was abandoned at its deadline"
	NaiveWithinDeadline NaiveOutcome = "finished within its deadline"
	NaiveFailed         NaiveOutcome = "failed to run"
	NaiveTimeoutOff     NaiveOutcome = "had no deadline: the naive timeout is off (MIOPEN_NAIVE_TIMEOUT=0), so naive ran to its end and was timed in full"
	NaiveNoDeadline     NaiveOutcome = "had no deadline: no other solver succeeded, so naive ran to its end and was timed in full"
	NaiveNotApplicable  NaiveOutcome = "did not run: no naive solver applies to the problem"
	NaiveNotConsidered  NaiveOutcome = "did not run: no naive solver among the solvers considered"
	NaiveFromDB         NaiveOutcome = "did not run: the find-db record chose the solver, nothing was benchmarked"
	NaiveImmediate      NaiveOutcome = "did not run: the immediate-mode heuristic chose the solver, nothing was benchmarked"
	NaiveInterrupted    NaiveOutcome = "did not finish: the find was interrupted"
)

// Abandoned reports whether the naive evaluation overran its deadline and
// was abandoned: the precondition of every check of the bound.
func (o NaiveOutcome) Abandoned() bool { return o == NaiveAbandoned }

// ErrInterrupted marks a find that its context ended: Find returns it
// with the result measured so far.
var ErrInterrupted = errors.New("find interrupted")

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
	// DBLockWait, when set, is told at once that the find-db write waits
	// for a lock another writer holds (MIOpen or another miotool), for
	// whom and for how long at most. Unset, the wait is a warning.
	DBLockWait func(finddb.LockWait)
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
	// Naive says whether the naive evaluation was abandoned at its
	// deadline and, when it was not, why not.
	Naive NaiveOutcome
	// NaiveAbandoned: the naive evaluation's stream was abandoned, its
	// kernel perhaps still running (at the deadline, on a launch failure
	// or on an interruption; Naive says which), so the handle's teardown
	// waits for it. NaiveAbandonedAt is when.
	NaiveAbandoned   bool
	NaiveAbandonedAt time.Time
	// Interrupted: the find's context ended before it did. Entries hold
	// what was measured (StatusInterrupted for the solver that was
	// running, with its samples; StatusNotRun for those not reached);
	// nothing is chosen and nothing is written to the find-db.
	Interrupted bool
	Elapsed     time.Duration
	DBPath      string
	// DBRecord is the record used (a hit) or merged into the find-db.
	DBRecord string
	// DBWritten: DBRecord was merged into the file at DBPath.
	DBWritten bool
	// DBWarnings are lines and items of the file that miotool keeps but
	// does not use (at most a few, then a count).
	DBWarnings []string
	// DBReplaced are the malformed items of miotool's solvers that the
	// write replaced in place (MIOpen reads only the first item of a
	// solver, so an item appended after them would never be read).
	DBReplaced []finddb.Replaced
	// DBWaited are the find-db locks the write found held and waited for.
	DBWaited []finddb.LockWait
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
// the reason in DBErr and Warnings. When ctx ends first, Find returns the
// result measured so far, marked Interrupted, with an error wrapping
// ErrInterrupted and ctx's error; any other error comes with no result.
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
		if !interruption(err) {
			return nil, err
		}
		f.res.Interrupted = true
		f.res.Elapsed = time.Since(start)
		return f.res, fmt.Errorf("%w: %w", ErrInterrupted, err)
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
			res.Naive = NaiveFromDB
			return f.runFromDB(hit)
		}
		if opts.Mode == ModeFast {
			res.Naive = NaiveImmediate
			return f.runImmediate()
		}
		f.logf("%s mode: find-db: %s; benchmarking", opts.Mode, res.Lookup)
	}
	return f.benchmark()
}

// benchmark times every applicable solver, naive last with its deadline,
// ranks them and writes the record to the find-db. Interrupted, it keeps
// what it measured, ranked, and returns the context's error.
func (f *search) benchmark() error {
	opts, res, p := f.opts, f.res, f.ts.Problem
	var naive []*conv.Solver
	best := 0.0
	res.Naive = naiveBefore(opts.Solvers, p)
	for i, s := range opts.Solvers {
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
			return f.interrupted(err, e, append(opts.Solvers[i+1:len(opts.Solvers):len(opts.Solvers)], naive...))
		}
		if e.Status == StatusOK && (best == 0 || e.TimeMs < best) {
			best = e.TimeMs
		}
		res.Entries = append(res.Entries, e)
	}
	if err := f.evaluateNaive(naive, best); err != nil {
		return err
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

// evaluateNaive times the naive solvers last, each with a deadline of
// MIOPEN_NAIVE_TIMEOUT percent of best (the best time of the others), or
// in full when the bound is off or nothing else was timed.
func (f *search) evaluateNaive(naive []*conv.Solver, best float64) error {
	opts, res := f.opts, f.res
	for i, s := range naive {
		if opts.NaiveTimeoutPct == 0 || best == 0 {
			res.Naive = NaiveTimeoutOff
			if opts.NaiveTimeoutPct != 0 {
				res.Naive = NaiveNoDeadline
			}
			e, err := f.timeSolver(s, 1)
			if err != nil {
				return f.interrupted(err, e, naive[i+1:])
			}
			res.Entries = append(res.Entries, e)
			continue
		}
		deadline := best * float64(opts.NaiveTimeoutPct) / 100
		e, waited, abandoned, err := f.tryNaiveWithTimeout(s, deadline)
		res.NaiveDeadlineMs, res.NaiveWaitMs = deadline, waited
		res.NaiveAbandoned = res.NaiveAbandoned || abandoned
		switch {
		case err != nil:
		case e.Status == StatusTimedOut:
			res.Naive = NaiveAbandoned
		case e.Status == StatusFailed && abandoned:
			res.Naive = naiveUnlessAbandoned(res.Naive, NaiveFailed)
		default:
			res.Naive = naiveUnlessAbandoned(res.Naive, NaiveWithinDeadline)
		}
		if err != nil {
			return f.interrupted(err, e, naive[i+1:])
		}
		res.Entries = append(res.Entries, e)
	}
	return nil
}

// naiveBefore is the naive outcome before the benchmark: no naive solver
// considered, none applicable, or, until the evaluation has an outcome,
// an interruption's.
func naiveBefore(solvers []*conv.Solver, p conv.Problem) NaiveOutcome {
	out := NaiveNotConsidered
	for _, s := range solvers {
		if s.IsNaive() {
			if s.IsApplicable(p) {
				return NaiveInterrupted
			}
			out = NaiveNotApplicable
		}
	}
	return out
}

// naiveUnlessAbandoned keeps an earlier naive solver's abandonment.
func naiveUnlessAbandoned(was, now NaiveOutcome) NaiveOutcome {
	if was.Abandoned() {
		return was
	}
	return now
}

// interruption reports an error that is the find's context ending.
func interruption(err error) bool {
	return errors.Is(err, context.Canceled) || errors.Is(err, context.DeadlineExceeded)
}

// interrupted ends the benchmark on err. When err is the context's end,
// the result keeps what was measured: e, the solver that was running,
// and the solvers not reached, ranked; the scratch cache is dropped as
// at the end of a find. Any other error is returned as it is.
func (f *search) interrupted(err error, e Entry, notReached []*conv.Solver) error {
	if !interruption(err) {
		return err
	}
	res, p := f.res, f.ts.Problem
	if e.Status == "" {
		e.Status = StatusInterrupted
	}
	res.Entries = append(res.Entries, e)
	for _, s := range notReached {
		ne := Entry{Solver: s.Name, Algorithm: s.Algorithm, Status: StatusNotRun, Detail: "the find was interrupted before its turn"}
		if !s.IsApplicable(p) {
			ne.Status, ne.Detail = StatusNotApplicable, ""
		}
		res.Entries = append(res.Entries, ne)
	}
	if derr := f.h.DropScratchCache(); derr != nil {
		return errors.Join(err, fmt.Errorf("drop the scratch cache: %w", derr))
	}
	rank(res.Entries)
	return err
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
	onWait := f.opts.DBLockWait
	if onWait == nil {
		onWait = func(w finddb.LockWait) { f.warn("find-db: %s", w) }
	}
	st, err := finddb.Store(f.ctx, f.opts.UserDB, rec, finddb.StoreOptions{LockTimeout: dbLockTimeout, OnWait: onWait})
	res.DBWaited = st.Waited
	f.noteDB(st.Warnings)
	if err != nil {
		res.DBErr = err
		f.warn("find-db not written (%v); the result stands without it", err)
		return
	}
	res.DBWritten = true
	res.DBReplaced = st.Replaced
	for _, r := range st.Replaced {
		f.warn("find-db: %s", r)
	}
}

// rank orders ok entries by time, then those that failed verification,
// were interrupted, timed out, failed, were not run, and do not apply.
func rank(es []Entry) {
	order := map[Status]int{StatusOK: 0, StatusFailedVerification: 1, StatusInterrupted: 2, StatusTimedOut: 3, StatusFailed: 4, StatusNotRun: 5, StatusNotApplicable: 6}
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
			res.Lookup = fmt.Sprintf("%s for this key, %s used", words.Count(len(rec.Entries), "entry", "entries"), s.Name)
			return &dbHit{solver: s, entry: de, rec: rec}, nil
		}
	}
	switch {
	case len(rec.Entries) == 0:
		res.Lookup = "no usable entries for this key"
	case known == 0:
		res.Lookup = fmt.Sprintf("%s for this key, none for miotool's solvers", words.Count(len(rec.Entries), "entry", "entries"))
	default:
		res.Lookup = fmt.Sprintf("%s for this key, none of miotool's applicable", words.Count(len(rec.Entries), "entry", "entries"))
	}
	return nil, nil
}

// runFromDB serves a find-db hit: the recorded solver, run once and
// verified, with its recorded time; nothing is benchmarked.
func (f *search) runFromDB(hit *dbHit) error {
	opts, res, s := f.opts, f.res, hit.solver
	f.logf("%s mode: find-db names %s (%.4g ms)", opts.Mode, s.Name, hit.entry.TimeMs)
	e, err := f.runOnce(s)
	if err != nil {
		if interruption(err) {
			res.Entries = append(res.Entries, e)
		}
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
		if interruption(err) {
			res.Entries = append(res.Entries, e)
		}
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
		e.Status, e.Detail = StatusInterrupted, "the find was interrupted before it ran"
		return e, err
	}
	if err := ts.ClearOutput(); err != nil {
		return e, err
	}
	tm, err := newTimer(f.ctx, h.Device())
	if err != nil {
		return e, err
	}
	defer tm.close()
	ms, err := tm.time(h.Stream(), func() error { return runPlan(h, h.Stream(), s, ts, ts.Y) })
	if err != nil {
		if interruption(err) {
			e.Status, e.Detail = StatusInterrupted, "the find was interrupted while it ran"
		}
		if isSticky(err) {
			return e, err
		}
		e.Status, e.Detail = StatusFailed, err.Error()
		return e, nil
	}
	e.TimeMs, e.Samples, e.Status = ms, 1, StatusOK
	if f.opts.Verify {
		if err := f.verify(&e); err != nil {
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
	tm, err := newTimer(f.ctx, h.Device())
	if err != nil {
		return e, err
	}
	defer tm.close()
	var samples []float64
	// interrupted keeps what was measured: the samples taken so far.
	interrupted := func(err error) (Entry, error) {
		e.Status, e.Samples = StatusInterrupted, len(samples)
		e.Detail = fmt.Sprintf("interrupted after %d of %d samples", len(samples), opts.Samples)
		if len(samples) > 0 {
			e.TimeMs, e.Dropped = RobustMean(samples)
		}
		return e, err
	}
	for i := 0; i < warmups+opts.Samples; i++ {
		if err := f.ctx.Err(); err != nil {
			return interrupted(err)
		}
		ms, err := tm.time(h.Stream(), func() error { return runPlan(h, h.Stream(), s, ts, ts.Y) })
		if err != nil {
			if interruption(err) {
				return interrupted(err)
			}
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
		if err := f.verify(&e); err != nil {
			return e, err
		}
	}
	return e, nil
}

// verify checks e's output against the CPU reference. The reference of a
// large problem takes seconds of CPU, so the wait for it ends when the
// find's context does: e is then marked interrupted, its samples kept,
// and the check left to finish on its own (the process's exit ends it).
func (f *search) verify(e *Entry) error {
	type checked struct {
		c   conv.CheckResult
		err error
	}
	ts := f.ts
	done := make(chan checked, 1)
	go func() {
		got, err := ts.Output()
		if err != nil {
			done <- checked{err: err}
			return
		}
		done <- checked{c: ts.Check(got)}
	}()
	var r checked
	select {
	case r = <-done:
	case <-f.ctx.Done():
		e.Status, e.Detail = StatusInterrupted, "interrupted while its output was checked against the CPU reference"
		return f.ctx.Err()
	}
	if r.err != nil {
		return fmt.Errorf("read %s's output: %w", e.Solver, r.err)
	}
	e.Check = &r.c
	if !r.c.OK {
		e.Status = StatusFailedVerification
		e.Detail = r.c.String()
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
		if interruption(err) {
			e.Status, e.Detail = StatusInterrupted, "the find was interrupted while it waited for a stream"
		}
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
			f.abandon(slot, stopEv)
		} else {
			_ = dev.EventDestroy(stopEv)
			f.abandon(slot, 0)
		}
		if isSticky(runErr) {
			return e, 0, true, runErr
		}
		e.Status, e.Detail = StatusFailed, runErr.Error()
		return e, 0, true, nil
	}
	if err := dev.EventRecord(stopEv, st); err != nil {
		_ = dev.EventDestroy(stopEv)
		f.abandon(slot, 0)
		return e, 0, true, err
	}
	deadline := t0.Add(time.Duration(deadlineMs * float64(time.Millisecond)))
	tr.AbandonBy(slot, deadline)
	for {
		select {
		case <-f.ctx.Done():
			// Interrupted: abandon the evaluation as at its deadline, so
			// its teardown is the same.
			waited := msSince(t0)
			f.abandon(slot, stopEv)
			e.Status = StatusInterrupted
			e.Detail = fmt.Sprintf("interrupted after %.4g ms of its %.4g ms deadline; abandoned", waited, deadlineMs)
			return e, waited, true, f.ctx.Err()
		default:
		}
		qerr := dev.EventQuery(stopEv)
		if qerr == nil {
			break
		}
		if !hip.IsNotReady(qerr) {
			f.abandon(slot, stopEv)
			return e, msSince(t0), true, fmt.Errorf("naive evaluation: %w", qerr)
		}
		if time.Now().After(deadline) {
			waited := msSince(t0)
			f.abandon(slot, stopEv)
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

// abandon hands the naive evaluation's slot to the tracker, its kernel
// perhaps still running, and notes when.
func (f *search) abandon(slot *streams.Slot, done hip.Event) {
	f.res.NaiveAbandonedAt = time.Now()
	f.h.Tracker().Abandon(slot, done)
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

// sampleGrace is how long an interrupted find still waits for the sample
// that is running: one about to end is kept, and the find still ends well
// within the two seconds an interruption may take.
const sampleGrace = 250 * time.Millisecond

// timer times work on a stream with a start/stop event pair. Its wait
// for the stop event ends early when ctx does: a sample of a large
// problem can take seconds, and an interrupted find must not wait for it.
type timer struct {
	ctx         context.Context
	dev         hip.Device
	start, stop hip.Event
	// waiting is closed when the wait an interruption left behind
	// returns; nil when none is left (the events are then free to go).
	waiting chan struct{}
}

func newTimer(ctx context.Context, dev hip.Device) (*timer, error) {
	a, err := dev.EventCreate(hip.EventDefault)
	if err != nil {
		return nil, err
	}
	b, err := dev.EventCreate(hip.EventDefault)
	if err != nil {
		_ = dev.EventDestroy(a)
		return nil, err
	}
	return &timer{ctx: ctx, dev: dev, start: a, stop: b}, nil
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
	synced := make(chan error, 1)
	waiting := make(chan struct{})
	go func() {
		synced <- t.dev.EventSynchronize(t.stop)
		close(waiting)
	}()
	var err error
	select {
	case err = <-synced:
	case <-t.ctx.Done():
		// A sample about to end is kept; a long one is left running.
		select {
		case err = <-synced:
		case <-time.After(sampleGrace):
			// The wait goes on; close leaves the events to it.
			t.waiting = waiting
			return 0, t.ctx.Err()
		}
	}
	if err != nil {
		return 0, err
	}
	ms, err := t.dev.EventElapsedTime(t.start, t.stop)
	return float64(ms), err
}

// close destroys the events, once no wait uses them any more.
func (t *timer) close() {
	destroy := func() {
		_ = t.dev.EventDestroy(t.start)
		_ = t.dev.EventDestroy(t.stop)
	}
	if t.waiting == nil {
		destroy()
		return
	}
	go func() {
		<-t.waiting
		destroy()
	}()
}
