package gpulib

import (
	"errors"
	"strings"
	"testing"

	"miotool/internal/hip"
)

// TestModuleImage walks ModuleBuilder's choices for a vendor without a
// precompiled fallback (HIP) and one with PTX (CUDA), on the fake compiler.
func TestModuleImage(t *testing.T) {
	f := fake()
	working := &Compiler{Prefix: "fakertc", RTC: &RTC{Prefix: "fakertc", Funcs: f.funcs}, Version: "13.2",
		Lib: hip.Library{Loaded: "/x/" + t.Name() + "/libfakertc.so"}}
	missing := &Compiler{Prefix: "fakertc", Err: errors.New("libfakertc.so.9 not found")}
	target := func(arch string) (BuildTarget, error) {
		if arch == "gfx000" {
			return BuildTarget{}, errors.New("no target for gfx000")
		}
		return BuildTarget{Target: arch, Options: []string{"--arch=" + arch}, Output: f.output}, nil
	}
	builder := func(c *Compiler, ptx bool) ModuleBuilder {
		return ModuleBuilder{Compiler: c, Name: "fakertc", Suffix: ".k", Target: target, SourceErrorStatus: 6, UsesPTX: ptx, Backend: "test"}
	}
	st := StatusMapper{Dialect: hip.DialectHIP}
	const text = "extern \"C\" __global__ void k() {}"
	const ptx = "//PTX k"
	tests := []struct {
		name    string
		c       *Compiler
		usesPTX bool
		src     hip.KernelSource
		arch    string
		archErr error
		want    string // the image, or what the error says
		how     string
		code    hip.Code
	}{
		{"builds", working, false, hip.KernelSource{Name: "a", Text: text}, "gfx942", nil,
			"CODE[--arch=gfx942]" + text, "built for gfx942", hip.Success},
		{"source error", working, false, hip.KernelSource{Name: "b", Text: "#error no"}, "gfx942", nil,
			"b.k(1): error", "", hip.ErrInvalidSource},
		{"compiler cannot target", working, false, hip.KernelSource{Name: "c", Text: text}, "gfx000", nil,
			`kernel source "c" cannot be built for gfx000: no target for gfx000`, "", hip.ErrNotSupported},
		{"no text", working, false, hip.KernelSource{Name: "d", Text: " "}, "gfx942", nil,
			`kernel source "d" has no text to compile`, "", hip.ErrInvalidValue},
		{"no compiler", missing, false, hip.KernelSource{Name: "e", Text: text}, "gfx942", nil,
			`kernel source "e" cannot be built: fakertc is unavailable (libfakertc.so.9 not found)`, "", hip.ErrNotSupported},
		{"unknown arch", working, false, hip.KernelSource{Name: "f", Text: text}, "", errors.New("no gcnArchName"),
			`kernel source "f" cannot be built: the device's architecture is unknown (no gcnArchName)`, "", hip.ErrNotSupported},

		{"PTX: builds", working, true, hip.KernelSource{Name: "g", Text: text, PTX: ptx}, "sm_90", nil,
			"CODE[--arch=sm_90]" + text, "built for sm_90", hip.Success},
		{"PTX: a source error is not hidden", working, true, hip.KernelSource{Name: "h", Text: "#error no", PTX: ptx}, "sm_90", nil,
			"h.k(1): error", "", hip.ErrInvalidSource},
		{"PTX: compiler cannot target", working, true, hip.KernelSource{Name: "i", Text: text, PTX: ptx}, "gfx000", nil,
			ptx + "\x00", "as precompiled PTX", hip.Success},
		{"PTX: compiler cannot target, no PTX", working, true, hip.KernelSource{Name: "j", Text: text}, "gfx000", nil,
			`kernel source "j" cannot be built for gfx000`, "", hip.ErrNotSupported},
		{"PTX: no text", working, true, hip.KernelSource{Name: "k", PTX: ptx}, "sm_90", nil,
			ptx + "\x00", "as precompiled PTX", hip.Success},
		{"PTX: neither", working, true, hip.KernelSource{Name: "l"}, "sm_90", nil,
			`kernel source "l" has neither text nor PTX`, "", hip.ErrInvalidValue},
		{"PTX: no compiler", missing, true, hip.KernelSource{Name: "m", Text: text, PTX: ptx}, "sm_90", nil,
			ptx + "\x00", "as precompiled PTX", hip.Success},
		{"PTX: no compiler, no PTX", missing, true, hip.KernelSource{Name: "n", Text: text}, "sm_90", nil,
			"fakertc is unavailable (libfakertc.so.9 not found) and the source carries no precompiled PTX", "", hip.ErrNotSupported},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			m := builder(tt.c, tt.usesPTX)
			image, how, err := m.image(st, &tt.src, tt.arch, tt.archErr)
			if got := hip.CodeOf(err); got != tt.code {
				t.Fatalf("code %v (%v), want %v", got, err, tt.code)
			}
			if err != nil {
				if !strings.Contains(err.Error(), tt.want) || !strings.HasPrefix(err.Error(), "hipModuleLoadData: ") {
					t.Fatalf("error %q lacks %q", err, tt.want)
				}
				return
			}
			if string(image) != tt.want || how != tt.how {
				t.Fatalf("image %q (%s), want %q (%s)", image, how, tt.want, tt.how)
			}
		})
	}
}

func TestProgramName(t *testing.T) {
	if got := ProgramName(&hip.KernelSource{Name: "conv"}, ".hip"); got != "conv.hip" {
		t.Errorf("named: %q", got)
	}
	if got := ProgramName(&hip.KernelSource{}, ".cu"); got != "kernel.cu" {
		t.Errorf("unnamed: %q", got)
	}
}
