package doctor

import (
	"fmt"
	"strconv"
	"time"

	"miotool/internal/cli"
	"miotool/internal/cmd/libtarget"
	"miotool/internal/doctor"
	"miotool/internal/hip"
	"miotool/internal/report"
	"miotool/internal/runenv"
)

// render turns a diagnosis into doctor's result: the backend selection,
// the backends and libraries tried, the libraries found, the device, the
// runtime variables and the configuration. Its verdict is PASS whenever a
// backend opened: an unavailable one is a finding here, not a failure.
func render(o *DoctorOptions, d doctor.Diagnosis, start, end time.Time) *report.Result {
	r := report.New("doctor", o.CommandLine, start)
	sel := d.Selection
	why := cli.SelectionReason(sel)
	r.Backend, r.BackendReason = sel.Chosen, why

	choice := r.AddTable("Backend selection", "item", "value")
	choice.AddRow("requested", d.Requested)
	if d.OpenErr == nil {
		choice.AddRow("chosen", sel.Chosen)
		choice.AddRow("why", why)
	} else {
		choice.AddRow("chosen", "none")
		choice.AddRow("why", d.OpenErr.Error())
	}

	tried := r.AddTable("Backends", "backend", "kind", "result", "detail")
	libs := r.AddTable("Libraries", "backend", "library", "path", "result", "version")
	for _, b := range d.Backends {
		switch b.State {
		case doctor.Chosen:
			tried.AddRow(b.Name, kindText(b.Kind), "chosen", why)
		case doctor.Unavailable:
			tried.AddRow(b.Name, kindText(b.Kind), "unavailable", b.Err.Error())
		case doctor.Available:
			tried.AddRow(b.Name, kindText(b.Kind), "available", "not used: "+notUsedReason(d.Requested, sel))
		}
		addLibraries(libs, b.Name, b.Libraries)
		if b.CloseErr != nil {
			r.Note("closing backend %s: %v", b.Name, b.CloseErr)
		}
	}
	addLibraries(libs, "target", d.TargetLibraries)
	if len(libs.Rows) == 0 {
		libs.AddRow("-", "-", "-", "no shared libraries loaded or tried", "-")
	}
	found := r.AddTable("Libraries found", "library", "found", "path", "version", "needed for")
	for _, f := range d.Found {
		switch {
		case !f.Searched:
			found.AddRow(f.Name, "not searched", "-", "-", neededFor(f.Need))
		case f.Library.Loaded != "":
			found.AddRow(f.Name, "yes", f.Library.Loaded, orDash(f.Library.Version), neededFor(f.Need))
		default:
			found.AddRow(f.Name, "no", fmt.Sprintf("not found in %d places (see Libraries)", len(f.Library.Tried)), "-", neededFor(f.Need))
		}
	}

	device := r.AddTable("Device", "property", "value")
	if d.Device != nil {
		p := d.Device.Props
		r.Device = report.Device{Name: p.Name, Arch: p.Arch, Description: p.String()}
		device.AddRow("name", p.Name)
		device.AddRow("ordinal", strconv.Itoa(p.Ordinal))
		device.AddRow("arch", p.Arch)
		device.AddRow("compute units", strconv.Itoa(p.ComputeUnits))
		device.AddRow("warp size", strconv.Itoa(p.WarpSize))
		device.AddRow("clock", fmt.Sprintf("%d MHz", p.ClockKHz/1000))
		device.AddRow("memory", memoryText(p.TotalMemory))
		device.AddRow("runtime version", p.RuntimeVersion)
		device.AddRow("driver version", p.DriverVersion)
		device.AddRow("dialect", string(d.Device.Dialect))
	} else {
		device.AddRow("device", "none opened")
	}

	vars := r.AddTable("Runtime variables", "variable", "value", "source", "note")
	for _, s := range d.Settings {
		source := string(s.Source)
		if s.Raw != "" && s.Source == runenv.FromDefault {
			source = fmt.Sprintf("default (env %q ignored)", s.Raw)
		}
		note := s.Note
		if s.Name == runenv.EnvUserDBPath && d.UserDBErr != nil {
			note = "error: " + d.UserDBErr.Error() + ": find refuses it"
		}
		vars.AddRow(s.Name, s.Value, source, note)
	}

	conf := r.AddTable("Configuration", "item", "value")
	if o.ConfigUsed != "" {
		conf.AddRow("config file", o.ConfigUsed)
	} else {
		conf.AddRow("config file", "none")
	}
	conf.AddRow("miotool", fmt.Sprintf("%s (commit %s)", o.Build.Version, o.Build.Commit))
	conf.AddRow("go", o.Build.GoVersion+" "+o.Build.Platform)

	// A requested backend that does not open is a skip, as for every other
	// command (exit 4), so that "doctor && ..." does not go on to a device
	// that is not there; the tables above still say why.
	if d.OpenErr != nil {
		r.Finish(report.Skip, "no backend opened: "+d.OpenErr.Error(), end)
		return r
	}
	r.Finish(report.Pass, fmt.Sprintf("backend %s on %s", sel.Chosen, r.Device.Short()), end)
	return r
}

// neededFor names the flag that needs the library, and what for.
func neededFor(n doctor.Need) string {
	s := ""
	if n.Backend != "" {
		s = cli.BackendFlag(n.Backend)
	} else {
		s = libtarget.Flag(n.Target)
	}
	if n.For != "" {
		s += " (" + n.For + ")"
	}
	return s
}

func notUsedReason(requested string, sel hip.Selection) string {
	if requested != "" && requested != string(hip.BackendAuto) {
		return cli.BackendFlag(hip.BackendName(requested)) + " was requested"
	}
	return "auto chose " + sel.Chosen
}

func kindText(k doctor.Kind) string {
	switch k {
	case doctor.KindGPU:
		return "GPU"
	case doctor.KindSimulator:
		return "simulator"
	}
	return "-"
}

// addLibraries adds a row for each path tried for each library, or one for
// a library loaded with no path tried.
func addLibraries(t *report.Table, backend string, libs []hip.Library) {
	for _, lib := range libs {
		if len(lib.Tried) == 0 && lib.Loaded != "" {
			t.AddRow(backend, lib.Name, lib.Loaded, "loaded", lib.Version)
			continue
		}
		for _, a := range lib.Tried {
			result, version := "loaded", lib.Version
			if a.Err != "" {
				result, version = a.Err, ""
			}
			t.AddRow(backend, lib.Name, a.Path, result, version)
		}
	}
}

func orDash(s string) string {
	if s == "" {
		return "-"
	}
	return s
}

func memoryText(b uint64) string {
	const gib = 1 << 30
	if b == 0 {
		return "unknown"
	}
	return fmt.Sprintf("%.1f GiB", float64(b)/gib)
}
