package trace

import (
	"fmt"
	"slices"
	"sort"
	"strconv"
	"strings"
	"time"

	"miotool/internal/childproc"
	"miotool/internal/hip"
	"miotool/internal/report"
	"miotool/internal/trace"
	"miotool/internal/words"
)

// captureRows bounds the capture table: every capture that failed or
// holds a hazard is listed, and the others up to this many; the rest are
// counted in a note.
const captureRows = 50

// failedScreens bounds how many failed captures get a screen of their own
// (who began it, its first refused call, what followed); the others are
// in the capture and refused-call tables.
const failedScreens = 10

// callerFrames is how many frames a caller chain shows, and pythonFrames
// how many Python frames.
const (
	callerFrames = 6
	pythonFrames = 4
)

// judged judges what the trace saw and fills and finishes r with it: the
// verdict, the headline, the tables, the notes and the checklist status,
// as of end.
func judged(r *report.Result, res *trace.Result, strict bool, rules *trace.RulesTables, end time.Time) trace.Judgement {
	j := trace.Judge(res, strict)
	fill(r, res, j, rules)
	r.Finish(reportVerdict(j.Verdict), j.Summary, end)
	return j
}

// fill turns what the trace saw into r's tables, notes, counters and
// checklist status.
func fill(r *report.Result, res *trace.Result, j trace.Judgement, rules *trace.RulesTables) {
	r.Backend, r.BackendReason = observed(res)
	r.Device = device(res)
	programTable(r, res)
	captureTable(r, res)
	failedCaptures(r, res, j)
	refusedTable(r, res, j)
	hazardTable(r, res)
	outsideTable(r, res)
	notes(r, res, rules)
	counters(r, res)
	r.Detail = detail(res, j)
}

// counters count what the trace saw, and the captures that passed.
func counters(r *report.Result, res *trace.Result) {
	good, refused, calls, guarded := 0, 0, 0, 0
	for _, c := range res.Captures {
		if c.EndedWell() && len(c.Refused) == 0 && c.RefusedOmitted == 0 {
			good++
		}
		refused += len(c.Refused) + c.RefusedOmitted
		calls += c.Calls
		guarded += c.Guarded
	}
	good += res.CapturesOmitted
	if ran := res.Ran(); ran > 0 {
		r.Cases = report.Cases{Passed: min(good, ran), Total: ran, Unit: "captures"}
	}
	outside, _, _ := res.Outside()
	r.Count("captures", int64(res.Ran()))
	r.Count("refused", int64(refused))
	r.Count("hazards", int64(len(res.Hazards)))
	r.Count("guarded", int64(guarded))
	r.Count("outside captures", int64(outside))
	r.Count("empty captures", int64(len(res.Empty())))
	r.Count("calls during captures", int64(calls))
	r.Count("graph launches", int64(res.Graphs.Launches))
	r.Count("processes", int64(len(res.Processes)+res.ProcessesOmitted))
	r.Count("exit code", int64(res.Exit.Code))
}

// observed names the runtimes the trace saw the program use, and how.
func observed(res *trace.Result) (string, string) {
	var names, how []string
	if res.CUDAObserved() || slices.ContainsFunc(res.Captures, func(c *trace.Capture) bool { return c.API == hip.DialectCUDA }) {
		names, how = append(names, "cuda"), append(how, "CUDA through CUPTI callbacks")
	}
	if slices.ContainsFunc(res.Captures, func(c *trace.Capture) bool { return c.API == hip.DialectHIP }) {
		names, how = append(names, "hip"), append(how, "HIP through the LD_PRELOAD interposer")
	}
	if len(names) == 0 {
		return "", ""
	}
	return strings.Join(names, "+"), "observed in the program: " + strings.Join(how, ", ")
}

// exitShort is how the program ended, for the checklist.
func exitShort(e trace.Exit) string {
	switch {
	case e.TimedOut:
		return fmt.Sprintf("program hung (watchdog %v)", e.Timeout)
	case e.Interrupted:
		return "program stopped by miotool"
	case e.Signal != 0:
		return "program killed by " + childproc.SignalName(e.Signal)
	}
	return fmt.Sprintf("program exit %d", e.Code)
}

