package configs

import (
	"os"
	"path/filepath"
	"strings"
	"testing"
)

func TestBuiltinProblemsAreValid(t *testing.T) {
	ps, err := Problems("")
	if err != nil {
		t.Fatal(err)
	}
	seen := map[string]bool{}
	for _, p := range ps {
		if seen[p.Name] {
			t.Errorf("duplicate %s", p.Name)
		}
		seen[p.Name] = true
	}
	for _, want := range []string{"naive-timeout-sim", "naive-timeout-gpu", "naive-long-sim", "naive-long-gpu", "capture-small"} {
		if !seen[want] {
			t.Errorf("missing %s", want)
		}
	}
	p, err := Problem("", "resnet50-stem")
	if err != nil || p.Problem.StrideH != 2 || p.Problem.DilH != 1 || p.Problem.Groups != 1 {
		t.Fatalf("resnet50-stem: %+v %v", p, err)
	}
}

func TestProblemsFileErrors(t *testing.T) {
	dir := t.TempDir()
	for _, tt := range []struct{ body, want string }{
		{"a:\n  batchsize: 1\n  bogus: 3\n", `p.yaml:3: problem a: unknown field "bogus"`},
		{"a:\n  batchsize: 1\n  conv_stride_h: 0\n", "p.yaml:1: problem a: invalid problem: stride_h"},
		{"- 1\n", "want a mapping"},
	} {
		f := filepath.Join(dir, "p.yaml")
		if err := os.WriteFile(f, []byte(tt.body), 0o644); err != nil {
			t.Fatal(err)
		}
		_, err := Problems(f)
		if err == nil || !strings.Contains(err.Error(), tt.want) {
			t.Errorf("%q: got %v, want %q", tt.body, err, tt.want)
		}
	}
	if _, err := Problem("", "nope"); err == nil || !strings.Contains(err.Error(), "known:") {
		t.Errorf("unknown name: %v", err)
	}
}
