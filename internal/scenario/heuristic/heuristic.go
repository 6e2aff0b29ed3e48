// Package heuristic answers what MIOpen's AI heuristics say about one
// convolution problem on one GPU arch, from the model files alone, without
// a device: TunaNet's solver ranking with its scores, whether the model
// covers the problem (and MIOpen's reason when it does not), the features
// fed to the network, and the KernelTuningNet prediction where one
// applies. It returns facts; internal/cmd/heuristic renders them.
package heuristic

import (
	"errors"
	"fmt"
	"io/fs"
	"slices"
	"sort"
	"strings"

	"miotool/internal/aiheur"
	"miotool/internal/aiheur/builtin"
	"miotool/internal/conv"
)

// InputError is a question that cannot be answered as asked: an invalid
// problem, an arch without models, a model directory that is not there.
type InputError struct{ Err error }

func (e *InputError) Error() string { return e.Err.Error() }
func (e *InputError) Unwrap() error { return e.Err }

// ModelError is a model file that is there but does not load or fails
// its self-tests: the model's failure, not the question's.
type ModelError struct{ Err error }

func (e *ModelError) Error() string { return e.Err.Error() }
func (e *ModelError) Unwrap() error { return e.Err }

// loadError classifies a failure to load a model set from q's models: a
// file that is not there in a directory the user named is a bad question
// (no such arch there); a file that is there and does not load is the
// model's failure.
func loadError(q Query, err error) error {
	err = fmt.Errorf("%s: %w", q.Models.Describe(), err)
	if q.Models.Given && errors.Is(err, fs.ErrNotExist) {
		return &InputError{Err: err}
	}
	return &ModelError{Err: err}
}

func inputErrorf(format string, args ...any) error {
	return &InputError{Err: fmt.Errorf(format, args...)}
}

// Models is where the model files come from.
type Models struct {
	FS fs.FS
	// Dir is the directory; "" for the models embedded in miotool.
	Dir string
	// Source says how Dir was chosen, e.g. "$ROCM_PATH", or how the user
	// named it when Given.
	Source string
	// Given is true when the user named the directory: a broken model in
	// it is then the user's input, not a failure of the tool.
	Given bool
}

// Describe names the models for people: "/opt/rocm/share/miopen/db
// ($ROCM_PATH)" or "miotool's embedded models".
func (m Models) Describe() string {
	if m.Dir == "" {
		return embeddedModels
	}
	return m.Dir + " (" + m.Source + ")"
}

const embeddedModels = "miotool's embedded models"

// FindModels picks the model files: dir when it is given (givenAs says how
// the user named it, for messages), else what search finds, as
// stress-threads finds them: an installed ROCm's share/miopen/db, else the
// model embedded in miotool. A nil search is aiheur.ModelDir.
func FindModels(dir, givenAs string, search func() (dir, source string)) (Models, error) {
	if dir != "" {
		fsys, err := aiheur.ModelFS(dir)
		if err != nil {
			return Models{}, &InputError{Err: err}
		}
		return Models{FS: fsys, Dir: dir, Source: givenAs, Given: true}, nil
	}
	if search == nil {
		search = func() (string, string) { return aiheur.ModelDir("") }
	}
	found, source := search()
	if found == "" {
		return Models{FS: builtin.FS, Source: aiheur.SourceEmbedded}, nil
	}
	fsys, err := aiheur.ModelFS(found)
	if err != nil {
		return Models{}, err
	}
	return Models{FS: fsys, Dir: found, Source: source}, nil
}

// Archs lists the archs whose TunaNet model and metadata files are both in
// fsys, sorted.
func Archs(fsys fs.FS) []string {
	files, err := aiheur.ModelFiles(fsys)
	if err != nil {
		return nil
	}
	var archs []string
	for _, f := range files {
		arch, ok := strings.CutSuffix(f, "_metadata.tn.model")
		if ok && hasTunaNet(fsys, arch) {
			archs = append(archs, arch)
		}
	}
	sort.Strings(archs)
	return archs
}

func hasTunaNet(fsys fs.FS, arch string) bool {
	model, meta := aiheur.TunaNetFiles(arch)
	return exists(fsys, model) && exists(fsys, meta)
}

func exists(fsys fs.FS, name string) bool {
	_, err := fs.Stat(fsys, name)
	return err == nil
}

// Query is the question: a problem, an arch ("" picks the only model set
// there, or miotool's own for the embedded models) and the models.
type Query struct {
	Problem aiheur.Problem
	Arch    string
	Models  Models
}

// Feature is one network input.
type Feature struct {
	Name       string
	Raw        float32
	Mean, Std  float32
	Normalized float32
}

// Ranked is one solver in TunaNet's order.
type Ranked struct {
	Rank   int // from 1
	Solver string
	Score  float32 // the network's logit
	// NotApplicable, for miotool's own solvers only, says why the solver
	// cannot run the problem; "" when it can. MIOpen's solvers are not
	// here to ask.
	NotApplicable string
}

