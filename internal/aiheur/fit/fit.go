package fit

import (
	"bytes"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"math"
	"math/rand/v2"
	"slices"
	"strconv"

	"miotool/internal/aiheur"
	"miotool/internal/aiheur/fdeep/fdeeptest"
)

// Version is the fitter's version, recorded in the metadata. Change it
// whenever a change to this package changes the bytes it writes.
const Version = "1"

// Config is how a model is fitted.
type Config struct {
	// Hidden are the widths of the hidden layers (Dense + ReLU each).
	Hidden []int `json:"hidden"`
	// Epochs of full-batch gradient descent.
	Epochs int `json:"epochs"`
	// LearningRate is the step size.
	LearningRate float64 `json:"learning_rate"`
	// L2 is the weight decay added to the gradient of every weight
	// (not the biases).
	L2 float64 `json:"l2"`
	// Seed seeds the initial weights.
	Seed uint64 `json:"seed"`
	// Tests is how many samples are embedded in the model as its
	// self-tests.
	Tests int `json:"tests"`
}

// DefaultConfig is what tools/tunanet-fit uses unless told otherwise.
func DefaultConfig() Config {
	return Config{Hidden: []int{24, 24}, Epochs: 1500, LearningRate: 0.2, L2: 1e-4, Seed: 27477, Tests: 6}
}

// Validate checks the config.
func (c Config) Validate() error {
	if len(c.Hidden) == 0 {
		return errors.New("fit config: give at least one hidden layer")
	}
	for i, h := range c.Hidden {
		if h < 1 || h > 4096 {
			return fmt.Errorf("fit config: hidden layer %d has %d units (want 1 to 4096)", i+1, h)
		}
	}
	switch {
	case c.Epochs < 1:
		return fmt.Errorf("fit config: epochs must be at least 1, got %d", c.Epochs)
	case !(c.LearningRate > 0) || math.IsInf(c.LearningRate, 0):
		return fmt.Errorf("fit config: learning rate must be positive, got %g", c.LearningRate)
	case !(c.L2 >= 0) || math.IsInf(c.L2, 0):
		return fmt.Errorf("fit config: l2 must be zero or positive, got %g", c.L2)
	case c.Tests < 1:
		return fmt.Errorf("fit config: tests must be at least 1, got %d", c.Tests)
	}
	return nil
}

// Names of the files Fit writes, for the builtin arch.
var ModelFile, MetadataFile = aiheur.TunaNetFiles(aiheur.BuiltinArch)

// candidateFeatures are the TunaNet inputs the fitter may use (MIOpen's
// gfx90a/gfx942 list); columns that are constant in the data are dropped
// and listed as redundant, as MIOpen's training pipeline does.
var candidateFeatures = []string{"Inp_0", "Inp_2", "Inp_3", "Out_0", "Out_2", "Out_3", "Fil_1", "Fil_2",
	"Pad_1", "Pad_2", "Str_1", "Str_2", "Dil_1", "Dil_2", "BatchSize", "Precision", "Direction", "GroupSize"}

// Encodings of the categorical features: miotool's solvers are forward,
// FP32 and NCHW only.
var (
	directionEncoding = map[string]int{"F": 0}
	precisionEncoding = map[string]int{"FP32": 0}
	layoutEncoding    = map[string]int{"NCHW": 0}
)

// Result is a fitted model.
type Result struct {
	Model    []byte // the frugally-deep JSON model (ModelFile)
	Metadata []byte // the TunaNet metadata (MetadataFile)
	// Accuracy is the share of training samples whose winner the model
	// ranks first (float32 weights, as inference runs them).
	Accuracy float64
	// Loss is the final mean cross-entropy.
	Loss float64
	// Features are the inputs used; Redundant the constant ones dropped.
	Features, Redundant []string
}

// Source says where the data came from, for the metadata.
type Source struct {
	// File is the data file's name as recorded (a base name, so the
	// bytes do not depend on where the file was read from).
	File string
}

