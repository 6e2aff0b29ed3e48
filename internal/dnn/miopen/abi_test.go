package miopen

import (
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"runtime"
	"strings"
	"testing"
	"unsafe"

	"miotool/internal/conv"
	"miotool/internal/dl"
	"miotool/internal/dnn/dnnlib/dnntest"
	"miotool/internal/hip"
)

// miopenConvAlgoPerf_t is 16 bytes and miopenConvSolution_t 32; the Go
// mirrors must match the C compiler's layout field by field.
func TestStructLayoutsMatchC(t *testing.T) {
	openStandIn(t)
	var c [7]int32
	dl.Call(mockCtl.layout, uintptr(unsafe.Pointer(&c[0])))
	var p convAlgoPerf
	var s convSolution
	goLayout := [7]int32{int32(unsafe.Sizeof(p)), int32(unsafe.Offsetof(p.time)), int32(unsafe.Offsetof(p.memory)),
		int32(unsafe.Sizeof(s)), int32(unsafe.Offsetof(s.workspace)), int32(unsafe.Offsetof(s.id)), int32(unsafe.Offsetof(s.algorithm))}
	if c != goLayout {
		t.Fatalf("C layout %v, Go %v (perf size, time, memory; solution size, workspace, id, algorithm)", c, goLayout)
	}
	if c[0] != 16 || c[3] != 32 {
		t.Fatalf("sizes %d and %d, want 16 and 32", c[0], c[3])
	}
}

// The environment is set before the library initialises: the stand-in
// records it in a load-time constructor.
func TestOpenSetsTheEnvironmentBeforeLoading(t *testing.T) {
	l := openStandIn(t)
	db := l.UserDBPath()
	if !strings.HasPrefix(filepath.Base(db), "miotool-miopen-userdb-") {
		t.Fatalf("user db %q is not a fresh temporary folder", db)
	}
	if entries, err := os.ReadDir(db); err != nil || len(entries) != 0 {
		t.Fatalf("user db folder: %v entries, %v", len(entries), err)
	}
	want := "MIOPEN_USER_DB_PATH=" + db + " MIOPEN_DEBUG_DISABLE_FIND_DB=1"
	if got := dl.GoString(dl.CallPtr(mockCtl.envAtLoad)); got != want {
		t.Fatalf("environment at load %q, want %q", got, want)
	}
	if env := strings.Join(l.Environment(), " "); env != "MIOPEN_USER_DB_PATH="+db+" MIOPEN_DEBUG_DISABLE_FIND_DB=1" {
		t.Fatalf("Environment() = %q", env)
	}
	if l.Version().String() != "3.5.1" || l.Info().Version != "3.5.1" || l.Info().Loaded != stand.Path() {
		t.Fatalf("version %s, info %+v", l.Version(), l.Info())
	}
	if !strings.Contains(l.String(), "libMIOpen 3.5.1 ("+stand.Path()+")") {
		t.Fatalf("String() = %q", l.String())
	}
}

func TestOpenRecordsEveryPathTried(t *testing.T) {
	openStandIn(t)
	dnntest.WantNotFound(t, LibraryName, Soname, func(spec dl.SearchSpec) error {
		_, err := Open(spec, Options{UserDBPath: t.TempDir()})
		return err
	})
}

func TestRemoveUserDBRemovesOnlyAFolderItMade(t *testing.T) {
	openStandIn(t)
	t.Setenv(EnvUserDBPath, "")
	made, err := Open(stand.Spec(LibraryName), Options{})
	must(t, err)
	if _, err := os.Stat(made.UserDBPath()); err != nil {
		t.Fatal(err)
	}
	must(t, made.RemoveUserDB())
	if _, err := os.Stat(made.UserDBPath()); !errors.Is(err, os.ErrNotExist) {
		t.Fatalf("the folder Open made is still there: %v", err)
	}
	must(t, made.RemoveUserDB())

	mine := t.TempDir()
	named, err := Open(stand.Spec(LibraryName), Options{UserDBPath: mine, KeepFindDB: true})
	must(t, err)
	must(t, named.RemoveUserDB())
	if _, err := os.Stat(mine); err != nil {
		t.Fatalf("a folder the caller named was removed: %v", err)
	}
}

