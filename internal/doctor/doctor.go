// Package doctor says what is there to run on and why: which backend the
// selection chooses, every backend and shared library tried with each path,
// the library targets' libraries, the device, the runtime variables and the
// configuration.
package doctor

import (
	"errors"
	"fmt"
	"slices"
	"strconv"
	"time"

	"miotool/internal/buildinfo"
	"miotool/internal/dnn/target"
	"miotool/internal/hip"
	"miotool/internal/report"
	"miotool/internal/runenv"
)

// Input is what Diagnose looks at.
type Input struct {
	Backend string // the backend requested, as resolved
	Ordinal int
	Dialect hip.Dialect // the simulator's rule table
	// Open selects and opens a backend (hip.Select).
	Open        func(backend string, opts hip.OpenOptions) (hip.Device, hip.Selection, error)
	Backends    func() []hip.Registration
	Env         runenv.Env
	ConfigUsed  string // "" when no config file was read
	CommandLine string
	Build       buildinfo.Info
	Now         func() time.Time
	// TargetLibraries reports the libraries of the library targets
	// (libMIOpen, libcudnn); nil searches for them (target.Libraries).
	TargetLibraries func() []hip.Library
	// Words spell what the user types, for the report.
	Words Words
}

// Words are the command-line spellings the report uses; the CLI layer,
// which owns them, supplies them.
type Words struct {
	// Backend is how a user asks for backend b on the command line.
	Backend func(b hip.BackendName) string
	// Target is how a user asks for library target t on the command line.
	Target func(t target.Name) string
	// Selection says why a selection's backend runs, in the words of the
	// command line.
	Selection func(sel hip.Selection) string
}

// libraryUse is what a library the summary lists is needed for: a backend
// or a library target, and for what.
type libraryUse struct {
	name    string
	backend hip.BackendName
	target  target.Name
	what    string
}

// libraryUses lists them in the summary's order.
var libraryUses = []libraryUse{
	{name: "libamdhip64", backend: hip.BackendHIP},
	{name: "libhiprtc", backend: hip.BackendHIP, what: "building kernels"},
	{name: target.LibraryNames[target.MIOpen], target: target.MIOpen},
	{name: target.LibraryNames[target.CUDNN], target: target.CUDNN},
}

// use names the flag that needs the library, and what for.
func (u libraryUse) use(w Words) string {
	s := ""
	if u.backend != "" {
		s = w.Backend(u.backend)
	} else {
		s = w.Target(u.target)
	}
	if u.what != "" {
		s += " (" + u.what + ")"
	}
	return s
}

