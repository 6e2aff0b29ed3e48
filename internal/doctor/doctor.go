// Package doctor finds out what is there to run on and why: which backend
// the selection chooses, every backend and shared library tried with each
// path, the library targets' libraries, the device and the runtime
// variables. It returns facts; the doctor command turns them into its
// report.
package doctor

import (
	"errors"
	"slices"

	"miotool/internal/dnn/target"
	"miotool/internal/hip"
	"miotool/internal/runenv"
)

// Input is what Diagnose looks at.
type Input struct {
	Backend string // the backend requested, as resolved
	Ordinal int
	Dialect hip.Dialect // the simulator's rule table
	// Open selects and opens a backend (hip.Select).
	Open     func(backend string, opts hip.OpenOptions) (hip.Device, hip.Selection, error)
	Backends func() []hip.Registration
	Env      runenv.Env
	// TargetLibraries reports the libraries of the library targets
	// (libMIOpen, libcudnn); nil searches for them (target.Libraries).
	TargetLibraries func() []hip.Library
}

// Kind is what sort of backend a registration is.
type Kind int

const (
	// KindUnknown is a backend the selection tried that is not registered.
	KindUnknown Kind = iota
	KindGPU
	KindSimulator
)

// State is what became of a backend.
type State int

const (
	// Chosen is the backend the selection opened.
	Chosen State = iota
	// Unavailable is a backend that did not open.
	Unavailable
	// Available is a backend that opened but that the selection did not
	// need.
	Available
)

// Backend is one backend tried: by the selection, or opened once by
// Diagnose to see what it would have done.
type Backend struct {
	Name  string
	Kind  Kind
	State State
	// Err is why an unavailable backend did not open.
	Err error
	// Libraries are the shared libraries it loaded or tried.
	Libraries []hip.Library
	// CloseErr is a failure to close an available backend after opening it.
	CloseErr error
}

// Need is a library (Name) a backend or a library target needs: for
// Backend when that is set, else for Target, and For says for what part of
// its work, when only a part needs it.
type Need struct {
	Name    string
	Backend hip.BackendName
	Target  target.Name
	For     string
}

// Needs lists the libraries the backends and targets need, in the order a
// summary lists them.
var Needs = []Need{
	{Name: "libamdhip64", Backend: hip.BackendHIP},
	{Name: "libhiprtc", Backend: hip.BackendHIP, For: "building kernels"},
	{Name: target.LibraryNames[target.MIOpen], Target: target.MIOpen},
	{Name: target.LibraryNames[target.CUDNN], Target: target.CUDNN},
}

// Found is what became of one needed library: whether any backend or
// target searched for it, and what was found (a loaded copy before one
// that was only tried).
type Found struct {
	Need
	Searched bool
	Library  hip.Library
}

// Device is the opened device.
type Device struct {
	Props   hip.Props
	Dialect hip.Dialect
}

// Diagnosis is what Diagnose found.
type Diagnosis struct {
	// Requested is the backend asked for; Selection what the selection did.
	Requested string
	Selection hip.Selection
	// OpenErr is why no backend opened; nil when one did.
	OpenErr error
	// Backends are the backends the selection tried, in its order, then
	// the ones it did not need.
	Backends []Backend
	// TargetLibraries are the library targets' libraries (libMIOpen,
	// libcudnn) with every path tried.
	TargetLibraries []hip.Library
	// Found says, for each of Needs in order, what was found.
	Found []Found
	// Device is the opened device; nil when none opened.
	Device *Device
	// Settings are the runtime variables with their values and sources;
	// UserDBErr is why find refuses MIOPEN_USER_DB_PATH, nil when it does
	// not.
	Settings  []runenv.Setting
	UserDBErr error
}

// Diagnose finds which backend is chosen and why, every backend and
// library tried with every path (the library targets' libMIOpen and
// libcudnn too), which of the needed libraries were found and where, the
// device and the runtime variables. An unavailable backend is a finding,
// not an error.
func Diagnose(in Input) Diagnosis {
	opts := hip.OpenOptions{Ordinal: in.Ordinal, Dialect: in.Dialect}
	dev, sel, openErr := in.Open(in.Backend, opts)
	if dev != nil {
		defer dev.Close()
	}
	d := Diagnosis{Requested: in.Backend, Selection: sel, OpenErr: openErr, Settings: in.Env.Settings, UserDBErr: in.Env.UserDBErr()}

	attempted := map[string]bool{}
	for _, a := range sel.Attempts {
		attempted[a.Backend] = true
		b := Backend{Name: a.Backend, Kind: kindOf(in.Backends, a.Backend)}
		if a.Err == nil {
			if dev != nil {
				b.Libraries = dev.Libraries()
			}
		} else {
			b.State, b.Err, b.Libraries = Unavailable, a.Err, unavailableLibraries(a.Err)
		}
		d.Backends = append(d.Backends, b)
	}
	// Backends the selection did not need are opened once here, so the
	// report says what each would have done.
	for _, r := range in.Backends() {
		if attempted[r.Name] {
			continue
		}
		b := Backend{Name: r.Name, Kind: kind(r)}
		o, err := r.Open(opts)
		if err != nil {
			b.State, b.Err, b.Libraries = Unavailable, err, unavailableLibraries(err)
		} else {
			b.State, b.Libraries = Available, o.Libraries()
			b.CloseErr = o.Close()
		}
		d.Backends = append(d.Backends, b)
	}
	targetLibs := in.TargetLibraries
	if targetLibs == nil {
		targetLibs = target.Libraries
	}
	d.TargetLibraries = targetLibs()
	d.Found = found(d.Backends, d.TargetLibraries)

	if dev != nil {
		d.Device = &Device{Props: dev.Props(), Dialect: dev.Dialect()}
	}
	return d
}

// found keeps, for each needed library, the first loaded copy listed, else
// the first one tried.
func found(backends []Backend, targetLibs []hip.Library) []Found {
	seen := map[string]hip.Library{}
	note := func(libs []hip.Library) {
		for _, lib := range libs {
			if prev, ok := seen[lib.Name]; !ok || prev.Loaded == "" {
				seen[lib.Name] = lib
			}
		}
	}
	for _, b := range backends {
		note(b.Libraries)
	}
	note(targetLibs)
	out := make([]Found, 0, len(Needs))
	for _, n := range Needs {
		lib, ok := seen[n.Name]
		out = append(out, Found{Need: n, Searched: ok, Library: lib})
	}
	return out
}

func kind(b hip.Registration) Kind {
	if b.GPU {
		return KindGPU
	}
	return KindSimulator
}

func kindOf(list func() []hip.Registration, name string) Kind {
	bs := list()
	if i := slices.IndexFunc(bs, func(b hip.Registration) bool { return b.Name == name }); i >= 0 {
		return kind(bs[i])
	}
	return KindUnknown
}

func unavailableLibraries(err error) []hip.Library {
	var u *hip.UnavailableError
	if errors.As(err, &u) {
		return u.Libraries
	}
	return nil
}
