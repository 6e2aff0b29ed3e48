package doctor

import (
	"strings"
	"testing"

	"miotool/internal/hip"
	"miotool/internal/runenv"
)

func diagnoseWithTargets(t *testing.T, targets func() []hip.Library) Diagnosis {
	t.Helper()
	closed := 0
	backends := stubBackends(&closed)
	return Diagnose(Input{
		Backend:         "auto",
		Open:            stubSelect(backends),
		Backends:        func() []hip.Registration { return backends },
		Env:             runenv.Read(func(string) (string, bool) { return "", false }, func() (string, error) { return "/h", nil }),
		TargetLibraries: targets,
	})
}

// foundText lists what was found of each needed library, one a line.
func foundText(d Diagnosis) string {
	var lines []string
	for _, f := range d.Found {
		lines = append(lines, strings.Join([]string{f.Name, string(f.Backend), string(f.Target), f.For,
			map[bool]string{true: "searched", false: "not searched"}[f.Searched], f.Library.Loaded, f.Library.Version}, "|"))
	}
	return strings.Join(lines, "\n")
}

// Each library the backends and targets need is found, or not, or never
// searched, in the order of Needs; the target libraries come with every
// path tried.
func TestDoctorFindsTheNeededLibraries(t *testing.T) {
	targets := []hip.Library{
		{Name: "libMIOpen", Tried: []hip.PathAttempt{{Path: "libMIOpen.so.1", Err: "cannot open shared object file"}, {Path: "/opt/rocm/lib/libMIOpen.so.1", Err: "not found"}}},
		{Name: "libcudnn", Loaded: "/usr/lib/x86_64-linux-gnu/libcudnn.so.9.14.0", Version: "9.14.0", Tried: []hip.PathAttempt{{Path: "libcudnn.so.9"}}},
	}
	d := diagnoseWithTargets(t, func() []hip.Library { return targets })
	want := strings.Join([]string{
		"libamdhip64|hip|||searched|/opt/rocm/lib/libamdhip64.so.7|7.2",
		"libhiprtc|hip||building kernels|not searched||",
		"libMIOpen||miopen||searched||",
		"libcudnn||cudnn||searched|/usr/lib/x86_64-linux-gnu/libcudnn.so.9.14.0|9.14.0",
	}, "\n")
	if got := foundText(d); got != want {
		t.Errorf("found:\n%s\nwant:\n%s", got, want)
	}
	if len(d.Found[2].Library.Tried) != 2 {
		t.Errorf("libMIOpen: %d paths tried, want 2", len(d.Found[2].Library.Tried))
	}
	if len(d.TargetLibraries) != 2 || d.TargetLibraries[0].Name != "libMIOpen" {
		t.Errorf("target libraries %+v", d.TargetLibraries)
	}
}

// A library listed twice is found where it was loaded, whichever came
// first.
func TestDoctorPrefersTheLoadedCopy(t *testing.T) {
	d := diagnoseWithTargets(t, func() []hip.Library {
		return []hip.Library{
			{Name: "libamdhip64", Tried: []hip.PathAttempt{{Path: "libamdhip64.so.6", Err: "not found"}}},
			{Name: "libcudnn", Tried: []hip.PathAttempt{{Path: "libcudnn.so.9", Err: "not found"}}},
			{Name: "libcudnn", Loaded: "/usr/lib64/libcudnn.so.9", Tried: []hip.PathAttempt{{Path: "/usr/lib64/libcudnn.so.9"}}},
		}
	})
	if f := d.Found[0]; f.Library.Loaded != "/opt/rocm/lib/libamdhip64.so.7" {
		t.Errorf("libamdhip64 found %+v, want the hip backend's loaded copy", f.Library)
	}
	if f := d.Found[3]; f.Library.Loaded != "/usr/lib64/libcudnn.so.9" {
		t.Errorf("libcudnn found %+v, want the loaded copy listed second", f.Library)
	}
}

// Without a stub, doctor searches for the real libraries; whatever this
// machine has, both are searched.
func TestDoctorSearchesForTheTargetLibraries(t *testing.T) {
	t.Setenv("MIOPEN_USER_DB_PATH", "")
	t.Setenv("MIOPEN_DEBUG_DISABLE_FIND_DB", "")
	d := diagnoseWithTargets(t, nil)
	for _, f := range d.Found[2:] {
		if !f.Searched || (f.Library.Loaded == "" && len(f.Library.Tried) == 0) {
			t.Errorf("%s: searched %v, %+v", f.Name, f.Searched, f.Library)
		}
	}
}
