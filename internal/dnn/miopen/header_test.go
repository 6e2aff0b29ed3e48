package miopen

import (
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"slices"
	"strings"
	"testing"
	"unsafe"

	"miotool/internal/testutil"
)

// TestBindingMatchesMIOpenHeader compiles testdata/miopen_check.cpp
// against the reference miopen.h beside the module: every function the
// binding table names must be in the stand-in's lists, whose declarations
// must be the header's; the numbers the binding passes and decodes, and
// the Go mirrors of the structs MIOpen fills, must be the header's; so must
// the stand-in's numbers and struct copies. Each kind of disagreement must
// fail the compile.
func TestBindingMatchesMIOpenHeader(t *testing.T) {
	gxx, err := exec.LookPath("g++")
	if err != nil {
		t.Skip("g++ is not on PATH")
	}
	flags := testutil.MIOpenReferenceIncludes(t)

	listed := standInFunctions(t)
	bound := boundFunctions()
	for _, name := range bound {
		if !slices.Contains(listed, name) {
			t.Errorf("the binding calls %s, which testdata/mockmiopen_api.h does not list: add its miopen.h declaration there (the stand-in must define it)", name)
		}
	}
	for _, name := range listed {
		if !slices.Contains(bound, name) {
			t.Errorf("testdata/mockmiopen_api.h lists %s, which the binding does not call", name)
		}
	}

	check := func(binding string, extra ...string) (string, error) {
		path := filepath.Join(t.TempDir(), "binding.h")
		if err := os.WriteFile(path, []byte(binding), 0o644); err != nil {
			t.Fatal(err)
		}
		args := append([]string{"-std=c++17", "-fsyntax-only", "-Wall", "-Werror", fmt.Sprintf("-DMIOTOOL_BINDING=%q", path)}, flags...)
		out, err := exec.Command(gxx, append(append(args, extra...), "testdata/miopen_check.cpp")...).CombinedOutput()
		return string(out), err
	}
	binding := bindingAsserts()
	if out, err := check(binding); err != nil {
		t.Fatalf("the binding or its stand-in disagrees with miopen.h: %v\n%s", err, out)
	}
	t.Logf("%d functions, %d numbers and the layouts of 2 structs agree with miopen.h", len(bound),
		strings.Count(binding, "MIOTOOL_NUMBER("))

	for _, f := range []struct {
		what, extra, define, want string
	}{
		{what: "a wrong declaration", define: "-DMIOTOOL_MUST_FAIL",
			want: "miopenCreate: the stand-in declares another type than miopen.h"},
		{what: "a bound function the lists lack", extra: "MIOTOOL_BOUND(miopenCreate)\n",
			want: "mockmiopen_type_miopenCreate"},
		{what: "a wrong number", extra: fmt.Sprintf("MIOTOOL_NUMBER(miopenFloat, %d)\n", dataFloat+1),
			want: fmt.Sprintf("the binding passes miopenFloat as %d, not the header's number", dataFloat+1)},
		{what: "a wrong size", extra: "MIOTOOL_SIZE(miopenConvAlgoPerf_t, 24)\n",
			want: "the Go mirror of miopenConvAlgoPerf_t is 24 bytes"},
		{what: "a wrong offset", extra: "MIOTOOL_FIELD(miopenConvSolution_t, algorithm, 28, 4)\n",
			want: "the Go mirror of miopenConvSolution_t.algorithm is not where the header puts it"},
	} {
		var defines []string
		if f.define != "" {
			defines = append(defines, f.define)
		}
		out, err := check(binding+f.extra, defines...)
		if err == nil || !strings.Contains(out, f.want) {
			t.Errorf("%s passed the check, or failed without %q: %v\n%s", f.what, f.want, err, out)
		}
	}
}

// standInFunctions are the functions testdata/mockmiopen_api.h lists.
func standInFunctions(t *testing.T) []string {
	t.Helper()
	text, err := os.ReadFile("testdata/mockmiopen_api.h")
	if err != nil {
		t.Fatal(err)
	}
	var names []string
	for _, m := range regexp.MustCompile(`(?m)^\s+X\(\s*[^,()]+,\s*(\w+),`).FindAllStringSubmatch(string(text), -1) {
		names = append(names, m[1])
	}
	if len(names) == 0 {
		t.Fatal("testdata/mockmiopen_api.h lists no function")
	}
	return names
}

