package rules_test

import (
	"bytes"
	"strings"
	"testing"

	"miotool/internal/hip"
	"miotool/internal/rules"
)

func parse(t *testing.T, name, cells string) *rules.Expectation {
	t.Helper()
	text := "schema: miotool/rules-expect/v1\ndialect: cuda\ndevice: \"dev " + name + "\"\nsource: \"src " + name + "\"\ncells:\n" + cells
	e, err := rules.ParseExpectation(name, []byte(text))
	if err != nil {
		t.Fatal(err)
	}
	return e
}

func TestFold(t *testing.T) {
	base := parse(t, "base.yaml", `  - {action: malloc, capture: global, thread: other, mode: global, returns: 900, end: 901, basis: measured, note: "kept"}
  - {action: free, capture: global, thread: other, mode: global, returns: 900, end: 901, basis: measured}
`)
	add := parse(t, "new.yaml", `  - {action: malloc, capture: global, thread: other, mode: global, returns: 900, end: 901, basis: measured}
  - {action: host-alloc, capture: global, thread: other, mode: global, returns: 900, end: 901, basis: measured}
  - {action: module-unload, capture: relaxed, thread: same, mode: relaxed, returns: 0, end: 0, basis: measured}
`)
	out, done, err := rules.Fold(base, add, rules.FoldOptions{})
	if err != nil {
		t.Fatal(err)
	}
	if len(done.Added) != 2 || done.Kept != 1 || len(done.Replaced) != 0 {
		t.Fatalf("folded %+v", done)
	}
	if len(done.Actions) != 2 || done.Actions[0] != rules.HostAlloc || done.Actions[1] != rules.ModuleUnload {
		t.Fatalf("actions %v", done.Actions)
	}
	malloc := rules.CellKey{Action: rules.Malloc, Capture: hip.CaptureModeGlobal, Other: true}
	if got := out.Cells[malloc]; got.Note != "kept" || got.Line != base.Cells[malloc].Line {
		t.Errorf("a cell both hold keeps the file's entry, got %+v", got)
	}
	if len(out.Cells) != 4 || out.Device != "dev base.yaml" || out.Dialect != hip.DialectCUDA {
		t.Errorf("folded file: %d cells, device %q", len(out.Cells), out.Device)
	}
	if want := "src base.yaml; cells of host-alloc, module-unload from src new.yaml"; out.Source != want {
		t.Errorf("source %q, want %q", out.Source, want)
	}
	if len(base.Cells) != 2 || len(add.Cells) != 3 {
		t.Error("Fold changed its inputs")
	}
	// The result reads back as it was folded.
	var buf bytes.Buffer
	if err := rules.WriteExpectation(&buf, out); err != nil {
		t.Fatal(err)
	}
	back, err := rules.ParseExpectation("out.yaml", buf.Bytes())
	if err != nil || len(back.Cells) != 4 || back.Source != out.Source {
		t.Fatalf("read back: %v\n%s", err, buf.String())
	}

	// Options: the basis, the note and the source of the added cells.
	out, _, err = rules.Fold(base, add, rules.FoldOptions{Basis: rules.BasisSource, Note: "n", Source: "read elsewhere"})
	if err != nil {
		t.Fatal(err)
	}
	hostAlloc := rules.CellKey{Action: rules.HostAlloc, Capture: hip.CaptureModeGlobal, Other: true}
	if got := out.Cells[hostAlloc]; got.Basis != rules.BasisSource || got.Note != "n" {
		t.Errorf("added cell %+v", got)
	}
	if out.Source != "src base.yaml; read elsewhere" {
		t.Errorf("source %q", out.Source)
	}
}

func TestFoldRefusesWhatDisagrees(t *testing.T) {
	base := parse(t, "base.yaml", `  - {action: malloc, capture: global, thread: other, mode: global, returns: 900, end: 901, basis: measured}
`)
	add := parse(t, "new.yaml", `  - {action: malloc, capture: global, thread: other, mode: global, returns: 0, end: 0, basis: measured}
`)
	_, _, err := rules.Fold(base, add, rules.FoldOptions{})
	if err == nil || !strings.Contains(err.Error(), "malloc/global/other/global (line 6 of base.yaml: 900/901; new.yaml: 0/0)") {
		t.Fatalf("a disagreeing cell: %v", err)
	}
	out, done, err := rules.Fold(base, add, rules.FoldOptions{Replace: true})
	if err != nil || len(done.Replaced) != 1 || out.Cells[done.Replaced[0].Key].Returns != 0 {
		t.Fatalf("replacing: %+v, %v", done, err)
	}

	hipFile := parse(t, "hip.yaml", "  []\n")
	hipFile.Dialect = hip.DialectHIP
	if _, _, err := rules.Fold(base, hipFile, rules.FoldOptions{}); err == nil || !strings.Contains(err.Error(), "dialect") {
		t.Errorf("another dialect: %v", err)
	}
	if _, _, err := rules.Fold(base, add, rules.FoldOptions{Basis: "guessed", Replace: true}); err == nil {
		t.Error("an unknown basis was accepted")
	}
}
