package doctor

import (
	"bytes"
	"errors"
	"strings"
	"testing"
	"time"

	"miotool/internal/buildinfo"
	"miotool/internal/doctor"
	"miotool/internal/hip"
	"miotool/internal/report"
	"miotool/internal/runenv"
)

var (
	missingCUDA = &hip.UnavailableError{Backend: "cuda", Reason: "libcuda.so.1 not found", Libraries: []hip.Library{libcuda}}
	libcuda     = hip.Library{
		Name:  "libcuda",
		Tried: []hip.PathAttempt{{Path: "libcuda.so.1", Err: "cannot open shared object file"}, {Path: "/usr/lib/wsl/lib/libcuda.so.1", Err: "not found"}},
	}
	libamdhip64 = hip.Library{Name: "libamdhip64", Loaded: "/opt/rocm/lib/libamdhip64.so.7", Version: "7.2", Tried: []hip.PathAttempt{{Path: "/opt/rocm/lib/libamdhip64.so.7"}}}
	libMIOpen   = hip.Library{Name: "libMIOpen", Tried: []hip.PathAttempt{{Path: "libMIOpen.so.1", Err: "cannot open shared object file"}, {Path: "/opt/rocm/lib/libMIOpen.so.1", Err: "not found"}}}
	libcudnn    = hip.Library{Name: "libcudnn", Loaded: "/usr/lib/x86_64-linux-gnu/libcudnn.so.9.14.0", Version: "9.14.0", Tried: []hip.PathAttempt{{Path: "libcudnn.so.9"}}}
)

// diagnosis is what doctor finds with a missing CUDA, a working HIP
// backend and the simulator, backend being requested.
func diagnosis(t *testing.T, backend string) doctor.Diagnosis {
	t.Helper()
	env := runenv.Read(func(k string) (string, bool) {
		if k == "GPU_MAX_HW_QUEUES" {
			return "0", true
		}
		return "", false
	}, func() (string, error) { return "/home/u/.config", nil })
	d := doctor.Diagnosis{
		Requested:       backend,
		TargetLibraries: []hip.Library{libMIOpen, libcudnn},
		Settings:        env.Settings,
		Found: []doctor.Found{
			{Need: doctor.Needs[0], Searched: true, Library: libamdhip64},
			{Need: doctor.Needs[1]},
			{Need: doctor.Needs[2], Searched: true, Library: libMIOpen},
			{Need: doctor.Needs[3], Searched: true, Library: libcudnn},
		},
	}
	cuda := doctor.Backend{Name: "cuda", Kind: doctor.KindGPU, State: doctor.Unavailable, Err: missingCUDA, Libraries: []hip.Library{libcuda}}
	sim := doctor.Backend{Name: "sim", Kind: doctor.KindSimulator, State: doctor.Available}
	switch backend {
	case "auto":
		d.Selection = hip.Selection{Requested: "auto", Chosen: "hip", Reason: "picked by the stub",
			Attempts: []hip.Attempt{{Backend: "cuda", Err: missingCUDA}, {Backend: "hip"}}}
		d.Backends = []doctor.Backend{cuda, {Name: "hip", Kind: doctor.KindGPU, State: doctor.Chosen, Libraries: []hip.Library{libamdhip64}}, sim}
		d.Device = &doctor.Device{Dialect: hip.DialectHIP, Props: hip.Props{Backend: "hip", Name: "AMD Instinct MI300X", Arch: "gfx942", ComputeUnits: 304, WarpSize: 64,
			ClockKHz: 2100000, TotalMemory: 192 << 30, RuntimeVersion: "7.2", DriverVersion: "6.10"}}
	case "cuda":
		d.Selection = hip.Selection{Requested: "cuda", Attempts: []hip.Attempt{{Backend: "cuda", Err: missingCUDA}}}
		d.OpenErr = missingCUDA
		d.Backends = []doctor.Backend{cuda, {Name: "hip", Kind: doctor.KindGPU, State: doctor.Available, Libraries: []hip.Library{libamdhip64}}, sim}
	default:
		t.Fatalf("no diagnosis for %q", backend)
	}
	return d
}

func renderDiagnosis(d doctor.Diagnosis, configUsed string) *report.Result {
	o := &DoctorOptions{CommandLine: "miotool doctor", ConfigUsed: configUsed,
		Build: buildinfo.Info{Version: "1.0.0", Commit: "abc", GoVersion: "go1.26.8", Platform: "linux/amd64"}}
	start := time.Date(2026, 11, 29, 0, 0, 0, 0, time.UTC)
	return render(o, d, start, start.Add(time.Millisecond))
}

func tableText(t *testing.T, r *report.Result, title string) string {
	t.Helper()
	for _, tb := range r.Tables {
		if tb.Title == title {
			var rows []string
			for _, row := range tb.Rows {
				rows = append(rows, strings.Join(row.Cells, " | "))
			}
			return strings.Join(rows, "\n")
		}
	}
	t.Fatalf("no table %q", title)
	return ""
}

