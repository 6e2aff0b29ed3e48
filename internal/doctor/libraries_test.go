package doctor

import (
	"strings"
	"testing"
	"time"

	"miotool/internal/hip"
	"miotool/internal/report"
	"miotool/internal/runenv"
)

func diagnoseWithTargets(t *testing.T, targets func() []hip.Library) *report.Result {
	t.Helper()
	closed := 0
	backends := stubBackends(&closed)
	return Diagnose(Input{
		Words:           testWords,
		Backend:         "auto",
		Open:            stubSelect(backends),
		Backends:        func() []hip.Registration { return backends },
		Env:             runenv.Read(func(string) (string, bool) { return "", false }, func() (string, error) { return "/h", nil }),
		CommandLine:     "miotool doctor",
		Now:             func() time.Time { return time.Date(2026, 11, 29, 0, 0, 0, 0, time.UTC) },
		TargetLibraries: targets,
	})
}

// The summary says which of the four libraries the backends and targets
// need were found, and where; the Libraries table lists every path tried.
func TestDoctorSummarisesTheLibrariesFound(t *testing.T) {
	r := diagnoseWithTargets(t, func() []hip.Library {
		return []hip.Library{
			{Name: "libMIOpen", Tried: []hip.PathAttempt{{Path: "libMIOpen.so.1", Err: "cannot open shared object file"}, {Path: "/opt/rocm/lib/libMIOpen.so.1", Err: "not found"}}},
			{Name: "libcudnn", Loaded: "/usr/lib/x86_64-linux-gnu/libcudnn.so.9.14.0", Version: "9.14.0", Tried: []hip.PathAttempt{{Path: "libcudnn.so.9"}}},
		}
	})
	found := tableText(t, r, "Libraries found")
	for _, want := range []string{
		"libamdhip64 | yes | /opt/rocm/lib/libamdhip64.so.7 | 7.2 | --backend hip",
		"libhiprtc | not searched | - | - | --backend hip (building kernels)",
		"libMIOpen | no | not found in 2 places (see Libraries) | - | --target miopen",
		"libcudnn | yes | /usr/lib/x86_64-linux-gnu/libcudnn.so.9.14.0 | 9.14.0 | --target cudnn",
	} {
		if !strings.Contains(found, want) {
			t.Errorf("summary lacks %q:\n%s", want, found)
		}
	}
	libs := tableText(t, r, "Libraries")
	for _, want := range []string{
		"target | libMIOpen | /opt/rocm/lib/libMIOpen.so.1 | not found",
		"target | libcudnn | libcudnn.so.9 | loaded | 9.14.0",
	} {
		if !strings.Contains(libs, want) {
			t.Errorf("Libraries lacks %q:\n%s", want, libs)
		}
	}
	if r.Verdict != report.Pass {
		t.Fatalf("verdict %s", r.Verdict)
	}
}

// Without a stub, doctor searches for the real libraries; whatever this
// machine has, both get a row.
func TestDoctorSearchesForTheTargetLibraries(t *testing.T) {
	t.Setenv("MIOPEN_USER_DB_PATH", "")
	t.Setenv("MIOPEN_DEBUG_DISABLE_FIND_DB", "")
	found := tableText(t, diagnoseWithTargets(t, nil), "Libraries found")
	for _, name := range []string{"libMIOpen", "libcudnn"} {
		ok := false
		for _, line := range strings.Split(found, "\n") {
			if strings.HasPrefix(line, name+" | yes | ") || strings.HasPrefix(line, name+" | no | not found in ") {
				ok = true
			}
		}
		if !ok {
			t.Errorf("no searched row for %s:\n%s", name, found)
		}
	}
}
