package heuristic

import (
	"fmt"
	"strconv"
	"time"

	"miotool/internal/report"
	heuristicscen "miotool/internal/scenario/heuristic"
)

// check is the check name results carry.
const check = "heuristic"

// fill writes the answer into r: the ranking (or why there is none),
// the features when verbose, the KTN prediction, and the verdict: PASS
// when the model ranked the solvers, SKIP when it does not cover the
// problem (MIOpen makes no AI prediction then). end closes the result.
func fill(r *report.Result, a *heuristicscen.Answer, verbose bool, end time.Time) {
	r.Device = report.Device{Name: "no device", Arch: a.Arch,
		Description: fmt.Sprintf("no device; the %s model from %s", a.Arch, a.Models)}
	r.Note("problem %s (MIOpen's find-db key)", a.Key)
	if a.ArchNote != "" {
		r.Note("%s", a.ArchNote)
	}
	r.Note("models: %s; %s and %s loaded, the model's %d embedded self-tests passed", a.Models, a.ModelFile, a.MetadataFile, a.SelfTests)

	if a.Supported {
		title := fmt.Sprintf("TunaNet %s: solvers ranked for the problem", a.Arch)
		var t *report.Table
		if a.Builtin {
			t = r.AddTable(title, "rank", "solver", "score", "applies")
		} else {
			t = r.AddTable(title, "rank", "solver", "score")
		}
		for _, s := range a.Ranking {
			cells := []string{strconv.Itoa(s.Rank), s.Solver, fmt.Sprintf("%.4f", s.Score)}
			if a.Builtin {
				applies := "yes"
				if s.NotApplicable != "" {
					applies = "no: " + s.NotApplicable
				}
				cells = append(cells, applies)
			}
			t.AddRow(cells...)
		}
		if a.Builtin {
			r.Note("immediate mode takes the first solver that applies")
		} else {
			r.Note("MIOpen's immediate mode walks this ranking and drops each solver that is disabled, not dynamic, not applicable to the problem on the device, or needs more workspace than given; those are the library's own checks, not run here")
		}
	}
	if verbose && len(a.Features) > 0 {
		t := r.AddTable(fmt.Sprintf("features fed to the network (normalised with the %s statistics)", a.StatsSplit),
			"feature", "value", "mean", "std", "normalised")
		for _, f := range a.Features {
			t.AddRow(f.Name, formatFloat(f.Raw), formatFloat(f.Mean), formatFloat(f.Std), fmt.Sprintf("%.6f", f.Normalized))
		}
	}
	if k := a.KTN; k != nil {
		t := r.AddTable(fmt.Sprintf("KernelTuningNet %s/%s: the tuning values %s starts from", a.Arch, k.Set, k.Solver),
			"step", "value", "token", "score")
		for _, c := range k.Choices {
			t.AddRow(strconv.Itoa(c.Step), c.Value, strconv.Itoa(c.Token), fmt.Sprintf("%.4f", c.Score))
		}
		if !k.OK {
			r.Note("KernelTuningNet gave up after %d values (its best token ended the sequence): MIOpen then uses %s's static heuristic", len(k.Choices), k.Solver)
		}
		r.Note("KernelTuningNet: every value the model ranks first is taken; MIOpen's validator also checks each against %s's kernel instances and may take a lower-scored one; the encoder and decoder passed their %d embedded self-tests", k.Solver, k.SelfTests)
	}
	if a.KTNSkipped != "" {
		r.Note("no KernelTuningNet prediction: %s", a.KTNSkipped)
	}

	if !a.Supported {
		summary := fmt.Sprintf("the %s model does not cover the problem: %s; MIOpen makes no AI prediction for it", a.Arch, a.Reason)
		r.Finish(report.Skip, summary, end)
		return
	}
	best := a.Ranking[0]
	summary := fmt.Sprintf("%s ranks %s first (score %.4f) of %d solvers", "TunaNet "+a.Arch, best.Solver, best.Score, len(a.Ranking))
	r.Detail = "ranks " + best.Solver + " first"
	r.Finish(report.Pass, summary, end)
}

// formatFloat prints whole numbers without a fraction (the raw features)
// and others with six significant digits.
func formatFloat(v float32) string {
	return strconv.FormatFloat(float64(v), 'g', 6, 32)
}
