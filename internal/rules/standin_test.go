package rules_test

import (
	"bufio"
	"bytes"
	"context"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
	"time"

	"miotool/internal/hip"
	"miotool/internal/rules"
)

// The trace tests' stand-in runtimes (internal/trace/testdata/standin)
// keep their own C copy of the capture rules: capture_rules.h and the
// checks in libcuda.c and libamdhip64.c. TestTraceStandInsFollowTheRulesTables
// holds them to configs/rules: it builds each stand-in as the trace tests
// do, runs the matrix against it (testdata/standin_matrix.c, the probe's
// set-up in C) and compares every cell the stand-in can be asked with the
// expectation file of its dialect.
//
// A stand-in has no device: a query of the busy stream B answers success
// where the device answers not-ready, so a cell that is not refused matches
// one that is not refused (0 or 600); a refusal must be the same code, and
// the end of the capture the same code too.

// standInFloor are the actions each stand-in must answer: what it answers
// today. A stand-in that loses one fails here rather than checking less.
var standInFloor = map[hip.Dialect][]rules.Action{
	hip.DialectCUDA: {
		rules.QueryCapturingStream, rules.SyncCapturingStream, rules.QueryOtherStream, rules.SyncOtherStream,
		rules.QueryCapturedEvent, rules.SyncCapturedEvent, rules.QueryUncapturedEvent, rules.SyncUncapturedEvent,
		rules.Malloc, rules.Free, rules.SyncMemcpy, rules.DeviceSync, rules.EndCaptureOtherThread, rules.LegacyStreamLaunch,
	},
	hip.DialectHIP: {
		rules.QueryCapturingStream, rules.SyncCapturingStream, rules.QueryOtherStream, rules.SyncOtherStream,
		rules.QueryCapturedEvent, rules.SyncCapturedEvent, rules.QueryUncapturedEvent, rules.SyncUncapturedEvent,
		rules.Malloc, rules.Free, rules.SyncMemset, rules.SyncMemcpy, rules.DeviceSync, rules.EndCaptureOtherThread,
		rules.LegacyStreamLaunch,
	},
}

// standInWarnings are the flags the trace tests build the stand-ins with.
var standInWarnings = []string{"-std=gnu11", "-O0", "-g", "-Wall", "-Wextra", "-Werror"}

func TestTraceStandInsFollowTheRulesTables(t *testing.T) {
	gcc, err := exec.LookPath("gcc")
	if err != nil {
		t.Skip("gcc is not on PATH")
	}
	root := moduleRoot(t)
	standin := filepath.Join(root, "internal", "trace", "testdata", "standin")
	for _, tc := range []struct {
		dialect hip.Dialect
		source  string
		lib     []string // extra link flags
		define  []string // for the matrix program
		rules   string
	}{
		{hip.DialectCUDA, "libcuda.c", []string{"-ldl"}, nil, "configs/rules/h200-cuda.yaml"},
		{hip.DialectHIP, "libamdhip64.c", nil, []string{"-DSTANDIN_HIP"}, "configs/rules/hip.yaml"},
	} {
		t.Run(string(tc.dialect), func(t *testing.T) {
			exp, err := rules.ReadExpectation(filepath.Join(root, tc.rules))
			if err != nil {
				t.Fatal(err)
			}
			out := runStandInMatrix(t, gcc, filepath.Join(standin, tc.source), tc.lib, tc.define)
			cells, unsupported := parseStandInMatrix(t, out)
			for _, a := range standInFloor[tc.dialect] {
				if why, ok := unsupported[a]; ok {
					t.Errorf("the %s stand-in no longer answers %s: %s", tc.dialect, a, why)
				}
			}
			compared := 0
			for _, k := range rules.Matrix() {
				got, measured := cells[k]
				want, expected := exp.Cells[k]
				if !measured || !expected {
					continue
				}
				compared++
				if !sameAnswer(got.Returns, want.Returns) || got.End != want.End {
					t.Errorf("%s stand-in, %s: returned %d, end %d; %s line %d says %d, end %d (%s)",
						tc.dialect, k, int(got.Returns), int(got.End), tc.rules, want.Line, int(want.Returns), int(want.End), want.Basis)
				}
			}
			if compared == 0 {
				t.Fatal("no cell compared")
			}
			t.Logf("%s stand-in: compared %d cells with %s; not asked: %v", tc.dialect, compared, tc.rules, unsupported)
		})
	}
}

