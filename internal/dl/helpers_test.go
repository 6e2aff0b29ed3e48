package dl

import (
	"os"
	"path/filepath"
	"testing"
	"unsafe"
)

// realLibrary finds a shared library every glibc system has, to stand in
// for a runtime that loads.
func realLibrary(t *testing.T) string {
	t.Helper()
	for _, p := range []string{
		"/lib/x86_64-linux-gnu/libm.so.6", "/usr/lib/x86_64-linux-gnu/libm.so.6",
		"/lib64/libm.so.6", "/usr/lib64/libm.so.6", "/lib/aarch64-linux-gnu/libm.so.6",
	} {
		if _, err := os.Stat(p); err == nil {
			return p
		}
	}
	t.Skip("no libm.so.6 found to stand in for a loadable library")
	return ""
}

func writeFile(t *testing.T, path, text string) {
	t.Helper()
	if err := os.MkdirAll(filepath.Dir(path), 0o755); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(path, []byte(text), 0o644); err != nil {
		t.Fatal(err)
	}
}

func ptrOf(b []byte) uintptr { return uintptr(unsafe.Pointer(&b[0])) }