// Fit trains a model on d with c and renders the two files.
func Fit(d *Dataset, c Config, src Source) (*Result, error) {
	if err := c.Validate(); err != nil {
		return nil, err
	}
	if len(d.Solvers) < 2 {
		return nil, fmt.Errorf("the data has %d solver columns; a ranking needs at least 2", len(d.Solvers))
	}
	if len(d.Samples) < 2 {
		return nil, fmt.Errorf("the data has %d samples; need at least 2", len(d.Samples))
	}

	// Raw features of every sample, then the statistics that normalise them.
	probe := &aiheur.TunaNetMetadata{Features: candidateFeatures, Direction: directionEncoding,
		Precision: precisionEncoding, Layout: layoutEncoding}
	raw := make([][]float32, len(d.Samples))
	labels := make([]int, len(d.Samples))
	for i, s := range d.Samples {
		r, err := probe.RawFeatures(s.Geometry.Problem())
		if err != nil {
			return nil, fmt.Errorf("sample %d: %w", i+1, err)
		}
		raw[i] = r
		labels[i] = slices.Index(d.Solvers, s.Winner)
	}
	var used, redundant []string
	var mean, std []float64
	for j, name := range candidateFeatures {
		m, s := columnStats(raw, j)
		if s == 0 {
			redundant = append(redundant, name)
			continue
		}
		used = append(used, name)
		mean, std = append(mean, m), append(std, s)
	}
	if len(used) == 0 {
		return nil, errors.New("every feature is constant in the data; nothing to fit")
	}

	// The metadata goes first: inference normalises in float32 with the
	// statistics as the file states them, so training does too.
	meta := newMetadata(d, c, src, used, redundant, mean, std)
	metaJSON, err := json.MarshalIndent(meta, "", "  ")
	if err != nil {
		return nil, err
	}
	parsed, err := aiheur.ParseTunaNetMetadata(metaJSON, "overall")
	if err != nil {
		return nil, fmt.Errorf("the metadata written does not parse back: %w", err)
	}
	inputs := make([][]float32, len(d.Samples))
	xs := make([][]float64, len(d.Samples))
	for i, s := range d.Samples {
		r, err := parsed.RawFeatures(s.Geometry.Problem())
		if err != nil {
			return nil, fmt.Errorf("sample %d: %w", i+1, err)
		}
		inputs[i] = parsed.Normalize(r)
		xs[i] = widen(inputs[i])
	}

	sizes := append(append([]int{len(used)}, c.Hidden...), len(d.Solvers))
	net := newNet(sizes, c.Seed)
	loss := net.train(xs, labels, c)
	q := net.rounded()

	correct := 0
	for i, x := range xs {
		if argmax(q.forward(x)) == labels[i] {
			correct++
		}
	}
	res := &Result{
		Accuracy: float64(correct) / float64(len(xs)), Loss: loss,
		Features: used, Redundant: redundant,
	}
	res.Model = q.modelJSON(inputs, c.Tests)
	sum := sha256.Sum256(res.Model)
	meta.Fit = fitSummary{
		Accuracy:    strconv.FormatFloat(res.Accuracy, 'f', 4, 64),
		Loss:        strconv.FormatFloat(loss, 'g', 4, 64),
		ModelSHA256: hex.EncodeToString(sum[:]),
	}
	if res.Metadata, err = json.MarshalIndent(meta, "", "  "); err != nil {
		return nil, err
	}
	res.Metadata = append(res.Metadata, '\n')
	return res, nil
}

// columnStats are the mean and population standard deviation of column j.
func columnStats(rows [][]float32, j int) (mean, std float64) {
	n := float64(len(rows))
	for _, r := range rows {
		mean += float64(r[j])
	}
	mean /= n
	for _, r := range rows {
		d := float64(r[j]) - mean
		std += mul(d, d)
	}
	return mean, math.Sqrt(std / n)
}

func widen(v []float32) []float64 {
	out := make([]float64, len(v))
	for i, x := range v {
		out[i] = float64(x)
	}
	return out
}

func argmax(v []float64) int {
	best := 0
	for i, x := range v {
		if x > v[best] {
			best = i
		}
	}
	return best
}

