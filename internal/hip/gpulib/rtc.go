package gpulib

import (
	"crypto/sha256"
	"encoding/hex"
	"fmt"
	"runtime"
	"strings"
	"sync"
	"sync/atomic"
	"unsafe"

	"miotool/internal/dl"
)

// RTCFuncs are the runtime-compiler entry points NVRTC and hiprtc share,
// name for name after the prefix ("nvrtc", "hiprtc"):
//
//	CreateProgram(prog*, src, name, numHeaders, headers, includeNames)
//	CompileProgram(prog, numOptions, options)
//	GetProgramLogSize(prog, size_t*) / GetProgramLog(prog, char*)
//	DestroyProgram(prog*)
//	GetErrorString(result) -> const char*
//	Version(int* major, int* minor)
type RTCFuncs struct {
	CreateProgram     uintptr
	CompileProgram    uintptr
	GetProgramLogSize uintptr
	GetProgramLog     uintptr
	DestroyProgram    uintptr
	GetErrorString    uintptr
	Version           uintptr
}

// Symbols is the binding table for f under prefix.
func (f *RTCFuncs) Symbols(prefix string) []dl.Symbol {
	return []dl.Symbol{
		{Name: prefix + "CreateProgram", Addr: &f.CreateProgram},
		{Name: prefix + "CompileProgram", Addr: &f.CompileProgram},
		{Name: prefix + "GetProgramLogSize", Addr: &f.GetProgramLogSize},
		{Name: prefix + "GetProgramLog", Addr: &f.GetProgramLog},
		{Name: prefix + "DestroyProgram", Addr: &f.DestroyProgram},
		{Name: prefix + "GetErrorString", Addr: &f.GetErrorString, Optional: true},
		{Name: prefix + "Version", Addr: &f.Version},
	}
}

// RTCOutput names the pair of calls that fetch one kind of compiled code:
// nvrtcGetCUBINSize/nvrtcGetCUBIN, nvrtcGetPTXSize/nvrtcGetPTX,
// hiprtcGetCodeSize/hiprtcGetCode.
type RTCOutput struct {
	Kind    string // "cubin", "ptx", "code": part of the cache key
	SizeFn  uintptr
	GetFn   uintptr
	SizeSym string // for error messages
}

// RTC runs one runtime compiler.
type RTC struct {
	Prefix string // "nvrtc" or "hiprtc"
	Funcs  RTCFuncs
}

// CompileError is a failed runtime-compiler call; for a failed compile Log
// holds the compiler's messages.
type CompileError struct {
	Call       string // e.g. nvrtcCompileProgram
	Status     int32
	StatusName string // e.g. NVRTC_ERROR_COMPILATION
	Program    string
	Log        string
}

func (e *CompileError) Error() string {
	s := fmt.Sprintf("%s %s: %s (%d)", e.Call, e.Program, e.StatusName, e.Status)
	if log := strings.TrimSpace(e.Log); log != "" {
		s += ":\n" + log
	}
	return s
}

// Version reports the compiler's "major.minor".
func (r *RTC) Version() (string, error) {
	var major, minor int32
	if st := dl.Call(r.Funcs.Version, uintptr(unsafe.Pointer(&major)), uintptr(unsafe.Pointer(&minor))); st != 0 {
		return "", r.fail("Version", "", st, "")
	}
	return fmt.Sprintf("%d.%d", major, minor), nil
}

// Compile compiles src (named name in messages) with options and fetches
// the code out names. The log is returned on success too (warnings).
func (r *RTC) Compile(src, name string, options []string, out RTCOutput) (code []byte, log string, err error) {
	if out.SizeFn == 0 || out.GetFn == 0 {
		return nil, "", fmt.Errorf("%s: no %s output is available", r.Prefix, out.Kind)
	}
	csrc, cname := dl.CString(src), dl.CString(name)
	var prog uintptr
	st := dl.Call(r.Funcs.CreateProgram, uintptr(unsafe.Pointer(&prog)),
		uintptr(unsafe.Pointer(&csrc[0])), uintptr(unsafe.Pointer(&cname[0])), 0, 0, 0)
	if st != 0 {
		return nil, "", r.fail("CreateProgram", name, st, "")
	}
	defer func() { dl.Call(r.Funcs.DestroyProgram, uintptr(unsafe.Pointer(&prog))) }()

	// Each option is its own NUL-terminated Go allocation; the array holds
	// their addresses. All stay reachable through copts until the call ends.
	copts := make([][]byte, len(options))
	optPtrs := make([]uintptr, len(options)+1) // +1 keeps &optPtrs[0] valid with no options
	for i, o := range options {
		copts[i] = dl.CString(o)
		optPtrs[i] = uintptr(unsafe.Pointer(&copts[i][0]))
	}
	st = dl.Call(r.Funcs.CompileProgram, prog, uintptr(len(options)), uintptr(unsafe.Pointer(&optPtrs[0])))
	runtime.KeepAlive(copts)
	log = r.programLog(prog)
	if st != 0 {
		return nil, log, r.fail("CompileProgram", name, st, log)
	}
	var size uintptr
	if st := dl.Call(out.SizeFn, prog, uintptr(unsafe.Pointer(&size))); st != 0 {
		return nil, log, r.failCall(out.SizeSym, name, st)
	}
	if size == 0 {
		return nil, log, fmt.Errorf("%s %s: the compiler produced no %s", r.Prefix, name, out.Kind)
	}
	code = make([]byte, size)
	if st := dl.Call(out.GetFn, prog, uintptr(unsafe.Pointer(&code[0]))); st != 0 {
		return nil, log, r.failCall(strings.TrimSuffix(out.SizeSym, "Size"), name, st)
	}
	return code, log, nil
}

