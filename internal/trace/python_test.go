package trace

import (
	"bufio"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strings"
	"syscall"
	"testing"
)

// The CPython versions the observer reads, as pyenv installs them on the
// CI machine; a test of a version that is not there skips, naming it.
var pythonVersions = []string{"3.10.13", "3.11.7", "3.12.1", "3.13.0"}

func pyenvRoot() string {
	if r := os.Getenv("PYENV_ROOT"); r != "" {
		return r
	}
	home, _ := os.UserHomeDir()
	return filepath.Join(home, ".pyenv")
}

// python is the interpreter of version v; t skips when it is missing.
func python(t *testing.T, v string) string {
	t.Helper()
	p := filepath.Join(pyenvRoot(), "versions", v, "bin", "python3")
	if _, err := os.Stat(p); err != nil {
		t.Skipf("CPython %s is not installed (%s)", v, p)
	}
	return p
}

// driveLines are drive.py's lines marked "# line: NAME".
func driveLines(t *testing.T, path string) map[string]int {
	t.Helper()
	f, err := os.Open(path)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	out := map[string]int{}
	re := regexp.MustCompile(`# line: (\w+)`)
	sc := bufio.NewScanner(f)
	for n := 1; sc.Scan(); n++ {
		if m := re.FindStringSubmatch(sc.Text()); m != nil {
			out[m[1]] = n
		}
	}
	return out
}

// minor is v's minor version: 10 for 3.10.13.
func minor(v string) int {
	var major, m int
	_, _ = fmt.Sscanf(v, "%d.%d", &major, &m)
	return m
}

// pyRun is drive.py's scenario under the observer, on interpreter py.
func pyRun(t *testing.T, k *kit, x *extraKit, py, script, scenario string, opts ...obsOpt) observed {
	t.Helper()
	o := k.observe(t, py, []string{script, filepath.Join(k.lib, "libcuda.so.1"), x.pyHelper, scenario}, opts...)
	if o.exit != 0 || !strings.HasPrefix(o.stdout, scenario+" ") {
		t.Fatalf("%s %s: exit %d signal %v\nstdout: %s\nstderr: %s", py, scenario, o.exit, o.signal, o.stdout, o.stderr)
	}
	return o
}

// wantFrames holds a Python stack's innermost frames to (line name,
// functions the frame may be named) pairs, in file.
func wantFrames(t *testing.T, what string, p PyStack, file string, lines map[string]int, want [][2]string) {
	t.Helper()
	if p.State != PyFrames || len(p.Frames) < len(want) {
		t.Fatalf("%s: Python %+v, want at least %d frames", what, p, len(want))
	}
	for i, w := range want {
		f := p.Frames[i]
		names := strings.Split(w[1], "|")
		ok := f.File == file && f.Line == lines[w[0]]
		found := false
		for _, n := range names {
			found = found || f.Function == n
		}
		if !ok || !found {
			t.Errorf("%s: frame %d is %s, want %s:%d in %s", what, i, f, file, lines[w[0]], w[1])
		}
	}
}