// net is a multi-layer perceptron: Dense+ReLU per hidden layer, then a
// linear Dense whose outputs are the solvers' logits.
type net struct {
	sizes []int
	w     [][]float64 // layer l: [in][out], row-major, as fdeep stores Dense kernels
	b     [][]float64
}

func newNet(sizes []int, seed uint64) *net {
	rng := rand.New(rand.NewPCG(seed, seed^0x5deece66d))
	n := &net{sizes: sizes}
	for l := 0; l+1 < len(sizes); l++ {
		in, out := sizes[l], sizes[l+1]
		limit := math.Sqrt(6 / float64(in+out)) // Glorot uniform
		w := make([]float64, in*out)
		for i := range w {
			w[i] = mul(rng.Float64()*2-1, limit)
		}
		n.w = append(n.w, w)
		n.b = append(n.b, make([]float64, out))
	}
	return n
}

// forward returns the logits for x.
func (n *net) forward(x []float64) []float64 {
	acts := n.activations(x)
	return acts[len(acts)-1]
}

// activations are every layer's output for x (ReLU applied to the hidden
// ones), the input first.
func (n *net) activations(x []float64) [][]float64 {
	acts := make([][]float64, len(n.sizes))
	for l := 1; l < len(n.sizes); l++ {
		acts[l] = make([]float64, n.sizes[l])
	}
	n.activationsInto(x, acts)
	return acts
}

// activationsInto is activations into preallocated layer outputs.
func (n *net) activationsInto(x []float64, acts [][]float64) {
	acts[0] = x
	for l := range n.w {
		cur, next, w := acts[l], acts[l+1], n.w[l]
		out := len(next)
		copy(next, n.b[l])
		for i, v := range cur {
			if v == 0 {
				continue // adds exactly nothing
			}
			row := w[i*out : (i+1)*out]
			for j, wv := range row {
				next[j] += mul(v, wv)
			}
		}
		if l+1 < len(n.w) {
			for j, s := range next {
				if s < 0 {
					next[j] = 0
				}
			}
		}
	}
}

// train runs full-batch gradient descent on the mean softmax
// cross-entropy and returns the final loss.
func (n *net) train(xs [][]float64, labels []int, c Config) float64 {
	gw := make([][]float64, len(n.w))
	gb := make([][]float64, len(n.b))
	for l := range n.w {
		gw[l] = make([]float64, len(n.w[l]))
		gb[l] = make([]float64, len(n.b[l]))
	}
	inv := 1 / float64(len(xs))
	loss := 0.0
	acts := make([][]float64, len(n.sizes))
	grads := make([][]float64, len(n.sizes)) // d(loss)/d(pre-activation), per layer
	for l := 1; l < len(n.sizes); l++ {
		acts[l] = make([]float64, n.sizes[l])
		grads[l] = make([]float64, n.sizes[l])
	}
	for epoch := 0; epoch < c.Epochs; epoch++ {
		for l := range gw {
			clear(gw[l])
			clear(gb[l])
		}
		loss = 0
		for s, x := range xs {
			n.activationsInto(x, acts)
			delta := grads[len(grads)-1]
			loss += softmaxLoss(acts[len(acts)-1], labels[s], delta)
			delta[labels[s]] -= 1
			for i := range delta {
				delta[i] = mul(delta[i], inv)
			}
			for layer := len(n.w) - 1; layer >= 0; layer-- {
				in, out := n.sizes[layer], n.sizes[layer+1]
				a := acts[layer]
				for i := 0; i < in; i++ {
					if a[i] == 0 {
						continue // adds exactly nothing
					}
					row := gw[layer][i*out : (i+1)*out]
					for j, d := range delta {
						row[j] += mul(a[i], d)
					}
				}
				for j, d := range delta {
					gb[layer][j] += d
				}
				if layer == 0 {
					break
				}
				prev := grads[layer]
				for i := 0; i < in; i++ {
					prev[i] = 0
					if a[i] > 0 { // ReLU's gradient
						prev[i] = dot(n.w[layer][i*out:(i+1)*out], delta)
					}
				}
				delta = prev
			}
		}
		loss = mul(loss, inv)
		for l := range n.w {
			for i, g := range gw[l] {
				n.w[l][i] -= mul(c.LearningRate, g+mul(c.L2, n.w[l][i]))
			}
			for j, g := range gb[l] {
				n.b[l][j] -= mul(c.LearningRate, g)
			}
		}
	}
	return loss
}