// sameAnswer: a refusal is the same code; anything else (success, or a
// query's not-ready) is not a refusal.
func sameAnswer(got, want hip.Code) bool {
	refusal := func(c hip.Code) bool { return c != hip.Success && c != hip.ErrNotReady }
	if refusal(got) || refusal(want) {
		return got == want
	}
	return true
}

// runStandInMatrix builds the stand-in from source as the trace tests do,
// and the matrix program, and returns what the program printed.
func runStandInMatrix(t *testing.T, gcc, source string, lib, define []string) []byte {
	t.Helper()
	dir := t.TempDir()
	observer := filepath.Join(filepath.Dir(filepath.Dir(filepath.Dir(source))), "observer")
	so := filepath.Join(dir, "standin.so")
	prog := filepath.Join(dir, "standin_matrix")
	builds := [][]string{
		append(append(append([]string(nil), standInWarnings...), "-I", observer, "-shared", "-fPIC", "-o", so, source, "-pthread"), lib...),
		append(append(append([]string(nil), standInWarnings...), define...), "-o", prog, "testdata/standin_matrix.c", "-ldl", "-pthread"),
	}
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	for _, args := range builds {
		if out, err := exec.CommandContext(ctx, gcc, args...).CombinedOutput(); err != nil {
			t.Fatalf("gcc %s: %v\n%s", strings.Join(args, " "), err, out)
		}
	}
	var stdout, stderr bytes.Buffer
	cmd := exec.CommandContext(ctx, prog, so)
	cmd.Stdout, cmd.Stderr = &stdout, &stderr
	if err := cmd.Run(); err != nil {
		t.Fatalf("%s %s: %v\n%s", prog, so, err, stderr.String())
	}
	return stdout.Bytes()
}

func parseStandInMatrix(t *testing.T, out []byte) (map[rules.CellKey]rules.Expected, map[rules.Action]string) {
	t.Helper()
	cells := map[rules.CellKey]rules.Expected{}
	unsupported := map[rules.Action]string{}
	sc := bufio.NewScanner(bytes.NewReader(out))
	for sc.Scan() {
		f := strings.Fields(sc.Text())
		switch {
		case len(f) == 7 && f[0] == "cell":
			k, err := rules.ParseCellKey(strings.Join(f[1:5], "/"))
			if err != nil {
				t.Fatalf("line %q: %v", sc.Text(), err)
			}
			ret, err1 := strconv.Atoi(f[5])
			end, err2 := strconv.Atoi(f[6])
			if err1 != nil || err2 != nil {
				t.Fatalf("line %q: codes are not numbers", sc.Text())
			}
			cells[k] = rules.Expected{Returns: hip.Code(ret), End: hip.Code(end)}
		case len(f) >= 3 && f[0] == "unsupported":
			a, err := rules.ParseAction(f[1])
			if err != nil {
				t.Fatalf("line %q: %v", sc.Text(), err)
			}
			unsupported[a] = strings.Join(f[2:], " ")
		default:
			t.Fatalf("unexpected line %q", sc.Text())
		}
	}
	for _, a := range rules.Actions {
		_, skipped := unsupported[a]
		if n := len(rules.CellsFor(a)); !skipped && countAction(cells, a) != n {
			t.Fatalf("the program measured %d cells of %s, want %d", countAction(cells, a), a, n)
		}
	}
	return cells, unsupported
}

func countAction(cells map[rules.CellKey]rules.Expected, a rules.Action) int {
	n := 0
	for k := range cells {
		if k.Action == a {
			n++
		}
	}
	return n
}

