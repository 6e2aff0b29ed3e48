package repeat

import (
	"context"
	"fmt"
	"os"
	"slices"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"miotool/internal/childproc"
	"miotool/internal/repeat/repeattest"
)

func TestMain(m *testing.M) {
	code := m.Run()
	repeattest.Remove()
	os.Exit(code)
}

// fails is flaky.h's flaky_fails: whether run fails at permille with seed.
func fails(run int, seed uint64, permille int) bool {
	return int(mix(seed*1000003^uint64(run))%1000) < permille
}

func mix(x uint64) uint64 {
	x += 0x9e3779b97f4a7c15
	x = (x ^ (x >> 30)) * 0xbf58476d1ce4e5b9
	x = (x ^ (x >> 27)) * 0x94d049bb133111eb
	return x ^ (x >> 31)
}

// flaky is a build of the kit's flaky program in mode, with its arguments.
func flaky(t *testing.T, label string, args ...string) Build {
	t.Helper()
	k := repeattest.Shared(t)
	return Build{Label: label, Program: append([]string{k.Flaky}, args...), Path: k.Flaky}
}

// run makes the runs with a deadline the test fails at.
func run(t *testing.T, o Options) *Facts {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), repeattest.Limit)
	defer cancel()
	if o.Jobs == 0 {
		o.Jobs = 2
	}
	f, err := Run(ctx, o)
	if err != nil {
		t.Fatal(err)
	}
	if ctx.Err() != nil {
		t.Fatalf("the runs outlasted %v", repeattest.Limit)
	}
	return f
}

// hangTimeout is the timeout of tests whose other runs must pass: a run
// that passes may take a second or two to start on a loaded machine, and
// must not be judged hung.
const hangTimeout = 5 * time.Second

func TestOutcomesOfRealRuns(t *testing.T) {
	const runs = 24
	const seed = 7
	expected := func(permille int) (failing int) {
		for r := range runs {
			if fails(r, seed, permille) {
				failing++
			}
		}
		return failing
	}
	for _, c := range []struct {
		name       string
		args       []string
		timeout    time.Duration
		kind       Kind
		signal     string
		exit       int
		failing    int
		stderrHas  string
		wantGroups int
	}{
		{"pass", []string{"pass"}, 0, RunPassed, "", 0, 0, "", 0},
		{"segv, every address masked into one group", []string{"segv", "400", "7"}, 0, RunCrashed, "SIGSEGV", 0, expected(400), "predicting with model", 1},
		{"abort", []string{"abort", "400", "7"}, 0, RunCrashed, "SIGABRT", 0, expected(400), "double free detected", 1},
		{"exit 3", []string{"exit3", "400", "7"}, 0, RunFailed, "", 3, expected(400), "wrong sum 1425636", 1},
		{"hang", []string{"hang", "150", "7"}, hangTimeout, RunHung, "", 0, expected(150), "waiting forever", 1},
		{"its own SIGSEGV handler, still called, the signal unchanged", []string{"handler", "400", "7"}, 0, RunCrashed, "SIGSEGV", 0, expected(400), "own SIGSEGV handler called", 1},
	} {
		t.Run(c.name, func(t *testing.T) {
			f := run(t, Options{Builds: []Build{flaky(t, "flaky", c.args...)}, Runs: runs, Jobs: 3, Timeout: c.timeout})
			b := f.Builds[0]
			if c.failing == 0 && c.kind != RunPassed {
				t.Fatalf("seed %d fails no run of %d: pick another", seed, runs)
			}
			if b.Passed != runs-c.failing || b.NotPassed() != c.failing || b.Finished() != runs {
				t.Errorf("passed %d, not passed %d of %d finished; want %d and %d of %d", b.Passed, b.NotPassed(), b.Finished(), runs-c.failing, c.failing, runs)
			}
			switch c.kind {
			case RunCrashed:
				if b.Crashed != c.failing || b.Signals[c.signal] != c.failing {
					t.Errorf("crashed %d, by signal %v; want %d %s", b.Crashed, b.Signals, c.failing, c.signal)
				}
			case RunFailed:
				if b.Failed != c.failing || b.Exits[c.exit] != c.failing {
					t.Errorf("failed %d, by status %v; want %d with %d", b.Failed, b.Exits, c.failing, c.exit)
				}
			case RunHung:
				if b.Hung != c.failing {
					t.Errorf("hung %d, want %d", b.Hung, c.failing)
				}
			}
			if len(b.Groups) != c.wantGroups {
				t.Fatalf("%d groups, want %d: %+v", len(b.Groups), c.wantGroups, b.Groups)
			}
			if c.wantGroups > 0 {
				g := b.Groups[0]
				if g.Count != c.failing || g.Kind != c.kind || g.Signal != c.signal || !strings.Contains(g.Stderr, c.stderrHas) {
					t.Errorf("group %+v: want %d runs, %s %s, standard error holding %q", g, c.failing, c.kind, c.signal, c.stderrHas)
				}
				if !fails(g.StderrRun, seed, atoi(c.args[1])) || !fails(g.FirstRun, seed, atoi(c.args[1])) {
					t.Errorf("group's runs %d (standard error) and %d (first) are not runs that fail", g.StderrRun, g.FirstRun)
				}
			}
			if f.Interrupted || f.StartFailures() != 0 || b.NotRun != 0 {
				t.Errorf("interrupted %v, start failures %d, not run %d", f.Interrupted, f.StartFailures(), b.NotRun)
			}
		})
	}
}