// detail is what the checklist status says after its count (the word and
// the count are the result's, report.Result.ChecklistStatus): the first
// culprit, failure or finding, and how the program ended.
func detail(res *trace.Result, j trace.Judgement) string {
	exit := exitShort(res.Exit)
	switch {
	case j.Capture == nil && res.Ran() == 0 && j.Verdict != trace.Interrupted:
		if res.Unobserved() != "" {
			return "the program could not be observed; " + exit
		}
		return "no capture began; " + exit
	case j.Culprit != nil:
		return fmt.Sprintf("%s refused (%d); %s", trace.BaseName(j.Culprit.Name), int(j.Culprit.Result), exit)
	case j.Capture != nil && j.Capture.End != nil && !j.Capture.End.StreamGone:
		return fmt.Sprintf("end capture %d; %s", int(j.Capture.End.Result), exit)
	case j.Capture != nil && j.Capture.End == nil:
		return "a capture never ended; " + exit
	case j.StrictFailed:
		return fmt.Sprintf("%s (--strict); %s", findings(res), exit)
	case findings(res) != "" && j.Verdict == trace.Pass:
		return fmt.Sprintf("with %s; %s", findings(res), exit)
	}
	return exit
}

// findings counts what a strict trace fails: "1 hazard, 2 calls outside a
// capture"; "" when none.
func findings(res *trace.Result) string {
	var parts []string
	if n := len(res.Hazards); n > 0 {
		parts = append(parts, words.Count(n, "hazard", "hazards"))
	}
	if n, _, _ := res.Outside(); n > 0 {
		parts = append(parts, words.Count(n, "call", "calls")+" outside a capture")
	}
	return strings.Join(parts, ", ")
}

func programTable(r *report.Result, res *trace.Result) {
	t := r.AddTable("program", "program", "exit", "wall time (ms)", "processes observed")
	t.AddRow(report.JoinCommandLine(append([]string{res.Program}, res.Args...)), "the program "+res.Exit.Describe(),
		report.Millis(res.Exit.Wall), fmt.Sprint(len(res.Processes)+res.ProcessesOmitted))
}

// at is a time as the tables show it: milliseconds after the first event,
// in a column whose title ends in "(ms)".
func at(res *trace.Result, t int64) string { return report.Millis(time.Duration(t - res.Start)) }

// codeText is a runtime's status as every table writes one: its name and
// its code, "CUDA_ERROR_STREAM_CAPTURE_INVALIDATED (901)".
func codeText(c hip.Code, api hip.Dialect) string { return codeCell(c, api).Text }

// codeCell is codeText with the code for the JSON records.
func codeCell(c hip.Code, api hip.Dialect) report.Cell { return report.CodeCell(c.Name(api), int(c)) }

// endCell is how a capture ended, as the capture table says it, with the
// code its end returned for the records (none where it did not end).
func endCell(c *trace.Capture) report.Cell {
	switch {
	case !c.Ran():
		return report.TextCell(fmt.Sprintf("never began: %s returned %s", trace.BaseName(c.BeginName), codeText(c.BeginResult, c.API)))
	case c.End == nil:
		return report.TextCell("never ended")
	case c.End.StreamGone:
		return report.TextCell("its stream was destroyed while it captured")
	}
	cell := codeCell(c.End.Result, c.API)
	if c.End.TID != c.TID {
		cell.Text += fmt.Sprintf(", ended by thread %d", c.End.TID)
	}
	if c.End.Empty() {
		cell.Text += "; the graph is empty"
	}
	return cell
}

// threadsText counts the threads that made calls during a capture.
func threadsText(c *trace.Capture) string {
	if c.OtherThreads > 0 {
		return fmt.Sprintf("more than %d", len(c.ByThread))
	}
	return fmt.Sprint(len(c.ByThread))
}

// topCalls names the calls made most often, from counts by name.
func topCalls(byName map[string]int, n int) string {
	type count struct {
		name string
		n    int
	}
	var cs []count
	for name, k := range byName {
		cs = append(cs, count{name, k})
	}
	sort.Slice(cs, func(i, j int) bool {
		if cs[i].n != cs[j].n {
			return cs[i].n > cs[j].n
		}
		return cs[i].name < cs[j].name
	})
	var parts []string
	for i, x := range cs {
		if i == n {
			parts = append(parts, fmt.Sprintf("%d more", len(cs)-n))
			break
		}
		parts = append(parts, fmt.Sprintf("%s %d", x.name, x.n))
	}
	return strings.Join(parts, ", ")
}