// With the find-db on, find writes its record to the folder the
// environment names at call time.
func TestFindWritesToTheUserDBWhenTheFindDBIsOn(t *testing.T) {
	openStandIn(t)
	dir := t.TempDir()
	t.Setenv(EnvUserDBPath, "")
	t.Setenv(EnvDisableFindDB, "")
	os.Unsetenv(EnvDisableFindDB)
	l, err := Open(stand.Spec(LibraryName), Options{UserDBPath: dir, KeepFindDB: true})
	must(t, err)
	if _, set := os.LookupEnv(EnvDisableFindDB); set {
		t.Fatal("KeepFindDB set the switch")
	}
	lockDevice(t, 0)
	h, err := l.NewHandle(0x10)
	must(t, err)
	defer h.Destroy()
	p, b := problemWithBuffers(t, l, problem, 1)
	_, err = h.FindForward(p, b, false)
	must(t, err)
	rec, err := os.ReadFile(filepath.Join(dir, "stand-in.ufdb.txt"))
	if err != nil || !strings.Contains(string(rec), "3-9-7-3x2=miopenConvolutionFwdAlgoDirect") {
		t.Fatalf("find-db record %q, %v", rec, err)
	}
}

func TestDeviceSelectorSelectsPerThread(t *testing.T) {
	l := openStandIn(t)
	sel := lockDevice(t, 1)
	if got := dl.Call(mockCtl.threadDevice); got != 1 {
		t.Fatalf("thread device %d, want 1", got)
	}
	h, err := l.NewHandle(0x20)
	must(t, err)
	defer h.Destroy()
	if line := stand.Lines("miopenCreateWithStream")[0]; !strings.Contains(line, "stream=0x20 device=1") {
		t.Fatalf("handle creation: %s", line)
	}
	p, b := problemWithBuffers(t, l, problem, 1)
	must(t, h.Forward(p, b, AlgoDirect, 1, 0))

	// The same handle from a thread on device 0 is refused by the stand-in.
	other, err := OpenDeviceSelector(stand.Path(), 0)
	must(t, err)
	errc := make(chan error, 1)
	go func() {
		runtime.LockOSThread()
		defer runtime.UnlockOSThread()
		if err := other.Select(); err != nil {
			errc <- err
			return
		}
		errc <- h.Forward(p, b, AlgoDirect, 1, 0)
	}()
	wantStatus(t, <-errc, StatusUnknownError, "forward from a thread on another device")
	must(t, sel.Select())

	_, err = OpenDeviceSelector(stand.Path(), -1)
	if err == nil {
		t.Fatal("a negative ordinal was accepted")
	}
	bad, err := OpenDeviceSelector(stand.Path(), 2)
	must(t, err)
	if err := bad.Select(); hip.CodeOf(err) != hip.ErrInvalidDevice || !strings.Contains(err.Error(), "hipSetDevice: hipErrorInvalidDevice (101)") {
		t.Fatalf("ordinal 2 of 2: %v", err)
	}
	if _, err := OpenDeviceSelector(filepath.Join(t.TempDir(), "libamdhip64.so.7"), 0); err == nil || !strings.Contains(err.Error(), "opening the HIP runtime") {
		t.Fatalf("missing runtime: %v", err)
	}
}

func TestRuntimePathComesFromTheDevice(t *testing.T) {
	dnntest.WantLoadedPath(t, RuntimePath, "libamdhip64", RuntimeSoname)
}

type hostBuffers struct {
	x, w, y, ws []float32
	ref         []float32
}

