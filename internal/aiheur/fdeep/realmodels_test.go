package fdeep

import (
	"errors"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"miotool/internal/testutil"
)

// modelsDir is ../shared/miopen-models beside the module, or skips.
func modelsDir(t testing.TB) string {
	t.Helper()
	return testutil.Shared(t, "miopen-models")
}

// networkFiles lists the frugally-deep files (not the metadata JSON).
func networkFiles(t testing.TB, dir string) []string {
	t.Helper()
	all, err := filepath.Glob(filepath.Join(dir, "*.model"))
	if err != nil {
		t.Fatal(err)
	}
	var out []string
	for _, f := range all {
		if !strings.Contains(filepath.Base(f), "metadata") {
			out = append(out, f)
		}
	}
	if len(out) != 15 {
		t.Fatalf("found %d network files in %s, want the 15 listed in its README", len(out), dir)
	}
	return out
}

// Every embedded test of every real model passes at load, with fdeep's
// tolerance and with one ten times tighter (the engine is float32 like
// fdeep, so it should agree far better than the tolerance).
func TestRealModelsPassEmbeddedTests(t *testing.T) {
	dir := modelsDir(t)
	for _, file := range networkFiles(t, dir) {
		name := filepath.Base(file)
		t.Run(name, func(t *testing.T) {
			for _, eps := range []float32{DefaultEpsilon, DefaultEpsilon / 10} {
				m, err := LoadFile(file, Options{Epsilon: eps})
				if err != nil {
					t.Fatalf("epsilon %g: %v", eps, err)
				}
				// gfx908.tn.model is the only file without tests.
				if wantTests := name != "gfx908.tn.model"; wantTests != (m.SelfTests() > 0) {
					t.Errorf("SelfTests() = %d for %s", m.SelfTests(), name)
				}
				if m.Name() != name {
					t.Errorf("Name() = %q, want %q", m.Name(), name)
				}
				m.Release()
			}
		})
	}
}

func TestRealModelShapes(t *testing.T) {
	dir := modelsDir(t)
	tests := []struct {
		file    string
		inputs  []Shape
		outputs []Shape
	}{
		{"gfx942.tn.model", []Shape{{18}}, []Shape{{21}}},
		{"gfx90a.tn.model", []Shape{{18}}, []Shape{{36}}},
		{"gfx908.tn.model", []Shape{{24}}, []Shape{{18}}},
		{"gfx942_ConvHipIgemmGroupFwdXdlops_encoder.ktn.model", []Shape{{17, 17}}, []Shape{{64}, {64}, {64}, {64}}},
		{"gfx942_ConvHipIgemmGroupWrwXdlops_decoder.ktn.model", []Shape{{1}, {64}, {64}, {64}, {64}}, []Shape{{75}, {64}, {64}, {64}, {64}}},
		{"gfx908_ConvAsm1x1U_encoder.ktn.model", []Shape{{8, 8}}, []Shape{{128}, {128}, {128}, {128}}},
	}
	for _, tc := range tests {
		t.Run(tc.file, func(t *testing.T) {
			m, err := LoadFile(filepath.Join(dir, tc.file), Options{})
			if err != nil {
				t.Fatal(err)
			}
			defer m.Release()
			if got := m.InputShapes(); !shapesEqual(got, tc.inputs) {
				t.Errorf("InputShapes() = %v, want %v", got, tc.inputs)
			}
			if got := m.OutputShapes(); !shapesEqual(got, tc.outputs) {
				t.Errorf("OutputShapes() = %v, want %v", got, tc.outputs)
			}
		})
	}
}

func shapesEqual(a, b []Shape) bool {
	if len(a) != len(b) {
		return false
	}
	for i := range a {
		if !a[i].equal(b[i]) {
			return false
		}
	}
	return true
}

// An expected output edited in a real file fails the load with an error
// that names the model and the deviation.
func TestRealModelTamperedTestFails(t *testing.T) {
	dir := modelsDir(t)
	data, err := os.ReadFile(filepath.Join(dir, "gfx942.tn.model"))
	if err != nil {
		t.Fatal(err)
	}
	// The first expected output value is -21.58 ("kaKswc9v" in base64);
	// "kaKsQc9v" is the same bits with the sign cleared: +21.58.
	const outputPrefix = `"outputs":[{"shape":[21],"values":["kaKswc9v`
	if !strings.Contains(string(data), outputPrefix) {
		t.Fatalf("gfx942.tn.model no longer starts its expected output with the value this test edits")
	}
	edited := strings.Replace(string(data), outputPrefix, `"outputs":[{"shape":[21],"values":["kaKsQc9v`, 1)
	_, err = Load([]byte(edited), "gfx942.tn.model", Options{})
	var st *SelfTestError
	if !errors.As(err, &st) {
		t.Fatalf("Load of edited file: %v, want a *SelfTestError", err)
	}
	if st.Model != "gfx942.tn.model" || st.Output != 0 || st.Index != 0 || st.Deviation < 43 || st.Deviation > 43.4 {
		t.Errorf("SelfTestError = %+v, want model gfx942.tn.model, output 0 element 0 off by about 43.2", st)
	}
	if msg := err.Error(); !strings.Contains(msg, "gfx942.tn.model") || !strings.Contains(msg, "deviates") {
		t.Errorf("error text %q should name the model and the deviation", msg)
	}
}