// captureColumns are the capture table's optional columns: where the
// captures were on several devices, began with a Python stack, or said
// how many nodes their graphs have.
type captureColumns struct {
	device, python, nodes bool
}

func optionalColumns(res *trace.Result) captureColumns {
	var cc captureColumns
	devices := map[[2]string]bool{}
	for _, c := range res.Captures {
		devices[[2]string{string(c.API), fmt.Sprint(c.Device)}] = true
		cc.python = cc.python || c.BeginPython.State != trace.PyNone
		cc.nodes = cc.nodes || (c.End != nil && c.End.NodesKnown)
	}
	cc.device = len(devices) > 1
	return cc
}

func captureTable(r *report.Result, res *trace.Result) {
	if len(res.Captures) == 0 {
		return
	}
	hazards := map[*trace.Capture]int{}
	for _, h := range res.Hazards {
		hazards[h.Capture]++
	}
	cc := optionalColumns(res)
	columns := []string{"#", "begun by (pid/thread)", "stream", "mode", "began (ms)", "end capture",
		"calls during it", "threads", "refused", "hazards", "guarded", "outside it", "calls by name"}
	if cc.nodes {
		columns = slices.Insert(columns, 6, "nodes")
	}
	if cc.python {
		columns = slices.Insert(columns, 2, "begun at")
	}
	if cc.device {
		columns = slices.Insert(columns, 2, "device")
	}
	t := r.AddTable("captures", columns...)
	listed, unlisted := 0, 0
	for _, c := range res.Captures {
		notable := failing(c) || hazards[c] > 0 || len(c.Outside) > 0 || c.End.Empty()
		if !notable && listed >= captureRows {
			unlisted++
			continue
		}
		listed++
		t.AddCells("", captureCells(res, c, cc, hazards[c])...)
	}
	if n := unlisted + res.CapturesOmitted; n > 0 {
		r.Note("%d more %s ended with success, nothing refused: counted, not listed", n, words.Plural(n, "capture", "captures"))
	}
}

// failing says whether a capture did not end well or had a call refused.
func failing(c *trace.Capture) bool {
	return !c.EndedWell() || len(c.Refused) > 0 || c.RefusedOmitted > 0
}

func captureCells(res *trace.Result, c *trace.Capture, cc captureColumns, hazards int) []report.Cell {
	begun := fmt.Sprintf("%d/%d", c.PID, c.TID)
	if names := trace.ThreadNames(res, c.PID, c.BeginThreadName, c.BeginPython); names != "" {
		begun += " " + names
	}
	text := report.TextCell
	cells := []report.Cell{text(fmt.Sprint(c.ID)), text(begun), text(fmt.Sprintf("%#x", c.Stream)), text(c.Mode.String()),
		text(at(res, c.Begin)), endCell(c), text(fmt.Sprint(c.Calls)), text(threadsText(c)), text(fmt.Sprint(len(c.Refused) + c.RefusedOmitted)),
		text(fmt.Sprint(hazards)), text(fmt.Sprint(c.Guarded)), text(fmt.Sprint(len(c.Outside) + c.OutsideOmitted)), text(topCalls(c.ByName, 3))}
	if cc.nodes {
		nodes := "-"
		if c.End != nil && c.End.NodesKnown {
			nodes = fmt.Sprint(c.End.Nodes)
		}
		cells = slices.Insert(cells, 6, text(nodes))
	}
	if cc.python {
		where := "-"
		if w := c.BeginPython.Call().Where; w != nil {
			where = w.String()
		}
		cells = slices.Insert(cells, 2, text(where))
	}
	if cc.device {
		cells = slices.Insert(cells, 2, text(deviceCell(c)))
	}
	return cells
}

