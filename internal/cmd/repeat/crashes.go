package repeat

import (
	"context"
	"errors"
	"path/filepath"
	"syscall"

	"miotool/internal/repeat"
	"miotool/internal/trace"
)

// traceCrashes is the observer's crash handler (trace.CrashWatch) as the
// source of the runs' crash reports.
type traceCrashes struct{ w *trace.CrashWatch }

// openCrashes builds (or takes from the cache) the observer and listens for
// its crash records. No C compiler to build it with is not an error: the
// runs go ahead, grouped by what they print (noCompiler says why).
func openCrashes(ctx context.Context) (repeat.CrashSource, func() error, error) {
	w, err := trace.WatchCrashes(ctx, "")
	if err != nil {
		return nil, nil, err
	}
	return traceCrashes{w}, w.Close, nil
}

// noCompiler reports whether err is the observer's build finding no C
// compiler.
func noCompiler(err error) bool {
	var nc *trace.NoCompilerError
	return errors.As(err, &nc)
}

// Env is the observer preloaded, its socket and run's token: the run's own
// LD_PRELOAD is kept after the observer by the engine.
func (c traceCrashes) Env(run string) []string { return c.w.EnvFor(nil, run) }

// Crashes converts what run's processes reported.
func (c traceCrashes) Crashes(run string) []repeat.Crash {
	got := c.w.Crashes(run)
	out := make([]repeat.Crash, len(got))
	for i, cr := range got {
		native := make([]repeat.NativeFrame, len(cr.Callers))
		for j, f := range cr.Callers {
			native[j] = repeat.NativeFrame{Object: filepath.Base(f.Module), Function: f.Symbol, Offset: f.Offset}
		}
		py := repeat.PyStack{State: string(cr.Python.State), Why: cr.Python.Why}
		for _, f := range cr.Python.Frames {
			py.Frames = append(py.Frames, repeat.PyFrame{File: f.File, Line: f.Line, Function: f.Function})
		}
		out[i] = repeat.Crash{PID: cr.PID, Signal: syscall.Signal(cr.Signal), ThreadName: cr.ThreadName, Native: native, Python: py}
	}
	return out
}
