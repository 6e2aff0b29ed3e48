package gpulib

import (
	"errors"

	"miotool/internal/dl"
	"miotool/internal/hip"
)

// Compiler is a runtime compiler (NVRTC, hiprtc) as a backend found it:
// loaded and bound, or the reason it cannot be used.
type Compiler struct {
	Prefix  string // "nvrtc", "hiprtc"
	Lib     hip.Library
	RTC     *RTC   // nil when Err is set
	Version string // "major.minor", when the compiler said
	Err     error  // why the compiler cannot be used; nil when it can
}

// OpenCompiler finds the library of spec and binds the calls every runtime
// compiler has under prefix, plus extra (its output getters, which fill
// the caller's RTCOutput fields). A failure is kept in Err rather than
// returned: a backend without its compiler still opens, and its report
// lists every path tried.
func OpenCompiler(spec dl.SearchSpec, prefix string, extra ...dl.Symbol) *Compiler {
	c := &Compiler{Prefix: prefix}
	h, lib, err := dl.Open(spec)
	c.Lib = lib
	if err != nil {
		c.Err = err
		return c
	}
	rtc := &RTC{Prefix: prefix}
	table := append(rtc.Funcs.Symbols(prefix), extra...)
	if err := dl.Bind(dl.Lookup(h), lib.Loaded, table); err != nil {
		c.Err = err
		return c
	}
	c.RTC = rtc
	if v, err := rtc.Version(); err == nil {
		c.Version = v
		c.Lib.Version = v
	}
	return c
}

// Available reports whether the compiler can be used.
func (c *Compiler) Available() bool { return c != nil && c.Err == nil && c.RTC != nil }

// CodeKey is the cache key of src built for arch with options. It names
// the compiler by its file as well as its version: two builds of one
// version in one process must not share code.
func (c *Compiler) CodeKey(arch, output, src string, options []string) CodeKey {
	return NewCodeKey(c.Prefix+" "+c.Version+" "+c.Lib.Loaded, arch, output, src, options)
}

// CompileCached returns the code of src (named name in messages) built
// for arch with options, compiling it on the first request for its key
// and sharing the result through cache afterwards.
func (c *Compiler) CompileCached(cache *CodeCache, src, name, arch string, options []string, out RTCOutput) ([]byte, error) {
	if !c.Available() {
		if c != nil && c.Err != nil {
			return nil, c.Err
		}
		return nil, errors.New("no runtime compiler is loaded")
	}
	code, _, err := cache.Get(c.CodeKey(arch, out.Kind, src, options), func() ([]byte, error) {
		code, _, err := c.RTC.Compile(src, name, options, out)
		return code, err
	})
	return code, err
}