func TestRenderSaysSelectionLibrariesDeviceAndEnvironment(t *testing.T) {
	r := renderDiagnosis(diagnosis(t, "auto"), "/work/miotool.yaml")
	if r.Verdict != report.Pass || r.Backend != "hip" || r.BackendReason != "picked by the stub" || r.Device.Short() != "AMD Instinct MI300X (gfx942)" {
		t.Fatalf("verdict %s backend %q (%s) device %q", r.Verdict, r.Backend, r.BackendReason, r.Device.Short())
	}
	if r.Summary != "backend hip on AMD Instinct MI300X (gfx942)" {
		t.Errorf("summary %q", r.Summary)
	}
	checks := map[string][]string{
		"Backend selection": {"requested | auto", "chosen | hip", "why | picked by the stub"},
		"Backends":          {"cuda | GPU | unavailable | backend cuda unavailable: libcuda.so.1 not found", "hip | GPU | chosen | picked by the stub", "sim | simulator | available | not used: auto chose hip"},
		"Libraries": {"cuda | libcuda | libcuda.so.1 | cannot open shared object file",
			"cuda | libcuda | /usr/lib/wsl/lib/libcuda.so.1 | not found", "hip | libamdhip64 | /opt/rocm/lib/libamdhip64.so.7 | loaded | 7.2",
			"target | libMIOpen | /opt/rocm/lib/libMIOpen.so.1 | not found", "target | libcudnn | libcudnn.so.9 | loaded | 9.14.0"},
		"Libraries found": {"libamdhip64 | yes | /opt/rocm/lib/libamdhip64.so.7 | 7.2 | --backend hip",
			"libhiprtc | not searched | - | - | --backend hip (building kernels)",
			"libMIOpen | no | not found in 2 places (see Libraries) | - | --target miopen",
			"libcudnn | yes | /usr/lib/x86_64-linux-gnu/libcudnn.so.9.14.0 | 9.14.0 | --target cudnn"},
		"Device": {"name | AMD Instinct MI300X", "arch | gfx942", "compute units | 304", "clock | 2100 MHz", "runtime version | 7.2", "driver version | 6.10", "memory | 192.0 GiB", "dialect | hip"},
		"Runtime variables": {`GPU_MAX_HW_QUEUES | 4 | default (env "0" ignored) | warning: GPU_MAX_HW_QUEUES=0 is not positive`,
			"MIOPEN_NAIVE_TIMEOUT | 300 | default", "MIOPEN_USER_DB_PATH | /home/u/.config/miotool/db | default", "MIOPEN_FIND_MODE | NORMAL (1) | default"},
		"Configuration": {"config file | /work/miotool.yaml", "miotool | 1.0.0 (commit abc)", "go | go1.26.8 linux/amd64"},
	}
	for title, wants := range checks {
		text := tableText(t, r, title)
		for _, w := range wants {
			if !strings.Contains(text, w) {
				t.Errorf("table %s lacks %q:\n%s", title, w, text)
			}
		}
	}
	var buf bytes.Buffer
	if err := report.WriteJSON(&buf, r); err != nil {
		t.Fatal(err)
	}
	if _, err := report.ReadJSON(&buf); err != nil {
		t.Errorf("doctor JSON does not read back: %v", err)
	}
}

// An explicitly requested backend that does not load makes doctor a skip
// (exit 4), with every table still there to say why.
func TestRenderSkipsWhenTheRequestedBackendIsMissing(t *testing.T) {
	r := renderDiagnosis(diagnosis(t, "cuda"), "")
	if r.Verdict != report.Skip {
		t.Fatalf("verdict %s", r.Verdict)
	}
	if !strings.Contains(r.Summary, "no backend opened: backend cuda unavailable") {
		t.Errorf("summary %q", r.Summary)
	}
	for title, want := range map[string]string{
		"Backend selection": "chosen | none",
		"Device":            "none opened",
		"Backends":          "hip | GPU | available | not used: --backend cuda was requested",
		"Configuration":     "config file | none",
	} {
		if text := tableText(t, r, title); !strings.Contains(text, want) {
			t.Errorf("%s table lacks %q:\n%s", title, want, text)
		}
	}
}

// The Libraries table always has a row; a backend that could not be
// closed is a note; an unregistered backend's kind is a dash; a user db
// path find refuses is an error in its row.
func TestRenderEdgeCases(t *testing.T) {
	env := runenv.Read(func(string) (string, bool) { return "", false }, func() (string, error) { return "/h", nil })
	d := doctor.Diagnosis{
		Requested: "auto",
		Selection: hip.Selection{Chosen: "sim", Attempts: []hip.Attempt{{Backend: "sim"}}},
		Backends: []doctor.Backend{{Name: "sim", Kind: doctor.KindUnknown, State: doctor.Chosen},
			{Name: "other", Kind: doctor.KindGPU, State: doctor.Available, CloseErr: errors.New("busy")}},
		Settings:  env.Settings,
		UserDBErr: errors.New("MIOPEN_USER_DB_PATH=/f: not a folder"),
		Device:    &doctor.Device{Props: hip.Props{Name: "sim"}},
	}
	r := renderDiagnosis(d, "")
	if text := tableText(t, r, "Libraries"); text != "- | - | - | no shared libraries loaded or tried | -" {
		t.Errorf("Libraries:\n%s", text)
	}
	if text := tableText(t, r, "Backends"); !strings.HasPrefix(text, "sim | - | chosen") {
		t.Errorf("Backends:\n%s", text)
	}
	if text := tableText(t, r, "Device"); !strings.Contains(text, "memory | unknown") {
		t.Errorf("Device:\n%s", text)
	}
	if text := tableText(t, r, "Runtime variables"); !strings.Contains(text, "error: MIOPEN_USER_DB_PATH=/f: not a folder: find refuses it") {
		t.Errorf("Runtime variables:\n%s", text)
	}
	if len(r.Notes) != 1 || r.Notes[0] != "closing backend other: busy" {
		t.Errorf("notes %q", r.Notes)
	}
}
