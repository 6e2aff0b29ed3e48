package trace

import (
	"os"
	"path/filepath"
	"slices"
	"testing"
)

func TestExecutablesAreWhatAShellWouldRun(t *testing.T) {
	a, b := t.TempDir(), t.TempDir()
	write := func(dir, name string, mode os.FileMode) {
		if err := os.WriteFile(filepath.Join(dir, name), []byte("#!/bin/sh\n"), mode); err != nil {
			t.Fatal(err)
		}
	}
	write(a, "python3", 0o755)
	write(a, "pytest", 0o644) // not executable
	write(b, "python3", 0o755)
	write(b, "pyspy", 0o700)
	if err := os.Mkdir(filepath.Join(b, "pydir"), 0o755); err != nil {
		t.Fatal(err)
	}
	if err := os.Symlink(filepath.Join(a, "python3"), filepath.Join(b, "pylink")); err != nil {
		t.Fatal(err)
	}
	env := []string{"PATH=" + a + string(os.PathListSeparator) + filepath.Join(a, "none") + string(os.PathListSeparator) + b}
	for _, tt := range []struct {
		prefix string
		want   []string
	}{
		{"py", []string{"pylink", "pyspy", "python3"}},
		{"pyt", []string{"python3"}},
		{"x", nil},
	} {
		if got := Executables(env, tt.prefix); !slices.Equal(got, tt.want) {
			t.Errorf("%q: %q, want %q", tt.prefix, got, tt.want)
		}
	}
}
