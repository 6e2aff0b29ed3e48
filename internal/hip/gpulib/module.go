package gpulib

import (
	"errors"
	"fmt"
	"log/slog"
	"strings"
	"sync"

	"miotool/internal/dl"
	"miotool/internal/hip"
)

// BuildTarget is what a runtime compiler is asked to build for one device
// architecture.
type BuildTarget struct {
	Target  string   // the architecture named in the options and the cache key
	Options []string // the compiler's options
	Output  RTCOutput
}

// ModuleBuilder turns a kernel source into the image a module loader
// takes: the runtime compiler's output for the device, or, where the vendor
// allows it and the compiler cannot build, the precompiled PTX the source
// carries.
type ModuleBuilder struct {
	Compiler *Compiler // its Err says why it cannot be used
	Name     string    // "NVRTC", "hiprtc": in messages
	Suffix   string    // of program names: ".cu", ".hip"
	// Target chooses the target, options and output for a device
	// architecture; an error means the compiler cannot build for it.
	Target func(arch string) (BuildTarget, error)
	// SourceErrorStatus is the compiler's status for a source that does
	// not compile (NVRTC_ERROR_COMPILATION, HIPRTC_ERROR_COMPILATION). Only
	// that failure is the source's fault (ErrInvalidSource); any other is
	// the compiler's (ErrNotSupported, or the PTX fallback).
	SourceErrorStatus int32
	// UsesPTX lets the loader take the source's precompiled PTX when the
	// compiler cannot build it (CUDA's driver JIT-compiles PTX).
	UsesPTX bool
	// Backend names the backend in the log line that notes a fallback.
	Backend string
}

// ProgramName is the name a compiler gives src in its messages: the
// source's name, or "kernel", with the vendor's suffix.
func ProgramName(src *hip.KernelSource, suffix string) string {
	if src.Name == "" {
		return "kernel" + suffix
	}
	return src.Name + suffix
}

// Build compiles src for arch, through the process-wide cache.
func (m *ModuleBuilder) Build(src *hip.KernelSource, arch string) ([]byte, error) {
	if m.Target == nil {
		return nil, errors.New("no build target is defined for " + m.Name)
	}
	t, err := m.Target(arch)
	if err != nil {
		return nil, err
	}
	return m.Compiler.CompileCached(Programs, src.Text, ProgramName(src, m.Suffix), t.Target, t.Options, t.Output)
}

func (m *ModuleBuilder) unavailable() string {
	if m.Compiler == nil {
		return "not loaded"
	}
	if m.Compiler.Err != nil {
		return m.Compiler.Err.Error()
	}
	return "not bound"
}

// image is the code ModuleLoadData gets for src on a device of arch
// (archErr says why arch is unknown), and how it came to be, for the
// message of a failed load.
func (m *ModuleBuilder) image(st StatusMapper, src *hip.KernelSource, arch string, archErr error) ([]byte, string, error) {
	hasText := strings.TrimSpace(src.Text) != ""
	var why string // why the compiler's code is not used
	switch {
	case !hasText:
		why = "no kernel text"
	case !m.Compiler.Available():
		why = m.unavailable()
	case archErr != nil:
		why = fmt.Sprintf("the device's architecture is unknown (%v)", archErr)
	default:
		code, err := m.Build(src, arch)
		if err == nil {
			return code, "built for " + arch, nil
		}
		var ce *CompileError
		if errors.As(err, &ce) && ce.Status == m.SourceErrorStatus {
			return nil, "", st.Errorf("ModuleLoad", hip.ErrInvalidSource, err.Error())
		}
		if !m.UsesPTX || src.PTX == "" {
			// An option it refuses, an internal error: not the source's fault.
			return nil, "", st.Errorf("ModuleLoad", hip.ErrNotSupported,
				fmt.Sprintf("kernel source %q cannot be built for %s: %v", src.Name, arch, err))
		}
		why = m.Name + " could not build it for " + arch + ": " + err.Error()
	}
	if m.UsesPTX && src.PTX != "" {
		m.notePTXFallback(src.Name, why)
		return dl.CString(src.PTX), "as precompiled PTX", nil
	}
	if !hasText {
		what := "has no text to compile"
		if m.UsesPTX {
			what = "has neither text nor PTX"
		}
		return nil, "", st.Errorf("ModuleLoad", hip.ErrInvalidValue, fmt.Sprintf("kernel source %q %s", src.Name, what))
	}
	if !m.Compiler.Available() {
		msg := fmt.Sprintf("kernel source %q cannot be built: %s is unavailable (%s)", src.Name, m.Name, m.unavailable())
		if m.UsesPTX {
			msg += " and the source carries no precompiled PTX"
		}
		return nil, "", st.Errorf("ModuleLoad", hip.ErrNotSupported, msg)
	}
	return nil, "", st.Errorf("ModuleLoad", hip.ErrNotSupported, fmt.Sprintf("kernel source %q cannot be built: %s", src.Name, why))
}

var ptxNoted sync.Map // backend + kernel source name -> struct{}

// notePTXFallback logs, once per kernel source and process, that its
// precompiled PTX is used instead of the compiler's output.
func (m *ModuleBuilder) notePTXFallback(name, why string) {
	if _, seen := ptxNoted.LoadOrStore(m.Backend+"\x00"+name, struct{}{}); seen {
		return
	}
	slog.Warn(m.Backend+": loading precompiled PTX instead of compiling with "+m.Name, "source", name, "reason", why)
}
