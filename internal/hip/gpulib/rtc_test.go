package gpulib

import (
	"errors"
	"reflect"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"unsafe"

	"github.com/ebitengine/purego"

	"miotool/internal/dl"
)

// fakeRTC is a runtime compiler made of Go callbacks with the C signatures
// NVRTC and hiprtc share, so RTC.Compile runs its real call sequence
// without a GPU toolkit. Its "code" is the options and source echoed back.
type fakeRTC struct {
	mu       sync.Mutex
	next     uintptr
	progs    map[uintptr]*fakeProgram
	destroys atomic.Int32
	errName  []byte // a C string the fake hands out; kept alive here
	funcs    RTCFuncs
	output   RTCOutput
}

type fakeProgram struct {
	src, name, log string
	code           []byte
}

var (
	fakeOnce sync.Once
	theFake  *fakeRTC
)

// fake returns the process's one fake compiler (callbacks are never freed,
// so they are made once).
func fake() *fakeRTC {
	fakeOnce.Do(func() {
		f := &fakeRTC{progs: map[uintptr]*fakeProgram{}, errName: dl.CString("FAKE_ERROR_COMPILATION")}
		f.funcs = RTCFuncs{
			CreateProgram:     purego.NewCallback(f.create),
			CompileProgram:    purego.NewCallback(f.compile),
			GetProgramLogSize: purego.NewCallback(func(p, out uintptr) uintptr { return f.size(p, out, true) }),
			GetProgramLog:     purego.NewCallback(func(p, buf uintptr) uintptr { return f.copyOut(p, buf, true) }),
			DestroyProgram:    purego.NewCallback(f.destroy),
			GetErrorString:    purego.NewCallback(f.errorString),
			Version:           purego.NewCallback(f.version),
		}
		f.output = RTCOutput{
			Kind:    "code",
			SizeFn:  purego.NewCallback(func(p, out uintptr) uintptr { return f.size(p, out, false) }),
			GetFn:   purego.NewCallback(func(p, buf uintptr) uintptr { return f.copyOut(p, buf, false) }),
			SizeSym: "fakertcGetCodeSize",
		}
		theFake = f
	})
	return theFake
}

func (f *fakeRTC) create(progOut, src, name, numHeaders, headers, includeNames uintptr) uintptr {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.next++
	f.progs[f.next] = &fakeProgram{src: dl.GoString(src), name: dl.GoString(name)}
	*(*uintptr)(pointerAt(progOut)) = f.next
	return 0
}

func (f *fakeRTC) compile(prog, numOptions, options uintptr) uintptr {
	f.mu.Lock()
	defer f.mu.Unlock()
	p := f.progs[prog]
	if p == nil {
		return 4 // invalid program
	}
	var opts []string
	if numOptions > 0 {
		for _, o := range unsafe.Slice((*uintptr)(pointerAt(options)), numOptions) {
			opts = append(opts, dl.GoString(o))
		}
	}
	if strings.Contains(p.src, "#error") {
		p.log = p.name + "(1): error: boom\n"
		return 6
	}
	p.log = ""
	p.code = []byte("CODE[" + strings.Join(opts, " ") + "]" + p.src)
	return 0
}

func (f *fakeRTC) size(prog, out uintptr, log bool) uintptr {
	f.mu.Lock()
	defer f.mu.Unlock()
	p := f.progs[prog]
	if p == nil {
		return 4
	}
	n := len(p.code)
	if log {
		n = len(p.log) + 1
	}
	*(*uintptr)(pointerAt(out)) = uintptr(n)
	return 0
}

func (f *fakeRTC) copyOut(prog, buf uintptr, log bool) uintptr {
	f.mu.Lock()
	defer f.mu.Unlock()
	p := f.progs[prog]
	if p == nil {
		return 4
	}
	data := p.code
	if log {
		data = append([]byte(p.log), 0)
	}
	copy(unsafe.Slice((*byte)(pointerAt(buf)), len(data)), data)
	return 0
}

func (f *fakeRTC) destroy(progPtr uintptr) uintptr {
	f.mu.Lock()
	defer f.mu.Unlock()
	slot := (*uintptr)(pointerAt(progPtr))
	delete(f.progs, *slot)
	*slot = 0
	f.destroys.Add(1)
	return 0
}

func (f *fakeRTC) errorString(result uintptr) uintptr {
	if result == 6 {
		return uintptr(unsafe.Pointer(&f.errName[0]))
	}
	return 0
}

func (f *fakeRTC) version(major, minor uintptr) uintptr {
	*(*int32)(pointerAt(major)) = 13
	*(*int32)(pointerAt(minor)) = 2
	return 0
}