func atoi(s string) int {
	var n int
	fmt.Sscan(s, &n)
	return n
}

func TestMixedCrashesGroupBySignal(t *testing.T) {
	const runs, seed = 40, 11
	var segv, abrt int
	for r := range runs {
		if fails(r, seed, 500) {
			if mix(uint64(r))%3 == 0 {
				abrt++
			} else {
				segv++
			}
		}
	}
	f := run(t, Options{Builds: []Build{flaky(t, "flaky", "mixed", "500", "11")}, Runs: runs, Jobs: 4})
	b := f.Builds[0]
	if b.Signals["SIGSEGV"] != segv || b.Signals["SIGABRT"] != abrt {
		t.Fatalf("crashes by signal %v, want %d SIGSEGV and %d SIGABRT", b.Signals, segv, abrt)
	}
	if len(b.Groups) != 2 || b.Groups[0].Count < b.Groups[1].Count {
		t.Fatalf("groups %+v: want two, the larger first", b.Groups)
	}
	got := b.SignalCounts()
	if got[0].N < got[1].N {
		t.Errorf("SignalCounts %v: want most first", got)
	}
}

func TestPythonThroughCtypes(t *testing.T) {
	k := repeattest.Shared(t)
	py := repeattest.Python(t)
	const runs = 6
	want := 0
	for r := range runs {
		if fails(r, 3, 500) {
			want++
		}
	}
	prog := []string{py, "-X", "faulthandler", k.Script, k.Library, "500", "3"}
	f := run(t, Options{Builds: []Build{{Label: "python", Program: prog, Path: py}}, Runs: runs, Jobs: 2})
	b := f.Builds[0]
	if b.Signals["SIGSEGV"] != want || b.Passed != runs-want {
		t.Fatalf("SIGSEGV %d, passed %d: want %d and %d", b.Signals["SIGSEGV"], b.Passed, want, runs-want)
	}
	// Grouped by the crashing thread's Python frames as faulthandler
	// printed them, whatever the main thread was doing meanwhile.
	if len(b.Groups) != 1 {
		for _, g := range b.Groups {
			t.Logf("group %+v", *g)
		}
		t.Fatalf("%d groups, want one", len(b.Groups))
	}
	g := b.Groups[0]
	wantFrames := []string{"predict (crash_ctypes.py:", "worker (crash_ctypes.py:", "run (threading.py:"}
	if g.Source != FromFaulthandler || len(g.Python) != 3 || !strings.HasPrefix(g.Python[0], wantFrames[0]) ||
		!strings.HasPrefix(g.Python[1], wantFrames[1]) || !strings.HasPrefix(g.Python[2], wantFrames[2]) {
		t.Errorf("group from %s with Python frames %q: want faulthandler's %q", g.Source, g.Python, wantFrames)
	}
}

