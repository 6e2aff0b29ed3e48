// Package find runs one find end to end on an open device and returns the
// facts: a handle and the problem's tensors, finder.Find in the requested
// mode (its immediate-mode fallback ranked by miotool's builtin TunaNet,
// the model stress-threads uses), each solver verified against the CPU
// reference, the user find-db read and merged, and a teardown that waits
// for the abandoned naive evaluation. internal/cmd/find renders them.
package find

import (
	"context"
	"errors"
	"fmt"
	"time"

	"miotool/internal/aiheur"
	"miotool/internal/aiheur/builtin"
	"miotool/internal/conv"
	"miotool/internal/finddb"
	"miotool/internal/finder"
	"miotool/internal/handle"
	"miotool/internal/hip"
	"miotool/internal/streams"
)

// Options are one find's inputs.
type Options struct {
	Problem conv.Problem
	// ProblemName is the named problem's name, "" for one given by its
	// dimensions.
	ProblemName string
	Mode        finder.Mode
	Samples     int
	Reclaim     streams.Policy
	// HWQueues is GPU_MAX_HW_QUEUES; the tracker's backlog cap follows it.
	HWQueues        int
	NaiveTimeoutPct int
	Seed            uint64
	// DBDir is the user find-db folder; "" keeps results in memory only.
	DBDir string
	// Progress, when set, is called after each step of find (total 0:
	// the number of steps is not known in advance).
	Progress func(done, total int)
	// Logf receives one line per step; Warnf each warning as it happens.
	Logf, Warnf func(format string, args ...any)
	// DBLockWait, when set, is told at once that the find-db write waits
	// for another writer's lock (see finder.Options.DBLockWait).
	DBLockWait func(finddb.LockWait)
}

// Outcome is what a find did.
type Outcome struct {
	Result *finder.Result
	// DBFile is the user find-db file ("" with no folder).
	DBFile string
	// MaxDraining is the tracker's backlog cap.
	MaxDraining int
	// AfterFind and AfterTeardown are the tracker's counters.
	AfterFind, AfterTeardown streams.Counters
	// TornDown: the handle's teardown ran and ended; Teardown and
	// AfterTeardown are its figures. A find that was interrupted may
	// leave it unfinished: the process's exit ends what it waited for.
	TornDown bool
	// Teardown is how long the handle's teardown took (it waits for the
	// abandoned evaluation, after find on purpose).
	Teardown time.Duration
}

// Found is a find that has finished and whose handle is not yet torn
// down: its Result is final (the teardown changes none of it), so a
// command can say the verdict before the teardown's wait.
type Found struct {
	Outcome
	h  *handle.Handle
	ts *finder.Tensors
}

// FinderOptions are the finder's options for o (without its hooks), the
// ones Start passes: Need takes them to say what the find allocates.
func FinderOptions(o Options) finder.Options {
	return finder.Options{NaiveTimeoutPct: o.NaiveTimeoutPct, Samples: o.Samples, Mode: o.Mode, Verify: true}
}

// Start runs the find on dev and returns it before the teardown. An error
// means the find itself failed (a device error), and nothing is left to
// tear down; a find-db that cannot be read or written is not one, but a
// warning in the result. When ctx ends first, Start returns the find with
// what it measured (Result.Interrupted) and an error wrapping
// finder.ErrInterrupted: its teardown is the caller's still.
func Start(ctx context.Context, dev hip.Device, o Options) (*Found, error) {
	found := &Found{Outcome: Outcome{MaxDraining: streams.MaxDrainingFor(o.HWQueues)}}
	h, err := handle.New(dev, handle.Options{Policy: o.Reclaim, MaxDraining: found.MaxDraining})
	if err != nil {
		return nil, err
	}
	ts, err := finder.NewTensors(dev, o.Problem, nil, o.Seed)
	if err != nil {
		return nil, errors.Join(err, h.Close())
	}
	found.h, found.ts = h, ts
	props := dev.Props()
	if o.DBDir != "" {
		found.DBFile = finddb.UserFile(o.DBDir, props.Arch, props.ComputeUnits, props.Backend)
	}
	steps := 0
	fo := FinderOptions(o)
	fo.UserDB = found.DBFile
	fo.Immediate = TunaNetRanking
	fo.Log = func(format string, args ...any) {
		steps++
		if o.Progress != nil {
			o.Progress(steps, 0)
		}
		if o.Logf != nil {
			o.Logf(format, args...)
		}
	}
	fo.Warn = o.Warnf
	fo.DBLockWait = o.DBLockWait
	res, ferr := finder.Find(ctx, h, ts, fo)
	found.Result = res
	found.AfterFind = h.Tracker().Counters()
	if ferr != nil && !errors.Is(ferr, finder.ErrInterrupted) {
		_, terr := found.Teardown(finder.TeardownOptions{})
		return nil, errors.Join(fmt.Errorf("find: %w", ferr), terr)
	}
	return found, ferr
}

// Teardown closes the handle and frees the tensors, waiting for the
// abandoned naive evaluation as MIOpen's handle destructor does (see
// finder.Teardown; opts.Notice hears of the wait). It fills the outcome's
// teardown figures.
func (f *Found) Teardown(opts finder.TeardownOptions) (finder.TeardownReport, error) {
	opts.Result = f.Result
	rep, err := finder.Teardown(f.h, f.ts, opts)
	f.Outcome.Teardown, f.AfterTeardown, f.TornDown = rep.Took, rep.After, true
	return rep, err
}

// Run runs the find on dev and its teardown. An error means the find
// itself failed (a device error, a cancelled context); a find-db that
// cannot be read or written is not one, but a warning in the result.
func Run(ctx context.Context, dev hip.Device, o Options) (*Outcome, error) {
	f, err := Start(ctx, dev, o)
	if f == nil {
		return nil, err
	}
	if _, terr := f.Teardown(finder.TeardownOptions{}); terr != nil && err == nil {
		err = terr
	}
	if err != nil {
		return nil, err
	}
	return &f.Outcome, nil
}

// TunaNetRanking ranks miotool's solvers for p with the builtin TunaNet
// model, as MIOpen's immediate mode ranks its own with the arch's model.
func TunaNetRanking(p conv.Problem) ([]string, error) {
	tn, err := aiheur.LoadTunaNet(builtin.FS, aiheur.BuiltinArch)
	if err != nil {
		return nil, fmt.Errorf("load the builtin TunaNet model: %w", err)
	}
	defer tn.Release()
	names, err := tn.Rank(aiProblem(p))
	if errors.Is(err, aiheur.ErrNotSupported) {
		return nil, fmt.Errorf("%w: %v", finder.ErrNoHeuristic, err)
	}
	return names, err
}

// aiProblem is p as the heuristics see it: forward, FP32, NCHW.
func aiProblem(p conv.Problem) aiheur.Problem {
	return aiheur.Problem{N: p.N, C: p.C, H: p.H, W: p.W, K: p.K, R: p.R, S: p.S,
		PadH: p.PadH, PadW: p.PadW, StrideH: p.StrideH, StrideW: p.StrideW,
		DilationH: p.DilH, DilationW: p.DilW, Groups: p.Groups,
		Direction: aiheur.Forward, DataType: "FP32", Layout: "NCHW"}
}
