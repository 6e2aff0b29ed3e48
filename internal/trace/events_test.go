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
		{"MT1\tfork\t11\t11\t6\t10\t/usr/bin/python3",
			Event{Kind: "fork", PID: 11, TID: 11, Time: 6, PPID: 10, Exe: "/usr/bin/python3"}},
		{"MT1\tnote\t10\t12\t7\tcupti\terror\tlibcupti could not be loaded; tried libcupti.so.13; ",
			Event{Kind: "note", PID: 10, TID: 12, Time: 7, Topic: "cupti", Status: "error", Text: "libcupti could not be loaded; tried libcupti.so.13; "}},
		{"MT1\tdevice\t10\t485\t99\tcuda\t1\tNVIDIA H200\tsm_90\t132",
			Event{Kind: "device", PID: 10, TID: 485, Time: 99, API: hip.DialectCUDA, Device: 1, DeviceName: "NVIDIA H200", Arch: "sm_90", ComputeUnits: 132}},
		{"MT1\tdevice\t10\t485\t99\thip\t0\t\t\t0",
			Event{Kind: "device", PID: 10, TID: 485, Time: 99, API: hip.DialectHIP}},
		{"MT1\tbegin\t10\t485\t100\tcuda\tcuStreamBeginCapture_v2\t0x356a1150\t0\t0\t1\t/x/libtorch.so\t_ZN2at4cuda9CUDAGraph13capture_beginEv\t0x1a2b",
			Event{Kind: "begin", PID: 10, TID: 485, Time: 100, API: hip.DialectCUDA, Name: "cuStreamBeginCapture_v2",
				Stream: 0x356a1150, Mode: hip.CaptureModeGlobal, Device: 1,
				Callers: []RawFrame{{Module: "/x/libtorch.so", Symbol: "_ZN2at4cuda9CUDAGraph13capture_beginEv", Offset: 0x1a2b}}}},
		{"MT1\tbegin\t10\t485\t100\thip\thipStreamBeginCapture\t0x10\t2\t0\t-1",
			Event{Kind: "begin", PID: 10, TID: 485, Time: 100, API: hip.DialectHIP, Name: "hipStreamBeginCapture",
				Stream: 0x10, Mode: hip.CaptureModeRelaxed, Device: -1}},
		{"MT1\tend\t10\t485\t300\thip\thipStreamEndCapture\t0x10\t901\t/p\t\t0x5\t+7",
			Event{Kind: "end", PID: 10, TID: 485, Time: 300, API: hip.DialectHIP, Name: "hipStreamEndCapture",
				Stream: 0x10, Result: 901, Callers: []RawFrame{{Module: "/p", Offset: 5}}, Omitted: 7}},
		{"MT1\tcall\t10\t512\t200\tcuda\tcuCtxSynchronize_v2\t0x0\t0x0\t900\t2\t?\t\t0x7f00\t+3",
			Event{Kind: "call", PID: 10, TID: 512, Time: 200, API: hip.DialectCUDA, Name: "cuCtxSynchronize_v2",
				Result: 900, Mode: hip.CaptureModeRelaxed, Callers: []RawFrame{{Module: "?", Offset: 0x7f00}}, Omitted: 3}},
		{"MT1\tcall\t1\t2\t3\thip\thipEventQuery\t0x0\t0xabc\t0\t1",
			Event{Kind: "call", PID: 1, TID: 2, Time: 3, API: hip.DialectHIP, Name: "hipEventQuery", Event: 0xabc,
				Mode: hip.CaptureModeThreadLocal}},
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
		{"MT1\tcall\t1\t1\t1\tcuda\tx\tzz\t0x0\t0\t0", "hexadecimal"},
		{"MT1\tcall\t1\t1\t1\tcuda\tx\t0x1\t0x0\t0\t0\t/lib\tsym", "triples"},
		{"MT1\tcall\t1\t1\t1\tcuda\tx\t0x1\t0x0\t0\t7", "mode 7"},
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
