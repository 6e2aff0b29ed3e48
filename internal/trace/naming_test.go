package trace

import (
	"strings"
	"testing"

	"miotool/internal/hip"
)

const (
	site    = "/home/u/.venv/lib/python3.12/site-packages/"
	stdlib  = "/home/u/.pyenv/versions/3.12.1/lib/python3.12/"
	program = "/home/u/proj/train.py"
)

func pyStack(names string, frames ...PyFrame) PyStack {
	return PyStack{State: PyFrames, ThreadName: names, Version: "3.12.1", Frames: frames}
}

func TestPythonFiles(t *testing.T) {
	cases := []struct {
		file  string
		user  bool
		short string
		mod   string
	}{
		{program, true, "train.py", "train"},
		{site + "torch/cuda/__init__.py", false, "torch/cuda/__init__.py", "torch.cuda"},
		{"/usr/lib/python3/dist-packages/numpy/core/numeric.py", false, "numpy/core/numeric.py", "numpy.core.numeric"},
		{stdlib + "threading.py", false, "threading.py", "threading"},
		{"/usr/lib64/python3.13t/concurrent/futures/thread.py", false, "concurrent/futures/thread.py", "concurrent.futures.thread"},
		{"<frozen importlib._bootstrap>", false, "<frozen importlib._bootstrap>", ""},
		{"<stdin>", true, "<stdin>", ""},
		{"/srv/lib/python_helpers/x.py", true, "x.py", "x"},
	}
	for _, c := range cases {
		if UserCode(c.file) != c.user || ShortFile(c.file) != c.short || moduleName(c.file) != c.mod {
			t.Errorf("%s: user %v, short %q, module %q; want %v, %q, %q", c.file, UserCode(c.file), ShortFile(c.file),
				moduleName(c.file), c.user, c.short, c.mod)
		}
	}
}

// TestPythonCall: the program's own line is the innermost frame outside
// installed packages and the standard library (the innermost frame where
// there is none), and the Python call is the innermost frame's function.
func TestPythonCall(t *testing.T) {
	sync := PyFrame{File: site + "torch/cuda/__init__.py", Line: 1162, Function: "synchronize"}
	user := PyFrame{File: program, Line: 42, Function: "log_metrics"}
	run := PyFrame{File: stdlib + "threading.py", Line: 1010, Function: "Thread.run"}
	pin := PyFrame{File: site + "torch/utils/data/_utils/pin_memory.py", Line: 56, Function: "_pin_memory_loop"}
	cases := []struct {
		name   string
		stack  PyStack
		where  string
		called string
	}{
		{"a package called from the program", pyStack("metrics", sync, user, run), "train.py:42 in log_metrics", "torch.cuda.synchronize"},
		{"the program called native code itself", pyStack("", user, run), "train.py:42 in log_metrics", ""},
		{"no frame of the program's own", pyStack("pin", pin, run), "torch/utils/data/_utils/pin_memory.py:56 in _pin_memory_loop", ""},
		{"no frame at all", pyStack(""), "", ""},
		{"a native thread", PyStack{State: PyNative}, "", ""},
		{"unreadable frames", PyStack{State: PyUnavailable, Why: "GIL held by another thread"}, "", ""},
	}
	for _, c := range cases {
		got := c.stack.Call()
		where := ""
		if got.Where != nil {
			where = got.Where.String()
		}
		if where != c.where || got.Called != c.called {
			t.Errorf("%s: %q, %q; want %q, %q", c.name, where, got.Called, c.where, c.called)
		}
	}
	for _, c := range []struct {
		stack PyStack
		want  string
	}{
		{pyStack("", sync, user, run), "torch/cuda/__init__.py:1162 in synchronize ← train.py:42 in log_metrics ← … (1 more)"},
		{PyStack{State: PyFrames, Frames: []PyFrame{user}, Omitted: 4}, "train.py:42 in log_metrics ← … (4 more)"},
		{PyStack{State: PyNative}, "native thread: no Python"},
		{PyStack{State: PyUnavailable, Why: "CPython 3.9: not supported"}, "Python frames unavailable: CPython 3.9: not supported"},
		{PyStack{State: PyFrames}, "no Python frame (the thread was in native code)"},
		{PyStack{}, ""},
	} {
		if got := c.stack.Describe(2); got != c.want {
			t.Errorf("Describe %+v = %q, want %q", c.stack, got, c.want)
		}
	}
}

