package trace

import (
	"reflect"
	"strings"
	"testing"

	"miotool/internal/hip"
)

func TestParseEvent(t *testing.T) {
	cases := []struct {
		line string
		want Event
	}{
		{"MT1\thello\t10\t10\t5\t1\t/usr/bin/python3\n",
			Event{Kind: "hello", PID: 10, TID: 10, Time: 5, PPID: 1, Exe: "/usr/bin/python3"}},
		{"MT1\thello\t10\t10\t5\t1\t/usr/bin/python3\tmiotool-observer wire=2 source=abc\n",
			Event{Kind: "hello", PID: 10, TID: 10, Time: 5, PPID: 1, Exe: "/usr/bin/python3", Observer: "miotool-observer wire=2 source=abc"}},
		{"MT1\tfork\t11\t11\t6\t10\t/usr/bin/python3",
			Event{Kind: "fork", PID: 11, TID: 11, Time: 6, PPID: 10, Exe: "/usr/bin/python3"}},
		{"MT1\tnote\t10\t12\t7\tcupti\terror\tlibcupti could not be loaded; tried libcupti.so.13; ",
			Event{Kind: "note", PID: 10, TID: 12, Time: 7, Topic: "cupti", Status: "error", Text: "libcupti could not be loaded; tried libcupti.so.13; "}},
		{"MT1\tdevice\t10\t485\t99\tcuda\t1\tNVIDIA H200\tsm_90\t132",
			Event{Kind: "device", PID: 10, TID: 485, Time: 99, API: hip.DialectCUDA, Device: 1, DeviceName: "NVIDIA H200", Arch: "sm_90", ComputeUnits: 132}},
		{"MT1\tdevice\t10\t485\t99\thip\t0\t\t\t0",
			Event{Kind: "device", PID: 10, TID: 485, Time: 99, API: hip.DialectHIP}},
		{"MT1\tbegin\t10\t485\t100\tcuda\tcuStreamBeginCapture_v2\t0x356a1150\t0\t0\t1\tt\tpt_main\tc\t/x/libtorch.so\t_ZN2at4cuda9CUDAGraph13capture_beginEv\t0x1a2b",
			Event{Kind: "begin", PID: 10, TID: 485, Time: 100, API: hip.DialectCUDA, Name: "cuStreamBeginCapture_v2",
				Stream: 0x356a1150, Mode: hip.CaptureModeGlobal, Device: 1, ThreadName: "pt_main",
				Callers: []RawFrame{{Module: "/x/libtorch.so", Symbol: "_ZN2at4cuda9CUDAGraph13capture_beginEv", Offset: 0x1a2b}}}},
		{"MT1\tbegin\t10\t485\t100\thip\thipStreamBeginCapture\t0x10\t2\t0\t-1",
			Event{Kind: "begin", PID: 10, TID: 485, Time: 100, API: hip.DialectHIP, Name: "hipStreamBeginCapture",
				Stream: 0x10, Mode: hip.CaptureModeRelaxed, Device: -1}},
		{"MT1\tend\t10\t485\t300\thip\thipStreamEndCapture\t0x10\t901\t0x0\t-1\tt\tx\tc\t/p\t\t0x5\t+7",
			Event{Kind: "end", PID: 10, TID: 485, Time: 300, API: hip.DialectHIP, Name: "hipStreamEndCapture", ThreadName: "x",
				Stream: 0x10, Result: 901, Nodes: -1, Callers: []RawFrame{{Module: "/p", Offset: 5}}, Omitted: 7}},
		{"MT1\tend\t10\t485\t300\tcuda\tcuStreamEndCapture\t0x10\t0\t0xbeef\t0",
			Event{Kind: "end", PID: 10, TID: 485, Time: 300, API: hip.DialectCUDA, Name: "cuStreamEndCapture",
				Stream: 0x10, Graph: 0xbeef, Nodes: 0}},
		{"MT1\tcall\t10\t512\t200\tcuda\tcuCtxSynchronize_v2\t0x0\t0x0\t900\t2\t0\tt\tmetrics\t" +
			"p\tframes\t\tmetrics\t3.12.1\t0002\t0001\t/w/train.py\t42\tlog_metrics\t/w/train.py\t7\t<module>\tc\t?\t\t0x7f00\t+3",
			Event{Kind: "call", PID: 10, TID: 512, Time: 200, API: hip.DialectCUDA, Name: "cuCtxSynchronize_v2",
				Result: 900, Mode: hip.CaptureModeRelaxed, ThreadName: "metrics",
				Python: PyStack{State: PyFrames, ThreadName: "metrics", Version: "3.12.1", Omitted: 1,
					Frames: []PyFrame{{File: "/w/train.py", Line: 42, Function: "log_metrics"}, {File: "/w/train.py", Line: 7, Function: "<module>"}}},
				Callers: []RawFrame{{Module: "?", Offset: 0x7f00}}, Omitted: 3}},
		{"MT1\tcall\t10\t512\t200\tcuda\tcuMemAlloc_v2\t0x0\t0x0\t0\t0\t0\tt\tpt_nccl_watchdg\tp\tnative\t\t\t3.12.1\t0000\t0000\tc",
			Event{Kind: "call", PID: 10, TID: 512, Time: 200, API: hip.DialectCUDA, Name: "cuMemAlloc_v2", ThreadName: "pt_nccl_watchdg",
				Python: PyStack{State: PyNative, Version: "3.12.1"}}},
		{"MT1\tcall\t10\t512\t200\tcuda\tcuStreamQuery\t0x1\t0x0\t900\t0\t0\tt\tpython3\tp\tunavailable\tCPython 3.9: not supported (3.10 to 3.13 are)\t\t3.9.18\t0000\t0000",
			Event{Kind: "call", PID: 10, TID: 512, Time: 200, API: hip.DialectCUDA, Name: "cuStreamQuery", Stream: 1, Result: 900, ThreadName: "python3",
				Python: PyStack{State: PyUnavailable, Why: "CPython 3.9: not supported (3.10 to 3.13 are)", Version: "3.9.18"}}},
		{"MT1\tcall\t1\t2\t3\thip\thipEventQuery\t0x0\t0xabc\t0\t1\t0",
			Event{Kind: "call", PID: 1, TID: 2, Time: 3, API: hip.DialectHIP, Name: "hipEventQuery", Event: 0xabc,
				Mode: hip.CaptureModeThreadLocal}},
		{"MT1\tcall\t1\t2\t3\thip\thipLaunchKernel\t0x20\t0x0\t0\t0\t1",
			Event{Kind: "call", PID: 1, TID: 2, Time: 3, API: hip.DialectHIP, Name: "hipLaunchKernel", Stream: 0x20, Outside: true}},
		{"MT1\tgraph\t1\t2\t3\tcuda\tcuGraphInstantiateWithFlags\t0x10\t0x20\t0x0\t0\t3",
			Event{Kind: "graph", PID: 1, TID: 2, Time: 3, API: hip.DialectCUDA, Name: "cuGraphInstantiateWithFlags", Graph: 0x10, Exec: 0x20, Nodes: 3}},
		{"MT1\tgraph\t1\t2\t3\thip\thipGraphLaunch\t0x0\t0x20\t0x30\t0\t-1",
			Event{Kind: "graph", PID: 1, TID: 2, Time: 3, API: hip.DialectHIP, Name: "hipGraphLaunch", Exec: 0x20, Stream: 0x30, Nodes: -1}},
		{"MT1\tcrash\t1\t2\t3\t11\t1\t0x0\trun-7\tt\tworker\tp\tframes\t\t\t3.11.7\t0001\t0000\t/w/c.py\t9\texplode\tc\t/lib/libc.so.6\t\t0x3c050",
			Event{Kind: "crash", PID: 1, TID: 2, Time: 3, Signal: 11, SignalCode: 1, Run: "run-7", ThreadName: "worker",
				Python:  PyStack{State: PyFrames, Version: "3.11.7", Frames: []PyFrame{{File: "/w/c.py", Line: 9, Function: "explode"}}},
				Callers: []RawFrame{{Module: "/lib/libc.so.6", Offset: 0x3c050}}}},
		{"MT1\tcrash\t1\t2\t3\t6\t-6\t0x0\t\tt\t\tc",
			Event{Kind: "crash", PID: 1, TID: 2, Time: 3, Signal: 6, SignalCode: -6}},
		// Records an earlier observer saved: callers untagged, no graph,
		// node count or outside field.
		{"MT1\tbegin\t1\t2\t3\tcuda\tcuStreamBeginCapture_v2\t0x5\t0\t0\t0\t/w/step\tcapture_step\t0x41c2",
			Event{Kind: "begin", PID: 1, TID: 2, Time: 3, API: hip.DialectCUDA, Name: "cuStreamBeginCapture_v2", Stream: 5,
				Callers: []RawFrame{{Module: "/w/step", Symbol: "capture_step", Offset: 0x41c2}}}},
		{"MT1\tend\t1\t2\t3\thip\thipStreamEndCapture\t0x5\t901",
			Event{Kind: "end", PID: 1, TID: 2, Time: 3, API: hip.DialectHIP, Name: "hipStreamEndCapture", Stream: 5, Result: 901, Nodes: -1}},
		{"MT1\tend\t1\t2\t3\thip\thipStreamEndCapture\t0x5\t0\t/w/step\t\t0x10",
			Event{Kind: "end", PID: 1, TID: 2, Time: 3, API: hip.DialectHIP, Name: "hipStreamEndCapture", Stream: 5, Nodes: -1,
				Callers: []RawFrame{{Module: "/w/step", Offset: 0x10}}}},
		{"MT1\tcall\t1\t2\t3\thip\thipStreamQuery\t0x5\t0x0\t900\t0\t?\t\t0x7f00\t+2",
			Event{Kind: "call", PID: 1, TID: 2, Time: 3, API: hip.DialectHIP, Name: "hipStreamQuery", Stream: 5, Result: 900,
				Callers: []RawFrame{{Module: "?", Offset: 0x7f00}}, Omitted: 2}},
		{"MT1\tcall\t1\t2\t3\tcuda\tcuLaunchKernel\t0x5\t0x0\t0\t0",
			Event{Kind: "call", PID: 1, TID: 2, Time: 3, API: hip.DialectCUDA, Name: "cuLaunchKernel", Stream: 5}},
		{"MT1\tgone\t1\t2\t3\tcuda\t0x99", Event{Kind: "gone", PID: 1, TID: 2, Time: 3, API: hip.DialectCUDA, Stream: 0x99}},
		{"MT1\teof\t0\t0\t0\tabc", Event{Kind: "eof", Text: "abc"}},
	}
	for _, c := range cases {
		got, err := ParseEvent([]byte(c.line))
		if err != nil {
			t.Errorf("%q: %v", c.line, err)
			continue
		}
		if !reflect.DeepEqual(got, c.want) {
			t.Errorf("%q:\n got %+v\nwant %+v", c.line, got, c.want)
		}
	}
}

