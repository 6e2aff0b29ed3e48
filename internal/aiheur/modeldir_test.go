package aiheur

import (
	"errors"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"testing/fstest"
)

// fakeRoot lays out directories (and optional model files) under a temp dir.
func fakeRoot(t *testing.T, withModels []string, empty []string) string {
	t.Helper()
	root := t.TempDir()
	for _, d := range withModels {
		full := filepath.Join(root, d)
		if err := os.MkdirAll(full, 0o755); err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(filepath.Join(full, "gfx942.tn.model"), []byte("{}"), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	for _, d := range empty {
		if err := os.MkdirAll(filepath.Join(root, d), 0o755); err != nil {
			t.Fatal(err)
		}
	}
	return root
}

func TestFindModelDir(t *testing.T) {
	saved := Embedded
	t.Cleanup(func() { Embedded = saved })
	Embedded = nil

	t.Run("override wins", func(t *testing.T) {
		root := fakeRoot(t, []string{"opt/rocm/share/miopen/db"}, nil)
		dir, src := findModelDir("/my/models", func(string) string { return "" }, filepath.Join(root, "opt"))
		if dir != "/my/models" || src != SourceFlag {
			t.Errorf("got %q from %q", dir, src)
		}
	})
	tests := []struct {
		name       string
		models     []string // dirs under root holding a *.tn.model
		empty      []string // dirs that exist without models
		env        map[string]string
		wantDir    string // relative to root
		wantSource string // prefix; "$ROOT" is replaced
	}{
		{"nothing", nil, nil, nil, "", SourceNone},
		{"miopen system db path", []string{"sys", "opt/rocm/share/miopen/db"}, nil,
			map[string]string{"MIOPEN_SYSTEM_DB_PATH": "$ROOT/sys"}, "sys", "$MIOPEN_SYSTEM_DB_PATH"},
		{"rocm path", []string{"rocm62/share/miopen/db", "opt/rocm/share/miopen/db"}, nil,
			map[string]string{"ROCM_PATH": "$ROOT/rocm62"}, "rocm62/share/miopen/db", "$ROCM_PATH"},
		{"rocm path without models falls through", []string{"opt/rocm/share/miopen/db"}, []string{"rocm62/share/miopen/db"},
			map[string]string{"ROCM_PATH": "$ROOT/rocm62"}, "opt/rocm/share/miopen/db", "$ROOT/opt/rocm"},
		{"versioned install", []string{"opt/rocm-6.2.0/share/miopen/db", "opt/rocm-6.3.1/share/miopen/db"}, nil, nil,
			"opt/rocm-6.3.1/share/miopen/db", "$ROOT/opt/rocm-6.3.1"},
		{"legacy layout", []string{"opt/rocm/miopen/share/miopen/db"}, nil, nil, "opt/rocm/miopen/share/miopen/db", "$ROOT/opt/rocm/miopen"},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			root := fakeRoot(t, tc.models, tc.empty)
			env := func(k string) string { return strings.ReplaceAll(tc.env[k], "$ROOT", root) }
			dir, src := findModelDir("", env, filepath.Join(root, "opt"))
			want := ""
			if tc.wantDir != "" {
				want = filepath.Join(root, tc.wantDir)
			}
			if dir != want || !strings.HasPrefix(src, strings.ReplaceAll(tc.wantSource, "$ROOT", root)) {
				t.Errorf("got %q from %q; want %q from %q", dir, src, want, tc.wantSource)
			}
		})
	}
}

// A libMIOpen.so found on LD_LIBRARY_PATH leads to <lib>/../share/miopen/db,
// following symlinks like MIOpen's dladdr-based lookup.
func TestFindModelDirFromLibrary(t *testing.T) {
	saved := Embedded
	t.Cleanup(func() { Embedded = saved })
	Embedded = nil
	root := fakeRoot(t, []string{"rocm-7.0/share/miopen/db"}, []string{"rocm-7.0/lib", "links"})
	lib := filepath.Join(root, "rocm-7.0", "lib", "libMIOpen.so.1.0")
	if err := os.WriteFile(lib, nil, 0o644); err != nil {
		t.Fatal(err)
	}
	if err := os.Symlink(lib, filepath.Join(root, "links", "libMIOpen.so")); err != nil {
		t.Skipf("symlinks unavailable: %v", err)
	}
	env := func(k string) string {
		if k == "LD_LIBRARY_PATH" {
			return "/nonexistent" + string(os.PathListSeparator) + filepath.Join(root, "links")
		}
		return ""
	}
	dir, src := findModelDir("", env, filepath.Join(root, "opt"))
	if want := filepath.Join(root, "rocm-7.0", "share", "miopen", "db"); dir != want || !strings.HasPrefix(src, "libMIOpen.so at ") {
		t.Errorf("got %q from %q; want %q from the library", dir, src, want)
	}
}