// headerRules are the actions each rule function of capture_rules.h stands
// for, by dialect: what a stand-in that calls the function for such a call
// answers.
var headerRules = map[string]map[hip.Dialect][]rules.Action{
	"unsafe_call": {
		hip.DialectCUDA: {rules.QueryOtherStream, rules.SyncOtherStream, rules.QueryUncapturedEvent, rules.SyncUncapturedEvent, rules.Malloc, rules.Free},
		hip.DialectHIP:  {rules.QueryOtherStream, rules.SyncOtherStream, rules.QueryUncapturedEvent, rules.SyncUncapturedEvent, rules.Malloc, rules.Free},
	},
	"host_memory_call": {
		hip.DialectCUDA: {rules.HostAlloc, rules.HostFree, rules.HostRegister, rules.HostUnregister},
		hip.DialectHIP:  {rules.HostAlloc, rules.HostFree, rules.HostRegister, rules.HostUnregister},
	},
	"cuda_module_unload": {hip.DialectCUDA: {rules.ModuleUnload}},
}

// TestCaptureRulesHeaderFollowsTheRulesTables asks each rule function of
// capture_rules.h about every cell (testdata/capture_rules_check.c) and
// holds its answers to the rows of the actions it stands for, wherever
// configs/rules holds them: those the stand-ins call today, and those kept
// ready for calls they do not export yet (pinned host memory).
func TestCaptureRulesHeaderFollowsTheRulesTables(t *testing.T) {
	gcc, err := exec.LookPath("gcc")
	if err != nil {
		t.Skip("gcc is not on PATH")
	}
	root := moduleRoot(t)
	prog := filepath.Join(t.TempDir(), "capture_rules_check")
	args := append(append([]string(nil), standInWarnings...), "-I", filepath.Join(root, "internal", "trace", "testdata", "standin"),
		"-o", prog, "testdata/capture_rules_check.c", "-pthread")
	if out, err := exec.Command(gcc, args...).CombinedOutput(); err != nil {
		t.Fatalf("gcc %s: %v\n%s", strings.Join(args, " "), err, out)
	}
	out, err := exec.Command(prog).Output()
	if err != nil {
		t.Fatalf("%s: %v", prog, err)
	}
	tables := map[hip.Dialect]*rules.Expectation{}
	for d, file := range map[hip.Dialect]string{hip.DialectCUDA: "configs/rules/h200-cuda.yaml", hip.DialectHIP: "configs/rules/hip.yaml"} {
		if tables[d], err = rules.ReadExpectation(filepath.Join(root, file)); err != nil {
			t.Fatal(err)
		}
	}
	answers := 0
	compared := map[string]int{}
	sc := bufio.NewScanner(bytes.NewReader(out))
	for sc.Scan() {
		f := strings.Fields(sc.Text())
		if len(f) != 6 {
			t.Fatalf("unexpected line %q", sc.Text())
		}
		fn, refused, invalidated := f[0], f[4] == "1", f[5] == "1"
		byDialect, ok := headerRules[fn]
		if !ok {
			t.Fatalf("line %q: the test does not know what %s stands for", sc.Text(), fn)
		}
		answers++
		for d, actions := range byDialect {
			for _, a := range actions {
				k, err := rules.ParseCellKey(strings.Join(append([]string{string(a)}, f[1:4]...), "/"))
				if err != nil {
					t.Fatal(err)
				}
				want, ok := tables[d].Cells[k]
				if !ok {
					continue
				}
				compared[fn]++
				wantRefused := !sameAnswer(want.Returns, hip.Success)
				if refused != wantRefused || invalidated != (want.End == hip.ErrStreamCaptureInvalidated) {
					t.Errorf("capture_rules.h %s() in cell %s: refused %v, invalidated %v; %s line %d says %d, end %d",
						fn, k, refused, invalidated, tables[d].Name, want.Line, int(want.Returns), int(want.End))
				}
			}
		}
	}
	if want := 18 * len(headerRules); answers != want {
		t.Fatalf("the check answered %d cells, want %d", answers, want)
	}
	for _, fn := range []string{"unsafe_call", "host_memory_call"} {
		if compared[fn] == 0 {
			t.Errorf("nothing of %s() compared", fn)
		}
	}
	t.Logf("compared, by function: %v", compared)
}
