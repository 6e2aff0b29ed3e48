package rules_test

import (
	"bytes"
	"context"
	"encoding/binary"
	"errors"
	"strings"
	"testing"
	"time"

	"miotool/internal/hip"
	"miotool/internal/rules"
)

// The call each action must make, and on what.
var wantCall = map[rules.Action]struct{ op, target string }{
	rules.QueryCapturingStream:  {"StreamQuery", "A"},
	rules.SyncCapturingStream:   {"StreamSynchronize", "A"},
	rules.QueryOtherStream:      {"StreamQuery", "B"},
	rules.SyncOtherStream:       {"StreamSynchronize", "B"},
	rules.QueryCapturedEvent:    {"EventQuery", "evA"},
	rules.SyncCapturedEvent:     {"EventSynchronize", "evA"},
	rules.QueryUncapturedEvent:  {"EventQuery", "evB"},
	rules.SyncUncapturedEvent:   {"EventSynchronize", "evB"},
	rules.Malloc:                {"Malloc", ""},
	rules.Free:                  {"MemFree", ""},
	rules.SyncMemset:            {"MemsetD8", ""},
	rules.SyncMemcpy:            {"MemcpyHtoD", ""},
	rules.DeviceSync:            {"DeviceSynchronize", ""},
	rules.EndCaptureOtherThread: {"StreamEndCapture", "A"},
	rules.HostAlloc:             {"HostAlloc", ""},
	rules.HostFree:              {"HostFree", ""},
	rules.HostRegister:          {"HostRegister", ""},
	rules.HostUnregister:        {"HostUnregister", ""},
	rules.ModuleUnload:          {"ModuleUnload", ""},
	rules.LegacyStreamLaunch:    {"LaunchKernel", "legacy"},

	rules.LegacyStreamLaunchBlockingCapture: {"LaunchKernel", "legacy"},
}

func probe(t *testing.T, d hip.Device, opts rules.Options) *rules.Measurement {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	m, err := rules.Probe(ctx, d, opts)
	if err != nil {
		t.Fatal(err)
	}
	return m
}

// Each cell makes its one call, on the capturing thread or on another OS
// thread, in the interaction mode the cell names, and leaves no thread in a
// switched mode and nothing allocated behind.
func TestProbeMakesEachCallOnTheRightThreadInTheRightMode(t *testing.T) {
	f := newFake()
	for _, key := range rules.Matrix() {
		f.reset()
		m := probe(t, f, rules.Options{Spin: time.Hour, Cells: []rules.CellKey{key}})
		calls := f.calls()
		if len(calls) == 0 {
			t.Fatalf("%s: no call during the capture", key)
		}
		got, want := calls[0], wantCall[key.Action]
		if got.op != want.op || got.target != want.target {
			t.Errorf("%s: first call during the capture is %s(%s), want %s(%s)", key, got.op, got.target, want.op, want.target)
		}
		if onCapturing := got.tid == f.beginTid; onCapturing == key.Other {
			t.Errorf("%s: call made on thread %d, capture begun on %d", key, got.tid, f.beginTid)
		}
		if got.mode != key.Mode {
			t.Errorf("%s: acting thread's mode was %s", key, got.mode)
		}
		wantFlags := hip.StreamNonBlocking
		if key.Action == rules.LegacyStreamLaunchBlockingCapture {
			wantFlags = 0
		}
		if flags := f.captureFlags(); flags != wantFlags {
			t.Errorf("%s: A was created with flags %#x, want %#x", key, flags, wantFlags)
		}
		o := m.Outcomes[0]
		if !o.Valid() || o.Returns != hip.Success || o.Attempts != 1 {
			t.Errorf("%s: outcome %+v", key, o)
		}
		wantEnd := hip.Success
		if key.Action == rules.EndCaptureOtherThread {
			wantEnd = hip.ErrIllegalState // the fake ended the capture on the other thread
		}
		if o.End != wantEnd {
			t.Errorf("%s: end = %d, want %d", key, o.End, wantEnd)
		}
	}
	if left := f.nonGlobalThreads(); len(left) > 0 {
		t.Errorf("threads left in a switched mode: %v", left)
	}
	if left := f.leaked(); len(left) > 0 {
		t.Errorf("not released: %v", left)
	}
}

// expectationFromFake writes a clean run as an expectation file and reads
// it back, so the comparison uses the file format end to end.
func expectationFromFake(t *testing.T) *rules.Expectation {
	t.Helper()
	m := probe(t, newFake(), rules.Options{Spin: time.Hour})
	var buf bytes.Buffer
	if err := rules.WriteExpectation(&buf, rules.FromMeasurement(m, "a clean fake run")); err != nil {
		t.Fatal(err)
	}
	e, err := rules.ParseExpectation("fake.yaml", buf.Bytes())
	if err != nil {
		t.Fatalf("%v\n%s", err, buf.String())
	}
	if len(e.Cells) != len(rules.Matrix()) {
		t.Fatalf("round trip kept %d of %d cells", len(e.Cells), len(rules.Matrix()))
	}
	return e
}

