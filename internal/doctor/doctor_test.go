package doctor

import (
	"bytes"
	"errors"
	"strings"
	"testing"
	"time"

	"miotool/internal/buildinfo"
	"miotool/internal/dnn/target"
	"miotool/internal/hip"
	"miotool/internal/report"
	"miotool/internal/runenv"
)

// stubDevice answers the calls doctor makes; the embedded nil interface
// makes any other call fail loudly.
type stubDevice struct {
	hip.Device
	props  hip.Props
	libs   []hip.Library
	closed *int
}

func (d stubDevice) Props() hip.Props         { return d.props }
func (d stubDevice) Dialect() hip.Dialect     { return hip.DialectCUDA }
func (d stubDevice) Libraries() []hip.Library { return d.libs }
func (d stubDevice) Close() error             { *d.closed++; return nil }

// stubBackends: a GPU backend whose library is missing, a second GPU
// backend that works, and the simulator.
func stubBackends(closed *int) []hip.Registration {
	missing := &hip.UnavailableError{Backend: "cuda", Reason: "libcuda.so.1 not found", Libraries: []hip.Library{{
		Name:  "libcuda",
		Tried: []hip.PathAttempt{{Path: "libcuda.so.1", Err: "cannot open shared object file"}, {Path: "/usr/lib/wsl/lib/libcuda.so.1", Err: "not found"}},
	}}}
	gpu := stubDevice{closed: closed, props: hip.Props{Backend: "hip", Name: "AMD Instinct MI300X", Arch: "gfx942", ComputeUnits: 304, WarpSize: 64, ClockKHz: 2100000, TotalMemory: 192 << 30, RuntimeVersion: "7.2", DriverVersion: "6.10"},
		libs: []hip.Library{{Name: "libamdhip64", Loaded: "/opt/rocm/lib/libamdhip64.so.7", Version: "7.2", Tried: []hip.PathAttempt{{Path: "/opt/rocm/lib/libamdhip64.so.7"}}}}}
	sim := stubDevice{closed: closed, props: hip.Props{Backend: "sim", Name: "miotool simulated device (cuda rules)", Arch: "sim", ComputeUnits: 2}}
	return []hip.Registration{
		{Name: "cuda", GPU: true, Order: 20, Open: func(hip.OpenOptions) (hip.Device, error) { return nil, missing }},
		{Name: "hip", GPU: true, Order: 30, Open: func(hip.OpenOptions) (hip.Device, error) { return gpu, nil }},
		{Name: "sim", Order: 100, Open: func(hip.OpenOptions) (hip.Device, error) { return sim, nil }},
	}
}

// stubSelect follows hip.Select's contract over the stub backends.
func stubSelect(backends []hip.Registration) func(string, hip.OpenOptions) (hip.Device, hip.Selection, error) {
	return func(name string, opts hip.OpenOptions) (hip.Device, hip.Selection, error) {
		sel := hip.Selection{Requested: name}
		for _, b := range backends {
			if name != "auto" && b.Name != name {
				continue
			}
			d, err := b.Open(opts)
			sel.Attempts = append(sel.Attempts, hip.Attempt{Backend: b.Name, Err: err})
			if err == nil {
				sel.Chosen, sel.Reason = b.Name, "picked by the stub"
				return d, sel, nil
			}
			if name != "auto" {
				return nil, sel, err
			}
		}
		return nil, sel, errors.New("nothing opened")
	}
}

func diagnose(t *testing.T, backend string, closed *int) *report.Result {
	t.Helper()
	backends := stubBackends(closed)
	env := runenv.Read(func(k string) (string, bool) {
		if k == "GPU_MAX_HW_QUEUES" {
			return "0", true
		}
		return "", false
	}, func() (string, error) { return "/home/u/.config", nil })
	return Diagnose(Input{
		Words:       testWords,
		Backend:     backend,
		Open:        stubSelect(backends),
		Backends:    func() []hip.Registration { return backends },
		Env:         env,
		ConfigUsed:  "/work/miotool.yaml",
		CommandLine: "miotool doctor",
		Build:       buildinfo.Info{Version: "1.0.0", Commit: "abc", GoVersion: "go1.26.8", Platform: "linux/amd64"},
		Now:         func() time.Time { return time.Date(2026, 11, 29, 0, 0, 0, 0, time.UTC) },
	})
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

func TestDoctorReportsSelectionLibrariesDeviceAndEnvironment(t *testing.T) {
	closed := 0
	r := diagnose(t, "auto", &closed)
	if r.Verdict != report.Pass || r.Backend != "hip" || r.Device.Short() != "AMD Instinct MI300X (gfx942)" {
		t.Fatalf("verdict %s backend %q device %q", r.Verdict, r.Backend, r.Device.Short())
	}
	checks := map[string][]string{
		"Backend selection": {"requested | auto", "chosen | hip", "why | picked by the stub"},
		"Backends":          {"cuda | GPU | unavailable | backend cuda unavailable: libcuda.so.1 not found", "hip | GPU | chosen", "sim | simulator | available | not used: auto chose hip"},
		"Libraries": {"cuda | libcuda | libcuda.so.1 | cannot open shared object file",
			"cuda | libcuda | /usr/lib/wsl/lib/libcuda.so.1 | not found", "hip | libamdhip64 | /opt/rocm/lib/libamdhip64.so.7 | loaded | 7.2"},
		"Device": {"name | AMD Instinct MI300X", "arch | gfx942", "compute units | 304", "runtime version | 7.2", "driver version | 6.10", "memory | 192.0 GiB"},
		"Runtime variables": {`GPU_MAX_HW_QUEUES | 4 | default (env "0" ignored) | warning: GPU_MAX_HW_QUEUES=0 is not positive`,
			"MIOPEN_NAIVE_TIMEOUT | 300 | default", "MIOPEN_USER_DB_PATH | /home/u/.config/miotool/db | default", "MIOPEN_FIND_MODE | NORMAL (1) | default"},
		"Configuration": {"config file | /work/miotool.yaml", "miotool | 1.0.0 (commit abc)"},
	}
	for title, wants := range checks {
		text := tableText(t, r, title)
		for _, w := range wants {
			if !strings.Contains(text, w) {
				t.Errorf("table %s lacks %q:\n%s", title, w, text)
			}
		}
	}
	if closed != 2 {
		t.Errorf("closed %d devices, want 2 (the chosen one and the probed simulator)", closed)
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
func TestDoctorSkipsWhenTheRequestedBackendIsMissing(t *testing.T) {
	closed := 0
	r := diagnose(t, "cuda", &closed)
	if r.Verdict != report.Skip {
		t.Fatalf("verdict %s", r.Verdict)
	}
	if !strings.Contains(r.Summary, "no backend opened: backend cuda unavailable") {
		t.Errorf("summary %q", r.Summary)
	}
	if text := tableText(t, r, "Backend selection"); !strings.Contains(text, "chosen | none") {
		t.Errorf("selection table:\n%s", text)
	}
	if text := tableText(t, r, "Device"); !strings.Contains(text, "none opened") {
		t.Errorf("device table:\n%s", text)
	}
	if text := tableText(t, r, "Backends"); !strings.Contains(text, "hip | GPU | available | not used: --backend cuda was requested") {
		t.Errorf("backends table:\n%s", text)
	}
}

// testWords spell flags as miotool does.
var testWords = Words{
	Backend: func(b hip.BackendName) string { return "--backend " + string(b) },
	Target:  func(t target.Name) string { return "--target " + string(t) },
	// The stubs' own reasons, as they gave them.
	Selection: func(sel hip.Selection) string { return sel.Reason },
}
