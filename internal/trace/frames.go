package trace

import (
	"debug/elf"
	"debug/gosym"
	"fmt"
	"path/filepath"
	"sort"
	"strings"
	"sync"

	"github.com/ianlancetaylor/demangle"
)

// Frame is one native caller: the object it is in, its function (C++
// names demangled, without parameters), and the return address's offset
// in the object.
type Frame struct {
	Module string
	// Symbol is "" when no symbol table names the address.
	Symbol string
	// Raw is the symbol as found (mangled for C++).
	Raw    string
	Offset uint64
	// Source says where the name came from: "dynamic" (the observer's
	// dladdr), "elf" (the object's symbol table), "go" (a Go binary's
	// pclntab), or "" when none named it.
	Source string
}

// Object is the module's file name, e.g. libc10_cuda.so.
func (f Frame) Object() string {
	if f.Module == "" || f.Module == "?" {
		return "?"
	}
	return filepath.Base(f.Module)
}

// Name is the function, or object+offset where none is known, e.g.
// c10::cuda::device_synchronize or miotool+0x146af8.
func (f Frame) Name() string {
	if f.Symbol != "" {
		return f.Symbol
	}
	return fmt.Sprintf("%s+%#x", f.Object(), f.Offset)
}

// String is the frame with its object, e.g.
// libc10_cuda.so(c10::cuda::device_synchronize).
func (f Frame) String() string {
	if f.Symbol == "" {
		return f.Name()
	}
	return f.Object() + "(" + f.Symbol + ")"
}

// Demangle is a C++ (or Rust) symbol's readable name without parameters,
// or a Cython function's Python name; other names come back unchanged.
func Demangle(raw string) string {
	name := raw
	if strings.HasPrefix(raw, "_Z") || strings.HasPrefix(raw, "_R") {
		name = demangle.Filter(raw, demangle.NoParams, demangle.NoClones)
	}
	// Cython's output compiled as C++ (CuPy's extensions) gives a static
	// function both manglings: _ZL50__pyx_f_13cupy_backends_..._mallocmi.
	if py, ok := demangleCython(name); ok {
		return py
	}
	return name
}

// cythonPrefixes start the C names Cython gives a module's functions: cdef
// functions (__pyx_f_), def functions (__pyx_pf_) and their Python-callable
// wrappers (__pyx_pw_).
var cythonPrefixes = []string{"__pyx_f_", "__pyx_pf_", "__pyx_pw_"}

// demangleCython reads a Cython function's C name as its Python one:
// __pyx_f_13cupy_backends_4cuda_3api_7runtime_malloc is
// cupy_backends.cuda.api.runtime.malloc. After the prefix come the
// module's and classes' names, each as its length, the name and "_", then
// the function's name, with a counter in front of it for def functions
// (__pyx_pw_4cupy_5_core_4core_7ndarray_15get is cupy._core.core.ndarray.get).
func demangleCython(raw string) (string, bool) {
	rest, ok := "", false
	for _, p := range cythonPrefixes {
		if strings.HasPrefix(raw, p) {
			rest, ok = raw[len(p):], true
			break
		}
	}
	if !ok {
		return "", false
	}
	var parts []string
	for {
		n, width := leadingNumber(rest)
		if width == 0 || n == 0 || width+n >= len(rest) || rest[width+n] != '_' {
			break
		}
		// A def function's counter before a dunder name looks like a part
		// named "_" (Memory_1__init__): no module or class is named so.
		if strings.Trim(rest[width:width+n], "_") == "" {
			break
		}
		parts = append(parts, rest[width:width+n])
		rest = rest[width+n+1:]
	}
	// What is left is the function's name, after a def function's counter.
	_, width := leadingNumber(rest)
	name := rest[width:]
	if len(parts) == 0 || name == "" {
		return "", false
	}
	return strings.Join(append(parts, name), "."), true
}

// leadingNumber is the decimal number s starts with and how many bytes it
// takes (0 when s starts with none).
func leadingNumber(s string) (n, width int) {
	for width < len(s) && width < 6 && s[width] >= '0' && s[width] <= '9' {
		n = n*10 + int(s[width]-'0')
		width++
	}
	return n, width
}