func TestMismatchIsFoundNamingTheCell(t *testing.T) {
	exp := expectationFromFake(t)
	f := newFake()
	// A device where malloc from another, default-mode thread is refused.
	f.refuse = func(c call, beginTid int) hip.Code {
		if c.op == "Malloc" && c.tid != beginTid && c.mode == hip.CaptureModeGlobal {
			return hip.ErrStreamCaptureUnsupported
		}
		return hip.Success
	}
	m := probe(t, f, rules.Options{Spin: time.Hour})
	cmp := rules.Compare(m, exp)

	want := []string{"malloc/global/other/global", "malloc/thread-local/other/global", "malloc/relaxed/other/global"}
	var got []string
	for _, x := range cmp.Differences {
		got = append(got, x.Key.String())
		if !strings.Contains(x.Describe(m.Dialect), "returned 900 STREAM_CAPTURE_UNSUPPORTED") {
			t.Errorf("%s: %s", x.Key, x.Describe(m.Dialect))
		}
	}
	if strings.Join(got, " ") != strings.Join(want, " ") {
		t.Fatalf("differing cells %v, want %v", got, want)
	}
	if cmp.Compared != len(rules.Matrix()) || len(cmp.Missing) != 0 {
		t.Errorf("compared %d, %d missing", cmp.Compared, len(cmp.Missing))
	}
}

func TestMatchingRunMatches(t *testing.T) {
	exp := expectationFromFake(t)
	m := probe(t, newFake(), rules.Options{Spin: time.Hour})
	cmp := rules.Compare(m, exp)
	if len(cmp.Differences) != 0 || cmp.Compared != len(rules.Matrix()) {
		t.Fatalf("%d differences, compared %d", len(cmp.Differences), cmp.Compared)
	}
}

func TestSetupFailureIsRecorded(t *testing.T) {
	f := newFake()
	f.failStreamCreate = true
	cells := rules.Matrix()[:2]
	m := probe(t, f, rules.Options{Spin: time.Hour, Cells: cells})
	for _, o := range m.Outcomes {
		if o.SetupErr == nil || !strings.Contains(o.SetupErr.Error(), "creating stream B") {
			t.Errorf("%s: setup error %v", o.Key, o.SetupErr)
		}
	}
	if len(m.Outcomes) != 2 {
		t.Errorf("%d outcomes, want 2", len(m.Outcomes))
	}
}

func TestHungCallStopsTheProbe(t *testing.T) {
	f := newFake()
	gate := make(chan struct{})
	f.block = gate
	t.Cleanup(func() { close(gate) })
	key := rules.CellKey{Action: rules.DeviceSync, Capture: hip.CaptureModeGlobal}
	_, err := rules.Probe(context.Background(), f, rules.Options{Spin: time.Millisecond, Cells: []rules.CellKey{key}, CellTimeout: 200 * time.Millisecond})
	if err == nil || !strings.Contains(err.Error(), key.String()) || !strings.Contains(err.Error(), "did not finish") {
		t.Fatalf("err = %v, want a timeout naming %s", err, key)
	}
}

func TestCancelStopsTheProbe(t *testing.T) {
	ctx, cancel := context.WithCancel(context.Background())
	cancel()
	m, err := rules.Probe(ctx, newFake(), rules.Options{Spin: time.Hour})
	if !errors.Is(err, context.Canceled) || len(m.Outcomes) != 0 {
		t.Fatalf("err = %v, %d outcomes", err, len(m.Outcomes))
	}
}

// A query of B is only meaningful while B still runs. The fake runs no
// kernels, so with a 1 ns spin every query of B comes too late: the cell is
// retried with the spin doubled, then reported as not timed.
func TestLateCellsAreRetriedThenReported(t *testing.T) {
	late := rules.CellKey{Action: rules.QueryOtherStream, Capture: hip.CaptureModeGlobal, Other: true}
	insensitive := rules.CellKey{Action: rules.Malloc, Capture: hip.CaptureModeGlobal, Other: true}
	m := probe(t, newFake(), rules.Options{Spin: time.Nanosecond, Retries: 2, Cells: []rules.CellKey{late, insensitive}})
	o := m.Outcomes[0]
	if !o.Late || o.Attempts != 3 || o.Spin != 4*time.Nanosecond {
		t.Errorf("query of B: late %v after %d attempts with spin %v; want late after 3 with 4ns", o.Late, o.Attempts, o.Spin)
	}
	if o2 := m.Outcomes[1]; o2.Late || o2.Attempts != 1 {
		t.Errorf("malloc: late %v, %d attempts", o2.Late, o2.Attempts)
	}
}

