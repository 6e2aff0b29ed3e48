package trace

import (
	"bytes"
	"debug/elf"
	"fmt"
	"os"
	"path/filepath"
	"strings"
)

// ProgramFile is what the program's file says of whether the observer can
// be loaded into it, read before it runs.
type ProgramFile struct {
	// Read: the file was read; the rest means nothing otherwise.
	Read bool
	// Static: an ELF executable without a program interpreter, so no
	// dynamic loader loads the observer (LD_PRELOAD) into it.
	Static bool
	// SetID: set-user-ID or set-group-ID, for which the loader ignores
	// LD_PRELOAD.
	SetID bool
	// Interpreter is a script's #! line's program, which is what runs.
	Interpreter string
}

// InspectProgram reads the program's file for the facts a judgement of
// an unobserved run needs.
func InspectProgram(path string) ProgramFile {
	st, err := os.Stat(path)
	if err != nil {
		return ProgramFile{}
	}
	pf := ProgramFile{Read: true, SetID: st.Mode()&(os.ModeSetuid|os.ModeSetgid) != 0}
	f, err := os.Open(path)
	if err != nil {
		return pf
	}
	defer f.Close()
	head := make([]byte, 256)
	n, _ := f.Read(head)
	head = head[:n]
	if line, ok := bytes.CutPrefix(head, []byte("#!")); ok {
		line, _, _ = bytes.Cut(line, []byte("\n"))
		if fields := strings.Fields(string(line)); len(fields) > 0 {
			pf.Interpreter = fields[0]
		}
		return pf
	}
	e, err := elf.NewFile(f)
	if err != nil {
		return pf
	}
	defer e.Close()
	pf.Static = true
	for _, p := range e.Progs {
		if p.Type == elf.PT_INTERP {
			pf.Static = false
		}
	}
	return pf
}

// miotoolName says whether an executable's file is a miotool.
func miotoolName(path string) bool {
	return strings.HasPrefix(filepath.Base(path), "miotool")
}

// NestedTrace says whether the traced program is itself `miotool trace`:
// its command line (or a shell command string in it, sh -c "miotool trace
// -- prog") names a miotool followed by trace before any --, and the
// program is a miotool or the observer loaded into one. The inner trace's
// observer reports to the inner trace, not to this one: such a run cannot
// be observed from outside.
func NestedTrace(r *Result) bool {
	if !miotoolName(r.Program) && !miotoolName(r.Path) && !r.miotoolObserved() {
		return false
	}
	var words []string
	for _, a := range append([]string{r.Program}, r.Args...) {
		words = append(words, strings.Fields(a)...)
	}
	inMiotool := false
	for _, w := range words {
		switch {
		case w == "--":
			inMiotool = false
		case miotoolName(w):
			inMiotool = true
		case inMiotool && w == "trace":
			return true
		}
	}
	return false
}

// miotoolObserved says whether some process the observer loaded into is a
// miotool.
func (r *Result) miotoolObserved() bool {
	for _, p := range r.Processes {
		if miotoolName(p.Exe) {
			return true
		}
	}
	return false
}

// innerProgram is what the nested trace runs: the words after the --
// that follows its trace, e.g. "python3 x.py".
func innerProgram(args []string) string {
	var words []string
	for _, a := range args {
		words = append(words, strings.Fields(a)...)
	}
	seen := false
	for i, w := range words {
		seen = seen || w == "trace"
		if seen && w == "--" && i+1 < len(words) {
			return strings.Join(words[i+1:], " ")
		}
	}
	return ""
}

// onlyMiotoolObserved says whether every process the observer loaded into
// is a miotool: a trace of a trace whose inner program never reported to
// this trace (an inner miotool older than the chained sockets).
func (r *Result) onlyMiotoolObserved() bool {
	for _, p := range r.Processes {
		if !miotoolName(p.Exe) {
			return false
		}
	}
	return true
}

// Unobserved says why the trace could not observe the program, where the
// facts tell: "" when the observer was in the program and could see its
// runtime calls. Only a trace that saw no capture asks. A trace of a trace
// observes the inner program too (the observer reports to every trace's
// socket); it could not only when nothing but miotool reported.
func (r *Result) Unobserved() string {
	switch {
	case NestedTrace(r) && r.onlyMiotoolObserved():
		s := "the program is miotool trace itself, whose own observer reports to it and not to this trace: " +
			"this trace could not observe what it ran"
		if inner := innerProgram(r.Args); inner != "" {
			s += fmt.Sprintf(" (trace it once: miotool trace -- %s)", inner)
		}
		return s
	case len(r.Processes)+r.ProcessesOmitted == 0:
		return "the observer never loaded into the program: " + r.neverLoaded()
	}
	if n, ok := r.CUPTIMissing(); ok {
		return fmt.Sprintf("the program's CUDA calls were not observed (process %d): %s; %s", n.PID,
			strings.TrimRight(n.Text, "; "), CUPTIInstall)
	}
	for _, n := range r.CUPTIErrors() {
		return fmt.Sprintf("the program's CUDA calls were not observed (process %d): %s", n.PID, n.Text)
	}
	return ""
}

// neverLoaded says why the observer may not have loaded, as far as the
// program's file tells.
func (r *Result) neverLoaded() string {
	name := r.Path
	if name == "" {
		name = r.Program
	}
	f := r.Executable
	switch {
	case f.Static:
		return name + " is statically linked: no dynamic loader loads the observer into it"
	case f.SetID:
		return name + " is set-user-ID or set-group-ID: the dynamic loader ignores LD_PRELOAD for it"
	}
	return "no process reported it (a program that clears its environment or is statically linked, " +
		"or an observer library that is not miotool's, cannot be observed)"
}
