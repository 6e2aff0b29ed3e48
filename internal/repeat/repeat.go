// Package repeat runs a program many times, each run a fresh process, and
// returns what the runs did: how each ended (passed, failed with its exit
// status, crashed with its signal, hung), the runs that did not pass
// grouped by where they ended (the crash report's frames, else the last
// lines of standard error), the counts by device, and, against the runs of
// an unfixed build, whether the fix is shown (Compare, Judge). Facts only:
// the command renders them.
//
// Two builds run interleaved, run by run, so that whatever the host is
// doing meanwhile falls on both alike.
package repeat

import (
	"context"
	"errors"
	"fmt"
	"os"
	"strconv"
	"strings"
	"sync"
	"time"

	"miotool/internal/childproc"
)

// ManyFunc runs n fresh children, spec(i) for i in [0, n), at most jobs
// at a time, each in its own process group and bounded by its Spec's
// Timeout, all killed when ctx ends; done is called once per started
// child as it ends, never concurrently with itself, err being a start
// failure; it returns how many it started, after every one has ended and
// been reported. It is childproc's runner of many children.
type ManyFunc func(ctx context.Context, n, jobs int, spec func(i int) childproc.Spec, done func(i int, res childproc.Result, err error)) (started int)

// DefaultMany is the runner Run uses when Options.Many is nil.
var DefaultMany ManyFunc = childproc.Many

// Environment variables every run gets.
const (
	// EnvRun is the run's number among its build's runs, from 0, counted
	// over every shard (the shard's first run is not 0): a program may
	// seed or name what it writes by it.
	EnvRun = "MIOTOOL_REPEAT_RUN"
	// EnvCUDADevices and EnvHIPDevices pin a run to its device.
	EnvCUDADevices = "CUDA_VISIBLE_DEVICES"
	EnvHIPDevices  = "HIP_VISIBLE_DEVICES"
)

// DefaultKeep is how much of each output stream of a run is kept while it
// runs: enough for the last lines of standard error.
const DefaultKeep = 64 << 10

// Options say what to run and how.
type Options struct {
	// Builds are the programs: the one under test first, and, to compare
	// with, the unfixed one; two run interleaved, run by run.
	Builds []Build
	// Runs is how many runs each build makes; FirstRun is the number of
	// the first (a shard's runs start past the earlier shards').
	Runs, FirstRun int
	// Jobs is how many runs go at a time.
	Jobs int
	// Timeout bounds each run: one still going is killed and counted as
	// hung. Zero: no bound.
	Timeout time.Duration
	// Env is every run's environment; nil means this process's.
	Env []string
	Dir string
	// Devices, when given, spread the runs over these devices (each run
	// sees one, through EnvCUDADevices and EnvHIPDevices).
	Devices []string
	// Crashes, when set, reports the runs' crashes with their stacks.
	Crashes CrashSource
	// Progress, when set, is told after every run that ends.
	Progress func(Progress)
	// Many runs the children; nil means DefaultMany.
	Many ManyFunc
	// Keep bounds what is kept of a run's output (DefaultKeep when zero).
	Keep int
}

// Progress is where the runs are.
type Progress struct {
	// Ended and Total count the runs of every build.
	Ended, Total int
	// Finished and NotPassed are each build's, in Options.Builds' order.
	Finished, NotPassed []int
}

// Facts are what the runs did.
type Facts struct {
	// Builds are each build's runs, in Options.Builds' order.
	Builds []*BuildFacts
	// Runs and FirstRun are the options'.
	Runs, FirstRun int
	// Started is how many processes were started.
	Started int
	// Interrupted: ctx ended before every run had ended.
	Interrupted bool
	// CrashReports says whether the runs had the crash handler.
	CrashReports bool
	Wall         time.Duration
}

// StartFailures is how many runs could not be started.
func (f *Facts) StartFailures() int {
	n := 0
	for _, b := range f.Builds {
		n += b.NotStarted
	}
	return n
}

// slot is which build and which run process k of an interleaved repeat
// is. Runs go in pairs, one of each build, and the order within a pair
// alternates, so that neither build always goes first.
func slot(k, builds int) (build, run int) {
	pair, pos := k/builds, k%builds
	if pair%2 == 1 {
		pos = builds - 1 - pos
	}
	return pos, pair
}

// Run makes the runs and returns what they did. An error is an option
// that cannot be run with; every way a run ends is a fact. When ctx ends,
// the runs going are killed (counted as interrupted), none is started
// after, and the facts hold every run that finished.
func Run(ctx context.Context, o Options) (*Facts, error) {
	if err := o.check(); err != nil {
		return nil, err
	}
	run := newRunner(o)
	start := time.Now()
	many := o.Many
	if many == nil {
		many = DefaultMany
	}
	started := many(ctx, o.Runs*len(o.Builds), o.Jobs, run.spec, run.done)
	f := &Facts{Builds: run.builds, Runs: o.Runs, FirstRun: o.FirstRun, Started: started,
		CrashReports: o.Crashes != nil, Wall: time.Since(start)}
	for _, b := range f.Builds {
		b.NotRun = b.Planned - b.Finished() - b.Interrupted - b.NotStarted
		b.sortGroups()
		if b.Interrupted > 0 || b.NotRun > 0 {
			f.Interrupted = f.Interrupted || ctx.Err() != nil
		}
	}
	return f, nil
}

