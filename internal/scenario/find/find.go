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
	// Teardown is how long the handle's teardown took (it waits for the
	// abandoned evaluation, after find on purpose).
	Teardown time.Duration
}

// Run runs the find on dev. An error means the find itself failed (a
// device error, a cancelled context); a find-db that cannot be read or
// written is not one, but a warning in the result.
func Run(ctx context.Context, dev hip.Device, o Options) (*Outcome, error) {
	out := &Outcome{MaxDraining: streams.MaxDrainingFor(o.HWQueues)}
	h, err := handle.New(dev, handle.Options{Policy: o.Reclaim, MaxDraining: out.MaxDraining})
	if err != nil {
		return nil, err
	}
	ts, err := finder.NewTensors(dev, o.Problem, nil, o.Seed)
	if err != nil {
		return nil, errors.Join(err, h.Close())
	}
	props := dev.Props()
	if o.DBDir != "" {
		out.DBFile = finddb.UserFile(o.DBDir, props.Arch, props.ComputeUnits, props.Backend)
	}
	steps := 0
	res, ferr := finder.Find(ctx, h, ts, finder.Options{
		NaiveTimeoutPct: o.NaiveTimeoutPct,
		Samples:         o.Samples,
		Mode:            o.Mode,
		UserDB:          out.DBFile,
		Verify:          true,
		Immediate:       TunaNetRanking,
		Log: func(format string, args ...any) {
			steps++
			if o.Progress != nil {
				o.Progress(steps, 0)
			}
			if o.Logf != nil {
				o.Logf(format, args...)
			}
		},
		Warn: o.Warnf,
	})
	out.Result = res
	out.AfterFind = h.Tracker().Counters()
	teardownStart := time.Now()
	cerr := h.Close()
	terr := ts.Free()
	out.Teardown = time.Since(teardownStart)
	out.AfterTeardown = h.Tracker().Counters()
	switch {
	case ferr != nil:
		return nil, fmt.Errorf("find: %w", ferr)
	case cerr != nil:
		return nil, fmt.Errorf("handle teardown: %w", cerr)
	case terr != nil:
		return nil, terr
	}
	return out, nil
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