// device is the result's device: the one the program's captures began on,
// as its runtime named it (all of them, where they were several).
func device(res *trace.Result) report.Device {
	// One device however many processes used it.
	var seen []trace.Device
	for _, d := range res.Devices {
		d.PID = 0
		if !slices.Contains(seen, d) {
			seen = append(seen, d)
		}
	}
	var names, descriptions []string
	var out report.Device
	for _, d := range seen {
		// The architecture without its target features: gfx942, not
		// gfx942:sramecc+:xnack-.
		arch, _, _ := strings.Cut(d.Arch, ":")
		name := d.Name
		if name == "" {
			name = fmt.Sprintf("%s device %d", d.API, d.Ordinal)
		}
		var about []string
		if d.Arch != "" {
			about = append(about, d.Arch)
		}
		if d.ComputeUnits > 0 {
			about = append(about, fmt.Sprintf("%d CUs", d.ComputeUnits))
		}
		about = append(about, fmt.Sprintf("%s device %d", d.API, d.Ordinal))
		out = report.Device{Name: name, Arch: arch}
		names = append(names, out.Short())
		descriptions = append(descriptions, fmt.Sprintf("%s (%s)", name, strings.Join(about, ", ")))
	}
	if len(seen) > 1 {
		out = report.Device{Name: strings.Join(names, ", ")}
	}
	if len(seen) > 0 {
		out.Description = strings.Join(descriptions, "; ")
	}
	return out
}

// deviceCell names a capture's device in the capture table.
func deviceCell(c *trace.Capture) string {
	if c.Device < 0 {
		return "unknown"
	}
	return fmt.Sprintf("%s %d", c.API, c.Device)
}

// callerChain is a call's native callers as a person reads them,
// innermost first, joined by " ← " (called from): the runtime entry the
// program called, then the frames outside the runtime, the observer and
// the C library, each object(function), or object+offset where no symbol
// names it.
func callerChain(frames []trace.Frame, n int) string {
	c := trace.ReadableCallers(frames)
	var parts []string
	if c.Entry != "" {
		parts = append(parts, c.Entry)
	}
	var last string
	shown := 0
	for i, f := range c.Frames {
		s := f.String()
		if s == last {
			continue // recursion, or frames of one function
		}
		if shown == n {
			parts = append(parts, fmt.Sprintf("… (%d more)", len(c.Frames)-i))
			break
		}
		parts, last = append(parts, s), s
		shown++
	}
	if len(parts) == 0 {
		return "-"
	}
	return strings.Join(parts, " ← ")
}

func streamText(s uint64) string {
	if s == 0 {
		return "-"
	}
	return fmt.Sprintf("%#x", s)
}

// threadText says whose thread made a call: `512 "metrics" (another
// thread)`.
func threadText(res *trace.Result, pid, tid int, osName string, py trace.PyStack, c *trace.Capture) string {
	if pid == c.PID && tid == c.TID && osName == "" && py.ThreadName == "" {
		// A record that carried no names, from the thread that began
		// the capture: its names from the begin.
		osName, py.ThreadName = c.BeginThreadName, c.BeginPython.ThreadName
	}
	s := fmt.Sprint(tid)
	if names := trace.ThreadNames(res, pid, osName, py); names != "" {
		s += " " + names
	}
	switch {
	case pid != c.PID:
		s += fmt.Sprintf(" of process %d", pid)
	case tid == c.TID:
		s += " (the capturing thread)"
	default:
		s += " (another thread)"
	}
	return s
}

func callThread(res *trace.Result, call *trace.Call, c *trace.Capture) string {
	return threadText(res, call.PID, call.TID, call.ThreadName, call.Python, c)
}

// pythonCell is a Python stack for a table cell: "-" where none was
// collected.
func pythonCell(py trace.PyStack) string {
	if s := py.Describe(pythonFrames); s != "" {
		return s
	}
	return "-"
}

// anyPython says whether some call carried a Python stack, so that its
// table has the column.
func anyPython(calls []*trace.Call) bool {
	return slices.ContainsFunc(calls, func(c *trace.Call) bool { return c.Python.State != trace.PyNone })
}

// withPython adds the Python column, after the native callers, where the
// table has it.
func withPython(columns []string, python bool) []string {
	if !python {
		return columns
	}
	return append(columns, "Python (innermost first)")
}