// KTNAnswer is KernelTuningNet's prediction for the solver of the
// problem's direction.
type KTNAnswer struct {
	Solver    string // e.g. ConvHipImplicitGemmGroupFwdXdlops
	Set       string // the file set, e.g. ConvHipIgemmGroupFwdXdlops
	SelfTests int    // embedded tests the encoder and decoder passed at load
	// OK is false when the model gave up: MIOpen then uses the solver's
	// static heuristic.
	OK      bool
	Choices []aiheur.KTNChoice
}

// Answer is what the heuristics say.
type Answer struct {
	Problem aiheur.Problem
	Key     string // MIOpen's find-db key of the problem
	// Arch is the model set used; Requested the one asked for, and
	// ArchNote why they differ.
	Arch, Requested, ArchNote string
	Models                    string // Models.Describe
	ModelFile, MetadataFile   string
	SelfTests                 int    // embedded tests the model passed at load
	StatsSplit                string // which statistics normalise the features
	Builtin                   bool   // miotool's own model and solvers

	// Supported is MIOpen's IsProblemSupported; Reason says why not.
	Supported bool
	Reason    string
	// Features are the network's inputs; empty when the problem cannot
	// be encoded (e.g. a data type the model has no encoding for).
	Features []Feature
	// Ranking is every solver, best first; empty when not supported.
	Ranking []Ranked

	KTN *KTNAnswer
	// KTNSkipped says why no KTN prediction is shown although the
	// direction has a KTN solver on this arch; "" otherwise.
	KTNSkipped string
}

// Ask answers q.
func Ask(q Query) (*Answer, error) {
	p := q.Problem
	if err := p.Validate(); err != nil {
		return nil, &InputError{Err: err}
	}
	fsys, arch, note, err := pickArch(q)
	if err != nil {
		return nil, err
	}
	tn, err := aiheur.LoadTunaNet(fsys, arch)
	if err != nil {
		return nil, loadError(q, err)
	}
	defer tn.Release()
	a := &Answer{
		Problem: p, Key: conv.FormatKey(convProblem(p), conv.Direction(p.Direction.String()), p.DataType, p.Layout),
		Arch: arch, Requested: q.Arch, ArchNote: note, Models: q.Models.Describe(),
		SelfTests: tn.Model.SelfTests(), StatsSplit: tn.Meta.StatsSplit, Builtin: arch == aiheur.BuiltinArch,
	}
	if a.Builtin && fsys == builtin.FS {
		a.Models = embeddedModels
	}
	a.ModelFile, a.MetadataFile = aiheur.TunaNetFiles(arch)
	if raw, err := tn.Meta.RawFeatures(p); err == nil {
		norm := tn.Meta.Normalize(raw)
		for i, name := range tn.Meta.Features {
			a.Features = append(a.Features, Feature{Name: name, Raw: raw[i], Mean: tn.Meta.Mean[i], Std: tn.Meta.Std[i], Normalized: norm[i]})
		}
	}
	a.Supported, a.Reason = true, ""
	if err := tn.Supports(p); err != nil {
		if !errors.Is(err, aiheur.ErrNotSupported) {
			return nil, err
		}
		reason := strings.TrimPrefix(err.Error(), "TunaNet "+arch+": ")
		a.Supported, a.Reason = false, strings.TrimPrefix(reason, aiheur.ErrNotSupported.Error()+": ")
	}
	var notApplicable map[string]string
	if a.Supported && a.Builtin {
		notApplicable = ownSolvers(p, tn.Meta.Solvers)
		if len(notApplicable) == len(tn.Meta.Solvers) {
			a.Supported = false
			a.Reason = "none of the model's solvers applies to the problem (" + notApplicable[tn.Meta.Solvers[0]] + ")"
		}
	}
	if a.Supported {
		scores, err := tn.Scores(p)
		if err != nil {
			return nil, err
		}
		for i, s := range scores {
			a.Ranking = append(a.Ranking, Ranked{Rank: i + 1, Solver: s.Solver, Score: s.Score, NotApplicable: notApplicable[s.Solver]})
		}
	}
	a.KTN, a.KTNSkipped, err = askKTN(fsys, arch, p)
	if err != nil {
		return nil, loadError(q, err)
	}
	return a, nil
}