// problemWithBuffers makes the descriptors of p and Go buffers standing in
// for device memory, with random x and w; the buffers live as long as the
// test.
func problemWithBuffers(t *testing.T, l *Library, p conv.Problem, seed uint64) (Problem, Buffers) {
	t.Helper()
	var d Problem
	var err error
	if d.X, err = l.NewTensorDesc(p.N, p.C, p.H, p.W); err != nil {
		t.Fatal(err)
	}
	if d.W, err = l.NewTensorDesc(p.K, p.C, p.R, p.S); err != nil {
		t.Fatal(err)
	}
	if d.Conv, err = l.NewConvDesc(dnntest.Geometry(p)); err != nil {
		t.Fatal(err)
	}
	if d.Y, err = l.NewTensorDesc(p.N, p.K, p.OutH(), p.OutW()); err != nil {
		t.Fatal(err)
	}
	hb := &hostBuffers{
		x:  conv.RandomTensor(p.InputElements(), seed),
		w:  conv.RandomTensor(p.WeightElements(), seed+1),
		y:  make([]float32, p.OutputElements()),
		ws: make([]float32, 512),
	}
	hb.ref = conv.Reference(p, hb.x, hb.w)
	buffers[d.Y] = hb
	t.Cleanup(func() {
		delete(buffers, d.Y)
		runtime.KeepAlive(hb)
	})
	dnntest.DestroyAtCleanup(t, d.X, d.W, d.Conv, d.Y)
	return d, Buffers{X: devPtr(hb.x), W: devPtr(hb.w), Y: devPtr(hb.y), Workspace: devPtr(hb.ws), WorkspaceBytes: 2048}
}

// buffers keeps each test's host buffers reachable, keyed by its y.
var buffers = map[*TensorDesc]*hostBuffers{}

func checkY(t *testing.T, p Problem, scale float32, what string) {
	t.Helper()
	dnntest.WantScaled(t, buffers[p.Y].y, buffers[p.Y].ref, scale, what)
}

func clearY(p Problem) { clear(buffers[p.Y].y) }

func TestDescriptorsPassTheirArgumentsInMIOpensOrder(t *testing.T) {
	l := openStandIn(t)
	lockDevice(t, 0)
	p, _ := problemWithBuffers(t, l, problem, 1)
	stand.WantLogged(t, []string{
		fmt.Sprintf("miopenSet4dTensorDescriptor desc=%#x dtype=1 n=2 c=3 h=9 w=7", p.X.ptr),
		fmt.Sprintf("miopenSet4dTensorDescriptor desc=%#x dtype=1 n=4 c=3 h=3 w=2", p.W.ptr),
		fmt.Sprintf("miopenInitConvolutionDescriptor desc=%#x mode=0 pad=1x0 stride=2x1 dilation=1x2", p.Conv.ptr),
	}...)
	dims, err := p.Conv.OutputDims(p.X, p.W)
	if err != nil || dims != [4]int{2, 4, problem.OutH(), problem.OutW()} || p.Y.Dims() != dims || p.Y.Elements() != 200 {
		t.Fatalf("OutputDims = %v, %v; y %v", dims, err, p.Y.Dims())
	}
	h, err := l.NewHandle(0x30)
	must(t, err)
	defer h.Destroy()
	ws, err := h.ForwardWorkspace(p)
	if err != nil || ws != 2048 {
		t.Fatalf("workspace %d, %v", ws, err)
	}
	// w before x in the workspace query.
	if line := stand.Lines("miopenConvolutionForwardGetWorkSpaceSize")[0]; !strings.Contains(line, fmt.Sprintf("w=%#x x=%#x", p.W.ptr, p.X.ptr)) {
		t.Fatalf("workspace query: %s", line)
	}
}