func TestModelFSAndEmbedded(t *testing.T) {
	saved := Embedded
	t.Cleanup(func() { Embedded = saved })

	Embedded = nil
	// The fact, not a flag: the command line is the caller's to name.
	if _, err := ModelFS(""); !errors.Is(err, ErrNoModels) || strings.Contains(err.Error(), "--") {
		t.Errorf("no dir and nothing embedded: err = %v, want ErrNoModels without a flag", err)
	}
	if _, src := findModelDir("", func(string) string { return "" }, t.TempDir()); src != SourceNone {
		t.Errorf("source without embedded models = %q", src)
	}
	if _, err := ModelFS(filepath.Join(t.TempDir(), "missing")); err == nil {
		t.Error("missing directory accepted")
	}

	Embedded = fstest.MapFS{"gfx942.tn.model": {Data: []byte("{}")}, "notes.txt": {Data: nil}}
	if _, src := findModelDir("", func(string) string { return "" }, t.TempDir()); src != SourceEmbedded {
		t.Errorf("source with embedded models = %q", src)
	}
	fsys, err := ModelFS("")
	if err != nil {
		t.Fatal(err)
	}
	files, err := ModelFiles(fsys)
	if err != nil || len(files) != 1 || files[0] != "gfx942.tn.model" {
		t.Errorf("ModelFiles = %v, %v", files, err)
	}
}

// The loaders work from any fs.FS, such as an embedded copy of the files.
func TestLoadFromMapFS(t *testing.T) {
	dir := modelsDir(t)
	mem := fstest.MapFS{}
	for _, name := range []string{"gfx942.tn.model", "gfx942_metadata.tn.model"} {
		data, err := os.ReadFile(filepath.Join(dir, name))
		if err != nil {
			t.Fatal(err)
		}
		mem[name] = &fstest.MapFile{Data: data}
	}
	tn, err := LoadTunaNet(mem, "gfx942")
	if err != nil {
		t.Fatal(err)
	}
	defer tn.Release()
	if ranked, err := tn.Rank(exampleProblem); err != nil || ranked[0] != "ConvBinWinogradRxSf2x3g1" {
		t.Errorf("Rank = %v, %v", ranked, err)
	}
}

func TestProblemValidate(t *testing.T) {
	mod := func(f func(*Problem)) Problem { p := exampleProblem; f(&p); return p }
	tests := []struct {
		name string
		p    Problem
		want string
	}{
		{"valid", exampleProblem, ""},
		{"zero batch", mod(func(p *Problem) { p.N = 0 }), "n must be at least 1"},
		{"zero stride", mod(func(p *Problem) { p.StrideH = 0 }), "stride_h must be at least 1, got 0"},
		{"negative pad", mod(func(p *Problem) { p.PadW = -1 }), "padding must not be negative"},
		{"groups", mod(func(p *Problem) { p.Groups = 2 }), "groups 2 must divide c 3"},
		{"filter too big", mod(func(p *Problem) { p.R = 40 }), "does not fit"},
		{"direction", mod(func(p *Problem) { p.Direction = 'X' }), "is not F, B or W"},
		{"data type", mod(func(p *Problem) { p.DataType = "" }), "data type is empty"},
	}
	for _, tc := range tests {
		err := tc.p.Validate()
		if (tc.want == "") != (err == nil) || (err != nil && !strings.Contains(err.Error(), tc.want)) {
			t.Errorf("%s: Validate() = %v, want %q", tc.name, err, tc.want)
		}
	}
	strided := mod(func(p *Problem) {
		p.StrideH, p.StrideW, p.H, p.W = 2, 2, 224, 224
		p.R, p.S, p.PadH, p.PadW = 7, 7, 3, 3
	})
	if strided.OutH() != 112 || strided.OutW() != 112 {
		t.Errorf("224x224, 7x7, pad 3, stride 2 gives %dx%d, want 112x112", strided.OutH(), strided.OutW())
	}
}

func TestParseDirection(t *testing.T) {
	for in, want := range map[string]Direction{"F": Forward, "fwd": Forward, "b": BackwardData, "bwd": BackwardData,
		"W": BackwardWeights, "wrw": BackwardWeights, "backward-weights": BackwardWeights} {
		if got, err := ParseDirection(in); err != nil || got != want {
			t.Errorf("ParseDirection(%q) = %v, %v", in, got, err)
		}
	}
	if _, err := ParseDirection("sideways"); err == nil || !strings.Contains(err.Error(), `"sideways"`) {
		t.Errorf("bad direction: %v", err)
	}
	if Forward.String() != "F" || Direction(0).String() != "Direction(0)" {
		t.Error("Direction.String")
	}
}