// TestCacheRaceOnTheHost runs the GPU section's model-cache race without
// a GPU: forced, every run crashes in model_predict, from a Python thread;
// with the fix's lock, forced too, none does.
func TestCacheRaceOnTheHost(t *testing.T) {
	k := repeattest.Shared(t)
	py := repeattest.Python(t)
	prog := []string{py, "-X", "faulthandler", k.RaceScript, k.CacheRace, "2"}
	env := append(os.Environ(), "CACHE_RACE_HOST_ONLY=1", "CACHE_RACE_FORCE=1", "CACHE_RACE_JITTER_US=0")
	f := run(t, Options{Builds: []Build{{Label: "fixed", Program: prog, Path: py}, {Label: "unfixed", Program: prog, Path: py}},
		Runs: 3, Jobs: 2, Env: env, Many: func(ctx context.Context, n, jobs int, spec func(int) childproc.Spec, done func(int, childproc.Result, error)) int {
			return DefaultMany(ctx, n, jobs, func(i int) childproc.Spec {
				s := spec(i)
				if b, _ := slot(i, 2); b == 0 {
					s.Env = append(s.Env, "CACHE_RACE_LOCKED=1")
				}
				return s
			}, done)
		}})
	fixed, unfixed := f.Builds[0], f.Builds[1]
	if fixed.Passed != 3 || unfixed.Signals["SIGSEGV"] != 3 {
		t.Fatalf("fixed: %d passed; unfixed: crashes %v; want 3 passed and 3 SIGSEGV", fixed.Passed, unfixed.Signals)
	}
	if g := unfixed.Groups; len(g) != 1 || len(g[0].Python) == 0 || !strings.HasPrefix(g[0].Python[0], "predict (cache_race.py:") {
		for _, one := range g {
			t.Logf("group of %d from %s: Python %q, native %q, stderr of run %d:\n%s", one.Count, one.Source, one.Python, one.Native, one.StderrRun, one.Stderr)
		}
		t.Errorf("unfixed: %d groups, want one, at predict in cache_race.py", len(g))
	}
}

// recordingMany runs the children through DefaultMany and records each
// one's spec, in the order they were asked for.
type recordingMany struct {
	mu    sync.Mutex
	specs map[int]childproc.Spec
	order []int
}

func (m *recordingMany) many(ctx context.Context, n, jobs int, spec func(int) childproc.Spec, done func(int, childproc.Result, error)) int {
	m.specs = map[int]childproc.Spec{}
	return DefaultMany(ctx, n, jobs, func(i int) childproc.Spec {
		s := spec(i)
		m.mu.Lock()
		m.specs[i] = s
		m.order = append(m.order, i)
		m.mu.Unlock()
		return s
	}, done)
}

func envOf(s childproc.Spec, key string) string {
	for _, kv := range s.Env {
		if k, v, _ := strings.Cut(kv, "="); k == key {
			return v
		}
	}
	return ""
}

func TestInterleavedBuilds(t *testing.T) {
	fixed, unfixed := flaky(t, "Patched", "pass"), flaky(t, "Unpatched", "segv", "1000")
	m := &recordingMany{}
	f := run(t, Options{Builds: []Build{fixed, unfixed}, Runs: 6, Jobs: 1, Many: m.many, FirstRun: 100})
	if p, u := f.Builds[0], f.Builds[1]; p.Passed != 6 || p.Crashed != 0 || u.Crashed != 6 || u.Passed != 0 {
		t.Fatalf("patched %d passed %d crashed, unpatched %d passed %d crashed: want 6/0 and 0/6", p.Passed, p.Crashed, u.Passed, u.Crashed)
	}
	// Run by run, each pair's order swapped from the pair before.
	var builds, numbers []string
	for _, i := range m.order {
		s := m.specs[i]
		builds = append(builds, s.Args[0])
		numbers = append(numbers, envOf(s, EnvRun))
	}
	wantBuilds := []string{"pass", "segv", "segv", "pass", "pass", "segv", "segv", "pass", "pass", "segv", "segv", "pass"}
	wantNumbers := []string{"100", "100", "101", "101", "102", "102", "103", "103", "104", "104", "105", "105"}
	if !slices.Equal(builds, wantBuilds) || !slices.Equal(numbers, wantNumbers) {
		t.Errorf("runs went %v numbered %v; want %v numbered %v", builds, numbers, wantBuilds, wantNumbers)
	}
	if g := f.Builds[1].Groups; len(g) != 1 || g[0].FirstRun != 100 || g[0].LastRun != 105 {
		t.Errorf("unpatched groups %+v: want one, runs 100 to 105", g)
	}
}

