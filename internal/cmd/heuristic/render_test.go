package heuristic

import (
	"strings"
	"testing"
	"time"

	"miotool/internal/aiheur"
	"miotool/internal/report"
	heuristicscen "miotool/internal/scenario/heuristic"
	"miotool/internal/testutil"
)

// shipped are MIOpen's model files from the reference data.
func shipped(t *testing.T) heuristicscen.Models {
	t.Helper()
	m, err := heuristicscen.FindModels(testutil.Shared(t, "miopen-models"), "--model-dir", nil)
	if err != nil {
		t.Fatal(err)
	}
	return m
}

// fwd is a forward FP32 NCHW problem with square padding, unit stride and
// dilation, one group.
func fwd(n, c, h, w, k, r, s, pad int) aiheur.Problem {
	return aiheur.Problem{N: n, C: c, H: h, W: w, K: k, R: r, S: s, PadH: pad, PadW: pad, StrideH: 1, StrideW: 1,
		DilationH: 1, DilationW: 1, Groups: 1, Direction: aiheur.Forward, DataType: "FP32", Layout: "NCHW"}
}

func ask(t *testing.T, m heuristicscen.Models, arch string, p aiheur.Problem) *heuristicscen.Answer {
	t.Helper()
	a, err := heuristicscen.Ask(heuristicscen.Query{Problem: p, Arch: arch, Models: m})
	if err != nil {
		t.Fatalf("%s %+v: %v", arch, p, err)
	}
	return a
}

func TestFill(t *testing.T) {
	m := shipped(t)
	end := time.Date(2026, 12, 1, 9, 0, 1, 0, time.UTC)
	a := ask(t, m, "gfx942", fwd(16, 64, 56, 56, 64, 3, 3, 1))
	r := report.New(check, "miotool heuristic --arch gfx942", end.Add(-time.Second))
	fill(r, a, false, end)
	if r.Verdict != report.Pass || len(r.Tables) != 2 || r.Tables[0].Columns[2] != "score" || len(r.Tables[0].Rows) != 21 ||
		!strings.Contains(r.Summary, "ranks ConvBinWinogradRxSf2x3g1 first") || r.Device.Arch != "gfx942" {
		t.Errorf("supported: %s %q, %d tables", r.Verdict, r.Summary, len(r.Tables))
	}
	verbose := report.New(check, "", time.Time{})
	fill(verbose, a, true, end)
	if len(verbose.Tables) != 3 || verbose.Tables[1].Rows[0].Cells[0] != "Inp_0" || verbose.Tables[1].Rows[0].Cells[1] != "64" {
		t.Errorf("verbose tables: %+v", verbose.Tables)
	}
	strided := fwd(1, 3, 224, 224, 64, 7, 7, 3)
	strided.StrideH = 2
	not := report.New(check, "", time.Time{})
	fill(not, ask(t, m, "gfx942", strided), false, end)
	if not.Verdict != report.Skip || !strings.Contains(not.Summary, "stride 2x1 is not square") ||
		!strings.HasPrefix(not.ChecklistStatus(), "Skipped (1/1 run skipped): the gfx942 model does not cover the problem: stride 2x1 is not square") {
		t.Errorf("not covered: %s %q %q", not.Verdict, not.Summary, not.ChecklistStatus())
	}
	for _, tb := range not.Tables {
		if strings.Contains(tb.Title, "ranked") {
			t.Error("a problem the model does not cover has a ranking")
		}
	}
}
