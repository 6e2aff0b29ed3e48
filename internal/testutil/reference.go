package testutil

import (
	"fmt"
	"os"
	"path/filepath"
	"testing"
)

// The real upstream headers in the shared folder's reference/ hold the
// bindings and the stand-in libraries to the C ABI where no such library
// is installed. Their builds generate a few headers that are not kept
// there; these helpers write minimal versions of them into a folder of the
// test's own and return the compiler flags that put both first on the
// include path, so that headers installed in the system folders (Debian's
// HIP 5.2 in /usr/include/hip) never mix in.

// The version of the HIP reference headers (ROCm/HIP and ROCm/clr of
// October 2024, the 6.3 release line).
const (
	HIPReferenceMajor = 6
	HIPReferenceMinor = 3
)

// HIPReferenceIncludes are the flags that compile against the HIP 6.3
// reference headers (hip/hip_runtime_api.h, hip/hiprtc.h, ...) with the
// AMD platform chosen; t is skipped where the reference is absent.
func HIPReferenceIncludes(t testing.TB) []string {
	t.Helper()
	ref := Shared(t, "reference", "hip-6.3", "include")
	gen := t.TempDir()
	writeFile(t, filepath.Join(gen, "hip", "hip_version.h"), fmt.Sprintf(
		"/* What HIP's build generates, for the reference headers. */\n"+
			"#define HIP_VERSION_MAJOR %d\n#define HIP_VERSION_MINOR %d\n#define HIP_VERSION_PATCH 0\n"+
			"#define HIP_VERSION (HIP_VERSION_MAJOR * 10000000 + HIP_VERSION_MINOR * 100000 + HIP_VERSION_PATCH)\n",
		HIPReferenceMajor, HIPReferenceMinor))
	return []string{"-D__HIP_PLATFORM_AMD__", "-isystem", gen, "-isystem", ref}
}

// MIOpenReferenceIncludes are the flags that compile against the reference
// miopen.h (C++ only: as C it uses a struct tag without its typedef) on
// MIOpen's HIP backend, as ROCm builds it, so that its stream type is the
// HIP 6.3 reference's hipStream_t; t is skipped where either is absent.
func MIOpenReferenceIncludes(t testing.TB) []string {
	t.Helper()
	ref := Shared(t, "reference", "miopen", "include")
	hip := HIPReferenceIncludes(t)
	gen := t.TempDir()
	writeFile(t, filepath.Join(gen, "miopen", "config.h"),
		"/* What MIOpen's build generates from config.h.in: only what miopen.h reads. */\n"+
			"#define MIOPEN_BACKEND_OPENCL 0\n#define MIOPEN_BACKEND_HIP 1\n")
	writeFile(t, filepath.Join(gen, "miopen", "export.h"),
		"/* What MIOpen's build generates: the symbol visibility of its API. */\n"+
			"#define MIOPEN_EXPORT __attribute__((visibility(\"default\")))\n")
	return append([]string{"-isystem", gen, "-isystem", ref}, hip...)
}

func writeFile(t testing.TB, path, text string) {
	t.Helper()
	if err := os.MkdirAll(filepath.Dir(path), 0o755); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(path, []byte(text), 0o644); err != nil {
		t.Fatal(err)
	}
}
