package fit

import (
	"bytes"
	"encoding/json"
	"math"
	"strings"
	"testing"
	"testing/fstest"

	"miotool/internal/aiheur"
)

func geometry(n, c, hw, k, r int) Geometry {
	return Geometry{N: n, C: c, H: hw, W: hw, K: k, R: r, S: r, StrideH: 1, StrideW: 1, DilationH: 1, DilationW: 1, Groups: 1}
}

// synthetic is data a small net can learn: "Big" wins above 40 pixels,
// "Small" below, "OneByOne" for 1x1 filters.
func synthetic() *Dataset {
	d := &Dataset{Info: []Info{{"device", "test device"}, {"arch", "test"}, {"backend", "sim"}, {"collected", "2026-01-02"}, {"tool", "miotool test"}},
		Solvers: []string{"Big", "OneByOne", "Small"}}
	for _, hw := range []int{8, 12, 16, 24, 32, 36, 44, 48, 56, 64, 80, 96} {
		for _, r := range []int{1, 3} {
			for _, c := range []int{4, 16} {
				s := Sample{Geometry: geometry(1, c, hw, 8, r), TimesMs: []float64{1, 1, 1}, Has: []bool{true, r == 1, true}}
				switch {
				case r == 1:
					s.Winner = "OneByOne"
				case hw > 40:
					s.Winner = "Big"
				default:
					s.Winner = "Small"
				}
				d.Samples = append(d.Samples, s)
			}
		}
	}
	return d
}

func smallConfig() Config {
	return Config{Hidden: []int{12}, Epochs: 400, LearningRate: 0.3, L2: 1e-4, Seed: 5, Tests: 3}
}

func TestCSVRoundTrip(t *testing.T) {
	in := synthetic()
	in.Samples[0].TimesMs = []float64{0.0123456789, 12, 1e-7}
	var b bytes.Buffer
	if err := WriteCSV(&b, in); err != nil {
		t.Fatal(err)
	}
	out, err := ReadCSV(b.Bytes())
	if err != nil {
		t.Fatalf("%v\n%s", err, b.String())
	}
	if len(out.Info) != len(in.Info) || out.Lookup("device") != "test device" || out.Lookup("missing") != "" {
		t.Errorf("info %v", out.Info)
	}
	if strings.Join(out.Solvers, ",") != "Big,OneByOne,Small" || len(out.Samples) != len(in.Samples) {
		t.Fatalf("solvers %v, %d samples", out.Solvers, len(out.Samples))
	}
	for i, s := range out.Samples {
		want := in.Samples[i]
		if s.Geometry != want.Geometry || s.Winner != want.Winner {
			t.Errorf("sample %d: %+v, want %+v", i, s, want)
		}
		for j := range s.Has {
			if s.Has[j] != want.Has[j] || (s.Has[j] && math.Abs(s.TimesMs[j]-want.TimesMs[j]) > 1e-5*want.TimesMs[j]) {
				t.Errorf("sample %d solver %d: %v/%v, want %v/%v", i, j, s.TimesMs[j], s.Has[j], want.TimesMs[j], want.Has[j])
			}
		}
	}
	if len(out.SHA256) != 64 {
		t.Errorf("digest %q", out.SHA256)
	}
}