func TestParseEventRejects(t *testing.T) {
	cases := []struct{ line, want string }{
		{"hello world", "not an observer record"},
		{"MT2\thello\t1\t1\t1\t0\tx", "not an observer record"},
		{"MT1\tbegin\t1\t1\tsoon\tcuda\tx\t0x1\t0\t0", "time"},
		{"MT1\tbegin\t1\t1\t1\tcuda\tx\t0x1\t0\t0", "want at least"},
		{"MT1\tbegin\t1\t1\t1\topencl\tx\t0x1\t0\t0\t0", "runtime \"opencl\""},
		{"MT1\tbegin\t1\t1\t1\tcuda\tx\t0x1\t0\t0\tgpu0", "want a number"},
		{"MT1\tdevice\t1\t1\t1\tcuda\t0\tH200\tsm_90", "want at least"},
		{"MT1\tcall\t1\t1\t1\tcuda\tx\tzz\t0x0\t0\t0\t0", "hexadecimal"},
		{"MT1\tcall\t1\t1\t1\tcuda\tx\t0x1\t0x0\t0\t0\t0\tc\t/lib\tsym", "triples"},
		{"MT1\tcall\t1\t1\t1\tcuda\tx\t0x1\t0x0\t0\t7\t0", "mode 7"},
		{"MT1\tcall\t1\t1\t1\tcuda\tx\t0x1\t0x0\t0\t0\t2", "want 0 or 1"},
		{"MT1\tcall\t1\t1\t1\tcuda\tx\t0x1\t0x0\t0\t0\t0\tx\tsym\t0x1", "where a section (t, p or c) begins"},
		{"MT1\tcall\t1\t1\t1\tcuda\tx\t0x1\t0x0\t0\t0\t0\tc\t/a\t\t0x1\tt\tname", "triples"},
		{"MT1\tcall\t1\t1\t1\tcuda\tx\t0x1\t0x0\t0\t0\t0\tp\tframes\t\t\t3.12.1\t0000\t0000\tt\tname", "out of order"},
		{"MT1\tcall\t1\t1\t1\tcuda\tx\t0x1\t0x0\t0\t0\t0\tt\tn\tp\tasleep\t\t\t3.12.1\t0000\t0000", "Python state \"asleep\""},
		{"MT1\tcall\t1\t1\t1\tcuda\tx\t0x1\t0x0\t0\t0\t0\tp\tframes\t\t\t3.12.1\t0002\t0000\t/a.py\t1\tf", "2 Python frames announced, 3 fields follow"},
		{"MT1\tcall\t1\t1\t1\tcuda\tx\t0x1\t0x0\t0\t0\t0\tp\tframes", "Python section of 2 fields"},
		{"MT1\tgraph\t1\t1\t1\tcuda\tcuGraphLaunch\t0x1\t0x2\t0x3\t0", "want at least"},
		{"MT1\tcrash\t1\t1\t1\tSEGV\t1\t0x0\trun", "want a number"},
		{"MT1\tlaunch\t1\t1\t1", "unknown record kind"},
	}
	for _, c := range cases {
		if _, err := ParseEvent([]byte(c.line)); err == nil || !strings.Contains(err.Error(), c.want) {
			t.Errorf("%q: %v, want an error with %q", c.line, err, c.want)
		}
	}
}

func TestBaseName(t *testing.T) {
	for raw, want := range map[string]string{
		"cuCtxSynchronize_v2":       "cuCtxSynchronize",
		"cuMemcpyHtoDAsync_v2_ptsz": "cuMemcpyHtoDAsync",
		"cuMemcpy_ptds":             "cuMemcpy",
		"cuStreamQuery":             "cuStreamQuery",
		"cuGetProcAddress_v2":       "cuGetProcAddress",
		"hipStreamQuery":            "hipStreamQuery",
		"_v2":                       "_v2",
	} {
		if got := BaseName(raw); got != want {
			t.Errorf("BaseName(%q) = %q, want %q", raw, got, want)
		}
	}
}