func TestMatrixKeysAreUniqueAndRoundTrip(t *testing.T) {
	keys := rules.Matrix()
	// 20 actions x 3 capture modes x 2 threads x 3 acting modes, plus the
	// wrong-thread end (other thread only) x 3 x 3.
	if len(keys) != 20*3*2*3+3*3 {
		t.Fatalf("matrix has %d cells", len(keys))
	}
	seen := map[rules.CellKey]bool{}
	for _, k := range keys {
		if seen[k] {
			t.Errorf("duplicate cell %s", k)
		}
		seen[k] = true
		back, err := rules.ParseCellKey(k.String())
		if err != nil || back != k {
			t.Errorf("ParseCellKey(%q) = %v, %v", k.String(), back, err)
		}
	}
	for _, bad := range []string{"malloc/global/same", "bogus/global/same/global", "malloc/sometimes/same/global", "malloc/global/third/global", "end-capture-other-thread/global/same/global"} {
		if _, err := rules.ParseCellKey(bad); err == nil {
			t.Errorf("ParseCellKey(%q) accepted", bad)
		}
	}
}

func TestLabelsFollowTheDialect(t *testing.T) {
	cases := []struct {
		a          rules.Action
		cuda, hipN string
	}{
		{rules.QueryOtherStream, "cuStreamQuery(B)", "hipStreamQuery(B)"},
		{rules.Free, "cuMemFree(p)", "hipFree(p)"},
		{rules.DeviceSync, "cuCtxSynchronize", "hipDeviceSynchronize"},
		{rules.SyncCapturedEvent, "cuEventSynchronize(evA)", "hipEventSynchronize(evA)"},
		{rules.HostAlloc, "cuMemHostAlloc", "hipHostMalloc"},
		{rules.HostFree, "cuMemFreeHost(h)", "hipHostFree(h)"},
		{rules.HostRegister, "cuMemHostRegister(m)", "hipHostRegister(m)"},
		{rules.HostUnregister, "cuMemHostUnregister(m)", "hipHostUnregister(m)"},
		{rules.ModuleUnload, "cuModuleUnload(mod)", "hipModuleUnload(mod)"},
		{rules.LegacyStreamLaunch, "cuLaunchKernel(legacy)", "hipModuleLaunchKernel(legacy)"},
		{rules.LegacyStreamLaunchBlockingCapture, "cuLaunchKernel(legacy), A blocking", "hipModuleLaunchKernel(legacy), A blocking"},
	}
	for _, tc := range cases {
		if got := tc.a.Label(hip.DialectCUDA); got != tc.cuda {
			t.Errorf("%s cuda label %q", tc.a, got)
		}
		if got := tc.a.Label(hip.DialectHIP); got != tc.hipN {
			t.Errorf("%s hip label %q", tc.a, got)
		}
	}
	k := rules.CellKey{Action: rules.Malloc, Capture: hip.CaptureModeThreadLocal, Other: true, Mode: hip.CaptureModeRelaxed}
	if got := k.ThreadLabel(); got != "other, relaxed{}" {
		t.Errorf("thread label %q", got)
	}
}

func TestKernelSourceAndTwins(t *testing.T) {
	src := rules.Kernels()
	for _, name := range src.Kernels {
		if !strings.Contains(src.Text, `extern "C" __global__ void `+name+"(") {
			t.Errorf("source lacks extern \"C\" entry point %s", name)
		}
		if src.Twins[name] == nil {
			t.Errorf("no Go twin for %s", name)
		}
	}
	for _, want := range []string{"%globaltimer", "wall_clock64()", "#if defined(__HIP_PLATFORM_AMD__) || defined(__HIPCC_RTC__)"} {
		if !strings.Contains(src.Text, want) {
			t.Errorf("source lacks %q", want)
		}
	}
	if strings.Contains(src.Text, "#include") {
		t.Error("source includes a header")
	}

	mem := &fakeMemory{buf: make([]byte, 8)}
	if err := src.Twins[rules.TinyKernel](mem, hip.D1(1), hip.D1(1), []hip.KernelArg{hip.DevPtr(0), uint32(7)}); err != nil {
		t.Fatal(err)
	}
	if got := binary.LittleEndian.Uint32(mem.buf); got != 7 {
		t.Errorf("tiny twin stored %d, want 7", got)
	}
	if err := src.Twins[rules.SpinKernel](mem, hip.D1(1), hip.D1(1), []hip.KernelArg{uint64(1000)}); err != nil {
		t.Errorf("spin twin: %v", err)
	}
	if err := src.Twins[rules.SpinKernel](mem, hip.D1(1), hip.D1(1), []hip.KernelArg{int32(5)}); err == nil {
		t.Error("spin twin accepted an int32")
	}
	if err := src.Twins[rules.TinyKernel](mem, hip.D1(1), hip.D1(1), []hip.KernelArg{uint32(1)}); err == nil {
		t.Error("tiny twin accepted one argument")
	}
}

type fakeMemory struct{ buf []byte }

func (m *fakeMemory) Bytes(p hip.DevPtr, n int) ([]byte, error) {
	if int(p)+n > len(m.buf) {
		return nil, errors.New("out of range")
	}
	return m.buf[int(p) : int(p)+n], nil
}

func (m *fakeMemory) Float32s(hip.DevPtr, int) ([]float32, error) { return nil, errors.New("unused") }