// TestPythonStacks: on every supported CPython, a refused call names the
// calling thread's Python stack, read without ever waiting for the GIL:
// from another thread with the GIL released (ctypes.CDLL) and held
// (ctypes.PyDLL: its threading name too), on the capturing thread, on a
// native thread (no Python thread state), and in the deadlock an observer
// that waited for the GIL would fall into (the program ends in its time).
func TestPythonStacks(t *testing.T) {
	k, x := extras(t)
	lines := driveLines(t, x.drive)
	for _, v := range pythonVersions {
		t.Run(v, func(t *testing.T) {
			// The versions run side by side: a regression that hangs the
			// deadlock case costs one limit, not one per version.
			t.Parallel()
			py := python(t, v)
			qualified := minor(v) >= 11
			log := "log"
			if qualified {
				log = "Metrics.log"
			}
			t.Run("another thread, GIL released", func(t *testing.T) {
				o := pyRun(t, k, x, py, x.drive, "released")
				s := o.calls("cuCtxSynchronize")
				if len(s) != 1 || s[0].Result != 900 || s[0].TID == s[0].PID {
					t.Fatalf("refused synchronize: %+v", s)
				}
				// Without the GIL, 3.11 and 3.12 read co_name (faulthandler's
				// writer); 3.10 has no qualified names; 3.13 reads co_qualname.
				want := "log"
				if minor(v) == 13 {
					want = "Metrics.log"
				}
				wantFrames(t, "released", s[0].Python, x.drive, lines, [][2]string{{"sync", want}, {"metrics_thread", "metrics_thread"}})
				// The threading name, read by the observer's naming thread.
				if s[0].Python.Version != v || s[0].Python.ThreadName != "metrics" || s[0].ThreadName == "" {
					t.Errorf("version %q, threading name %q, OS name %q; want %s, metrics and one", s[0].Python.Version, s[0].Python.ThreadName, s[0].ThreadName, v)
				}
			})
			t.Run("another thread, GIL released, pinned offsets", func(t *testing.T) {
				// 3.11 and 3.12 read at offsets pinned to their headers where
				// a build does not export _Py_DumpTraceback.
				if m := minor(v); m != 11 && m != 12 {
					t.Skipf("CPython %s has no such fallback", v)
				}
				o := pyRun(t, k, x, py, x.drive, "released", obsEnv(EnvPython+"=offsets"))
				s := o.calls("cuCtxSynchronize")
				if len(s) != 1 {
					t.Fatalf("refused synchronize: %+v", s)
				}
				wantFrames(t, "released", s[0].Python, x.drive, lines, [][2]string{{"sync", "Metrics.log"}, {"metrics_thread", "metrics_thread"}})
				if n := len(s[0].Python.Frames); s[0].Python.Frames[n-1].Function != "Thread._bootstrap" {
					t.Errorf("outermost frame %s, want Thread._bootstrap", s[0].Python.Frames[n-1])
				}
				o = pyRun(t, k, x, py, x.drive, "query-released", obsEnv(EnvPython+"=offsets"))
				q := o.calls("cuStreamQuery")
				if len(q) != 1 {
					t.Fatalf("query: %+v", q)
				}
				wantFrames(t, "query", q[0].Python, x.drive, lines, [][2]string{{"query", "capture_step"}, {"main", "main"}})
			})
			t.Run("another thread, GIL released, PyGILState_Check off", func(t *testing.T) {
				// PyGILState_Check answers 1 after a sub-interpreter was
				// made: the public API must not be taken for safe then.
				o := pyRun(t, k, x, py, x.drive, "released-subinterpreter")
				s := o.calls("cuCtxSynchronize")
				if len(s) != 1 || s[0].Python.ThreadName != "metrics" {
					t.Fatalf("refused synchronize: %+v (want its threading name, metrics)", s)
				}
				want := "log"
				if minor(v) == 13 {
					want = "Metrics.log"
				}
				wantFrames(t, "released", s[0].Python, x.drive, lines, [][2]string{{"sync", want}, {"metrics_thread", "metrics_thread"}})
			})
			t.Run("another thread, GIL held", func(t *testing.T) {
				o := pyRun(t, k, x, py, x.drive, "held")
				s := o.calls("cuCtxSynchronize")
				if len(s) != 1 {
					t.Fatalf("refused synchronize: %+v", s)
				}
				wantFrames(t, "held", s[0].Python, x.drive, lines, [][2]string{{"sync", log}, {"metrics_thread", "metrics_thread"}})
				if s[0].Python.ThreadName != "metrics" {
					t.Errorf("threading name %q, want metrics", s[0].Python.ThreadName)
				}
			})
			for _, held := range []bool{false, true} {
				scenario := map[bool]string{false: "query-released", true: "query-held"}[held]
				t.Run("the capturing thread/"+scenario, func(t *testing.T) {
					o := pyRun(t, k, x, py, x.drive, scenario)
					q, begins, ends := o.calls("cuStreamQuery"), o.records(kindBegin), o.records(kindEnd)
					if len(q) != 1 || len(begins) != 1 || len(ends) != 1 || q[0].TID != q[0].PID {
						t.Fatalf("query %+v, begins %+v, ends %+v", q, begins, ends)
					}
					wantFrames(t, "query", q[0].Python, x.drive, lines, [][2]string{{"query", "capture_step"}})
					wantFrames(t, "begin", begins[0].Python, x.drive, lines, [][2]string{{"begin", "begin"}})
					wantFrames(t, "end", ends[0].Python, x.drive, lines, [][2]string{{"end", "end"}})
					if last := q[0].Python.Frames[len(q[0].Python.Frames)-1]; last.Function != "<module>" {
						t.Errorf("outermost frame %s, want <module>", last)
					}
					if held && q[0].Python.ThreadName != "MainThread" {
						t.Errorf("threading name %q, want MainThread", q[0].Python.ThreadName)
					}
				})
			}
			t.Run("a native thread", func(t *testing.T) {
				o := pyRun(t, k, x, py, x.drive, "native")
				s := o.calls("cuCtxSynchronize")
				if len(s) != 1 || s[0].Python.State != PyNative || len(s[0].Python.Frames) != 0 || s[0].ThreadName != "native-sync" {
					t.Fatalf("refused synchronize on a native thread: %+v", s)
				}
			})
			t.Run("deadlock", func(t *testing.T) {
				// The main thread holds the GIL and waits for a lock that the
				// refusing thread holds across its refused call.
				o := pyRun(t, k, x, py, x.drive, "deadlock")
				s := o.calls("cuCtxSynchronize")
				if len(s) != 3 || s[0].Result != 900 {
					t.Fatalf("synchronize, refused then twice more under the lock: %+v", s)
				}
				wantFrames(t, "deadlock", s[0].Python, x.drive, lines, [][2]string{{"holder", "<lambda>|deadlock.<locals>.<lambda>"}})
				// The GIL's holder waits for the refusing thread: the naming
				// thread cannot read its name, and the refusing thread went
				// on without it, once: its later records did not wait again.
				for i, c := range s {
					if c.Python.ThreadName != "" {
						t.Errorf("call %d: threading name %q read while the GIL's holder waited for the refusing thread", i, c.Python.ThreadName)
					}
				}
				var unnamed []string
				for _, n := range o.records("note") {
					if n.Topic == "python" && n.Status == "unnamed" {
						unnamed = append(unnamed, n.Text)
					}
				}
				if want := fmt.Sprintf("thread %d: ", s[0].TID); len(unnamed) != 1 || !strings.HasPrefix(unnamed[0], want) {
					t.Errorf("notes of a thread left unnamed: %q, want one, for thread %d", unnamed, s[0].TID)
				}
				// Reading frames only with the GIL: none, and why.
				o = pyRun(t, k, x, py, x.drive, "deadlock", obsEnv(EnvPython+"=held"))
				s = o.calls("cuCtxSynchronize")
				if len(s) != 3 || s[0].Python.State != PyUnavailable || !strings.Contains(s[0].Python.Why, "does not hold the GIL") {
					t.Fatalf("with %s=held: %+v", EnvPython, s)
				}
				if minor(v) <= 11 && !strings.Contains(s[0].Python.Why, "GIL held by another thread") {
					t.Errorf("why %q: 3.10 and 3.11 tell the GIL's holder", s[0].Python.Why)
				}
			})
			t.Run("a file named in Unicode", func(t *testing.T) {
				data, err := os.ReadFile(x.drive)
				if err != nil {
					t.Fatal(err)
				}
				script := filepath.Join(t.TempDir(), "dré_ü€𝄞.py")
				if err := os.WriteFile(script, data, 0o644); err != nil {
					t.Fatal(err)
				}
				for _, scenario := range []string{"query-released", "query-held"} {
					o := pyRun(t, k, x, py, script, scenario)
					q := o.calls("cuStreamQuery")
					if len(q) != 1 || len(q[0].Python.Frames) == 0 {
						t.Fatalf("%s: %+v", scenario, q)
					}
					want := script
					if scenario == "query-released" && (minor(v) == 11 || minor(v) == 12) {
						// faulthandler's writer escapes what is not ASCII.
						want = filepath.Join(filepath.Dir(script), `dr\xe9_\xfc\u20ac\U0001d11e.py`)
					}
					if got := q[0].Python.Frames[0].File; got != want {
						t.Errorf("%s: file %q, want %q", scenario, got, want)
					}
				}
			})
		})
	}
}