// failedCaptures gives each failed capture a screen of its own, victim to
// culprit: who began it (thread, stream, mode, Python line), its first
// refused call (thread, Python line, native callers), what followed,
// folded by thread and result, and how it ended.
func failedCaptures(r *report.Result, res *trace.Result, j trace.Judgement) {
	shown, more := 0, 0
	for _, c := range res.Captures {
		if !c.Ran() || !failing(c) {
			continue
		}
		if shown == failedScreens {
			more++
			continue
		}
		shown++
		failedScreen(r, res, c, j)
	}
	if more > 0 {
		r.Note("%d more failed %s: in the capture and refused-call tables", more, words.Plural(more, "capture", "captures"))
	}
}

// screenRow is one step of a failed capture's screen.
type screenRow struct {
	step, call, thread string
	python             trace.PyStack
	callers            string
}

func failedScreen(r *report.Result, res *trace.Result, c *trace.Capture, j trace.Judgement) {
	rows := []screenRow{{step: "began", call: fmt.Sprintf("%s (%s mode, stream %#x)", trace.BaseName(c.BeginName), c.Mode, c.Stream),
		thread: threadText(res, c.PID, c.TID, c.BeginThreadName, c.BeginPython, c), python: c.BeginPython,
		callers: callerChain(c.BeginCallers, callerFrames)}}
	first := c.FirstRefused()
	if first != nil {
		step := "first refused call"
		if first == j.Culprit {
			step = "first culprit"
		}
		rows = append(rows, screenRow{step: step, call: fmt.Sprintf("%s returned %s", trace.BaseName(first.Name), codeText(first.Result, first.API)),
			thread: callThread(res, first, c), python: first.Python, callers: callerChain(first.Callers, callerFrames)})
	}
	for _, q := range c.Consequences(first) {
		rows = append(rows, screenRow{step: "then", call: fmt.Sprintf("%s returned %s (%s)", words.Count(q.Calls, "call", "calls"),
			codeText(q.Result, c.API), topCalls(q.ByName, 3)), thread: threadText(res, q.PID, q.TID, q.ThreadName, q.Python, c),
			python: q.Python, callers: "-"})
	}
	if c.RefusedOmitted > 0 {
		rows = append(rows, screenRow{step: "then", call: fmt.Sprintf("%s more refused, not kept", words.Count(c.RefusedOmitted, "call", "calls")),
			thread: "-", callers: "-"})
	}
	rows = append(rows, endRow(res, c))
	python := slices.ContainsFunc(rows, func(row screenRow) bool { return row.python.State != trace.PyNone })
	t := r.AddTable(fmt.Sprintf("capture %d failed: who began it, its first refused call, what followed (← called from)", c.ID),
		withPython([]string{"step", "call", "thread", "native callers"}, python)...)
	for _, row := range rows {
		cells := []string{row.step, row.call, row.thread, row.callers}
		if python {
			cells = append(cells, pythonCell(row.python))
		}
		t.AddRow(cells...)
	}
}

// endRow is how a failed capture ended, or that it never did.
func endRow(res *trace.Result, c *trace.Capture) screenRow {
	switch {
	case c.End == nil:
		return screenRow{step: "ended", call: "never: the program " + res.Exit.Describe(), thread: "-", callers: "-"}
	case c.End.StreamGone:
		return screenRow{step: "ended", call: "never: its stream was destroyed while it captured",
			thread: threadText(res, c.PID, c.End.TID, c.End.ThreadName, c.End.Python, c), callers: "-"}
	}
	return screenRow{step: "ended", call: fmt.Sprintf("%s returned %s", trace.BaseName(c.End.Name), codeText(c.End.Result, c.API)),
		thread: threadText(res, c.PID, c.End.TID, c.End.ThreadName, c.End.Python, c), python: c.End.Python,
		callers: callerChain(c.End.Callers, callerFrames)}
}

