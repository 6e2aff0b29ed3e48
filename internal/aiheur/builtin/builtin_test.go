package builtin

import (
	"bytes"
	"encoding/json"
	"io/fs"
	"os"
	"path/filepath"
	"testing"

	"miotool/internal/aiheur"
	"miotool/internal/aiheur/fit"
)

// dataFile is the CSV the committed model was fitted on, as its metadata
// records it (the data lives in testdata/).
func dataFile(t *testing.T) string {
	t.Helper()
	meta, err := fs.ReadFile(FS, fit.MetadataFile)
	if err != nil {
		t.Fatal(err)
	}
	_, data, err := fit.RecordedConfig(meta)
	if err != nil {
		t.Fatal(err)
	}
	if data.File == "" || data.File != filepath.Base(data.File) {
		t.Fatalf("the metadata records the data file as %q, want a base name", data.File)
	}
	return filepath.Join("testdata", data.File)
}

func TestImportInstallsTheEmbeddedModel(t *testing.T) {
	if aiheur.Embedded == nil {
		t.Fatal("aiheur.Embedded is nil after importing builtin")
	}
	files, err := aiheur.ModelFiles(aiheur.Embedded)
	if err != nil {
		t.Fatal(err)
	}
	want := []string{fit.ModelFile, fit.MetadataFile}
	if len(files) != 2 || files[0] != want[0] || files[1] != want[1] {
		t.Errorf("embedded files %v, want %v", files, want)
	}
}

// The embedded model loads through the same path as MIOpen's files, its
// self-tests run and pass, and its metadata says where it came from.
func TestEmbeddedModelLoadsAndSelfTests(t *testing.T) {
	tn, err := aiheur.LoadTunaNet(FS, aiheur.BuiltinArch)
	if err != nil {
		t.Fatal(err)
	}
	defer tn.Release()
	if tn.Model.SelfTests() < 1 {
		t.Errorf("the model ran %d self-tests at load, want at least 1", tn.Model.SelfTests())
	}
	if tn.Meta.Offset() != 0 || len(tn.Meta.Solvers) != 3 {
		t.Errorf("offset %d, solvers %v; want 0 and miotool's three solvers", tn.Meta.Offset(), tn.Meta.Solvers)
	}
	meta, err := fs.ReadFile(FS, fit.MetadataFile)
	if err != nil {
		t.Fatal(err)
	}
	var m struct {
		GPU struct {
			Name, Arch, Backend string
		} `json:"gpu"`
		GeneratedOn string `json:"generated_on"`
		Data        struct {
			File, Collector string
		} `json:"data"`
		Fitter struct {
			Version string `json:"version"`
		} `json:"fitter"`
	}
	if err := json.Unmarshal(meta, &m); err != nil {
		t.Fatal(err)
	}
	for what, v := range map[string]string{"gpu.name": m.GPU.Name, "gpu.arch": m.GPU.Arch, "gpu.backend": m.GPU.Backend,
		"generated_on": m.GeneratedOn, "data.file": m.Data.File, "data.collector": m.Data.Collector, "fitter.version": m.Fitter.Version} {
		if v == "" {
			t.Errorf("the metadata does not record %s", what)
		}
	}
}

// The committed model is what the committed fitter makes of the committed
// data, with the configuration its metadata records: byte for byte.
func TestFitReproducesCommittedModel(t *testing.T) {
	file := dataFile(t)
	data, err := os.ReadFile(file)
	if err != nil {
		t.Fatal(err)
	}
	committedModel, err := fs.ReadFile(FS, fit.ModelFile)
	if err != nil {
		t.Fatal(err)
	}
	committedMeta, err := fs.ReadFile(FS, fit.MetadataFile)
	if err != nil {
		t.Fatal(err)
	}
	cfg, rec, err := fit.RecordedConfig(committedMeta)
	if err != nil {
		t.Fatal(err)
	}
	ds, err := fit.ReadCSV(data)
	if err != nil {
		t.Fatal(err)
	}
	if ds.SHA256 != rec.SHA256 {
		t.Fatalf("%s has sha256 %s, but the model was fitted on data with %s", file, ds.SHA256, rec.SHA256)
	}
	res, err := fit.Fit(ds, cfg, fit.Source{File: rec.File})
	if err != nil {
		t.Fatal(err)
	}
	if !bytes.Equal(res.Model, committedModel) {
		t.Errorf("re-fitting %s does not reproduce %s (%d bytes, committed %d)", file, fit.ModelFile, len(res.Model), len(committedModel))
	}
	if !bytes.Equal(res.Metadata, committedMeta) {
		t.Errorf("re-fitting %s does not reproduce %s:\n%s", file, fit.MetadataFile, res.Metadata)
	}
}

// Run through inference (float32, as the stress scenario runs it), the
// model picks the measured winner for most problems of its data.
func TestModelAgreesWithItsData(t *testing.T) {
	data, err := os.ReadFile(dataFile(t))
	if err != nil {
		t.Fatal(err)
	}
	ds, err := fit.ReadCSV(data)
	if err != nil {
		t.Fatal(err)
	}
	tn, err := aiheur.LoadTunaNet(FS, aiheur.BuiltinArch)
	if err != nil {
		t.Fatal(err)
	}
	defer tn.Release()
	agree := 0
	for _, s := range ds.Samples {
		rank, err := tn.Rank(s.Geometry.Problem())
		if err != nil {
			t.Fatal(err)
		}
		if rank[0] == s.Winner {
			agree++
		}
	}
	if share := float64(agree) / float64(len(ds.Samples)); share < 0.8 {
		t.Errorf("the model ranks the measured winner first for %d of %d problems (%.0f%%), want at least 80%%", agree, len(ds.Samples), 100*share)
	}
}

// BenchmarkLoadBuiltin is the embedded model's load (JSON, weights,
// self-tests): the time two threads that miss the cache together spend
// loading before the pre-fix cache lets the second destroy the first's.
func BenchmarkLoadBuiltin(b *testing.B) {
	for b.Loop() {
		tn, err := aiheur.LoadTunaNet(FS, aiheur.BuiltinArch)
		if err != nil {
			b.Fatal(err)
		}
		tn.Release()
	}
}

// BenchmarkScoresBuiltin is one heuristic query of the embedded model:
// features, inference and ranking, for the stress-threads problem.
func BenchmarkScoresBuiltin(b *testing.B) {
	tn, err := aiheur.LoadTunaNet(FS, aiheur.BuiltinArch)
	if err != nil {
		b.Fatal(err)
	}
	defer tn.Release()
	p := aiheur.Problem{N: 1, C: 1, H: 2048, W: 2048, K: 1, R: 2, S: 2, StrideH: 1, StrideW: 1, DilationH: 1, DilationW: 1,
		Groups: 1, Direction: aiheur.Forward, DataType: "FP32", Layout: "NCHW"}
	for b.Loop() {
		if _, err := tn.Scores(p); err != nil {
			b.Fatal(err)
		}
	}
}