// Diagnose reports which backend is chosen and why, every backend and
// library tried with every path (the library targets' libMIOpen and
// libcudnn too), a summary of which of libamdhip64, libhiprtc, libMIOpen
// and libcudnn were found and where, the device, the runtime variables and
// the configuration. Its verdict is PASS whenever the report could be made:
// an unavailable backend is a finding here, not a failure.
func Diagnose(in Input) *report.Result {
	start := in.Now()
	r := report.New("doctor", in.CommandLine, start)

	opts := hip.OpenOptions{Ordinal: in.Ordinal, Dialect: in.Dialect}
	dev, sel, openErr := in.Open(in.Backend, opts)
	if dev != nil {
		defer dev.Close()
	}
	why := in.Words.Selection(sel)
	r.Backend, r.BackendReason = sel.Chosen, why

	choice := r.AddTable("Backend selection", "item", "value")
	choice.AddRow("requested", in.Backend)
	if openErr == nil {
		choice.AddRow("chosen", sel.Chosen)
		choice.AddRow("why", why)
	} else {
		choice.AddRow("chosen", "none")
		choice.AddRow("why", openErr.Error())
	}

	tried := r.AddTable("Backends", "backend", "kind", "result", "detail")
	libs := &libraryTable{Table: r.AddTable("Libraries", "backend", "library", "path", "result", "version"), seen: map[string]hip.Library{}}
	attempted := map[string]bool{}
	for _, a := range sel.Attempts {
		attempted[a.Backend] = true
		if a.Err == nil {
			tried.AddRow(a.Backend, kindOf(in.Backends, a.Backend), "chosen", why)
			if dev != nil {
				addLibraries(libs, a.Backend, dev.Libraries())
			}
			continue
		}
		tried.AddRow(a.Backend, kindOf(in.Backends, a.Backend), "unavailable", a.Err.Error())
		addUnavailable(libs, a.Backend, a.Err)
	}
	// Backends the selection did not need are opened once here, so the
	// report says what each would have done.
	for _, b := range in.Backends() {
		if attempted[b.Name] {
			continue
		}
		d, err := b.Open(opts)
		if err != nil {
			tried.AddRow(b.Name, kind(b), "unavailable", err.Error())
			addUnavailable(libs, b.Name, err)
			continue
		}
		tried.AddRow(b.Name, kind(b), "available", "not used: "+notUsedReason(in.Backend, sel, in.Words))
		addLibraries(libs, b.Name, d.Libraries())
		if err := d.Close(); err != nil {
			r.Note("closing backend %s: %v", b.Name, err)
		}
	}
	targetLibs := in.TargetLibraries
	if targetLibs == nil {
		targetLibs = target.Libraries
	}
	for _, lib := range targetLibs() {
		addLibraries(libs, "target", []hip.Library{lib})
	}
	if len(libs.Rows) == 0 {
		libs.AddRow("-", "-", "-", "no shared libraries loaded or tried", "-")
	}
	found := r.AddTable("Libraries found", "library", "found", "path", "version", "needed for")
	for _, u := range libraryUses {
		lib, searched := libs.seen[u.name]
		switch {
		case !searched:
			found.AddRow(u.name, "not searched", "-", "-", u.use(in.Words))
		case lib.Loaded != "":
			found.AddRow(u.name, "yes", lib.Loaded, orDash(lib.Version), u.use(in.Words))
		default:
			found.AddRow(u.name, "no", fmt.Sprintf("not found in %d places (see Libraries)", len(lib.Tried)), "-", u.use(in.Words))
		}
	}

	device := r.AddTable("Device", "property", "value")
	if dev != nil {
		p := dev.Props()
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
		device.AddRow("dialect", string(dev.Dialect()))
	} else {
		device.AddRow("device", "none opened")
	}

	vars := r.AddTable("Runtime variables", "variable", "value", "source", "note")
	dbErr := in.Env.UserDBErr()
	for _, s := range in.Env.Settings {
		source := string(s.Source)
		if s.Raw != "" && s.Source == runenv.FromDefault {
			source = fmt.Sprintf("default (env %q ignored)", s.Raw)
		}
		note := s.Note
		if s.Name == runenv.EnvUserDBPath && dbErr != nil {
			note = "error: " + dbErr.Error() + ": find refuses it"
		}
		vars.AddRow(s.Name, s.Value, source, note)
	}

	conf := r.AddTable("Configuration", "item", "value")
	if in.ConfigUsed != "" {
		conf.AddRow("config file", in.ConfigUsed)
	} else {
		conf.AddRow("config file", "none")
	}
	conf.AddRow("miotool", fmt.Sprintf("%s (commit %s)", in.Build.Version, in.Build.Commit))
	conf.AddRow("go", in.Build.GoVersion+" "+in.Build.Platform)

	// A requested backend that does not open is a skip, as for every other
	// command (exit 4), so that "doctor && ..." does not go on to a device
	// that is not there; the tables above still say why.
	if openErr != nil {
		r.Finish(report.Skip, "no backend opened: "+openErr.Error(), in.Now())
		return r
	}
	r.Finish(report.Pass, fmt.Sprintf("backend %s on %s", sel.Chosen, r.Device.Short()), in.Now())
	return r
}

func notUsedReason(requested string, sel hip.Selection, w Words) string {
	if requested != "" && requested != string(hip.BackendAuto) {
		return w.Backend(hip.BackendName(requested)) + " was requested"
	}
	return "auto chose " + sel.Chosen
}

func kind(b hip.Registration) string {
	if b.GPU {
		return "GPU"
	}
	return "simulator"
}

func kindOf(list func() []hip.Registration, name string) string {
	bs := list()
	if i := slices.IndexFunc(bs, func(b hip.Registration) bool { return b.Name == name }); i >= 0 {
		return kind(bs[i])
	}
	return "-"
}

// libraryTable is the Libraries table and the record of every library
// listed in it, by name, for the summary.
type libraryTable struct {
	*report.Table
	seen map[string]hip.Library
}

func orDash(s string) string {
	if s == "" {
		return "-"
	}
	return s
}

func addUnavailable(t *libraryTable, backend string, err error) {
	var u *hip.UnavailableError
	if errors.As(err, &u) {
		addLibraries(t, backend, u.Libraries)
	}
}

func addLibraries(t *libraryTable, backend string, libs []hip.Library) {
	for _, lib := range libs {
		if prev, ok := t.seen[lib.Name]; !ok || prev.Loaded == "" {
			t.seen[lib.Name] = lib
		}
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

func memoryText(b uint64) string {
	const gib = 1 << 30
	if b == 0 {
		return "unknown"
	}
	return fmt.Sprintf("%.1f GiB", float64(b)/gib)
}