func TestReadCSVErrors(t *testing.T) {
	const header = "n,c,h,w,k,r,s,pad_h,pad_w,stride_h,stride_w,dil_h,dil_w,groups,ms:A,ms:B,winner\n"
	const row = "1,3,8,8,4,3,3,1,1,1,1,1,1,1,0.5,0.7,A\n"
	for _, tt := range []struct {
		name, data, want string
	}{
		{"empty", "", "no header"},
		{"preamble only", "# device: x\n", "line 2: no header"},
		{"preamble without colon", "# just words\n" + header + row, `line 1: a preamble line must read "# key: value"`},
		{"short header", "n,c,winner\n1,2,A\n", "the header has 3 columns"},
		{"wrong geometry column", strings.Replace(header, "pad_h", "padh", 1) + row, `column 8 is "padh", want "pad_h"`},
		{"no winner column", strings.Replace(header, "winner", "best", 1) + row, `the last column is "best"`},
		{"solver column without prefix", strings.Replace(header, "ms:B", "B", 1) + row, `column 16 is "B"`},
		{"solver twice", strings.Replace(header, "ms:B", "ms:A", 1) + row, "solver A has two columns"},
		{"no samples", header, "no samples"},
		{"not an integer", header + strings.Replace(row, "1,3,8", "1,x,8", 1), `line 2: column c: "x" is not an integer`},
		{"invalid problem", "# a: b\n" + header + row + strings.Replace(row, ",1,1,1,1,1,1,1,", ",1,1,0,1,1,1,1,", 1), "line 4: problem: stride_h must be at least 1"},
		{"bad time", header + strings.Replace(row, "0.7", "-2", 1), `column ms:B: "-2" is not a time`},
		{"unknown winner", header + strings.Replace(row, ",A\n", ",C\n", 1), `the winner "C" is not one of the solver columns`},
		{"winner without time", header + strings.Replace(row, "0.5,", ",", 1), "the winner A has no time"},
		{"empty winner", header + strings.Replace(row, ",A\n", ",\n", 1), "the winner is empty"},
		{"missing field", header + "1,3,8,8,4,3,3,1,1,1,1,1,1,1,0.5,A\n", "line 2: wrong number of fields"},
	} {
		_, err := ReadCSV([]byte(tt.data))
		if err == nil || !strings.Contains(err.Error(), tt.want) {
			t.Errorf("%s: error %v, want one containing %q", tt.name, err, tt.want)
		}
	}
}

func TestWriteCSVRejects(t *testing.T) {
	for _, d := range []*Dataset{
		{Info: []Info{{"a:b", "v"}}},
		{Info: []Info{{"a", "two\nlines"}}},
		{Info: []Info{{"", "v"}}},
		{Solvers: []string{"A", "B"}, Samples: []Sample{{TimesMs: []float64{1}, Has: []bool{true}, Winner: "A"}}},
	} {
		if err := WriteCSV(&bytes.Buffer{}, d); err == nil {
			t.Errorf("%+v written without an error", d)
		}
	}
}

// exp agrees with the math package's to a few ulps over its whole range.
func TestExp(t *testing.T) {
	worst := 0.0
	for i := 0; i <= 200000; i++ {
		x := -745 * float64(i) / 200000
		got, want := exp(x), math.Exp(x)
		if want == 0 || want < 1e-300 {
			continue
		}
		if rel := math.Abs(got-want) / want; rel > worst {
			worst = rel
		}
	}
	if worst > 1e-15 {
		t.Errorf("largest relative error %g, want below 1e-15", worst)
	}
	if exp(0) != 1 || exp(-746) != 0 || !math.IsNaN(exp(math.NaN())) {
		t.Errorf("exp(0) = %v, exp(-746) = %v, exp(NaN) = %v", exp(0), exp(-746), exp(math.NaN()))
	}
}

// A fitted model loads through the same path as MIOpen's, passes its own
// self-tests, and ranks the training data's winners first.
func TestFitLearnsAndLoads(t *testing.T) {
	d := synthetic()
	res, err := Fit(d, smallConfig(), Source{File: "synthetic.csv"})
	if err != nil {
		t.Fatal(err)
	}
	if res.Accuracy < 0.95 {
		t.Errorf("training accuracy %.2f, want at least 0.95 on separable data", res.Accuracy)
	}
	// Only the varying features are used; the constant ones are recorded.
	if strings.Join(res.Features, ",") != "Inp_0,Inp_2,Inp_3,Out_2,Out_3,Fil_1,Fil_2" {
		t.Errorf("features %v", res.Features)
	}
	if !strings.Contains(strings.Join(res.Redundant, ","), "Precision") {
		t.Errorf("redundant %v", res.Redundant)
	}
	fsys := fstest.MapFS{ModelFile: {Data: res.Model}, MetadataFile: {Data: res.Metadata}}
	tn, err := aiheur.LoadTunaNet(fsys, aiheur.BuiltinArch)
	if err != nil {
		t.Fatal(err)
	}
	defer tn.Release()
	if tn.Model.SelfTests() != 3 {
		t.Errorf("%d self-tests ran, want 3", tn.Model.SelfTests())
	}
	agree := 0
	for _, s := range d.Samples {
		rank, err := tn.Rank(s.Geometry.Problem())
		if err != nil {
			t.Fatal(err)
		}
		if rank[0] == s.Winner {
			agree++
		}
	}
	if float64(agree) < 0.95*float64(len(d.Samples)) {
		t.Errorf("inference ranks the winner first for %d of %d samples", agree, len(d.Samples))
	}
	var meta map[string]any
	if err := json.Unmarshal(res.Metadata, &meta); err != nil {
		t.Fatal(err)
	}
	if meta["generated_on"] != "2026-01-02" || meta["gpu"].(map[string]any)["name"] != "test device" {
		t.Errorf("metadata does not say where the data came from: %v %v", meta["generated_on"], meta["gpu"])
	}
}