// softmaxLoss writes the softmax of logits into probs and returns the
// cross-entropy of label.
func softmaxLoss(logits []float64, label int, probs []float64) float64 {
	top := logits[argmax(logits)]
	sum := 0.0
	for i, z := range logits {
		probs[i] = exp(z - top)
		sum += probs[i]
	}
	for i := range probs {
		probs[i] /= sum
	}
	return math.Log(sum) - (logits[label] - top)
}

// rounded is the net with its parameters rounded to float32, as the model
// file stores them.
func (n *net) rounded() *net {
	q := &net{sizes: n.sizes}
	for l := range n.w {
		q.w = append(q.w, widen(narrow(n.w[l])))
		q.b = append(q.b, widen(narrow(n.b[l])))
	}
	return q
}

func narrow(v []float64) []float32 {
	out := make([]float32, len(v))
	for i, x := range v {
		out[i] = float32(x)
	}
	return out
}

// modelJSON renders the float32 net as a frugally-deep model whose
// embedded tests are tests samples spread over inputs, their expected
// logits computed here in float64.
func (n *net) modelJSON(inputs [][]float32, tests int) []byte {
	b := fdeeptest.NewBuilder().Input("input_1", n.sizes[0])
	prev := "input_1"
	for l := range n.w {
		dense := "dense_" + strconv.Itoa(l+1)
		b.Layer("Dense", dense, map[string]any{"units": n.sizes[l+1], "activation": "linear", "use_bias": true},
			map[string][]float32{"weights": narrow(n.w[l]), "bias": narrow(n.b[l])}, fdeeptest.R(prev))
		prev = dense
		if l+1 < len(n.w) {
			relu := "re_lu_" + strconv.Itoa(l+1)
			b.Layer("ReLU", relu, map[string]any{"max_value": nil, "negative_slope": 0.0, "threshold": 0.0}, nil, fdeeptest.R(prev))
			prev = relu
		}
	}
	b.Output(fdeeptest.R(prev), n.sizes[len(n.sizes)-1])
	tests = min(tests, len(inputs))
	for t := 0; t < tests; t++ {
		x := inputs[t*len(inputs)/tests]
		b.Test([][]float32{x}, [][]float32{narrow(n.forward(widen(x)))})
	}
	return b.JSON()
}

// metadata is the TunaNet metadata file: the keys MIOpen reads, then where
// the model came from.
type metadata struct {
	Arch       string         `json:"arch"`
	ModelName  string         `json:"model_name"`
	NumInputs  int            `json:"num_inputs"`
	NumOutputs int            `json:"num_outputs"`
	NumSolvers int            `json:"num_solvers"`
	Encodings  encodings      `json:"encodings"`
	Features   []string       `json:"conv_params_used_as_features"`
	Redundant  map[string]int `json:"redundant_columns"`
	Stats      map[string]struct {
		Features featureStats `json:"features"`
	} `json:"stats"`
	GPU         gpuInfo    `json:"gpu"`
	GeneratedOn string     `json:"generated_on"`
	Database    string     `json:"database"`
	Data        dataInfo   `json:"data"`
	Fitter      fitterInfo `json:"fitter"`
	Fit         fitSummary `json:"fit"`
	Note        string     `json:"note"`
}

type encodings struct {
	Direction map[string]int `json:"Direction"`
	Precision map[string]int `json:"Precision"`
	Layout    map[string]int `json:"Layout"`
	Solver    map[string]int `json:"solver"`
}

type featureStats struct {
	Mean map[string]float64 `json:"mean"`
	Std  map[string]float64 `json:"std"`
}

type gpuInfo struct {
	Name    string `json:"name"`
	Arch    string `json:"arch"`
	Backend string `json:"backend"`
	NumCU   string `json:"num_cu"`
}

type dataInfo struct {
	File      string `json:"file"`
	SHA256    string `json:"sha256"`
	Rows      int    `json:"rows"`
	Collector string `json:"collector"`
	Samples   string `json:"samples_per_solver"`
}