// TestThreadNames: a thread reads by its Python name, with its OS name
// only where that says something else than the name every thread of the
// program starts with.
func TestThreadNames(t *testing.T) {
	r := &Result{Program: "python3", Processes: []*Process{{PID: 7, Exe: "/usr/bin/python3.12", MainThreadName: "python3", Python: true}}}
	cases := []struct {
		os   string
		py   PyStack
		want string
	}{
		{"python3", pyStack("metrics"), `"metrics"`},
		{"python3.12", pyStack("metrics"), `"metrics"`},
		{"metrics", pyStack("metrics"), `"metrics"`},
		{"pt_io", pyStack("loader"), `"loader" (OS name "pt_io")`},
		{"Thread-2 (_pin_", pyStack("Thread-2 (_pin_memory_loop)"), `"Thread-2 (_pin_memory_loop)"`},
		{"pt_nccl_watchdg", PyStack{State: PyNative}, `"pt_nccl_watchdg"`},
		{"python3", PyStack{State: PyUnavailable}, ``},
		{"", PyStack{}, ``},
		// The threading name unread (the GIL was released): the function
		// threading started the thread in, or the main program.
		{"python3", PyStack{State: PyFrames, Frames: []PyFrame{
			{File: "/usr/lib/python3.12/site-packages/torch/cuda/__init__.py", Line: 1162, Function: "synchronize"},
			{File: "/w/train.py", Line: 36, Function: "log_metrics"},
			{File: "/usr/lib/python3.12/threading.py", Line: 1010, Function: "run"},
			{File: "/usr/lib/python3.12/threading.py", Line: 1073, Function: "_bootstrap_inner"},
			{File: "/usr/lib/python3.12/threading.py", Line: 1030, Function: "_bootstrap"}}}, `(started in log_metrics)`},
		{"python3", PyStack{State: PyFrames, Frames: []PyFrame{
			{File: "/w/train.py", Line: 26, Function: "<module>"}}}, `(the main thread)`},
		{"python3", PyStack{State: PyFrames, Omitted: 3, Frames: []PyFrame{
			{File: "/w/train.py", Line: 36, Function: "log_metrics"}}}, ``},
		{"python3", PyStack{State: PyFrames, Frames: []PyFrame{
			{File: "/w/train.py", Line: 36, Function: "log_metrics"}}}, ``},
	}
	for _, c := range cases {
		if got := ThreadNames(r, 7, c.os, c.py); got != c.want {
			t.Errorf("%q %+v: %s, want %s", c.os, c.py, got, c.want)
		}
	}
	if got := threadLabel(r, 7, 533, "pt_nccl_watchdg", PyStack{State: PyNative}); got != `native thread 533 "pt_nccl_watchdg"` {
		t.Errorf("a native thread of a Python program: %s", got)
	}
	c := &Result{Processes: []*Process{{PID: 8, Exe: "/opt/prog"}}}
	if got := threadLabel(c, 8, 9, "prog", PyStack{State: PyNative}); got != "thread 9" {
		t.Errorf("a thread of a C program: %s", got)
	}
}