func TestRTCCompile(t *testing.T) {
	f := fake()
	r := &RTC{Prefix: "fakertc", Funcs: f.funcs}
	destroys := f.destroys.Load()

	code, log, err := r.Compile("extern \"C\" __global__ void k() {}", "k.cu", []string{"--gpu-architecture=sm_90", "-lineinfo"}, f.output)
	if err != nil {
		t.Fatalf("Compile: %v", err)
	}
	if want := "CODE[--gpu-architecture=sm_90 -lineinfo]extern \"C\" __global__ void k() {}"; string(code) != want {
		t.Fatalf("code %q, want %q", code, want)
	}
	if log != "" {
		t.Fatalf("log %q", log)
	}

	_, log, err = r.Compile("#error nope", "bad.cu", nil, f.output)
	var ce *CompileError
	if !errors.As(err, &ce) {
		t.Fatalf("want *CompileError, got %T %v", err, err)
	}
	if ce.Call != "fakertcCompileProgram" || ce.Status != 6 || ce.StatusName != "FAKE_ERROR_COMPILATION" || ce.Program != "bad.cu" {
		t.Fatalf("compile error %+v", ce)
	}
	if !strings.Contains(ce.Log, "bad.cu(1): error: boom") || log != ce.Log {
		t.Fatalf("log %q / %q", ce.Log, log)
	}
	if !strings.Contains(err.Error(), "fakertcCompileProgram bad.cu: FAKE_ERROR_COMPILATION (6):\nbad.cu(1): error: boom") {
		t.Fatalf("message %q", err.Error())
	}
	if got := f.destroys.Load() - destroys; got != 2 {
		t.Fatalf("%d programs destroyed, want 2 (one per compile, failed or not)", got)
	}
	if v, err := r.Version(); err != nil || v != "13.2" {
		t.Fatalf("Version = %q, %v", v, err)
	}
	if _, _, err := r.Compile("x", "x.cu", nil, RTCOutput{Kind: "cubin"}); err == nil {
		t.Fatal("an output without functions must be refused")
	}
	if got := r.StatusName(3); got != "fakertc result 3" {
		t.Fatalf("unnamed status %q", got)
	}
}

func TestRTCSymbols(t *testing.T) {
	var f RTCFuncs
	got := dl.SymbolNames(f.Symbols("nvrtc"))
	want := []string{"nvrtcCreateProgram", "nvrtcCompileProgram", "nvrtcGetProgramLogSize", "nvrtcGetProgramLog",
		"nvrtcDestroyProgram", "nvrtcGetErrorString", "nvrtcVersion"}
	if !reflect.DeepEqual(got, want) {
		t.Fatalf("symbols %q", got)
	}
}

func TestCodeKey(t *testing.T) {
	base := NewCodeKey("nvrtc", "sm_90", "cubin", "src", []string{"-a", "-b"})
	if base != NewCodeKey("nvrtc", "sm_90", "cubin", "src", []string{"-a", "-b"}) {
		t.Fatal("equal inputs gave different keys")
	}
	for name, k := range map[string]CodeKey{
		"source":   NewCodeKey("nvrtc", "sm_90", "cubin", "src2", []string{"-a", "-b"}),
		"options":  NewCodeKey("nvrtc", "sm_90", "cubin", "src", []string{"-a -b"}),
		"arch":     NewCodeKey("nvrtc", "sm_80", "cubin", "src", []string{"-a", "-b"}),
		"output":   NewCodeKey("nvrtc", "sm_90", "ptx", "src", []string{"-a", "-b"}),
		"compiler": NewCodeKey("hiprtc", "sm_90", "cubin", "src", []string{"-a", "-b"}),
	} {
		if k == base {
			t.Errorf("a different %s gave the same key", name)
		}
	}
}

func TestCodeCacheBuildsOnce(t *testing.T) {
	c := NewCodeCache()
	key := NewCodeKey("x", "a", "o", "s", nil)
	gate := make(chan struct{})
	t.Cleanup(func() {
		select {
		case <-gate:
		default:
			close(gate)
		}
	})
	var builds atomic.Int32
	build := func() ([]byte, error) {
		builds.Add(1)
		<-gate
		return []byte("code"), nil
	}
	const callers = 16
	var wg sync.WaitGroup
	results := make(chan string, callers)
	for range callers {
		wg.Add(1)
		go func() {
			defer wg.Done()
			code, _, err := c.Get(key, build)
			if err != nil {
				results <- "error: " + err.Error()
				return
			}
			results <- string(code)
		}()
	}
	close(gate)
	wg.Wait()
	close(results)
	for r := range results {
		if r != "code" {
			t.Fatalf("caller got %q", r)
		}
	}
	if builds.Load() != 1 {
		t.Fatalf("built %d times", builds.Load())
	}
	hits, misses := c.Stats()
	if hits != callers-1 || misses != 1 || c.Len() != 1 {
		t.Fatalf("hits %d misses %d len %d", hits, misses, c.Len())
	}
	if _, hit, _ := c.Get(key, build); !hit {
		t.Fatal("a later Get missed")
	}
}

func TestCodeCacheDoesNotKeepFailures(t *testing.T) {
	c := NewCodeCache()
	key := NewCodeKey("x", "a", "o", "s", nil)
	fail := errors.New("compiler crashed")
	if _, _, err := c.Get(key, func() ([]byte, error) { return nil, fail }); !errors.Is(err, fail) {
		t.Fatalf("err %v", err)
	}
	if _, _, err := c.Get(key, func() ([]byte, error) { panic("boom") }); err == nil || !strings.Contains(err.Error(), "boom") {
		t.Fatalf("a panicking build gave %v", err)
	}
	code, hit, err := c.Get(key, func() ([]byte, error) { return []byte("ok"), nil })
	if err != nil || hit || string(code) != "ok" {
		t.Fatalf("retry: %q hit=%v err=%v", code, hit, err)
	}
}
