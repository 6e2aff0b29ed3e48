package cudnn

import (
	"flag"
	"fmt"
	"maps"
	"os"
	"os/exec"
	"regexp"
	"slices"
	"strings"
	"testing"
	"unsafe"

	"miotool/internal/dl"
)

var update = flag.Bool("update", false, "rewrite testdata/cudnn_binding.h from the binding")

// bindingHeader is the Go side of the cuDNN header check, as
// testdata/cudnn_check.c includes it.
const bindingHeader = "testdata/cudnn_binding.h"

// TestHeaderCheckFollowsTheBinding keeps the header check, which only a
// machine with cuDNN's headers compiles, current with the binding: the
// stand-in's function lists name exactly the symbols the binding tables
// bind, and testdata/cudnn_binding.h is what the binding's symbols,
// numbers and struct mirror give now (go test -run TestHeaderCheck -update
// rewrites it).
func TestHeaderCheckFollowsTheBinding(t *testing.T) {
	var a api
	var d driverAPI
	for _, l := range []struct {
		list  string
		bound []string
	}{
		{"MOCKCUDNN_API", symbolNames(a.symbols())},
		{"MOCKCUDNN_DRIVER_API", symbolNames(d.symbols())},
	} {
		listed := standInFunctions(t, l.list)
		for _, name := range l.bound {
			if !slices.Contains(listed, name) {
				t.Errorf("the binding binds %s, which %s in testdata/mockcudnn_api.h does not list: add its declaration there (the stand-in must define it)", name, l.list)
			}
		}
		for _, name := range listed {
			if !slices.Contains(l.bound, name) {
				t.Errorf("%s in testdata/mockcudnn_api.h lists %s, which the binding does not bind", l.list, name)
			}
		}
	}

	want := bindingAsserts()
	if *update {
		if err := os.WriteFile(bindingHeader, []byte(want), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	got, err := os.ReadFile(bindingHeader)
	if err != nil {
		t.Fatal(err)
	}
	if string(got) != want {
		t.Fatalf("%s is not what the binding gives now (run go test ./internal/dnn/cudnn -run TestHeaderCheckFollowsTheBinding -update, then scripts/abi-check-cuda.sh where cuDNN's headers are):\n%s", bindingHeader, lineDiff(string(got), want))
	}
}

// TestBindingMatchesCUDNNHeader compiles testdata/cudnn_check.c against
// the cuDNN 9 headers in the folder MIOTOOL_CUDNN_INCLUDE names (with
// MIOTOOL_CUDA_INCLUDE for the CUDA runtime's, when they are elsewhere),
// as scripts/abi-check-cuda.sh does; a wrong declaration must fail it.
func TestBindingMatchesCUDNNHeader(t *testing.T) {
	include := os.Getenv("MIOTOOL_CUDNN_INCLUDE")
	if include == "" {
		t.Skip("MIOTOOL_CUDNN_INCLUDE names no folder with cudnn.h (scripts/abi-check-cuda.sh finds one on a CUDA machine)")
	}
	gcc, err := exec.LookPath("gcc")
	if err != nil {
		t.Skip("gcc is not on PATH")
	}
	args := []string{"-std=gnu11", "-fsyntax-only", "-Wall", "-Werror", "-isystem", include}
	if cuda := os.Getenv("MIOTOOL_CUDA_INCLUDE"); cuda != "" {
		args = append(args, "-isystem", cuda)
	}
	check := func(extra ...string) (string, error) {
		out, err := exec.Command(gcc, append(append(args, extra...), "testdata/cudnn_check.c")...).CombinedOutput()
		return string(out), err
	}
	if out, err := check(); err != nil {
		t.Fatalf("the binding or its stand-in disagrees with the cuDNN headers in %s: %v\n%s", include, err, out)
	}
	out, err := check("-DMIOTOOL_MUST_FAIL")
	if err == nil || !strings.Contains(out, "cudnnCreate: the stand-in declares another type than the real header") {
		t.Fatalf("a wrong declaration of cudnnCreate passed the check: %v\n%s", err, out)
	}
}

func symbolNames(syms []dl.Symbol) []string {
	var names []string
	for _, s := range syms {
		names = append(names, s.Name)
	}
	return names
}

// standInFunctions are the functions the list macro named list in
// testdata/mockcudnn_api.h names.
func standInFunctions(t *testing.T, list string) []string {
	t.Helper()
	text, err := os.ReadFile("testdata/mockcudnn_api.h")
	if err != nil {
		t.Fatal(err)
	}
	_, body, ok := strings.Cut(string(text), "#define "+list+"(X)")
	if !ok {
		t.Fatalf("testdata/mockcudnn_api.h defines no %s", list)
	}
	body, _, _ = strings.Cut(body, "\n#define ")
	var names []string
	for _, m := range regexp.MustCompile(`(?m)^\s+X\(\s*[^,()]+,\s*(\w+),`).FindAllStringSubmatch(body, -1) {
		names = append(names, m[1])
	}
	if len(names) == 0 {
		t.Fatalf("%s lists no function", list)
	}
	return names
}

// bindingAsserts is the Go side as cudnn_check.c reads it: the symbols
// bound, the numbers passed and decoded, and the perf struct's mirror.
func bindingAsserts() string {
	var b strings.Builder
	b.WriteString("/* Written by the Go tests from the cuDNN binding: go test ./internal/dnn/cudnn\n" +
		" * -run TestHeaderCheckFollowsTheBinding -update. cudnn_check.c reads it. */\n")
	var a api
	for _, name := range symbolNames(a.symbols()) {
		fmt.Fprintf(&b, "MIOTOOL_BOUND(%s)\n", name)
	}
	var d driverAPI
	for _, name := range symbolNames(d.symbols()) {
		fmt.Fprintf(&b, "MIOTOOL_BOUND_DRIVER(%s)\n", name)
	}
	number := func(name string, value int) { fmt.Fprintf(&b, "MIOTOOL_NUMBER(%s, %d)\n", name, value) }
	number("CUDNN_DATA_FLOAT", dataFloat)
	number("CUDNN_TENSOR_NCHW", formatNCHW)
	number("CUDNN_CONVOLUTION", int(Convolution))
	number("CUDNN_CROSS_CORRELATION", int(CrossCorrelation))
	number("CUDNN_DETERMINISTIC", deterministic)
	for _, m := range []MathType{DefaultMath, TensorOpMath, TensorOpMathAllowConvert, FMAMath} {
		number(m.String(), int(m))
	}
	for i := range fwdAlgoNames {
		number("CUDNN_CONVOLUTION_FWD_ALGO_"+FwdAlgo(i).String(), i)
	}
	number("CUDNN_CONVOLUTION_FWD_ALGO_COUNT", len(fwdAlgoNames))
	for _, c := range []struct {
		st   Status
		name string
	}{
		{StatusSuccess, "CUDNN_STATUS_SUCCESS"}, {StatusNotInitialized, "CUDNN_STATUS_NOT_INITIALIZED"},
		{StatusSublibraryMismatch, "CUDNN_STATUS_SUBLIBRARY_VERSION_MISMATCH"},
		{StatusSublibraryLoading, "CUDNN_STATUS_SUBLIBRARY_LOADING_FAILED"}, {StatusBadParam, "CUDNN_STATUS_BAD_PARAM"},
		{StatusBadParamNullPointer, "CUDNN_STATUS_BAD_PARAM_NULL_POINTER"},
		{StatusBadParamStreamMismatch, "CUDNN_STATUS_BAD_PARAM_STREAM_MISMATCH"},
		{StatusNotSupported, "CUDNN_STATUS_NOT_SUPPORTED"}, {StatusInternalError, "CUDNN_STATUS_INTERNAL_ERROR"},
		{StatusExecutionFailed, "CUDNN_STATUS_EXECUTION_FAILED"},
		{StatusExecutionFailedDriver, "CUDNN_STATUS_EXECUTION_FAILED_CUDA_DRIVER"},
		{StatusExecutionFailedCudart, "CUDNN_STATUS_EXECUTION_FAILED_CUDART"},
	} {
		number(c.name, int(c.st))
	}
	for _, st := range slices.Sorted(maps.Keys(statusNames)) {
		fmt.Fprintf(&b, "MIOTOOL_STATUS_NAME(%s, %d)\n", st, int(st))
	}

	var p fwdAlgoPerf
	const typ = "cudnnConvolutionFwdAlgoPerf_t"
	fmt.Fprintf(&b, "MIOTOOL_SIZE(%s, %d)\n", typ, unsafe.Sizeof(p))
	for _, f := range []struct {
		name         string
		offset, size uintptr
	}{
		{"algo", unsafe.Offsetof(p.algo), unsafe.Sizeof(p.algo)},
		{"status", unsafe.Offsetof(p.status), unsafe.Sizeof(p.status)},
		{"time", unsafe.Offsetof(p.time), unsafe.Sizeof(p.time)},
		{"memory", unsafe.Offsetof(p.memory), unsafe.Sizeof(p.memory)},
		{"determinism", unsafe.Offsetof(p.determinism), unsafe.Sizeof(p.determinism)},
		{"mathType", unsafe.Offsetof(p.mathType), unsafe.Sizeof(p.mathType)},
		{"reserved", unsafe.Offsetof(p.reserved), unsafe.Sizeof(p.reserved)},
	} {
		fmt.Fprintf(&b, "MIOTOOL_FIELD(%s, %s, %d, %d)\n", typ, f.name, f.offset, f.size)
	}
	return b.String()
}

// lineDiff lists the lines only one of a and b has.
func lineDiff(a, b string) string {
	var out []string
	al, bl := strings.Split(a, "\n"), strings.Split(b, "\n")
	for _, l := range al {
		if !slices.Contains(bl, l) {
			out = append(out, "- "+l)
		}
	}
	for _, l := range bl {
		if !slices.Contains(al, l) {
			out = append(out, "+ "+l)
		}
	}
	return strings.Join(out, "\n")
}
