package trace

import (
	"strings"

	"miotool/internal/hip"
)

// GraphUse is what the trace saw of executable graphs: instantiated and
// launched, whether or not a capture built them.
type GraphUse struct {
	// Instantiations and Launches count the calls that succeeded.
	Instantiations, Launches int
	// Launched counts the distinct graphs launched; Uncaptured those of
	// them that no capture the trace saw produced: built node by node
	// (XLA's command buffers), or instantiated where the trace did not see
	// it.
	Launched, Uncaptured int
	// Partial: more graphs than the trace keeps track of; the counts of
	// distinct graphs are lower bounds.
	Partial bool
}

// graphsTracked bounds each map of the graph tracker.
const graphsTracked = 1 << 16

// graphKey is a graph or executable graph handle of one process's runtime;
// exec marks an executable graph whose graph is unknown, standing for it.
type graphKey struct {
	pid  int
	api  hip.Dialect
	h    uint64
	exec bool
}

// graphTracker follows graphs from capture to instantiation to launch.
type graphTracker struct {
	captured map[graphKey]bool     // graphs that captures produced
	execs    map[graphKey]graphKey // executable graph -> its graph
	launched map[graphKey]bool     // graphs launched (an executable graph where its graph is unknown)
	use      GraphUse
}

func newGraphTracker() *graphTracker {
	return &graphTracker{captured: map[graphKey]bool{}, execs: map[graphKey]graphKey{}, launched: map[graphKey]bool{}}
}

// put adds k to m within the bound, and says where it could not.
func put[V any](t *graphTracker, m map[graphKey]V, k graphKey, v V) {
	if _, ok := m[k]; !ok && len(m) >= graphsTracked {
		t.use.Partial = true
		return
	}
	m[k] = v
}

// capturedGraph notes a graph that a capture produced.
func (t *graphTracker) capturedGraph(pid int, api hip.Dialect, graph uint64) {
	if graph != 0 {
		put(t, t.captured, graphKey{pid: pid, api: api, h: graph}, true)
	}
}

// record folds a graph record: an instantiation or a launch.
func (t *graphTracker) record(e Event) {
	if e.Result != hip.Success {
		return
	}
	base := BaseName(e.Name)
	exec := graphKey{pid: e.PID, api: e.API, h: e.Exec}
	switch {
	case strings.Contains(base, "GraphInstantiate"):
		t.use.Instantiations++
		if e.Exec != 0 && e.Graph != 0 {
			put(t, t.execs, exec, graphKey{pid: e.PID, api: e.API, h: e.Graph})
		}
	case strings.HasSuffix(base, "GraphLaunch"):
		t.use.Launches++
		g, ok := t.execs[exec]
		if !ok {
			g = exec
			g.exec = true
		}
		put(t, t.launched, g, true)
	}
}

// result counts the distinct graphs launched, and those no capture built.
func (t *graphTracker) result() GraphUse {
	u := t.use
	u.Launched = len(t.launched)
	for g := range t.launched {
		if g.exec || !t.captured[g] {
			u.Uncaptured++
		}
	}
	return u
}
