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

// Demangle is a C++ (or Rust) symbol's readable name without parameters;
// other names come back unchanged.
func Demangle(raw string) string {
	if !strings.HasPrefix(raw, "_Z") && !strings.HasPrefix(raw, "_R") {
		return raw
	}
	return demangle.Filter(raw, demangle.NoParams, demangle.NoClones)
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
