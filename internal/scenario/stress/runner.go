package stress

import (
	"context"
	"errors"
	"fmt"
	"os"
	"strings"
	"sync"
	"time"

	"miotool/internal/aiheur/cache"
	"miotool/internal/childproc"
)

// ChildCommand is how a stress run's fresh process is started: Path with
// Args (miotool re-executing itself with a hidden flag, or a test binary
// standing in for it), and Env (nil: this process's environment).
type ChildCommand struct {
	Path string
	Args []string
	Env  []string
	// Token, when set, makes every run one of this process's (ChildEnv
	// with this token in its environment), and only a result line that
	// echoes it is read as the run's result.
	Token string
}

// RunnerOptions configure RunProcesses.
type RunnerOptions struct {
	// Runs is how many child processes to run, Jobs how many at a time.
	Runs, Jobs int
	// Timeout is the watchdog: a run still going after it is killed and
	// counted as a hang.
	Timeout time.Duration
	// Progress, when set, is told after every finished run.
	Progress func(done, total int)
	// Log, when set, gets one line per finished run.
	Log func(format string, args ...any)
	// Stop, when set, is asked after every finished run whether to start
	// no more (a run that could not open the device: the next would not
	// either). The runs still going finish.
	Stop func(RunOutcome) bool
}

// maxRuns bounds o.Runs: the runner keeps an outcome per run.
const maxRuns = 100000

// RunProcesses starts o.Runs children of cmd, o.Jobs at a time, each
// under the watchdog (childproc.Many: each in a group of its own, nothing
// it starts left running), and classifies how each ended. When ctx ends it
// kills the children still running and returns, with ctx's error, the
// runs it started, in start order: those that finished as they ended,
// those it killed as RunInterrupted. Runs never started are not there.
func RunProcesses(ctx context.Context, cmd ChildCommand, o RunnerOptions) ([]RunOutcome, error) {
	switch {
	case o.Runs < 1 || o.Runs > maxRuns:
		return nil, fmt.Errorf("runs must be between 1 and %d, got %d", maxRuns, o.Runs)
	case o.Jobs < 1:
		return nil, fmt.Errorf("jobs must be at least 1, got %d", o.Jobs)
	case o.Timeout <= 0:
		return nil, fmt.Errorf("the watchdog timeout must be positive, got %v", o.Timeout)
	case cmd.Path == "":
		return nil, errors.New("no child command to run")
	}
	if cmd.Token != "" {
		base := cmd.Env
		if base == nil {
			base = os.Environ()
		}
		env := make([]string, 0, len(base)+1)
		for _, kv := range base {
			if !strings.HasPrefix(kv, ChildEnv+"=") {
				env = append(env, kv)
			}
		}
		cmd.Env = append(env, ChildEnv+"="+ChildEnvValue(cmd.Token))
	}
	outcomes := make([]RunOutcome, o.Runs)
	started := make([]bool, o.Runs)
	var (
		mu       sync.Mutex
		finished int
		startErr error
		stopped  bool
	)
	spec := func(int) childproc.Spec {
		mu.Lock()
		defer mu.Unlock()
		// A run that could not start, or one that says to stop, ends the
		// starting; the runs going on finish.
		return childproc.Spec{Path: cmd.Path, Args: cmd.Args, Env: cmd.Env, Timeout: o.Timeout, Skip: startErr != nil || stopped}
	}
	childproc.Many(ctx, o.Runs, o.Jobs, spec, func(i int, res childproc.Result, err error) {
		out, err := outcomeOf(cmd, res, err, o.Timeout)
		out.Index = i
		// The per-thread sums are the child's to check; the runner keeps
		// each run's tallies, so that its memory does not grow with
		// threads x trials x runs.
		if out.Run != nil {
			out.Run.Sums, out.Run.BadElements = nil, nil
		}
		mu.Lock()
		started[i] = true
		if err != nil && startErr == nil {
			startErr = err
		}
		if o.Stop != nil && o.Stop(out) {
			stopped = true
		}
		outcomes[i] = out
		finished++
		n := finished
		mu.Unlock()
		if o.Log != nil {
			o.Log("run %d: %s%s (%s)", i+1, out.Kind, crashSuffix(out), out.Wall.Round(time.Millisecond))
		}
		if o.Progress != nil {
			o.Progress(n, o.Runs)
		}
	})
	if startErr != nil {
		return nil, startErr
	}
	if err := ctx.Err(); err != nil || stopped {
		var partial []RunOutcome
		for i, o := range outcomes {
			if started[i] {
				partial = append(partial, o)
			}
		}
		return partial, err
	}
	return outcomes, nil
}

func crashSuffix(o RunOutcome) string {
	if o.Crash != "" {
		return ": " + o.Crash
	}
	return ""
}

// outcomeOf classifies how one child ended: res and err as childproc
// reported them, the child (and whatever it started) killed when the
// watchdog or ctx fired. An error means the child could not be started at
// all.
func outcomeOf(cmd ChildCommand, res childproc.Result, err error, timeout time.Duration) (RunOutcome, error) {
	if err != nil {
		if res.PID == 0 {
			return RunOutcome{Kind: RunError, Exit: -1, Detail: err.Error()}, fmt.Errorf("starting the run's process: %w", err)
		}
		return RunOutcome{Kind: RunError, Exit: -1, Wall: res.Wall, Detail: err.Error()}, nil
	}
	stderr := res.Stderr.Data
	if res.Stderr.Cut > 0 {
		stderr = append([]byte(fmt.Sprintf("... (the first %d bytes not kept) ...\n", res.Stderr.Cut)), stderr...)
	}
	out := Classify(res.State, res.Stdout.Data, stderr, res.TimedOut)
	out.Wall = res.Wall
	if cmd.Token != "" {
		// Lines without this run's token are not its own: a process that
		// only looks like a run.
		if out.Device != nil && out.Device.Token != cmd.Token {
			out.Device = nil
		}
		if out.Run != nil && out.Run.Token != cmd.Token {
			out.Kind, out.Run = RunError, nil
			out.Detail = fmt.Sprintf("exited with status %d: %v", out.Exit, errForeignRun)
		}
	}
	switch {
	case res.TimedOut:
		out.Detail = fmt.Sprintf("still running after %v; killed by the watchdog", timeout)
	case res.Canceled:
		// Killed by this process on its interruption: not a crash, and
		// not a finding. What its caches had recorded so far is dropped,
		// so that it counts as interrupted and in no other row.
		out.Kind, out.Crash, out.Excerpt = RunInterrupted, "", ""
		out.Detections, out.Run, out.Unopened = cache.Detections{}, nil, nil
		out.Detail = "killed when miotool was interrupted"
	}
	return out, nil
}