func (r *RTC) programLog(prog uintptr) string {
	var size uintptr
	if dl.Call(r.Funcs.GetProgramLogSize, prog, uintptr(unsafe.Pointer(&size))) != 0 || size <= 1 {
		return ""
	}
	buf := make([]byte, size)
	if dl.Call(r.Funcs.GetProgramLog, prog, uintptr(unsafe.Pointer(&buf[0]))) != 0 {
		return ""
	}
	return strings.TrimRight(string(buf), "\x00")
}

func (r *RTC) fail(call, program string, st int32, log string) error {
	e := r.failCall(r.Prefix+call, program, st).(*CompileError)
	e.Log = log
	return e
}

func (r *RTC) failCall(call, program string, st int32) error {
	return &CompileError{Call: call, Status: st, StatusName: r.StatusName(st), Program: program}
}

// StatusName is the compiler's own name for a result code.
func (r *RTC) StatusName(st int32) string {
	if r.Funcs.GetErrorString != 0 {
		if s := dl.GoString(dl.CallPtr(r.Funcs.GetErrorString, uintptr(st))); s != "" {
			return s
		}
	}
	return fmt.Sprintf("%s result %d", r.Prefix, st)
}

// CodeKey identifies one compiled program: the compiler, the target
// architecture, the output kind, the options and the source text's hash.
type CodeKey struct {
	Compiler, Arch, Output, Options, SourceHash string
}

// NewCodeKey builds the key for src compiled with options.
func NewCodeKey(compiler, arch, output, src string, options []string) CodeKey {
	sum := sha256.Sum256([]byte(src))
	return CodeKey{
		Compiler:   compiler,
		Arch:       arch,
		Output:     output,
		Options:    strings.Join(options, "\x00"),
		SourceHash: hex.EncodeToString(sum[:]),
	}
}

// CodeCache keeps compiled code for the life of the process. Concurrent
// requests for one key compile once; the others wait for that result.
// Failures are not kept, so a later request tries again.
type CodeCache struct {
	mu      sync.Mutex
	entries map[CodeKey]*codeEntry

	hits, misses atomic.Uint64
}

type codeEntry struct {
	done chan struct{}
	code []byte
	err  error
}

// NewCodeCache returns an empty cache.
func NewCodeCache() *CodeCache { return &CodeCache{entries: map[CodeKey]*codeEntry{}} }

// Programs is the process-wide cache of runtime-compiled code.
var Programs = NewCodeCache()

// Get returns the code for key, running build on a miss. hit reports that
// the code came from an earlier (or concurrent) build. The returned slice is
// shared: callers must not modify it.
func (c *CodeCache) Get(key CodeKey, build func() ([]byte, error)) (code []byte, hit bool, err error) {
	c.mu.Lock()
	if e, ok := c.entries[key]; ok {
		c.mu.Unlock()
		<-e.done
		if e.err == nil {
			c.hits.Add(1)
		}
		return e.code, e.err == nil, e.err
	}
	e := &codeEntry{done: make(chan struct{})}
	c.entries[key] = e
	c.mu.Unlock()
	c.misses.Add(1)

	defer close(e.done)
	defer func() {
		if r := recover(); r != nil {
			e.err = fmt.Errorf("compiling: %v", r)
			err = e.err
		}
		if e.err != nil {
			c.mu.Lock()
			delete(c.entries, key)
			c.mu.Unlock()
		}
	}()
	e.code, e.err = build()
	return e.code, false, e.err
}

// Stats reports cache hits and misses so far.
func (c *CodeCache) Stats() (hits, misses uint64) { return c.hits.Load(), c.misses.Load() }

// Len is the number of cached programs.
func (c *CodeCache) Len() int {
	c.mu.Lock()
	defer c.mu.Unlock()
	return len(c.entries)
}
