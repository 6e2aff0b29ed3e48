package doctor

import (
	"errors"
	"fmt"
	"strings"
	"testing"

	"miotool/internal/hip"
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

func diagnose(t *testing.T, backend string, closed *int) Diagnosis {
	t.Helper()
	backends := stubBackends(closed)
	env := runenv.Read(func(k string) (string, bool) {
		if k == "GPU_MAX_HW_QUEUES" {
			return "0", true
		}
		return "", false
	}, func() (string, error) { return "/home/u/.config", nil })
	return Diagnose(Input{
		Backend:         backend,
		Open:            stubSelect(backends),
		Backends:        func() []hip.Registration { return backends },
		Env:             env,
		TargetLibraries: func() []hip.Library { return nil },
	})
}

// backendsText lists the backends as "name kind state error", one a line.
func backendsText(d Diagnosis) string {
	var lines []string
	for _, b := range d.Backends {
		line := fmt.Sprintf("%s %d %d", b.Name, b.Kind, b.State)
		if b.Err != nil {
			line += " " + b.Err.Error()
		}
		for _, lib := range b.Libraries {
			line += fmt.Sprintf(" [%s %q %d tried]", lib.Name, lib.Loaded, len(lib.Tried))
		}
		lines = append(lines, line)
	}
	return strings.Join(lines, "\n")
}

func TestDoctorFindsSelectionLibrariesDeviceAndEnvironment(t *testing.T) {
	closed := 0
	d := diagnose(t, "auto", &closed)
	if d.OpenErr != nil || d.Requested != "auto" || d.Selection.Chosen != "hip" || d.Selection.Reason != "picked by the stub" {
		t.Fatalf("requested %q, selection %+v, err %v", d.Requested, d.Selection, d.OpenErr)
	}
	want := strings.Join([]string{
		fmt.Sprintf(`cuda %d %d backend cuda unavailable: libcuda.so.1 not found [libcuda "" 2 tried]`, KindGPU, Unavailable),
		fmt.Sprintf(`hip %d %d [libamdhip64 "/opt/rocm/lib/libamdhip64.so.7" 1 tried]`, KindGPU, Chosen),
		fmt.Sprintf(`sim %d %d`, KindSimulator, Available),
	}, "\n")
	if got := backendsText(d); got != want {
		t.Errorf("backends:\n%s\nwant:\n%s", got, want)
	}
	if d.Device == nil || d.Device.Props.Name != "AMD Instinct MI300X" || d.Device.Props.ComputeUnits != 304 || d.Device.Dialect != hip.DialectCUDA {
		t.Errorf("device %+v", d.Device)
	}
	names := []string{}
	for _, s := range d.Settings {
		names = append(names, s.Name)
	}
	if strings.Join(names, " ") != "GPU_MAX_HW_QUEUES MIOPEN_NAIVE_TIMEOUT MIOPEN_USER_DB_PATH MIOPEN_FIND_MODE" {
		t.Errorf("settings %v", names)
	}
	if s := d.Settings[0]; s.Value != "4" || s.Raw != "0" || s.Source != runenv.FromDefault || !strings.Contains(s.Note, "not positive") {
		t.Errorf("GPU_MAX_HW_QUEUES %+v", s)
	}
	if d.UserDBErr != nil {
		t.Errorf("user db error %v", d.UserDBErr)
	}
	if closed != 2 {
		t.Errorf("closed %d devices, want 2 (the chosen one and the probed simulator)", closed)
	}
}

// An explicitly requested backend that does not load is a finding: no
// device, and the other backends opened once to say what they would do.
func TestDoctorFindsTheRequestedBackendMissing(t *testing.T) {
	closed := 0
	d := diagnose(t, "cuda", &closed)
	if d.OpenErr == nil || !strings.Contains(d.OpenErr.Error(), "backend cuda unavailable") || d.Device != nil {
		t.Fatalf("err %v, device %+v", d.OpenErr, d.Device)
	}
	want := strings.Join([]string{
		fmt.Sprintf(`cuda %d %d backend cuda unavailable: libcuda.so.1 not found [libcuda "" 2 tried]`, KindGPU, Unavailable),
		fmt.Sprintf(`hip %d %d [libamdhip64 "/opt/rocm/lib/libamdhip64.so.7" 1 tried]`, KindGPU, Available),
		fmt.Sprintf(`sim %d %d`, KindSimulator, Available),
	}, "\n")
	if got := backendsText(d); got != want {
		t.Errorf("backends:\n%s\nwant:\n%s", got, want)
	}
	if closed != 2 {
		t.Errorf("closed %d devices, want 2 (the probed hip and simulator)", closed)
	}
}
