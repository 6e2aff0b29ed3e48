package trace

import (
	"bufio"
	"os"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
)

// The GPU tests of this file read the observer's records as it sends them
// (observe_test.go's way) on a machine with PyTorch on an NVIDIA GPU: the
// Python line of each refused call, and the crash handler in a CUDA
// process. They log what they read, for the results. Run them as
// gpu_test.go says, -test.run 'GPUPython|GPUCrash'.

// lineOf is the number of the first line of path, after the first line
// holding after (when not ""), that holds text.
func lineOf(t *testing.T, path, after, text string) int {
	t.Helper()
	f, err := os.Open(path)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	sc := bufio.NewScanner(f)
	seen := after == ""
	for n := 1; sc.Scan(); n++ {
		if !seen {
			seen = strings.Contains(sc.Text(), after)
			continue
		}
		if strings.Contains(sc.Text(), text) {
			return n
		}
	}
	t.Fatalf("%s holds no %q after %q", path, text, after)
	return 0
}

func logRecord(t *testing.T, what string, e Event) {
	t.Helper()
	t.Logf("%s: %s → %d on thread %d %q", what, e.Name, e.Result, e.TID, e.ThreadName)
	p := e.Python
	t.Logf("  Python %s %s (CPython %s, threading name %q, %d frames omitted)", p.State, p.Why, p.Version, p.ThreadName, p.Omitted)
	for _, f := range p.Frames {
		t.Logf("    %s", f)
	}
	for i, f := range NewSymbolizer().Frames(e.Callers) {
		if i == 8 {
			t.Logf("    ... %d more native callers", len(e.Callers)-8+e.Omitted)
			break
		}
		t.Logf("    %s", f)
	}
}

// TestGPUPythonFrames: PyTorch's refused calls name the Python line that
// made them: a second thread's torch.cuda.synchronize() (GIL released by
// PyTorch) and a query on the capturing thread.
func TestGPUPythonFrames(t *testing.T) {
	obs := gpuObserver(t)
	k := &kit{observer: obs, cupti: FindCUPTI(os.Environ())}
	cases := []struct{ script, call, after, text string }{
		{"sync_thread.py", "cuCtxSynchronize", "def log_metrics", "torch.cuda.synchronize()"},
		{"query.py", "cuStreamQuery", "with torch.cuda.graph", ".query()"},
	}
	for _, c := range cases {
		t.Run(c.script, func(t *testing.T) {
			script, err := filepath.Abs(filepath.Join("testdata", "pytorch", c.script))
			if err != nil {
				t.Fatal(err)
			}
			line := lineOf(t, script, c.after, c.text)
			o := k.observe(t, "python3", []string{script})
			var refused []Event
			for _, e := range o.calls(c.call) {
				if e.Result == 900 {
					refused = append(refused, e)
				}
			}
			if len(refused) == 0 {
				t.Fatalf("no refused %s in %d records", c.call, len(o.events))
			}
			logRecord(t, c.script, refused[0])
			for _, b := range o.records(kindBegin) {
				logRecord(t, "the capture's begin", b)
			}
			found := false
			for _, f := range refused[0].Python.Frames {
				found = found || f.File == script && f.Line == line
			}
			if refused[0].Python.State != PyFrames || !found {
				t.Errorf("the refused %s does not name %s:%d", c.call, c.script, line)
			}
		})
	}
}

// TestGPUCrashHandler: a CUDA process that crashes through ctypes is
// reported with its native and Python frames, and dies of its signal.
func TestGPUCrashHandler(t *testing.T) {
	obs := gpuObserver(t)
	script, err := filepath.Abs(filepath.Join("testdata", "python", "torch_crash.py"))
	if err != nil {
		t.Fatal(err)
	}
	c := crashRun(t, &kit{observer: obs}, "python3", []string{script}, syscall.SIGSEGV)
	t.Logf("crash: %s (code %d, address %#x) on thread %d %q", c.SignalName, c.Code, c.Addr, c.TID, c.ThreadName)
	for _, f := range c.Python.Frames {
		t.Logf("    %s", f)
	}
	for _, f := range c.Callers {
		t.Logf("    %s", f)
	}
	line := lineOf(t, script, "", "# line: explode")
	found := false
	for _, f := range c.Python.Frames {
		found = found || f.File == script && f.Line == line && f.Function == "explode"
	}
	if !found || len(c.Callers) == 0 {
		t.Errorf("the crash does not name %s:%d in explode, or has no native frames: %+v", script, line, c)
	}
}