func refusedTable(r *report.Result, res *trace.Result, j trace.Judgement) {
	var all []*trace.Call
	omitted := 0
	for _, c := range res.Captures {
		omitted += c.RefusedOmitted
		all = append(all, c.Refused...)
	}
	if len(all) > 0 {
		python := anyPython(all)
		t := r.AddTable("refused calls (callers innermost first, ← called from)",
			withPython([]string{"capture", "call", "thread", "stream", "result", "callers"}, python)...)
		t.FlagColumn = "role"
		for _, c := range res.Captures {
			// In the order they were made: threads' records arrive in any.
			refused := slices.Clone(c.Refused)
			sort.SliceStable(refused, func(i, j int) bool { return refused[i].Time < refused[j].Time })
			for _, call := range refused {
				role := ""
				switch {
				case call == j.Culprit && c == j.Capture:
					role = "first culprit"
				case call.Consequence():
					role = "reports an earlier refusal"
				}
				cells := []report.Cell{report.TextCell(fmt.Sprint(c.ID)), report.TextCell(trace.BaseName(call.Name)),
					report.TextCell(callThread(res, call, c)), report.TextCell(streamText(call.Stream)), codeCell(call.Result, call.API),
					report.TextCell(callerChain(call.Callers, callerFrames))}
				if python {
					cells = append(cells, report.TextCell(pythonCell(call.Python)))
				}
				t.AddCells(role, cells...)
			}
		}
	}
	if omitted > 0 {
		r.Note("%d more refused %s past the first %d of a capture: counted, not listed", omitted,
			words.Plural(omitted, "call", "calls"), trace.DefaultLimits.Calls)
	}
}

func hazardTable(r *report.Result, res *trace.Result) {
	if len(res.Hazards) == 0 {
		return
	}
	calls := make([]*trace.Call, len(res.Hazards))
	for i, h := range res.Hazards {
		calls[i] = h.Call
	}
	python := anyPython(calls)
	t := r.AddTable("hazards (calls a global-mode capture would not survive)", withPython([]string{"capture", "call", "thread",
		"succeeded because", "rule", "global mode would", "basis", "rules table", "callers"}, python)...)
	for _, h := range res.Hazards {
		basis := string(h.Would.Basis)
		if basis == "" {
			basis = "not given"
		}
		would := fmt.Sprintf("return %s; end capture %s", codeText(h.Would.Returns, h.Capture.API), codeText(h.Would.End, h.Capture.API))
		cells := []string{fmt.Sprint(h.Capture.ID), trace.BaseName(h.Call.Name), callThread(res, h.Call, h.Capture), h.Because(),
			h.Strict.String(), would, basis, h.Table, callerChain(h.Call.Callers, callerFrames)}
		if python {
			cells = append(cells, pythonCell(h.Call.Python))
		}
		t.AddRow(cells...)
	}
}

// outsideTable lists the work enqueued during captures into streams that
// were not capturing: no graph holds it.
func outsideTable(r *report.Result, res *trace.Result) {
	var all []*trace.Call
	omitted := 0
	for _, c := range res.Captures {
		all = append(all, c.Outside...)
		omitted += c.OutsideOmitted
	}
	if len(all) > 0 {
		python := anyPython(all)
		t := r.AddTable("work outside the capture (enqueued during it into a stream that was not capturing; no graph holds it)",
			withPython([]string{"capture", "call", "thread", "stream", "callers"}, python)...)
		for _, c := range res.Captures {
			for _, call := range c.Outside {
				cells := []string{fmt.Sprint(c.ID), trace.BaseName(call.Name), callThread(res, call, c), streamText(call.Stream),
					callerChain(call.Callers, callerFrames)}
				if python {
					cells = append(cells, pythonCell(call.Python))
				}
				t.AddRow(cells...)
			}
		}
	}
	if omitted > 0 {
		r.Note("%d more %s outside a capture past the first %d of a capture: counted, not listed", omitted,
			words.Plural(omitted, "call", "calls"), trace.DefaultLimits.Calls)
	}
}

