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
		{"a:\n  batchsize: 1\n  in_hh: 3\n", `p.yaml:3: problem a: unknown field "in_hh" (did you mean in_h?)`},
		{"a:\n  batchsize: 1\n  zzz: 3\n", `unknown field "zzz" (the fields are description and MIOpenDriver's long flag names: batchsize, conv_stride_h,`},
		{"a:\n  in_h: 8\nb:\n  in_h: 9\n\na:\n  in_h: 10\n", "p.yaml:6: problem a is defined twice, at lines 1 and 6"},
		{"a:\n  in_h: 8\n  batchsize: 2\n  in_h: 9\n", "p.yaml:4: problem a: in_h is set twice, at lines 2 and 4"},
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
	if _, err := Problem("", "naive-long-simm"); err == nil || !strings.HasSuffix(err.Error(), `no problem named "naive-long-simm" (did you mean naive-long-sim?)`) {
		t.Errorf("a name one letter off: %v", err)
	}
}