func TestBadArgumentsAreRefusedBeforeTheLibrary(t *testing.T) {
	l := openStandIn(t)
	for _, tt := range []struct {
		name string
		call func() error
		want string
	}{
		{"tensor", func() error { _, err := l.NewTensorDesc(1, 1, 0, 4); return err }, "h=0: want a positive size"},
		{"padding", func() error {
			_, err := l.NewConvDesc(Conv2d{PadW: -3, StrideH: 1, StrideW: 1, DilH: 1, DilW: 1})
			return err
		}, "padding 0x-3 is negative"},
		{"dilation", func() error { _, err := l.NewConvDesc(Conv2d{StrideH: 1, StrideW: 1, DilW: 1}); return err }, "dilation_h=0"},
		{"descriptor", func() error { return (&Handle{lib: l}).Forward(Problem{}, Buffers{}, AlgoDirect, 1, 0) }, "a descriptor is missing"},
		{"solutions", func() error {
			_, err := (&Handle{lib: l}).Solutions(Problem{X: &TensorDesc{}, W: &TensorDesc{}, Y: &TensorDesc{}, Conv: &ConvDesc{}}, 0)
			return err
		}, "max=0"},
	} {
		e := wantStatus(t, tt.call(), StatusBadParm, tt.name)
		if !strings.Contains(e.Message, tt.want) {
			t.Errorf("%s: %v, want %q", tt.name, e, tt.want)
		}
	}
	if n := len(stand.Lines("miopenSet4dTensorDescriptor")) + len(stand.Lines("miopenConvolutionForward")); n != 0 {
		t.Fatalf("a refused argument reached the library (%d calls)", n)
	}
}

func TestFindDecodesPerfResultsAndWritesY(t *testing.T) {
	l := openStandIn(t)
	lockDevice(t, 0)
	h, err := l.NewHandle(0x40)
	must(t, err)
	defer h.Destroy()
	p, b := problemWithBuffers(t, l, problem, 3)

	found, err := h.FindForward(p, b, true)
	must(t, err)
	if fmt.Sprint(found) != fmt.Sprint([]AlgoPerf{{AlgoDirect, 0.125, 0}, {AlgoGEMM, 0.5, 2048}}) {
		t.Fatalf("find = %+v", found)
	}
	checkY(t, p, 1, "find's output")
	line := stand.Lines("miopenFindConvolutionForwardAlgorithm")[0]
	for _, part := range []string{"requested=8", "ws_size=2048", "exhaustive=1", "stream=0x40",
		fmt.Sprintf("x=%#x xdata=%#x w=%#x wdata=%#x", p.X.ptr, uintptr(b.X), p.W.ptr, uintptr(b.W)),
		fmt.Sprintf("y=%#x ydata=%#x", p.Y.ptr, uintptr(b.Y))} {
		if !strings.Contains(line, part) {
			t.Errorf("find call lacks %q: %s", part, line)
		}
	}

	// Without GEMM's workspace, find returns Direct alone.
	b.WorkspaceBytes = 0
	found, err = h.FindForward(p, b, false)
	must(t, err)
	if len(found) != 1 || found[0].Algo != AlgoDirect {
		t.Fatalf("find without workspace = %+v", found)
	}
	if AlgoImplicitGEMM.String() != "miopenConvolutionFwdAlgoImplicitGEMM" || Algo(4).String() != "miopenConvolutionFwdAlgo(4)" {
		t.Fatal("algorithm names")
	}
}

