package repeat

import (
	"cmp"
	"slices"
	"strings"
	"time"

	"miotool/internal/childproc"
	"miotool/internal/stats"
	"miotool/internal/words"
)

// Build is one program the runs start.
type Build struct {
	// Label names the build in the result ("Patched", "Unpatched").
	Label string
	// Program is the program and its arguments as given.
	Program []string
	// Path is the executable started (Program[0] looked up).
	Path string
}

// MaxGroups bounds the groups a build keeps: past it, runs of a new
// signature are counted (BuildFacts.Ungrouped) but not kept, so that
// memory grows with the signatures a program has, up to this bound, and
// never with its runs.
const MaxGroups = 32

// stderrKept is how much of one run's standard error a group keeps: its
// last lines, each cut to a reader's width.
const (
	stderrKeptLines = 20
	stderrLineWidth = 240
)

// Group is the runs of one build that ended the same way in the same
// place.
type Group struct {
	Kind Kind
	// Signal is a crashed group's signal; Exit a failed group's status.
	Signal string
	Exit   int
	Count  int
	// CoreDumped counts the runs that left a core.
	CoreDumped int
	// Native and Python are the frames of its signature, innermost first,
	// from the crash report of its first run; Thread that thread's name.
	Native, Python []string
	Thread         string
	// Source says what the signature was read from.
	Source Source
	// Stderr is the last lines of one run's standard error, and StderrRun
	// that run's number.
	Stderr    string
	StderrRun int
	// FirstRun and LastRun are the numbers of its first and last runs.
	FirstRun, LastRun int
	key               string
}

// DeviceTally is what the runs of one build on one device did.
type DeviceTally struct {
	Device string
	// Finished are the runs that ran to an end; NotPassed those of them
	// that did not pass.
	Finished, NotPassed int
}

// BuildFacts is what the runs of one build did.
type BuildFacts struct {
	Build
	// Planned is how many runs were to be made.
	Planned                       int
	Passed, Failed, Crashed, Hung int
	// Interrupted were killed when the repeat was interrupted; NotStarted
	// could not be started; NotRun were never started (the repeat ended
	// first).
	Interrupted, NotStarted, NotRun int
	// CoreDumped counts the crashes that left a core.
	CoreDumped int
	// Signals counts the crashes by signal name; Exits the failures by
	// exit status.
	Signals map[string]int
	Exits   map[int]int
	// Devices are the runs by device, in the order the devices were given.
	Devices []DeviceTally
	// Groups are the runs that did not pass, by signature, most runs
	// first; Ungrouped counts those past MaxGroups.
	Groups    []*Group
	Ungrouped int
	// WallTotal and WallMax are the finished runs' wall times.
	WallTotal, WallMax time.Duration
	// StartError is why the first run that could not start did not.
	StartError string
	byKey      map[string]*Group
}

func newBuildFacts(b Build, planned int, devices []string) *BuildFacts {
	f := &BuildFacts{Build: b, Planned: planned, Signals: map[string]int{}, Exits: map[int]int{}, byKey: map[string]*Group{}}
	for _, d := range devices {
		f.Devices = append(f.Devices, DeviceTally{Device: d})
	}
	return f
}

// Finished is how many runs ran to an end: they are the statistics' runs.
func (f *BuildFacts) Finished() int { return f.Passed + f.Failed + f.Crashed + f.Hung }

// NotPassed is how many finished runs did not pass.
func (f *BuildFacts) NotPassed() int { return f.Failed + f.Crashed + f.Hung }

// Count is the build's failures among its finished runs.
func (f *BuildFacts) Count() stats.Count { return stats.Count{K: f.NotPassed(), N: f.Finished()} }

// add counts run number run, on device index dev (-1: none), which ended
// as o, with its crash report (nil: none) and the end of its standard
// error.
func (f *BuildFacts) add(run, dev int, o Outcome, crash *Crash, stderr string) {
	switch o.Kind {
	case RunPassed:
		f.Passed++
	case RunFailed:
		f.Failed++
		f.Exits[o.Exit]++
	case RunCrashed:
		f.Crashed++
		f.Signals[childproc.SignalName(o.Signal)]++
		if o.CoreDumped {
			f.CoreDumped++
		}
	case RunHung:
		f.Hung++
	case RunInterrupted:
		f.Interrupted++
		return
	default:
		f.NotStarted++
		if f.StartError == "" && o.Err != nil {
			f.StartError = o.Err.Error()
		}
		return
	}
	f.WallTotal += o.Wall
	f.WallMax = max(f.WallMax, o.Wall)
	if dev >= 0 {
		f.Devices[dev].Finished++
		if o.Kind != RunPassed {
			f.Devices[dev].NotPassed++
		}
	}
	if o.Kind != RunPassed {
		f.group(run, o, crash, stderr)
	}
}

func (f *BuildFacts) group(run int, o Outcome, crash *Crash, stderr string) {
	if o.Kind == RunHung {
		crash = nil
	}
	sig := signatureOf(o, crash, stderr)
	g := f.byKey[sig.key]
	if g == nil {
		if len(f.byKey) >= MaxGroups {
			f.Ungrouped++
			return
		}
		g = &Group{Kind: o.Kind, Exit: o.Exit, Native: sig.native, Python: sig.python, Thread: sig.thread, Source: sig.from,
			Stderr: keptStderr(stderr), StderrRun: run, FirstRun: run, key: sig.key}
		if o.Kind == RunCrashed {
			g.Signal = childproc.SignalName(o.Signal)
		}
		f.byKey[sig.key] = g
		f.Groups = append(f.Groups, g)
	}
	g.Count++
	g.FirstRun, g.LastRun = min(g.FirstRun, run), max(g.LastRun, run)
	if o.CoreDumped {
		g.CoreDumped++
	}
	if g.Stderr == "" && strings.TrimSpace(stderr) != "" {
		g.Stderr, g.StderrRun = keptStderr(stderr), run
	}
}

// keptStderr is the last lines of a run's standard error, each cut to a
// reader's width.
func keptStderr(s string) string {
	lines := strings.Split(words.LastLines(s, stderrKeptLines), "\n")
	for i, l := range lines {
		if r := []rune(l); len(r) > stderrLineWidth {
			lines[i] = string(r[:stderrLineWidth]) + "…"
		}
	}
	return strings.Join(lines, "\n")
}

// sortGroups orders the groups most runs first, then by their first run.
func (f *BuildFacts) sortGroups() {
	slices.SortStableFunc(f.Groups, func(a, b *Group) int {
		return cmp.Or(cmp.Compare(b.Count, a.Count), cmp.Compare(a.FirstRun, b.FirstRun))
	})
}

// SignalCounts are the crashes by signal name, most first, then by name.
func (f *BuildFacts) SignalCounts() []Count[string] { return byCount(f.Signals) }

// ExitCounts are the failures by exit status, most first, then by status.
func (f *BuildFacts) ExitCounts() []Count[int] { return byCount(f.Exits) }

// Count is how many runs ended one way: by a signal's name or an exit
// status.
type Count[K cmp.Ordered] struct {
	Key K
	N   int
}

// byCount lists a tally most first, then by key.
func byCount[K cmp.Ordered](tally map[K]int) []Count[K] {
	out := make([]Count[K], 0, len(tally))
	for k, n := range tally {
		out = append(out, Count[K]{k, n})
	}
	slices.SortFunc(out, func(a, b Count[K]) int { return cmp.Or(cmp.Compare(b.N, a.N), cmp.Compare(a.Key, b.Key)) })
	return out
}
