package fdeep

import (
	"os"
	"path/filepath"
	"testing"

	"miotool/internal/aiheur/fdeep/fdeeptest"
)

// BenchmarkPredictGfx942 is one TunaNet inference (18 -> 21) through
// PredictInto, the allocation-free path.
func BenchmarkPredictGfx942(b *testing.B) {
	m, err := LoadFile(filepath.Join(modelsDir(b), "gfx942.tn.model"), Options{})
	if err != nil {
		b.Fatal(err)
	}
	defer m.Release()
	benchmarkPredict(b, m)
}

// BenchmarkPredictSyntheticMLP runs a model of TunaNet's size that needs
// no model files.
func BenchmarkPredictSyntheticMLP(b *testing.B) {
	m, err := Load(fdeeptest.MLP([]int{18, 64, 128, 256, 64, 64, 32, 21}, 1), "mlp", Options{})
	if err != nil {
		b.Fatal(err)
	}
	defer m.Release()
	benchmarkPredict(b, m)
}

func benchmarkPredict(b *testing.B, m *Model) {
	inputs := make([][]float32, len(m.inputs))
	for i, p := range m.inputs {
		inputs[i] = make([]float32, p.n)
		for k := range inputs[i] {
			inputs[i][k] = float32(k%7) - 3
		}
	}
	outputs := make([][]float32, len(m.outputs))
	for i, p := range m.outputs {
		outputs[i] = make([]float32, p.n)
	}
	b.ReportAllocs()
	for b.Loop() {
		if err := m.PredictInto(outputs, inputs...); err != nil {
			b.Fatal(err)
		}
	}
}

// BenchmarkLoadGfx942 is a full load: JSON, base64, weights into their
// mapping, and the embedded self-test.
func BenchmarkLoadGfx942(b *testing.B) {
	data, err := os.ReadFile(filepath.Join(modelsDir(b), "gfx942.tn.model"))
	if err != nil {
		b.Fatal(err)
	}
	b.SetBytes(int64(len(data)))
	for b.Loop() {
		m, err := Load(data, "gfx942.tn.model", Options{})
		if err != nil {
			b.Fatal(err)
		}
		m.Release()
	}
}