// pickArch chooses the model set for q and where to load it from.
func pickArch(q Query) (fs.FS, string, string, error) {
	fsys, want := q.Models.FS, q.Arch
	have := Archs(fsys)
	known := aiheur.TunaNetArchs()
	switch {
	case want == "" && q.Models.Dir == "":
		return fsys, aiheur.BuiltinArch, "", nil
	case want == "" && len(have) == 1:
		return fsys, have[0], "", nil
	case want == "":
		return nil, "", "", inputErrorf("name the arch: %s has the TunaNet models of %s", q.Models.Describe(), listOr(have, "no arch"))
	case hasTunaNet(fsys, want) && slices.Contains(known, want):
		return fsys, want, "", nil
	case want == aiheur.BuiltinArch:
		return builtin.FS, want, "", nil
	case hasTunaNet(fsys, want):
		return nil, "", "", inputErrorf("%s holds TunaNet files for %s, but miotool implements MIOpen 3.3's TunaNet classes only (%s)", q.Models.Describe(), want, strings.Join(known, ", "))
	}
	if mapped := aiheur.TunaNetArch(want); strings.HasPrefix(want, "gfx") && mapped != want && hasTunaNet(fsys, mapped) {
		return fsys, mapped, fmt.Sprintf("MIOpen 3.3 gives every device but gfx90a and gfx942 the %s model, so %s gets it; its checks then usually reject the problem", mapped, want), nil
	}
	return nil, "", "", inputErrorf("no TunaNet model for %s in %s, which has %s", want, q.Models.Describe(), listOr(have, "none"))
}

func listOr(items []string, none string) string {
	if len(items) == 0 {
		return none
	}
	return strings.Join(items, ", ")
}

// convProblem is p in the conv package's terms (geometry only).
func convProblem(p aiheur.Problem) conv.Problem {
	return conv.Problem{N: p.N, C: p.C, H: p.H, W: p.W, K: p.K, R: p.R, S: p.S, PadH: p.PadH, PadW: p.PadW,
		StrideH: p.StrideH, StrideW: p.StrideW, DilH: p.DilationH, DilW: p.DilationW, Groups: p.Groups}
}

// ownSolvers asks miotool's solvers named by the model whether they can
// run p, and returns why not for those that cannot.
func ownSolvers(p aiheur.Problem, names []string) map[string]string {
	cp := convProblem(p)
	out := map[string]string{}
	for _, name := range names {
		s, ok := conv.SolverByName(name)
		if !ok {
			out[name] = "not one of miotool's solvers"
			continue
		}
		if err := s.NotApplicable(cp); err != nil {
			out[name] = err.Error()
		}
	}
	return out
}

// ktnSolver is the solver whose heuristic init uses KernelTuningNet for
// p's direction on arch, or "" when there is none.
func ktnSolver(arch string, p aiheur.Problem) string {
	switch arch {
	case "gfx90a", "gfx942":
		return map[aiheur.Direction]string{
			aiheur.Forward:         "ConvHipImplicitGemmGroupFwdXdlops",
			aiheur.BackwardData:    "ConvHipImplicitGemmGroupBwdXdlops",
			aiheur.BackwardWeights: "ConvHipImplicitGemmGroupWrwXdlops",
		}[p.Direction]
	case "gfx908":
		// ConvAsm1x1U: 1x1 filters, forward and backward data.
		if p.Direction != aiheur.BackwardWeights && p.R == 1 && p.S == 1 {
			return "ConvAsm1x1U"
		}
	}
	return ""
}

// askKTN runs the KTN of p's direction the way MIOpen's ModelSetParams
// does, accepting every value the model offers (MIOpen's validator also
// checks each against the solver's kernel instances, which are not here).
func askKTN(fsys fs.FS, arch string, p aiheur.Problem) (*KTNAnswer, string, error) {
	solver := ktnSolver(arch, p)
	if solver == "" {
		return nil, "", nil
	}
	set, err := aiheur.KTNModelFor(arch, solver)
	if err != nil {
		return nil, "", nil
	}
	enc, dec, meta := aiheur.KTNFiles(arch, set)
	switch {
	case !exists(fsys, enc) || !exists(fsys, dec) || !exists(fsys, meta):
		return nil, fmt.Sprintf("%s uses KernelTuningNet, but %s, %s or %s is missing", solver, enc, dec, meta), nil
	case solver == "ConvAsm1x1U" && p.StrideH != 1:
		return nil, fmt.Sprintf("%s uses KernelTuningNet only with stride 1 in height, not %d", solver, p.StrideH), nil
	case solver != "ConvAsm1x1U" && p.DataType != "FP32" && p.DataType != "FP16":
		return nil, fmt.Sprintf("%s uses KernelTuningNet for FP32 and FP16 only, not %s", solver, p.DataType), nil
	case arch == "gfx90a" && p.Direction == aiheur.Forward:
		return nil, fmt.Sprintf("%s's KernelTuningNet on gfx90a takes the device's compute-unit count, which a query without a device does not have", solver), nil
	}
	features, err := aiheur.KTNFeatures(arch, set, p, 0)
	if err != nil {
		return nil, fmt.Sprintf("%s: %v", solver, err), nil
	}
	k, err := aiheur.LoadKTN(fsys, arch, set)
	if err != nil {
		return nil, "", err
	}
	defer k.Release()
	res, err := k.Predict(p.Direction, features, func(int, string) bool { return true })
	if err != nil {
		return nil, "", fmt.Errorf("KTN %s/%s: %w", arch, set, err)
	}
	return &KTNAnswer{Solver: solver, Set: set, SelfTests: k.Encoder.SelfTests() + k.Decoder.SelfTests(),
		OK: res.OK, Choices: res.Choices}, "", nil
}