func TestDevicesSpreadEachBuild(t *testing.T) {
	devices := []string{"0", "1", "2", "3"}
	m := &recordingMany{}
	const runs = 8
	f := run(t, Options{Builds: []Build{flaky(t, "a", "pass"), flaky(t, "b", "pass")}, Runs: runs, Jobs: 1, Devices: devices, Many: m.many})
	perBuild := map[string]map[string]int{}
	for _, s := range m.specs {
		cuda, hip := envOf(s, EnvCUDADevices), envOf(s, EnvHIPDevices)
		if cuda == "" || cuda != hip {
			t.Fatalf("a run sees CUDA devices %q and HIP devices %q: want one device, the same", cuda, hip)
		}
		if perBuild[s.Args[0]] == nil {
			perBuild[s.Args[0]] = map[string]int{}
		}
		perBuild[s.Args[0]][cuda]++
	}
	for _, b := range f.Builds {
		if len(b.Devices) != len(devices) {
			t.Fatalf("%d device tallies, want %d", len(b.Devices), len(devices))
		}
		for i, d := range b.Devices {
			if d.Device != devices[i] || d.Finished != runs/len(devices) || d.NotPassed != 0 {
				t.Errorf("build %s, device %+v: want %d runs on device %s", b.Label, d, runs/len(devices), devices[i])
			}
		}
	}
	if len(perBuild) != 1 {
		t.Fatalf("spec args by build: %v", perBuild)
	}
}

func TestDevicesSpreadRunsAtATime(t *testing.T) {
	// Four at a time on four devices: while runs go, no device has two.
	k := repeattest.Shared(t)
	devices := []string{"0", "1", "2", "3"}
	var mu sync.Mutex
	busy := map[string]int{}
	worst := 0
	many := func(ctx context.Context, n, jobs int, spec func(int) childproc.Spec, done func(int, childproc.Result, error)) int {
		dev := map[int]string{}
		return DefaultMany(ctx, n, jobs, func(i int) childproc.Spec {
			s := spec(i)
			mu.Lock()
			dev[i] = envOf(s, EnvCUDADevices)
			busy[dev[i]]++
			worst = max(worst, busy[dev[i]])
			mu.Unlock()
			return s
		}, func(i int, r childproc.Result, err error) {
			mu.Lock()
			busy[dev[i]]--
			mu.Unlock()
			done(i, r, err)
		})
	}
	run(t, Options{Builds: []Build{{Label: "x", Program: []string{k.Flaky, "pass"}, Path: k.Flaky}}, Runs: 16, Jobs: 4, Devices: devices, Many: many})
	if worst != 1 {
		t.Errorf("up to %d runs at once on one device, with 4 devices and 4 at a time: want 1", worst)
	}
}

func TestHungRunsLeaveNothing(t *testing.T) {
	var pids []int
	var mu sync.Mutex
	many := func(ctx context.Context, n, jobs int, spec func(int) childproc.Spec, done func(int, childproc.Result, error)) int {
		return DefaultMany(ctx, n, jobs, func(i int) childproc.Spec {
			s := spec(i)
			s.Started = func(pid int) { mu.Lock(); pids = append(pids, pid); mu.Unlock() }
			return s
		}, done)
	}
	f := run(t, Options{Builds: []Build{flaky(t, "flaky", "hang")}, Runs: 3, Jobs: 3, Timeout: 200 * time.Millisecond, Many: many})
	if f.Builds[0].Hung != 3 {
		t.Fatalf("hung %d, want 3", f.Builds[0].Hung)
	}
	for _, pid := range pids {
		if err := syscall.Kill(pid, 0); err == nil {
			t.Errorf("process %d still runs after its run was judged hung", pid)
		}
	}
}