func TestFitIsDeterministic(t *testing.T) {
	a, err := Fit(synthetic(), smallConfig(), Source{File: "x.csv"})
	if err != nil {
		t.Fatal(err)
	}
	b, err := Fit(synthetic(), smallConfig(), Source{File: "x.csv"})
	if err != nil {
		t.Fatal(err)
	}
	if !bytes.Equal(a.Model, b.Model) || !bytes.Equal(a.Metadata, b.Metadata) {
		t.Error("two fits of the same data and config differ")
	}
	c := smallConfig()
	c.Seed++
	other, err := Fit(synthetic(), c, Source{File: "x.csv"})
	if err != nil {
		t.Fatal(err)
	}
	if bytes.Equal(a.Model, other.Model) {
		t.Error("a different seed gave the same model")
	}
	cfg, data, err := RecordedConfig(a.Metadata)
	if err != nil {
		t.Fatal(err)
	}
	if cfg.Seed != 5 || cfg.Epochs != 400 || len(cfg.Hidden) != 1 || cfg.Hidden[0] != 12 || data.File != "x.csv" || data.SHA256 != "" {
		t.Errorf("recorded config %+v, data %+v", cfg, data)
	}
}

func TestFitErrors(t *testing.T) {
	good := smallConfig()
	one := synthetic()
	one.Solvers = one.Solvers[:1]
	few := synthetic()
	few.Samples = few.Samples[:1]
	constant := synthetic()
	for i := range constant.Samples {
		constant.Samples[i].Geometry = constant.Samples[0].Geometry
	}
	for _, tt := range []struct {
		d    *Dataset
		edit func(*Config)
		want string
	}{
		{synthetic(), func(c *Config) { c.Hidden = nil }, "hidden layer"},
		{synthetic(), func(c *Config) { c.Hidden = []int{0} }, "hidden layer 1 has 0 units"},
		{synthetic(), func(c *Config) { c.Epochs = 0 }, "epochs"},
		{synthetic(), func(c *Config) { c.LearningRate = math.NaN() }, "learning rate"},
		{synthetic(), func(c *Config) { c.L2 = -1 }, "l2"},
		{synthetic(), func(c *Config) { c.Tests = 0 }, "tests"},
		{one, func(*Config) {}, "at least 2"},
		{few, func(*Config) {}, "1 samples"},
		{constant, func(*Config) {}, "every feature is constant"},
	} {
		c := good
		tt.edit(&c)
		if _, err := Fit(tt.d, c, Source{}); err == nil || !strings.Contains(err.Error(), tt.want) {
			t.Errorf("error %v, want one containing %q", err, tt.want)
		}
	}
}

func TestRecordedConfigRejects(t *testing.T) {
	for _, tt := range []struct{ meta, want string }{
		{"not json", "metadata"},
		{`{"fitter": {"name": "other", "version": "1"}}`, "is not tunanet-fit"},
		{`{"fitter": {"name": "tunanet-fit", "version": "0"}}`, "version 0"},
		{`{"fitter": {"name": "tunanet-fit", "version": "` + Version + `", "epochs": 0}}`, "hidden layer"},
	} {
		if _, _, err := RecordedConfig([]byte(tt.meta)); err == nil || !strings.Contains(err.Error(), tt.want) {
			t.Errorf("%s: error %v, want one containing %q", tt.meta, err, tt.want)
		}
	}
}

// BenchmarkFitBuiltinSize is a fit the size of the embedded model's.
func BenchmarkFitBuiltinSize(b *testing.B) {
	d := synthetic()
	c := DefaultConfig()
	for b.Loop() {
		if _, err := Fit(d, c, Source{}); err != nil {
			b.Fatal(err)
		}
	}
}