// rawFrames names frames by what the observer sent alone.
func rawFrames(fs []RawFrame) []Frame {
	out := make([]Frame, len(fs))
	for i, f := range fs {
		out[i] = Frame{Module: f.Module, Raw: f.Symbol, Offset: f.Offset, Symbol: Demangle(f.Symbol)}
		if f.Symbol != "" {
			out[i].Source = "dynamic"
		}
	}
	return out
}

// Symbolizer names frames that have no dynamic symbol from their object's
// own tables: the ELF symbol table where the file has one, and a Go
// binary's pclntab (miotool itself: no dynamic symbols, a pclntab). Each
// object is read once.
type Symbolizer struct {
	mu      sync.Mutex
	modules map[string]*moduleSyms
}

// NewSymbolizer returns an empty one.
func NewSymbolizer() *Symbolizer { return &Symbolizer{modules: map[string]*moduleSyms{}} }

// Frames names fs.
func (s *Symbolizer) Frames(fs []RawFrame) []Frame {
	out := rawFrames(fs)
	for i := range out {
		if out[i].Symbol != "" || out[i].Module == "" || out[i].Module == "?" {
			continue
		}
		if name, src := s.lookup(out[i].Module, out[i].Offset); name != "" {
			out[i].Raw, out[i].Symbol, out[i].Source = name, Demangle(name), src
		}
	}
	return out
}

type elfSym struct {
	addr, size uint64
	name       string
}

type moduleSyms struct {
	bias  uint64 // an address in the file is offset + bias
	funcs []elfSym
	gotab *gosym.Table
}

func (s *Symbolizer) lookup(path string, offset uint64) (string, string) {
	s.mu.Lock()
	m, ok := s.modules[path]
	if !ok {
		m = loadModule(path)
		s.modules[path] = m
	}
	s.mu.Unlock()
	if m == nil {
		return "", ""
	}
	// A return address points past its call: look the call up.
	addr := offset + m.bias
	if offset > 0 {
		addr--
	}
	i := sort.Search(len(m.funcs), func(i int) bool { return m.funcs[i].addr > addr }) - 1
	if i >= 0 {
		f := m.funcs[i]
		if addr < f.addr+f.size {
			return f.name, "elf"
		}
	}
	if m.gotab != nil {
		if fn := m.gotab.PCToFunc(addr); fn != nil {
			return fn.Name, "go"
		}
	}
	return "", ""
}

// loadModule reads an object's function symbols and, for a Go binary, its
// line table; nil when the file cannot be read.
func loadModule(path string) *moduleSyms {
	f, err := elf.Open(path)
	if err != nil {
		return nil
	}
	defer f.Close()
	m := &moduleSyms{}
	// The observer's offsets are from where the object's first loaded
	// page is mapped (dladdr's dli_fbase).
	for _, p := range f.Progs {
		if p.Type == elf.PT_LOAD {
			m.bias = p.Vaddr &^ 4095
			break
		}
	}
	for _, read := range []func() ([]elf.Symbol, error){f.Symbols, f.DynamicSymbols} {
		syms, _ := read()
		for _, sym := range syms {
			t := elf.ST_TYPE(sym.Info)
			if (t == elf.STT_FUNC || t == elf.STT_GNU_IFUNC) && sym.Value != 0 && sym.Section != elf.SHN_UNDEF {
				m.funcs = append(m.funcs, elfSym{addr: sym.Value, size: sym.Size, name: sym.Name})
			}
		}
	}
	sort.Slice(m.funcs, func(i, j int) bool { return m.funcs[i].addr < m.funcs[j].addr })
	if pcln, text := f.Section(".gopclntab"), f.Section(".text"); pcln != nil && text != nil {
		if data, err := pcln.Data(); err == nil {
			var symtab []byte
			if st := f.Section(".gosymtab"); st != nil {
				symtab, _ = st.Data()
			}
			if tab, err := gosym.NewTable(symtab, gosym.NewLineTable(data, text.Addr)); err == nil {
				m.gotab = tab
			}
		}
	}
	return m
}

