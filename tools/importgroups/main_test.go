package main

import (
	"bytes"
	"os"
	"path/filepath"
	"strings"
	"testing"
)

func TestCheckFile(t *testing.T) {
	for _, tc := range []struct {
		name string
		src  string
		want []string // offences, as "line: message"
	}{
		{"no imports", "package p\n", nil},
		{"one import", "package p\n\nimport \"fmt\"\n", nil},
		{"three groups in order", `package p

import (
	"fmt"
	"os"

	"github.com/spf13/cobra"

	"miotool/internal/hip"
)
`, nil},
		{"own side-effect imports in a group of their own", `package p

import (
	"fmt"

	"miotool/internal/hip"

	_ "miotool/internal/hip/sim"
)
`, nil},
		{"a comment line does not end a group", `package p

import (
	"fmt"
	// the device
	"miotool/internal/hip"
)
`, []string{"4: one import group mixes standard library and own packages"}},
		{"separate declarations in order", "package p\n\nimport \"fmt\"\nimport \"miotool/internal/hip\"\n", nil},
		{"cgo's import C stands apart", `package p

// #include <stdlib.h>
import "C"

import (
	"unsafe"

	"miotool/internal/hip"
)
`, nil},
		{"module path itself is own", `package p

import (
	"fmt"

	"miotool"
)
`, nil},
		{"stdlib and own mixed", `package p

import (
	"fmt"
	"miotool/internal/hip"
	"os"
)
`, []string{"4: one import group mixes standard library and own packages"}},
		{"third-party and own mixed, then stdlib", `package p

import (
	"github.com/spf13/cobra"
	"miotool/internal/hip"

	"fmt"
)
`, []string{
			"4: one import group mixes third-party and own packages",
			"7: a group of standard library imports comes after own imports",
		}},
		{"own before third-party", `package p

import (
	"fmt"

	"miotool/internal/hip"

	"github.com/spf13/cobra"
)
`, []string{"8: a group of third-party imports comes after own imports"}},
		{"third-party before stdlib across declarations", "package p\n\nimport \"go.yaml.in/yaml/v3\"\nimport \"fmt\"\n",
			[]string{"4: a group of standard library imports comes after third-party imports"}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			got, err := checkFile("f.go", []byte(tc.src), "miotool")
			if err != nil {
				t.Fatal(err)
			}
			var lines []string
			for _, o := range got {
				if o.file != "f.go" {
					t.Errorf("offence names file %q, want f.go", o.file)
				}
				lines = append(lines, strings.TrimPrefix(o.String(), "f.go:"))
			}
			if strings.Join(lines, "\n") != strings.Join(tc.want, "\n") {
				t.Errorf("offences:\n%s\nwant:\n%s", strings.Join(lines, "\n"), strings.Join(tc.want, "\n"))
			}
		})
	}
}

func TestClassify(t *testing.T) {
	for _, tc := range []struct {
		path string
		want kind
	}{
		{"fmt", stdlib},
		{"net/http", stdlib},
		{"golang.org/x/term", thirdParty},
		{"github.com/spf13/cobra", thirdParty},
		{"miotool", own},
		{"miotool/internal/hip", own},
		{"miotoolbox/x", stdlib}, // no dot: not a module path of this kind
	} {
		if got := classify(tc.path, "miotool"); got != tc.want {
			t.Errorf("classify(%q) = %v, want %v", tc.path, got, tc.want)
		}
	}
}

func write(t *testing.T, root, name, src string) {
	t.Helper()
	p := filepath.Join(root, filepath.FromSlash(name))
	if err := os.MkdirAll(filepath.Dir(p), 0o755); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(p, []byte(src), 0o644); err != nil {
		t.Fatal(err)
	}
}

const mixed = "package p\n\nimport (\n\t\"fmt\"\n\t\"example.com/m/x\"\n)\n"

func TestRunNamesEveryOffendingFileAndSkipsWhatGoSkips(t *testing.T) {
	root := t.TempDir()
	write(t, root, "go.mod", "module example.com/m\n\ngo 1.26\n")
	write(t, root, "a/bad.go", mixed)
	write(t, root, "a/good.go", "package p\n\nimport (\n\t\"fmt\"\n\n\t\"example.com/m/x\"\n)\n")
	write(t, root, "b/c/bad_test.go", mixed)
	for _, skipped := range []string{"a/testdata/x.go", "vendor/v/x.go", ".hidden/x.go", "_old/x.go", "nested/x.go"} {
		write(t, root, skipped, mixed)
	}
	write(t, root, "nested/go.mod", "module example.com/other\n")
	write(t, root, "a/notes.txt", mixed)

	var stdout, stderr bytes.Buffer
	if code := run([]string{root}, &stdout, &stderr); code != 1 {
		t.Fatalf("exit %d, want 1; stderr %s", code, stderr.String())
	}
	want := "a/bad.go:4: one import group mixes standard library and own packages\n" +
		"b/c/bad_test.go:4: one import group mixes standard library and own packages\n"
	if stdout.String() != want {
		t.Errorf("stdout:\n%swant:\n%s", stdout.String(), want)
	}
	if !strings.Contains(stderr.String(), "2 files") {
		t.Errorf("stderr %q does not count 2 files", stderr.String())
	}
}

func TestRunPassesACleanTree(t *testing.T) {
	root := t.TempDir()
	write(t, root, "go.mod", "module \"example.com/m\"\n")
	write(t, root, "a/good.go", "package p\n\nimport (\n\t\"fmt\"\n\n\t\"example.com/m/x\"\n)\n")
	write(t, root, "a/third.go", "package p\n\nimport (\n\t\"fmt\"\n\n\t\"example.com/other/x\"\n\n\t\"example.com/m/x\"\n)\n")
	var stdout, stderr bytes.Buffer
	if code := run([]string{root}, &stdout, &stderr); code != 0 {
		t.Fatalf("exit %d, want 0; stdout %s stderr %s", code, stdout.String(), stderr.String())
	}
}

func TestRunBadInput(t *testing.T) {
	noMod := t.TempDir()
	broken := t.TempDir()
	write(t, broken, "go.mod", "module example.com/m\n")
	write(t, broken, "x.go", "package p\n\nimport (\n")
	for _, tc := range []struct {
		name string
		args []string
	}{
		{"two arguments", []string{"a", "b"}},
		{"a flag", []string{"-h"}},
		{"no go.mod", []string{noMod}},
		{"a file that does not parse", []string{broken}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			var stdout, stderr bytes.Buffer
			if code := run(tc.args, &stdout, &stderr); code != 2 {
				t.Errorf("exit %d, want 2", code)
			}
			if msg := stderr.String(); strings.Count(msg, "\n") != 1 {
				t.Errorf("want one line on stderr, got %q", msg)
			}
		})
	}
}