func (o *Options) check() error {
	switch {
	case len(o.Builds) < 1 || len(o.Builds) > 2:
		return fmt.Errorf("want one or two builds, got %d", len(o.Builds))
	case o.Runs < 1:
		return fmt.Errorf("want 1 or more runs, got %d", o.Runs)
	case o.Jobs < 1:
		return fmt.Errorf("want 1 or more jobs, got %d", o.Jobs)
	case o.Timeout < 0:
		return fmt.Errorf("want a timeout of 0 (none) or more, got %v", o.Timeout)
	case o.FirstRun < 0:
		return fmt.Errorf("want a first run of 0 or more, got %d", o.FirstRun)
	}
	for _, b := range o.Builds {
		if b.Path == "" || len(b.Program) == 0 {
			return errors.New("a build has no program")
		}
	}
	return nil
}

// runner is one repeat's state while its runs go.
type runner struct {
	o      Options
	base   []string
	builds []*BuildFacts

	mu       sync.Mutex
	device   map[int]int // the device index of each process running
	busy     []int       // processes running on each device
	used     [][]int     // runs started on each device, by build
	ended    int
	progress Progress
}

func newRunner(o Options) *runner {
	r := &runner{o: o, base: o.Env, device: map[int]int{}, busy: make([]int, len(o.Devices))}
	if r.base == nil {
		r.base = os.Environ()
	}
	r.progress = Progress{Total: o.Runs * len(o.Builds), Finished: make([]int, len(o.Builds)), NotPassed: make([]int, len(o.Builds))}
	for _, b := range o.Builds {
		r.builds = append(r.builds, newBuildFacts(b, o.Runs, o.Devices))
		r.used = append(r.used, make([]int, len(o.Devices)))
	}
	return r
}

// pickDevice is the device process k of build b runs on: the one with the
// fewest runs going, then the one this build has used least, then the
// first; so runs at a time spread over the devices, and each build's runs
// spread evenly over all of them.
func (r *runner) pickDevice(k, b int) int {
	if len(r.o.Devices) == 0 {
		return -1
	}
	r.mu.Lock()
	defer r.mu.Unlock()
	best := 0
	for d := 1; d < len(r.busy); d++ {
		if r.busy[d] < r.busy[best] || r.busy[d] == r.busy[best] && r.used[b][d] < r.used[b][best] {
			best = d
		}
	}
	r.busy[best]++
	r.used[b][best]++
	r.device[k] = best
	return best
}

// token is the crash reports' name for process k.
func token(k int) string { return "r" + strconv.Itoa(k) }

func (r *runner) spec(k int) childproc.Spec {
	b, run := slot(k, len(r.o.Builds))
	build := r.o.Builds[b]
	extra := []string{EnvRun + "=" + strconv.Itoa(r.o.FirstRun+run)}
	if d := r.pickDevice(k, b); d >= 0 {
		extra = append(extra, EnvCUDADevices+"="+r.o.Devices[d], EnvHIPDevices+"="+r.o.Devices[d])
	}
	if r.o.Crashes != nil {
		extra = append(extra, r.o.Crashes.Env(token(k))...)
	}
	keep := r.o.Keep
	if keep <= 0 {
		keep = DefaultKeep
	}
	return childproc.Spec{Path: build.Path, Args: build.Program[1:], Env: withEnv(r.base, extra), Dir: r.o.Dir,
		Timeout: r.o.Timeout, Keep: keep}
}

func (r *runner) done(k int, res childproc.Result, err error) {
	b, run := slot(k, len(r.o.Builds))
	o := Classify(res, err)
	var crash *Crash
	if r.o.Crashes != nil {
		crashes := r.o.Crashes.Crashes(token(k))
		if o.Kind == RunCrashed || o.Kind == RunFailed {
			crash = pickCrash(crashes, o)
		}
	}
	stderr := string(res.Stderr.Data)
	r.mu.Lock()
	dev := -1
	if d, ok := r.device[k]; ok {
		dev = d
		delete(r.device, k)
		r.busy[d]--
	}
	r.builds[b].add(r.o.FirstRun+run, dev, o, crash, stderr)
	r.ended++
	if o.Kind.Finished() {
		r.progress.Finished[b]++
		if o.Kind != RunPassed {
			r.progress.NotPassed[b]++
		}
	}
	p := Progress{Ended: r.ended, Total: r.progress.Total,
		Finished: append([]int(nil), r.progress.Finished...), NotPassed: append([]int(nil), r.progress.NotPassed...)}
	r.mu.Unlock()
	if r.o.Progress != nil {
		r.o.Progress(p)
	}
}

// withEnv is base with extra's variables set over it. LD_PRELOAD keeps the
// program's own libraries after those extra preloads (a crash handler's
// observer goes first), rather than losing them.
func withEnv(base, extra []string) []string {
	set := make(map[string]string, len(extra))
	for _, kv := range extra {
		k, v, _ := strings.Cut(kv, "=")
		set[k] = v
	}
	out := make([]string, 0, len(base)+len(extra))
	for _, kv := range base {
		k, v, _ := strings.Cut(kv, "=")
		mine, ok := set[k]
		switch {
		case !ok:
			out = append(out, kv)
		case k == "LD_PRELOAD" && v != "" && !strings.Contains(mine, v):
			set[k] = mine + ":" + v
		}
	}
	for _, kv := range extra {
		k, _, _ := strings.Cut(kv, "=")
		if v, ok := set[k]; ok {
			out = append(out, k+"="+v)
			delete(set, k)
		}
	}
	return out
}