// runtimeObjects start the file names of the objects whose frames are the
// runtime's, the observer's or the C library's: never a caller a person
// looks for. A wheel's copy of a library has a hash after its name
// (libcudart-d0da41ae.so.11.0).
var runtimeObjects = []string{
	"libcuda.so", "libcuda-", "libcudart.so", "libcudart-", "libcupti", "libamdhip64", "libhsa-runtime64",
	"libmiotool-observer", "libc.so", "libc-", "libpthread", "libdl.so", "ld-linux", "ld64.so",
}

// staticCUDARuntime starts the symbols of a CUDA runtime linked statically
// into another object (CuPy's extensions): libcudart_static_<hash>.
const staticCUDARuntime = "libcudart_static_"

// RuntimeFrame says whether a frame is inside the GPU runtime, the
// observer or the C library, by its object or, for a statically linked
// CUDA runtime, its symbol.
func RuntimeFrame(f Frame) bool {
	if strings.HasPrefix(f.Raw, staticCUDARuntime) || strings.HasPrefix(f.Symbol, staticCUDARuntime) {
		return true
	}
	obj := f.Object()
	for _, p := range runtimeObjects {
		if strings.HasPrefix(obj, p) {
			return true
		}
	}
	return false
}

// runtimeEntry says whether a runtime frame is an entry point of the
// CUDA runtime or HIP, named as the program calls it (cudaMalloc,
// hipStreamQuery).
func runtimeEntry(f Frame) bool {
	obj := f.Object()
	if !strings.HasPrefix(obj, "libcudart") && !strings.HasPrefix(obj, "libamdhip64") {
		return false
	}
	return runtimeAPIName(f.Symbol)
}

// runtimeAPIName says whether a symbol is named as a CUDA runtime or HIP
// API function is (cudaMalloc, hipStreamQuery).
func runtimeAPIName(symbol string) bool {
	for _, p := range []string{"cuda", "hip"} {
		if rest, ok := strings.CutPrefix(symbol, p); ok && rest != "" && rest[0] >= 'A' && rest[0] <= 'Z' {
			return true
		}
	}
	return false
}

// Callers are a call's native callers as a person reads them: the runtime
// entry point the program called, and the frames outside the runtime.
type Callers struct {
	// Entry is the CUDA runtime or HIP function the program called
	// (cudaMalloc); "" when no runtime frame names one (a statically
	// linked runtime's frames have hashed names).
	Entry string
	// Frames are the frames outside the runtime, the observer and the C
	// library, innermost first.
	Frames []Frame
	// Skipped counts the frames left out.
	Skipped int
}

// ReadableCallers leaves out the frames of the runtime, the observer and
// the C library, and names the runtime's entry point from the outermost
// of its named frames below the first frame outside.
func ReadableCallers(frames []Frame) Callers {
	var c Callers
	outside, static := false, false
	for _, f := range frames {
		// A statically linked runtime's entry point keeps its API name in
		// the object that links it (cudaMalloc in CuPy's extension), right
		// above the runtime's hashed frames.
		staticEntry := !outside && static && runtimeAPIName(f.Symbol)
		if RuntimeFrame(f) || staticEntry {
			c.Skipped++
			static = static || strings.HasPrefix(f.Raw, staticCUDARuntime)
			if !outside && (runtimeEntry(f) || staticEntry) {
				c.Entry = f.Symbol
			}
			continue
		}
		outside = true
		c.Frames = append(c.Frames, f)
	}
	return c
}

// Names are the entry point (when known) and the outside frames' names,
// innermost first, at most n of them, a frame repeated in a row once.
func (c Callers) Names(n int) []string {
	var names []string
	if c.Entry != "" {
		names = append(names, c.Entry)
	}
	for _, f := range c.Frames {
		if len(names) == n {
			break
		}
		name := f.Name()
		if len(names) > 0 && names[len(names)-1] == name {
			continue
		}
		names = append(names, name)
	}
	return names
}

// Summary is the entry point and the first named frames outside, at most
// n names joined by " ← " (called from): what a headline shows. Where no
// frame outside has a name, the first one is shown as object+offset.
func (c Callers) Summary(n int) string {
	named := Callers{Entry: c.Entry}
	for _, f := range c.Frames {
		if f.Symbol != "" {
			named.Frames = append(named.Frames, f)
		}
	}
	if len(named.Frames) == 0 && len(c.Frames) > 0 {
		named.Frames = c.Frames[:1]
	}
	return strings.Join(named.Names(n), " ← ")
}
