package trace

import (
	"fmt"
	"strings"
	"sync"

	"miotool/configs"
	"miotool/internal/hip"
	"miotool/internal/rules"
)

// RulesTables are the measured capture-rules tables a trace judges hazards
// by, one per runtime.
type RulesTables struct {
	ByDialect map[hip.Dialect]*rules.Expectation
	// Names are where each was read from, for messages.
	Names map[hip.Dialect]string
}

// builtinRulesFiles are the tables miotool ships (configs/rules), the same
// that miotool rules checks devices against.
var builtinRulesFiles = map[hip.Dialect]string{
	hip.DialectCUDA: "h200-cuda.yaml",
	hip.DialectHIP:  "hip.yaml",
}

var builtin struct {
	once   sync.Once
	tables *RulesTables
	err    error
}

// BuiltinRules reads the shipped tables once.
func BuiltinRules() (*RulesTables, error) {
	builtin.once.Do(func() {
		t := &RulesTables{ByDialect: map[hip.Dialect]*rules.Expectation{}, Names: map[hip.Dialect]string{}}
		for d, name := range builtinRulesFiles {
			data, err := configs.RulesFile(name)
			if err != nil {
				builtin.err = fmt.Errorf("built-in rules table %s: %w", name, err)
				return
			}
			e, err := rules.ParseExpectation("configs/rules/"+name, data)
			if err != nil {
				builtin.err = err
				return
			}
			if e.Dialect != d {
				builtin.err = fmt.Errorf("built-in rules table configs/rules/%s is for %s, want %s", name, e.Dialect, d)
				return
			}
			t.ByDialect[d], t.Names[d] = e, "configs/rules/"+name
		}
		builtin.tables = t
	})
	return builtin.tables, builtin.err
}

// Hazard is a call that succeeded during a capture only because of the
// capture's mode, and that a global-mode capture would have refused or
// been invalidated by: a capture that is safe today and breaks the day
// someone captures in global mode (PyTorch's default). A call its own
// thread guarded, by switching itself to a mode the tables say is safe
// under every capture, is no hazard (Capture.Guarded counts it).
type Hazard struct {
	Capture *Capture
	Call    *Call
	// Cell is the situation the call was in; Strict the one a global-mode
	// capture would put it in (the same thread, in the same mode), and
	// Would what the table says of that.
	Cell, Strict rules.CellKey
	Would        rules.Expected
	Table        string // the rules table's name
	// Reasons say what let the call through, e.g. "the capture was begun
	// in relaxed mode".
	Reasons []string
}

// Rule is the table cell that makes the call a hazard, e.g.
// "query-other-stream/global/other/global returns 900, end 901 (source,
// configs/rules/hip.yaml)".
func (h Hazard) Rule() string {
	basis := string(h.Would.Basis)
	if basis == "" {
		basis = "basis not given"
	}
	return fmt.Sprintf("%s returns %d, end %d (%s, %s)", h.Strict, int(h.Would.Returns), int(h.Would.End), basis, h.Table)
}

// Because joins the reasons, e.g. "the capture was begun in relaxed mode".
func (h Hazard) Because() string { return strings.Join(h.Reasons, " and ") }

// blocks says whether a table cell has the call refused, or the capture
// invalidated (an end-capture cell's end of 401 only says the capture was
// already over).
func blocks(e rules.Expected) bool { return refusal(e.Returns) || refusal(e.End) }

// SafeInEveryCapture says whether the table has action a, made by the
// capturing thread or another one (other) in thread mode mode, neither
// refused nor invalidating the capture whatever mode the capture was begun
// in: a thread that put itself in that mode guards the call.
func SafeInEveryCapture(table *rules.Expectation, a rules.Action, other bool, mode hip.CaptureMode) bool {
	if table == nil {
		return false
	}
	for _, capture := range hip.CaptureModes {
		e, ok := table.Cells[rules.CellKey{Action: a, Capture: capture, Other: other, Mode: mode}]
		if !ok || blocks(e) {
			return false
		}
	}
	return true
}

// Hazards judges every kept candidate call of the captures against the
// tables. A call is a hazard when its own cell lets it through (or the
// table has no cell for it and it succeeded) while the strict cell, the
// same call in a global-mode capture, refuses it or invalidates the
// capture: only the capture's mode let it through.
func Hazards(captures []*Capture, t *RulesTables) []Hazard {
	if t == nil {
		return nil
	}
	var out []Hazard
	for _, cp := range captures {
		table := t.ByDialect[cp.API]
		if table == nil {
			continue
		}
		for _, call := range cp.Candidates {
			if call.Action == "" || call.Refused() {
				continue
			}
			other := call.PID != cp.PID || call.TID != cp.TID
			cell := rules.CellKey{Action: call.Action, Capture: cp.Mode, Other: other, Mode: call.ThreadMode}
			strict := rules.CellKey{Action: call.Action, Capture: hip.CaptureModeGlobal, Other: other,
				Mode: call.ThreadMode}
			if cell == strict {
				continue
			}
			would, ok := table.Cells[strict]
			if !ok || !blocks(would) {
				continue
			}
			if own, ok := table.Cells[cell]; ok && blocks(own) {
				// The table says this call is refused here too, yet it
				// succeeded: not a hazard of the mode.
				continue
			}
			h := Hazard{Capture: cp, Call: call, Cell: cell, Strict: strict, Would: would, Table: t.Names[cp.API]}
			r := fmt.Sprintf("the capture was begun in %s mode", cp.Mode)
			if other && cp.Mode == hip.CaptureModeThreadLocal {
				r += ", which does not restrict other threads"
			}
			h.Reasons = append(h.Reasons, r)
			out = append(out, h)
		}
	}
	return out
}