func TestInterruptKeepsFinishedRuns(t *testing.T) {
	// Run 0 passes and run 1 hangs: once run 0 has ended the repeat is
	// interrupted, run 1 is killed, and no other run starts.
	seed := uint64(0)
	for s := uint64(1); s < 1000; s++ {
		if !fails(0, s, 500) && fails(1, s, 500) {
			seed = s
			break
		}
	}
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	deadline := time.AfterFunc(repeattest.Limit, cancel)
	defer deadline.Stop()
	f, err := Run(ctx, Options{Builds: []Build{flaky(t, "flaky", "hang", "500", fmt.Sprint(seed))}, Runs: 10, Jobs: 2,
		Progress: func(p Progress) {
			if p.Ended == 1 {
				cancel()
			}
		}})
	if err != nil {
		t.Fatal(err)
	}
	b := f.Builds[0]
	if !f.Interrupted || b.Passed != 1 || b.Interrupted != 1 || b.NotRun != 8 || b.Finished() != 1 {
		t.Fatalf("interrupted %v, passed %d, interrupted runs %d, not run %d: want true, 1, 1, 8", f.Interrupted, b.Passed, b.Interrupted, b.NotRun)
	}
	if j := Judge(f, nil, 0.95); j.Verdict != Interrupted {
		t.Errorf("verdict %s, want interrupted", j.Verdict)
	}
}

func TestProgramThatCannotStart(t *testing.T) {
	dir := t.TempDir()
	gone := dir + "/gone"
	f := run(t, Options{Builds: []Build{{Label: "x", Program: []string{gone}, Path: gone}}, Runs: 3, Jobs: 1})
	b := f.Builds[0]
	if b.NotStarted != 3 || b.Finished() != 0 || !strings.Contains(b.StartError, "gone") {
		t.Fatalf("not started %d, finished %d, error %q", b.NotStarted, b.Finished(), b.StartError)
	}
	if j := Judge(f, nil, 0.95); j.Verdict != Error {
		t.Errorf("verdict %s, want error", j.Verdict)
	}
}

func TestSlot(t *testing.T) {
	for _, c := range []struct{ k, builds, build, run int }{
		{0, 1, 0, 0}, {5, 1, 0, 5},
		{0, 2, 0, 0}, {1, 2, 1, 0}, {2, 2, 1, 1}, {3, 2, 0, 1}, {4, 2, 0, 2}, {5, 2, 1, 2},
	} {
		if b, r := slot(c.k, c.builds); b != c.build || r != c.run {
			t.Errorf("slot(%d, %d) = %d, %d; want %d, %d", c.k, c.builds, b, r, c.build, c.run)
		}
	}
}

func TestWithEnv(t *testing.T) {
	base := []string{"PATH=/bin", "CUDA_VISIBLE_DEVICES=7", "LD_PRELOAD=/usr/lib/libmine.so", "HOME=/h"}
	got := withEnv(base, []string{"CUDA_VISIBLE_DEVICES=1", "LD_PRELOAD=/tmp/observer.so", "NEW=1"})
	want := []string{"PATH=/bin", "HOME=/h", "CUDA_VISIBLE_DEVICES=1", "LD_PRELOAD=/tmp/observer.so:/usr/lib/libmine.so", "NEW=1"}
	if !slices.Equal(got, want) {
		t.Errorf("withEnv = %v, want %v", got, want)
	}
	// A preload that already names the program's own is not doubled.
	got = withEnv(base, []string{"LD_PRELOAD=/tmp/observer.so:/usr/lib/libmine.so"})
	if envOf(childproc.Spec{Env: got}, "LD_PRELOAD") != "/tmp/observer.so:/usr/lib/libmine.so" {
		t.Errorf("withEnv doubled the preload: %v", got)
	}
}

func TestBadOptions(t *testing.T) {
	ok := Build{Label: "x", Program: []string{"/bin/true"}, Path: "/bin/true"}
	for _, o := range []Options{
		{Runs: 1, Jobs: 1},
		{Builds: []Build{ok, ok, ok}, Runs: 1, Jobs: 1},
		{Builds: []Build{ok}, Runs: 0, Jobs: 1},
		{Builds: []Build{ok}, Runs: 1, Jobs: 0},
		{Builds: []Build{ok}, Runs: 1, Jobs: 1, Timeout: -1},
		{Builds: []Build{{Label: "x"}}, Runs: 1, Jobs: 1},
	} {
		if _, err := Run(context.Background(), o); err == nil {
			t.Errorf("Run(%+v): no error", o)
		}
	}
}