// notes say what was observed, and how.
func notes(r *report.Result, res *trace.Result, rules *trace.RulesTables) {
	cuptiNotes(r, res)
	scopeNotes(r, res)
	unnamedNote(r, res)
	hipSeen := slices.ContainsFunc(res.Captures, func(c *trace.Capture) bool { return c.API == hip.DialectHIP })
	if hipSeen || res.Ran() == 0 {
		r.Note("HIP: calls to libamdhip64 observed by the LD_PRELOAD interposer in every process that loaded it; " +
			"a program that dlopens libamdhip64 and looks up its functions itself bypasses it (AMD's rocprofiler-sdk traces those)")
	}
	processNote(r, res)
	if why := res.Unobserved(); why != "" && res.Ran() == 0 {
		r.Note("not observed: %s", why)
	}
	findingNotes(r, res)
	if rules != nil {
		var tables []string
		for _, d := range []hip.Dialect{hip.DialectCUDA, hip.DialectHIP} {
			if name, ok := rules.Names[d]; ok {
				tables = append(tables, fmt.Sprintf("%s for %s", name, strings.ToUpper(string(d))))
			}
		}
		r.Note("hazards judged by the measured rules tables %s", strings.Join(tables, " and "))
	}
	if res.Stray > 0 {
		r.Note("%d %s fell in no capture that the trace saw begin", res.Stray, words.Plural(res.Stray, "call", "calls"))
	}
	if res.Malformed > 0 {
		r.Note("%d observer %s could not be read", res.Malformed, words.Plural(res.Malformed, "record", "records"))
	}
}

// cuptiNotes say, per status and text, in which processes CUDA was or
// was not observed.
func cuptiNotes(r *report.Result, res *trace.Result) {
	for _, g := range notesOf(res, "cupti") {
		switch g.status {
		case "ok":
			r.Note("CUDA: the driver API observed through CUPTI callbacks (%s) in %s", g.text, g.pids)
		case "missing":
			r.Note("CUDA: not observed in %s: %s; %s", g.pids, strings.TrimRight(g.text, "; "), trace.CUPTIInstall)
		default:
			r.Note("CUDA: not observed in %s: %s", g.pids, g.text)
		}
	}
}

// scopeNotes say in which processes the observer's callback ran for
// every driver call, outside captures too, and why: what slows a
// launch-bound program under the trace. The narrow scope, the usual case,
// is in the records only.
func scopeNotes(r *report.Result, res *trace.Result) {
	for _, g := range notesOf(res, "scope") {
		switch g.status {
		case "full":
			r.Note("CUDA: in %s, %s (a launch-bound program runs a few percent slower under the trace)", g.pids, g.text)
		case "renarrowed":
			r.Note("CUDA: in %s, %s", g.pids, g.text)
		}
	}
}

// noteGroup is the processes that sent one note.
type noteGroup struct {
	status, text, pids string
}

// notesOf groups the notes of topic by status and text, in the order they
// first came, each with the list of its processes.
func notesOf(res *trace.Result, topic string) []noteGroup {
	pids := map[string][]int{} // status: text -> processes
	var order []string
	for _, n := range res.Notes {
		if n.Topic != topic {
			continue
		}
		key := n.Status + "\x00" + n.Text
		if _, ok := pids[key]; !ok {
			order = append(order, key)
		}
		pids[key] = append(pids[key], n.PID)
	}
	groups := make([]noteGroup, 0, len(order))
	for _, key := range order {
		st, text, _ := strings.Cut(key, "\x00")
		groups = append(groups, noteGroup{status: st, text: text, pids: processList(pids[key])})
	}
	return groups
}

// unnamedNote says which Python threads are shown without their threading
// name because the observer gave up waiting for it.
func unnamedNote(r *report.Result, res *trace.Result) {
	var tids []int
	for _, n := range res.Notes {
		if n.Topic != "python" || n.Status != "unnamed" {
			continue
		}
		id, _, _ := strings.Cut(strings.TrimPrefix(n.Text, "thread "), ":")
		if tid, err := strconv.Atoi(id); err == nil {
			tids = append(tids, tid)
		}
	}
	if len(tids) > 0 {
		r.Note("Python: %s shown without %s threading name: another thread held the GIL for all of the 50 ms the observer waits for it, once per thread",
			idList(tids, "thread ", "threads "), words.Plural(len(tids), "its", "their"))
	}
}

