package trace

import (
	"fmt"
	"slices"
	"sort"
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

// callerFrames is how many frames a caller chain shows.
const callerFrames = 6

// fill turns what the trace saw into r's tables, notes, counters and
// checklist status.
func fill(r *report.Result, res *trace.Result, j trace.Judgement, rules *trace.RulesTables) {
	r.Backend, r.BackendReason = observed(res)
	r.Device = device(res)
	programTable(r, res)
	captureTable(r, res)
	refusedTable(r, res, j)
	hazardTable(r, res)
	notes(r, res, rules)

	good := 0
	refused := 0
	calls := 0
	for _, c := range res.Captures {
		if c.EndedWell() && len(c.Refused) == 0 && c.RefusedOmitted == 0 {
			good++
		}
		refused += len(c.Refused) + c.RefusedOmitted
		calls += c.Calls
	}
	good += res.CapturesOmitted
	if ran := res.Ran(); ran > 0 {
		r.Cases = report.Cases{Passed: min(good, ran), Total: ran}
	}
	r.Count("captures", int64(res.Ran()))
	r.Count("refused", int64(refused))
	r.Count("hazards", int64(len(res.Hazards)))
	r.Count("calls during captures", int64(calls))
	r.Count("processes", int64(len(res.Processes)+res.ProcessesOmitted))
	r.Count("exit status", int64(res.Exit.Code))
	r.Status = status(res, j)
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

// status is the checklist's Status cell: the verdict's word, the first
// culprit or failure, and how the program ended.
func status(res *trace.Result, j trace.Judgement) string {
	word := reportVerdict(j.Verdict).Status()
	switch {
	case j.Verdict == trace.NothingToCheck:
		return word + ": no capture began; " + exitShort(res.Exit)
	case j.Verdict == trace.CouldNotObserve:
		return word + ": the program could not be observed; " + exitShort(res.Exit)
	case j.Capture == nil && res.Ran() == 0 && j.Verdict == trace.Fail:
		if res.Unobserved() != "" {
			return word + ": the program could not be observed; " + exitShort(res.Exit)
		}
		return word + ": no capture began; " + exitShort(res.Exit)
	case j.Culprit != nil:
		return fmt.Sprintf("%s: %s refused (%d); %s", word, trace.BaseName(j.Culprit.Name), int(j.Culprit.Result), exitShort(res.Exit))
	case j.Capture != nil && j.Capture.End != nil && !j.Capture.End.StreamGone:
		return fmt.Sprintf("%s: end capture %d; %s", word, int(j.Capture.End.Result), exitShort(res.Exit))
	case j.Capture != nil && j.Capture.End == nil:
		return fmt.Sprintf("%s: a capture never ended; %s", word, exitShort(res.Exit))
	case j.StrictFailed:
		return fmt.Sprintf("%s: %d %s (--strict); %s", word, len(res.Hazards), words.Plural(len(res.Hazards), "hazard", "hazards"), exitShort(res.Exit))
	case len(res.Hazards) > 0:
		return fmt.Sprintf("%s with %d %s; %s", word, len(res.Hazards), words.Plural(len(res.Hazards), "hazard", "hazards"), exitShort(res.Exit))
	}
	return word + "; " + exitShort(res.Exit)
}

func programTable(r *report.Result, res *trace.Result) {
	t := r.AddTable("program", "program", "exit", "wall time", "processes observed")
	t.AddRow(report.JoinCommandLine(append([]string{res.Program}, res.Args...)), "the program "+res.Exit.Describe(),
		res.Exit.Wall.Round(time.Millisecond).String(), fmt.Sprint(len(res.Processes)+res.ProcessesOmitted))
}

// at is a time as the tables show it: seconds after the first event.
func at(res *trace.Result, t int64) string {
	return fmt.Sprintf("+%.3fs", time.Duration(t-res.Start).Seconds())
}

func codeText(c hip.Code, api hip.Dialect) string {
	return fmt.Sprintf("%d %s", int(c), c.Name(api))
}

// endText is how a capture ended, as the capture table says it.
func endText(c *trace.Capture) string {
	switch {
	case !c.Ran():
		return fmt.Sprintf("never began: %s returned %s", trace.BaseName(c.BeginName), codeText(c.BeginResult, c.API))
	case c.End == nil:
		return "never ended"
	case c.End.StreamGone:
		return "its stream was destroyed while it captured"
	}
	s := codeText(c.End.Result, c.API)
	if c.End.TID != c.TID {
		s += fmt.Sprintf(" (ended by thread %d)", c.End.TID)
	}
	return s
}

// threadsText counts the threads that made calls during a capture.
func threadsText(c *trace.Capture) string {
	if c.OtherThreads > 0 {
		return fmt.Sprintf("more than %d", len(c.ByThread))
	}
	return fmt.Sprint(len(c.ByThread))
}

// topCalls names the calls made most often during a capture.
func topCalls(c *trace.Capture, n int) string {
	type count struct {
		name string
		n    int
	}
	var cs []count
	for name, k := range c.ByName {
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

func captureTable(r *report.Result, res *trace.Result) {
	if len(res.Captures) == 0 {
		return
	}
	hazards := map[*trace.Capture]int{}
	for _, h := range res.Hazards {
		hazards[h.Capture]++
	}
	// Which device each capture was on matters where there were several.
	devices := map[[2]string]bool{}
	for _, c := range res.Captures {
		devices[[2]string{string(c.API), fmt.Sprint(c.Device)}] = true
	}
	columns := []string{"#", "begun by (pid/thread)", "stream", "mode", "began", "end capture",
		"calls during it", "threads", "refused", "hazards", "calls by name"}
	if len(devices) > 1 {
		columns = slices.Insert(columns, 2, "device")
	}
	t := r.AddTable("captures", columns...)
	listed, unlisted := 0, 0
	for _, c := range res.Captures {
		failing := !c.EndedWell() || len(c.Refused) > 0 || c.RefusedOmitted > 0
		if !failing && hazards[c] == 0 && listed >= captureRows {
			unlisted++
			continue
		}
		listed++
		cells := []string{fmt.Sprint(c.ID), fmt.Sprintf("%d/%d", c.PID, c.TID), fmt.Sprintf("%#x", c.Stream), c.Mode.String(),
			at(res, c.Begin), endText(c), fmt.Sprint(c.Calls), threadsText(c), fmt.Sprint(len(c.Refused) + c.RefusedOmitted),
			fmt.Sprint(hazards[c]), topCalls(c, 3)}
		if len(devices) > 1 {
			cells = slices.Insert(cells, 2, deviceCell(c))
		}
		t.AddRow(cells...)
	}
	if n := unlisted + res.CapturesOmitted; n > 0 {
		r.Note("%d more %s ended with success, nothing refused: counted, not listed", n, words.Plural(n, "capture", "captures"))
	}
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

// callerChain is a call's native callers, innermost first, joined by
// " ← " (called from): object(function), or object+offset where no
// symbol names the frame.
func callerChain(frames []trace.Frame, n int) string {
	var parts []string
	var last string
	shown := 0
	for i, f := range frames {
		s := f.String()
		if s == last {
			continue // recursion, or frames of one function
		}
		if shown == n {
			parts = append(parts, fmt.Sprintf("… (%d more)", len(frames)-i))
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

// threadText says whose thread made a call: "512 (another thread)".
func threadText(call *trace.Call, c *trace.Capture) string {
	s := fmt.Sprint(call.TID)
	switch {
	case call.PID != c.PID:
		s += fmt.Sprintf(" of process %d", call.PID)
	case call.TID == c.TID:
		s += " (the capturing thread)"
	default:
		s += " (another thread)"
	}
	return s
}

func refusedTable(r *report.Result, res *trace.Result, j trace.Judgement) {
	var t *report.Table
	omitted := 0
	for _, c := range res.Captures {
		omitted += c.RefusedOmitted
		for _, call := range c.Refused {
			if t == nil {
				t = r.AddTable("refused calls (callers innermost first, ← called from)", "capture", "call", "thread",
					"stream", "result", "callers")
				t.FlagColumn = "role"
			}
			role := ""
			switch {
			case call == j.Culprit && c == j.Capture:
				role = "first culprit"
			case call.Consequence():
				role = "reports an earlier refusal"
			}
			t.AddFlaggedRow(role, fmt.Sprint(c.ID), trace.BaseName(call.Name), threadText(call, c), streamText(call.Stream),
				codeText(call.Result, call.API), callerChain(call.Callers, callerFrames))
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
	t := r.AddTable("hazards (calls a global-mode capture would not survive)", "capture", "call", "thread",
		"succeeded because", "rule", "global mode would", "basis", "rules table", "callers")
	for _, h := range res.Hazards {
		basis := string(h.Would.Basis)
		if basis == "" {
			basis = "not given"
		}
		would := fmt.Sprintf("return %s; end capture %s", codeText(h.Would.Returns, h.Capture.API), codeText(h.Would.End, h.Capture.API))
		t.AddRow(fmt.Sprint(h.Capture.ID), trace.BaseName(h.Call.Name), threadText(h.Call, h.Capture), h.Because(),
			h.Strict.String(), would, basis, h.Table, callerChain(h.Call.Callers, callerFrames))
	}
}

// notes say what was observed, and how.
func notes(r *report.Result, res *trace.Result, rules *trace.RulesTables) {
	cupti := map[string][]int{} // status: text -> processes
	var order []string
	for _, n := range res.Notes {
		if n.Topic != "cupti" {
			continue
		}
		key := n.Status + "\x00" + n.Text
		if _, ok := cupti[key]; !ok {
			order = append(order, key)
		}
		cupti[key] = append(cupti[key], n.PID)
	}
	for _, key := range order {
		st, text, _ := strings.Cut(key, "\x00")
		pids := processList(cupti[key])
		switch st {
		case "ok":
			r.Note("CUDA: the driver API observed through CUPTI callbacks (%s) in %s", text, pids)
		case "missing":
			r.Note("CUDA: not observed in %s: %s; %s", pids, strings.TrimRight(text, "; "), trace.CUPTIInstall)
		default:
			r.Note("CUDA: not observed in %s: %s", pids, text)
		}
	}
	hipSeen := slices.ContainsFunc(res.Captures, func(c *trace.Capture) bool { return c.API == hip.DialectHIP })
	if hipSeen || res.Ran() == 0 {
		r.Note("HIP: calls to libamdhip64 observed by the LD_PRELOAD interposer in every process that loaded it; " +
			"a program that dlopens libamdhip64 and looks up its functions itself bypasses it (AMD's rocprofiler-sdk traces those)")
	}
	switch n := len(res.Processes) + res.ProcessesOmitted; {
	case n == 0:
		r.Note("processes: the observer loaded into none (a statically linked program cannot be observed)")
	default:
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

func processList(pids []int) string {
	parts := make([]string, 0, len(pids))
	for i, p := range pids {
		if i == 10 {
			parts = append(parts, fmt.Sprintf("%d more", len(pids)-10))
			break
		}
		parts = append(parts, fmt.Sprint(p))
	}
	return words.Plural(len(pids), "process ", "processes ") + strings.Join(parts, ", ")
}

func baseName(path string) string {
	if i := strings.LastIndexByte(path, '/'); i >= 0 {
		return path[i+1:]
	}
	return path
}