// TestNamesInTheUsersWords: a call and a capture read by the program's
// Python line and the thread's name where the trace has them, by the
// runtime call and its callers outside the runtime otherwise.
func TestNamesInTheUsersWords(t *testing.T) {
	r := &Result{Program: "python3", Processes: []*Process{{PID: 7, Exe: "/usr/bin/python3.12", MainThreadName: "python3", Python: true}}}
	cudart := Frame{Module: "/x/libcudart.so.13", Symbol: "cudaDeviceSynchronize"}
	c10 := Frame{Module: "/x/libc10_cuda.so", Symbol: "c10::cuda::device_synchronize"}
	scalar := Frame{Module: "/x/libtorch_cuda.so", Symbol: "at::native::_local_scalar_dense_cuda"}
	user := PyFrame{File: program, Line: 42, Function: "log_metrics"}
	sync := PyFrame{File: site + "torch/cuda/__init__.py", Line: 1162, Function: "synchronize"}
	cases := []struct {
		name string
		call Call
		want string
	}{
		{"a Python call", Call{PID: 7, TID: 561, Name: "cuCtxSynchronize_v2", ThreadName: "python3", Callers: []Frame{cudart, c10},
			Python: pyStack("metrics", sync, user)},
			`torch.cuda.synchronize() at train.py:42 in log_metrics, thread 561 "metrics" (cuCtxSynchronize)`},
		{"a line that called native code", Call{PID: 7, TID: 485, Name: "cuStreamSynchronize", Callers: []Frame{{Module: "/x/libcudart.so.13", Symbol: "cudaStreamSynchronize"}, scalar},
			Python: pyStack("MainThread", PyFrame{File: "/t/test_cuda.py", Line: 123, Function: "TestCuda.test_item"})},
			`cuStreamSynchronize at test_cuda.py:123 in TestCuda.test_item, thread 485 "MainThread" (cudaStreamSynchronize ← at::native::_local_scalar_dense_cuda)`},
		{"a native thread", Call{PID: 7, TID: 533, Name: "cuEventQuery", ThreadName: "pt_nccl_watchdg", Python: PyStack{State: PyNative},
			Callers: []Frame{{Module: "/x/libcudart.so.13", Symbol: "cudaEventQuery"}, {Module: "/x/libtorch_cuda.so", Symbol: "c10d::ProcessGroupNCCL::WorkNCCL::isCompleted"}}},
			`cuEventQuery from native thread 533 "pt_nccl_watchdg" (cudaEventQuery ← c10d::ProcessGroupNCCL::WorkNCCL::isCompleted)`},
		{"frames that could not be read", Call{PID: 7, TID: 561, Name: "cuCtxSynchronize", ThreadName: "python3", Callers: []Frame{cudart, c10},
			Python: PyStack{State: PyUnavailable, Why: "GIL held by another thread"}},
			`cuCtxSynchronize from thread 561 (cudaDeviceSynchronize ← c10::cuda::device_synchronize)`},
		{"no callers", Call{PID: 7, TID: 561, Name: "cuCtxSynchronize"}, `cuCtxSynchronize from thread 561`},
	}
	for _, c := range cases {
		call := c.call
		if got := CallName(r, &call); got != c.want {
			t.Errorf("%s:\n got %s\nwant %s", c.name, got, c.want)
		}
	}
	cp := &Capture{PID: 7, TID: 485, Stream: 0xa, Mode: global, BeginThreadName: "python3",
		BeginPython: pyStack("MainThread", PyFrame{File: site + "torch/cuda/graphs.py", Line: 72, Function: "CUDAGraph.capture_begin"},
			PyFrame{File: program, Line: 30, Function: "capture_step"})}
	if got := CaptureName(r, cp); got != `the global-mode capture begun at train.py:30 in capture_step by thread 485 "MainThread" on stream 0xa` {
		t.Errorf("capture: %s", got)
	}
	if got := CaptureName(&Result{}, &Capture{TID: 5, Stream: 0xb, Mode: relaxed}); got != "the relaxed-mode capture begun by thread 5 on stream 0xb" {
		t.Errorf("capture without names: %s", got)
	}
	if !strings.Contains(CaptureName(&Result{Processes: []*Process{{PID: 1}, {PID: 2}}}, &Capture{PID: 2, TID: 5, Stream: 0xb, API: hip.DialectHIP}), "thread 5 of process 2 on stream 0xb") {
		t.Errorf("several processes: the process is not named")
	}
}