// fitterInfo records the Config, so the model can be re-fitted exactly.
type fitterInfo struct {
	Name    string `json:"name"`
	Version string `json:"version"`
	Config
}

type fitSummary struct {
	Accuracy    string `json:"train_accuracy"`
	Loss        string `json:"final_loss"`
	ModelSHA256 string `json:"model_sha256"`
}

func newMetadata(d *Dataset, c Config, src Source, used, redundant []string, mean, std []float64) *metadata {
	solvers := map[string]int{}
	for i, s := range d.Solvers {
		solvers[s] = i
	}
	fs := featureStats{Mean: map[string]float64{}, Std: map[string]float64{}}
	for i, name := range used {
		fs.Mean[name], fs.Std[name] = mean[i], std[i]
	}
	red := map[string]int{}
	probe := &aiheur.TunaNetMetadata{Features: redundant, Direction: directionEncoding,
		Precision: precisionEncoding, Layout: layoutEncoding}
	if len(d.Samples) > 0 {
		if vals, err := probe.RawFeatures(d.Samples[0].Geometry.Problem()); err == nil {
			for i, name := range redundant {
				red[name] = int(vals[i])
			}
		}
	}
	m := &metadata{
		Arch:       aiheur.BuiltinArch,
		ModelName:  "miotool TunaNet (MLP " + sizesString(len(used), c.Hidden, len(d.Solvers)) + ")",
		NumInputs:  len(used),
		NumOutputs: len(d.Solvers),
		NumSolvers: len(d.Solvers),
		Encodings:  encodings{Direction: directionEncoding, Precision: precisionEncoding, Layout: layoutEncoding, Solver: solvers},
		Features:   used,
		Redundant:  red,
		Stats: map[string]struct {
			Features featureStats `json:"features"`
		}{"overall": {Features: fs}},
		GPU: gpuInfo{Name: d.Lookup("device"), Arch: d.Lookup("arch"), Backend: d.Lookup("backend"),
			NumCU: d.Lookup("compute_units")},
		GeneratedOn: d.Lookup("collected"),
		Database:    "find results of miotool's solvers (finder.Find), one row per problem",
		Data: dataInfo{File: src.File, SHA256: d.SHA256, Rows: len(d.Samples),
			Collector: d.Lookup("tool"), Samples: d.Lookup("samples")},
		Fitter: fitterInfo{Name: "tunanet-fit", Version: Version, Config: c},
		Note:   "fitted to the device named under gpu; times from another device rank the solvers differently",
	}
	return m
}

func sizesString(in int, hidden []int, out int) string {
	var b bytes.Buffer
	b.WriteString(strconv.Itoa(in))
	for _, h := range hidden {
		b.WriteString("-" + strconv.Itoa(h))
	}
	b.WriteString("-" + strconv.Itoa(out))
	return b.String()
}

// DataRecord is what a metadata file records of the data it was fitted on.
type DataRecord struct {
	File   string // base name of the CSV
	SHA256 string // digest of its bytes
}

// RecordedConfig reads the fitter section of a metadata file this package
// wrote, and the data it records, so that the model can be re-fitted.
func RecordedConfig(metadataJSON []byte) (Config, DataRecord, error) {
	var m struct {
		Data   dataInfo   `json:"data"`
		Fitter fitterInfo `json:"fitter"`
	}
	if err := json.Unmarshal(metadataJSON, &m); err != nil {
		return Config{}, DataRecord{}, fmt.Errorf("metadata: %v", err)
	}
	rec := DataRecord{File: m.Data.File, SHA256: m.Data.SHA256}
	if m.Fitter.Name != "tunanet-fit" {
		return Config{}, rec, fmt.Errorf("metadata: fitter %q is not tunanet-fit", m.Fitter.Name)
	}
	if m.Fitter.Version != Version {
		return Config{}, rec, fmt.Errorf("metadata: written by fitter version %s, this is version %s", m.Fitter.Version, Version)
	}
	return m.Fitter.Config, rec, m.Fitter.Config.Validate()
}
