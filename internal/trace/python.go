package trace

import (
	"fmt"
	"path"
	"regexp"
	"strings"
)

// installedPackage matches the folders that installed packages live in.
var installedPackage = regexp.MustCompile(`/(site|dist)-packages/`)

// standardLibrary matches the folder of CPython's standard library,
// e.g. /usr/lib/python3.12/ or ~/.pyenv/versions/3.12.1/lib/python3.12/.
var standardLibrary = regexp.MustCompile(`/lib(64)?/python3\.[0-9]+t?/`)

// UserCode says whether a Python file is the program's own: not in an
// installed package, not in the standard library, not frozen into the
// interpreter.
func UserCode(file string) bool {
	switch {
	case strings.HasPrefix(file, "<frozen "):
		return false
	case installedPackage.MatchString(file):
		return false
	case standardLibrary.MatchString(file):
		return false
	}
	return true
}

// ShortFile is how a line shows a Python file: from the package's folder
// for an installed package (torch/cuda/__init__.py), from the library's
// folder for the standard library (threading.py), and the file's own name
// for the program's (train.py).
func ShortFile(file string) string {
	for _, re := range []*regexp.Regexp{installedPackage, standardLibrary} {
		if loc := re.FindStringIndex(file); loc != nil {
			return file[loc[1]:]
		}
	}
	if strings.HasPrefix(file, "<") {
		return file
	}
	return path.Base(file)
}

// String is the frame as a line shows it: "train.py:42 in log_metrics".
func (f PyFrame) String() string {
	s := ShortFile(f.File)
	if f.Line > 0 {
		s += fmt.Sprintf(":%d", f.Line)
	}
	if f.Function != "" {
		s += " in " + f.Function
	}
	return s
}

// moduleName is the Python module a file holds, as far as its path tells:
// torch/cuda/__init__.py is torch.cuda, threading.py threading.
func moduleName(file string) string {
	short := ShortFile(file)
	if strings.HasPrefix(short, "<") {
		return ""
	}
	short = strings.TrimSuffix(short, ".py")
	short = strings.TrimSuffix(short, "/__init__")
	return strings.ReplaceAll(short, "/", ".")
}

// PyCall is what a thread's Python stack says of a call: the innermost
// frame of the program's own code (the innermost frame where there is
// none) and the Python function it was running when the call was made.
type PyCall struct {
	// Where is the program's line; nil when no frame was read.
	Where *PyFrame
	// Called names the innermost frame's function when it is not the
	// program's line itself, e.g. torch.cuda.synchronize; "" otherwise
	// (the line called into native code directly).
	Called string
}

// Call reads the stack: its innermost frame of the program's own code
// and, where the program called into a package, the package's function.
func (s PyStack) Call() PyCall {
	if s.State != PyFrames || len(s.Frames) == 0 {
		return PyCall{}
	}
	at := 0
	for i, f := range s.Frames {
		if UserCode(f.File) {
			at = i
			break
		}
	}
	c := PyCall{Where: &s.Frames[at]}
	if at > 0 {
		inner := s.Frames[0]
		c.Called = inner.Function
		if m := moduleName(inner.File); m != "" {
			c.Called = m + "." + inner.Function
		}
	}
	return c
}

// Describe says in a few words what the stack holds, for a table cell:
// the frames innermost first joined by " ← " (at most n), or why there
// are none.
func (s PyStack) Describe(n int) string {
	switch s.State {
	case PyNone:
		return ""
	case PyNative:
		return "native thread: no Python"
	case PyUnavailable:
		if s.Why == "" {
			return "Python frames unavailable"
		}
		return "Python frames unavailable: " + s.Why
	}
	if len(s.Frames) == 0 {
		return "no Python frame (the thread was in native code)"
	}
	var parts []string
	for i, f := range s.Frames {
		if i == n {
			parts = append(parts, fmt.Sprintf("… (%d more)", len(s.Frames)-n+s.Omitted))
			break
		}
		parts = append(parts, f.String())
	}
	if len(s.Frames) <= n && s.Omitted > 0 {
		parts = append(parts, fmt.Sprintf("… (%d more)", s.Omitted))
	}
	return strings.Join(parts, " ← ")
}