// TestPythonOutsideTheSupportedRange: an interpreter before 3.10 is named
// and said to be unsupported, never read.
func TestPythonOutsideTheSupportedRange(t *testing.T) {
	k, x := extras(t)
	matches, _ := filepath.Glob(filepath.Join(pyenvRoot(), "versions", "3.9.*", "bin", "python3"))
	if len(matches) == 0 {
		t.Skip("no CPython 3.9 installed (pyenv's versions/3.9.*)")
	}
	o := pyRun(t, k, x, matches[0], x.drive, "query-held")
	q := o.calls("cuStreamQuery")
	if len(q) != 1 || q[0].Python.State != PyUnavailable || q[0].Python.Why != "CPython 3.9: not supported (3.10 to 3.13 are)" ||
		!strings.HasPrefix(q[0].Python.Version, "3.9.") {
		t.Fatalf("%+v", q)
	}
}

// TestPythonDeclarationsMatchRealHeaders compiles
// observer/check/python_check.c against each supported version's headers:
// every declaration and offset the observer uses is the header's, and a
// wrong offset fails the check.
func TestPythonDeclarationsMatchRealHeaders(t *testing.T) {
	gcc := gccOrSkip(t)
	for _, v := range pythonVersions {
		t.Run(v, func(t *testing.T) {
			python(t, v)
			include, _ := filepath.Glob(filepath.Join(pyenvRoot(), "versions", v, "include", "python3.*"))
			if len(include) != 1 {
				t.Skipf("no headers of CPython %s: %v", v, include)
			}
			check := func(extra ...string) (string, error) {
				args := append([]string{"-std=gnu11", "-fsyntax-only", "-Wall", "-Werror", "-I" + include[0]}, extra...)
				out, err := exec.Command(gcc, append(args, "observer/check/python_check.c")...).CombinedOutput()
				return string(out), err
			}
			if out, err := check(); err != nil {
				t.Fatalf("the observer's CPython declarations disagree with %s: %v\n%s", include[0], err, out)
			}
			if out, err := check("-DMIOTOOL_MUST_FAIL"); err == nil || !strings.Contains(out, "static assertion failed") {
				t.Fatalf("a wrong offset passed the check: %v\n%s", err, out)
			}
		})
	}
}

// TestPythonCrashFrames: a Python program that crashes through ctypes is
// reported with its Python frames, read by the signal-safe paths, and
// still dies of its signal.
func TestPythonCrashFrames(t *testing.T) {
	k, x := extras(t)
	lines := driveLines(t, x.drive)
	for _, v := range pythonVersions {
		t.Run(v, func(t *testing.T) {
			py := python(t, v)
			c := crashRun(t, k, py, []string{x.drive, filepath.Join(k.lib, "libcuda.so.1"), x.pyHelper, "crash"}, syscall.SIGSEGV)
			p := c.Python
			if p.State != PyFrames || len(p.Frames) < 2 || !strings.HasSuffix(p.Frames[0].File, "ctypes/__init__.py") ||
				p.Frames[0].Function != "string_at" {
				t.Fatalf("Python %+v", p)
			}
			f := p.Frames[1]
			if f.File != x.drive || f.Line != lines["explode"] || f.Function != "explode" {
				t.Errorf("frame 1 is %s, want drive.py:%d in explode", f, lines["explode"])
			}
		})
	}
}