func TestForwardImmediateAndScaleMatchTheCPUReference(t *testing.T) {
	l := openStandIn(t)
	lockDevice(t, 0)
	h, err := l.NewHandle(0x50)
	must(t, err)
	defer h.Destroy()
	p, b := problemWithBuffers(t, l, problem, 5)

	must(t, h.Forward(p, b, AlgoGEMM, 1, 0))
	checkY(t, p, 1, "forward")
	line := stand.Lines("miopenConvolutionForward")[0]
	for _, part := range []string{"alpha=1 ", "algo=0 ", "beta=0 ", "ws_size=2048", "stream=0x50"} {
		if !strings.Contains(line, part) {
			t.Errorf("forward call lacks %q: %s", part, line)
		}
	}
	must(t, h.Forward(p, b, AlgoDirect, 2, 1)) // 2*ref + ref
	must(t, h.ScaleTensor(p.Y, b.Y, 0.5))
	checkY(t, p, 1.5, "forward with alpha and beta, then scale")

	sols, err := h.Solutions(p, 4)
	must(t, err)
	if fmt.Sprint(sols) != fmt.Sprint([]Solution{{10, 0, 85, AlgoDirect}, {20, 2048, 91, AlgoGEMM}}) {
		t.Fatalf("solutions = %+v", sols)
	}
	if one, err := h.Solutions(p, 1); err != nil || len(one) != 1 || one[0].ID != 85 {
		t.Fatalf("one solution: %+v, %v", one, err)
	}
	ws, err := h.SolutionWorkspace(p, 91)
	if err != nil || ws != 2048 {
		t.Fatalf("solution 91 workspace %d, %v", ws, err)
	}
	must(t, h.CompileSolution(p, 85))
	clearY(p)
	must(t, h.ForwardImmediate(p, b, 91))
	checkY(t, p, 1, "immediate forward")
	line = stand.Lines("miopenConvolutionForwardImmediate")[0]
	if !strings.Contains(line, fmt.Sprintf("w=%#x wdata=%#x x=%#x xdata=%#x", p.W.ptr, uintptr(b.W), p.X.ptr, uintptr(b.X))) ||
		!strings.Contains(line, "id=91") {
		t.Fatalf("immediate call: %s", line)
	}
	wantStatus(t, h.ForwardImmediate(p, b, 7), StatusBadParm, "unknown solution id")
	s, err := h.Stream()
	if err != nil || s != 0x50 {
		t.Fatalf("Stream() = %#x, %v", s, err)
	}
	must(t, h.SetStream(0x51))
	if s, _ := h.Stream(); s != 0x51 {
		t.Fatalf("after SetStream: %#x", s)
	}
}

func TestFailuresCarryMIOpensText(t *testing.T) {
	l := openStandIn(t)
	lockDevice(t, 0)
	h, err := l.NewHandle(0x60)
	must(t, err)
	defer h.Destroy()
	p, b := problemWithBuffers(t, l, problem, 7)

	failNext("miopenConvolutionForward", StatusInternalError)
	e := wantStatus(t, h.Forward(p, b, AlgoDirect, 1, 0), StatusInternalError, "injected failure")
	if e.Error() != "miopenConvolutionForward: miopenStatusInternalError (5): stand-in: the kernel failed to launch" {
		t.Fatalf("message %q", e.Error())
	}
	failNext("miopenConvolutionForward", StatusBadParm)
	if e := wantStatus(t, h.Forward(p, b, AlgoDirect, 1, 0), StatusBadParm, "bad parm"); e.Message != "" {
		t.Fatalf("a message that repeats the name is kept: %q", e.Message)
	}
	must(t, h.Forward(p, b, AlgoDirect, 1, 0))
	b.WorkspaceBytes = 0
	wantStatus(t, h.Forward(p, b, AlgoGEMM, 1, 0), StatusBadParm, "GEMM without workspace")
	if StatusOf(nil) != StatusSuccess || StatusOf(errors.New("x")) != StatusUnknownError || Status(42).String() != "miopenStatus(42)" {
		t.Fatal("StatusOf / String")
	}
}

func TestDestroyIsIdempotent(t *testing.T) {
	l := openStandIn(t)
	lockDevice(t, 0)
	h, err := l.NewHandle(0)
	must(t, err)
	x, err := l.NewTensorDesc(1, 1, 2, 2)
	must(t, err)
	dnntest.DestroyTwice(t, h, x, (*ConvDesc)(nil), (*TensorDesc)(nil), (*Handle)(nil), &TensorDesc{})
	if n := len(stand.Lines("miopenDestroyTensorDescriptor")); n != 1 {
		t.Fatalf("miopenDestroyTensorDescriptor called %d times", n)
	}
	if n := len(stand.Lines("miopenDestroy")); n != 1 {
		t.Fatalf("miopenDestroy called %d times", n)
	}
}