// processNote lists the processes the observer loaded into.
func processNote(r *report.Result, res *trace.Result) {
	n := len(res.Processes) + res.ProcessesOmitted
	if n == 0 {
		r.Note("processes: the observer loaded into none")
		return
	}
	var parts []string
	for i, p := range res.Processes {
		if i == 10 {
			parts = append(parts, fmt.Sprintf("%d more", n-10))
			break
		}
		s := fmt.Sprintf("%d %s", p.PID, baseName(p.Exe))
		if p.Forked {
			s += fmt.Sprintf(" (forked from %d)", p.PPID)
		}
		parts = append(parts, s)
	}
	r.Note("processes observed (%d): %s", n, strings.Join(parts, ", "))
}

// findingNotes say what the tables do not: the guarded calls, the empty
// graphs, the graphs launched that no capture built, and why Python
// frames are missing.
func findingNotes(r *report.Result, res *trace.Result) {
	guarded := map[string]int{}
	total, captures := 0, 0
	for _, c := range res.Captures {
		if c.Guarded > 0 {
			captures++
			total += c.Guarded
			for name, n := range c.GuardedByName {
				guarded[name] += n
			}
		}
	}
	if total > 0 {
		r.Note("guarded: %s during %s (%s), each made by a thread that had switched its own capture mode around it "+
			"(to relaxed: MIOpen's ScopedRelaxedCaptureMode, PyTorch's cudaMallocMaybeCapturing), in which the rules tables "+
			"say the call is safe whatever the capture's mode: none is a hazard", words.Count(total, "call", "calls"),
			words.Count(captures, "capture", "captures"), topCalls(guarded, 4))
	}
	if empty := res.Empty(); len(empty) > 0 {
		ids := make([]string, 0, len(empty))
		for _, c := range empty {
			ids = append(ids, fmt.Sprint(c.ID))
		}
		r.Note("empty: %s ended with success into a graph with no node (%s): no work was captured; "+
			"work enqueued on another stream, or on the capturing stream by another thread before the capture, is not in it",
			words.Count(len(empty), "capture", "captures"), "#"+strings.Join(ids, ", #"))
	}
	if g := res.Graphs; g.Launches > 0 {
		uncaptured := "each built by a capture the trace saw"
		if g.Uncaptured > 0 {
			uncaptured = fmt.Sprintf("%d of them built without a capture the trace saw (node by node, as XLA's command buffers are)",
				g.Uncaptured)
		}
		r.Note("graphs: %s instantiated, %s of %s, %s", words.Count(g.Instantiations, "graph", "graphs"),
			words.Count(g.Launches, "launch", "launches"), words.Count(g.Launched, "graph", "graphs"), uncaptured)
	}
	pythonNotes(r, res)
}

// pythonNotes say why a thread's Python frames are missing, once per
// reason.
func pythonNotes(r *report.Result, res *trace.Result) {
	why := map[string][]int{}
	var order []string
	add := func(tid int, py trace.PyStack) {
		if py.State != trace.PyUnavailable {
			return
		}
		if _, ok := why[py.Why]; !ok {
			order = append(order, py.Why)
		}
		if !slices.Contains(why[py.Why], tid) {
			why[py.Why] = append(why[py.Why], tid)
		}
	}
	for _, c := range res.Captures {
		add(c.TID, c.BeginPython)
		for _, call := range slices.Concat(c.Refused, c.Outside) {
			add(call.TID, call.Python)
		}
	}
	for _, h := range res.Hazards {
		add(h.Call.TID, h.Call.Python)
	}
	for _, reason := range order {
		said := reason
		if said == "" {
			said = "the observer did not say why"
		}
		r.Note("Python: the frames of %s could not be read: %s", threadList(why[reason]), said)
	}
}

func threadList(tids []int) string { return idList(tids, "thread ", "threads ") }

func processList(pids []int) string { return idList(pids, "process ", "processes ") }

// idList is "threads 12, 13", the first ten ids and how many more.
func idList(ids []int, one, many string) string {
	parts := make([]string, 0, len(ids))
	for i, id := range ids {
		if i == 10 {
			parts = append(parts, fmt.Sprintf("%d more", len(ids)-10))
			break
		}
		parts = append(parts, fmt.Sprint(id))
	}
	return words.Plural(len(ids), one, many) + strings.Join(parts, ", ")
}

func baseName(path string) string {
	if i := strings.LastIndexByte(path, '/'); i >= 0 {
		return path[i+1:]
	}
	return path
}
