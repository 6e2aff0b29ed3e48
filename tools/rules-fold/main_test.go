package main

import (
	"bytes"
	"os"
	"path/filepath"
	"strings"
	"testing"
)

const header = "schema: miotool/rules-expect/v1\ndialect: cuda\ndevice: \"H200\"\nsource: \"measured\"\ncells:\n"

func write(t *testing.T, dir, name, cells string, mode os.FileMode) string {
	t.Helper()
	p := filepath.Join(dir, name)
	if err := os.WriteFile(p, []byte(header+cells), mode); err != nil {
		t.Fatal(err)
	}
	return p
}

func TestFoldsInPlace(t *testing.T) {
	dir := t.TempDir()
	into := write(t, dir, "h200.yaml", "  - {action: malloc, capture: global, thread: other, mode: global, returns: 900, end: 901, basis: measured}\n", 0o640)
	measured := write(t, dir, "new.yaml", "  - {action: host-alloc, capture: global, thread: other, mode: global, returns: 900, end: 901, basis: measured}\n", 0o644)
	var out, errOut bytes.Buffer
	if code := run([]string{"--into", into, measured}, &out, &errOut); code != 0 {
		t.Fatalf("exit %d: %s", code, errOut.String())
	}
	if !strings.Contains(out.String(), "added 1 cells, replaced 0, kept 0") {
		t.Errorf("stdout %q", out.String())
	}
	data, err := os.ReadFile(into)
	if err != nil {
		t.Fatal(err)
	}
	for _, want := range []string{"# cuMemAlloc\n  - {action: malloc", "# cuMemHostAlloc\n  - {action: host-alloc", `source: "measured; cells of host-alloc from measured"`} {
		if !strings.Contains(string(data), want) {
			t.Errorf("folded file lacks %q:\n%s", want, data)
		}
	}
	if info, err := os.Stat(into); err != nil || info.Mode().Perm() != 0o640 {
		t.Errorf("mode %v, %v: want the file's own 0640", info.Mode(), err)
	}
	if left, _ := filepath.Glob(filepath.Join(dir, ".*")); len(left) > 0 {
		t.Errorf("left behind %q", left)
	}
}

func TestRefusals(t *testing.T) {
	dir := t.TempDir()
	into := write(t, dir, "h200.yaml", "  - {action: malloc, capture: global, thread: other, mode: global, returns: 900, end: 901, basis: measured}\n", 0o644)
	differs := write(t, dir, "new.yaml", "  - {action: malloc, capture: global, thread: other, mode: global, returns: 0, end: 0, basis: measured}\n", 0o644)
	before, _ := os.ReadFile(into)
	for _, tc := range []struct {
		args []string
		code int
		err  string
	}{
		{[]string{differs}, 2, "--into and one measured expectation file are required"},
		{[]string{"--into", into}, 2, "--into and one measured expectation file are required"},
		{[]string{"--into", into, filepath.Join(dir, "missing.yaml")}, 2, "missing.yaml"},
		{[]string{"--into", into, differs}, 1, "1 cells of " + differs + " differ"},
	} {
		var out, errOut bytes.Buffer
		if code := run(tc.args, &out, &errOut); code != tc.code || !strings.Contains(errOut.String(), tc.err) {
			t.Errorf("%q: exit %d, stderr %q; want %d and %q", tc.args, code, errOut.String(), tc.code, tc.err)
		}
	}
	if after, _ := os.ReadFile(into); !bytes.Equal(before, after) {
		t.Error("a refused fold changed the file")
	}
}