// boundFunctions are the symbols the binding and DeviceSelector bind.
func boundFunctions() []string {
	var a api
	var s DeviceSelector
	var names []string
	for _, sym := range append(a.symbols(), s.symbols()...) {
		names = append(names, sym.Name)
	}
	return names
}

// bindingAsserts is the Go side as miopen_check.cpp reads it: the symbols
// bound, the numbers passed and decoded, and the struct mirrors.
func bindingAsserts() string {
	var b strings.Builder
	for _, name := range boundFunctions() {
		fmt.Fprintf(&b, "MIOTOOL_BOUND(%s)\n", name)
	}
	number := func(name string, value int) { fmt.Fprintf(&b, "MIOTOOL_NUMBER(%s, %d)\n", name, value) }
	// The named codes, and the names String gives each number.
	for _, c := range []struct {
		st   Status
		name string
	}{
		{StatusSuccess, "miopenStatusSuccess"}, {StatusNotInitialized, "miopenStatusNotInitialized"},
		{StatusInvalidValue, "miopenStatusInvalidValue"}, {StatusBadParm, "miopenStatusBadParm"},
		{StatusAllocFailed, "miopenStatusAllocFailed"}, {StatusInternalError, "miopenStatusInternalError"},
		{StatusNotImplemented, "miopenStatusNotImplemented"}, {StatusUnknownError, "miopenStatusUnknownError"},
		{StatusUnsupportedOp, "miopenStatusUnsupportedOp"}, {StatusGpuOperationsSkipped, "miopenStatusGpuOperationsSkipped"},
		{StatusVersionMismatch, "miopenStatusVersionMismatch"},
	} {
		number(c.name, int(c.st))
	}
	for st := range Status(len(statusNames)) {
		number(st.String(), int(st))
	}
	number("miopenFloat", dataFloat)
	number("miopenConvolution", convCrossCorrelation)
	for _, a := range []Algo{AlgoGEMM, AlgoDirect, AlgoFFT, AlgoWinograd, AlgoImplicitGEMM} {
		number(a.String(), int(a))
		// Solutions carry a miopenConvAlgorithm_t, decoded as an Algo.
		number(strings.Replace(a.String(), "FwdAlgo", "Algo", 1), int(a))
	}

	var p convAlgoPerf
	fmt.Fprintf(&b, "MIOTOOL_SIZE(miopenConvAlgoPerf_t, %d)\n", unsafe.Sizeof(p))
	field := func(typ, name string, offset, size uintptr) {
		fmt.Fprintf(&b, "MIOTOOL_FIELD(%s, %s, %d, %d)\n", typ, name, offset, size)
	}
	field("miopenConvAlgoPerf_t", "fwd_algo", unsafe.Offsetof(p.algo), unsafe.Sizeof(p.algo))
	field("miopenConvAlgoPerf_t", "time", unsafe.Offsetof(p.time), unsafe.Sizeof(p.time))
	field("miopenConvAlgoPerf_t", "memory", unsafe.Offsetof(p.memory), unsafe.Sizeof(p.memory))
	var s convSolution
	fmt.Fprintf(&b, "MIOTOOL_SIZE(miopenConvSolution_t, %d)\n", unsafe.Sizeof(s))
	field("miopenConvSolution_t", "time", unsafe.Offsetof(s.time), unsafe.Sizeof(s.time))
	field("miopenConvSolution_t", "workspace_size", unsafe.Offsetof(s.workspace), unsafe.Sizeof(s.workspace))
	field("miopenConvSolution_t", "solution_id", unsafe.Offsetof(s.id), unsafe.Sizeof(s.id))
	field("miopenConvSolution_t", "algorithm", unsafe.Offsetof(s.algorithm), unsafe.Sizeof(s.algorithm))
	return b.String()
}
