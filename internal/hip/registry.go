package hip

import (
	"errors"
	"fmt"
	"sort"
	"strings"
	"sync"
)

// BackendName names a runtime backend, as Select and the backends'
// registrations spell it.
type BackendName string

// Backend names; BackendAuto asks Select to choose.
const (
	BackendAuto BackendName = "auto"
	BackendSim  BackendName = "sim"
	BackendCUDA BackendName = "cuda"
	BackendHIP  BackendName = "hip"
)

// Library records how a backend looked for one shared library.
type Library struct {
	Name    string        // e.g. "libcuda", "libnvrtc"
	Loaded  string        // the path that loaded; empty if none did
	Version string        // what the library reported, when known
	Tried   []PathAttempt // every path tried, in order
}

// PathAttempt is one dlopen attempt.
type PathAttempt struct {
	Path string
	Err  string // empty when it loaded
}

// UnavailableError says why a backend cannot run here: a library or a
// symbol is missing, or no device is present.
type UnavailableError struct {
	Backend   string
	Reason    string
	Libraries []Library
}

func (e *UnavailableError) Error() string {
	return fmt.Sprintf("backend %s unavailable: %s", e.Backend, e.Reason)
}

// OpenOptions configure a backend.
type OpenOptions struct {
	Ordinal int
	// Dialect selects the simulator's rule table and naming; GPU backends
	// ignore it (they speak their own).
	Dialect Dialect
	// HWQueues is the simulator's hardware-queue count; 0 reads
	// GPU_MAX_HW_QUEUES.
	HWQueues int
}

// Registration is one runtime backend as it registers itself: its name,
// whether it is a GPU, its place in auto selection, and how to open it.
type Registration struct {
	Name  string // a BackendName: "sim", "cuda", "hip"
	GPU   bool   // false only for the simulator
	Order int    // auto tries lower numbers first
	Open  func(OpenOptions) (Device, error)
}

var (
	regMu    sync.Mutex
	registry = map[string]Registration{}
)

// Register adds a backend; backends call it from init.
func Register(b Registration) {
	regMu.Lock()
	defer regMu.Unlock()
	if _, dup := registry[b.Name]; dup {
		panic("hip: backend registered twice: " + b.Name)
	}
	registry[b.Name] = b
}

// Backends lists the registered backends in auto order.
func Backends() []Registration {
	regMu.Lock()
	defer regMu.Unlock()
	out := make([]Registration, 0, len(registry))
	for _, b := range registry {
		out = append(out, b)
	}
	sort.Slice(out, func(i, j int) bool {
		if out[i].Order != out[j].Order {
			return out[i].Order < out[j].Order
		}
		return out[i].Name < out[j].Name
	})
	return out
}

// Attempt is one backend tried by Select.
type Attempt struct {
	Backend string
	Err     error // nil for the chosen one
}

// ReasonRequested is a Selection's reason when the backend was named, not
// chosen by auto.
const ReasonRequested = "requested"

// Selection records which backend Select chose and why.
type Selection struct {
	Requested string
	Chosen    string
	Reason    string
	Attempts  []Attempt
}

// ErrUnknownBackend is returned for a name no backend registered.
var ErrUnknownBackend = errors.New("unknown backend")

// Select opens the named backend, or with "auto" the first GPU backend that
// opens, else the simulator. An explicit GPU backend that cannot open
// returns its *UnavailableError.
func Select(name string, opts OpenOptions) (Device, Selection, error) {
	sel := Selection{Requested: name}
	if name == "" {
		name = "auto"
	}
	if name != "auto" {
		regMu.Lock()
		b, ok := registry[name]
		regMu.Unlock()
		if !ok {
			return nil, sel, fmt.Errorf("%w %q (want auto, %s)", ErrUnknownBackend, name, strings.Join(backendNames(), ", "))
		}
		d, err := b.Open(opts)
		sel.Attempts = append(sel.Attempts, Attempt{Backend: name, Err: err})
		if err != nil {
			return nil, sel, err
		}
		sel.Chosen, sel.Reason = name, ReasonRequested
		return d, sel, nil
	}
	var sim *Registration
	for _, b := range Backends() {
		if !b.GPU {
			bb := b
			sim = &bb
			continue
		}
		d, err := b.Open(opts)
		sel.Attempts = append(sel.Attempts, Attempt{Backend: b.Name, Err: err})
		if err == nil {
			sel.Chosen, sel.Reason = b.Name, "auto: the "+b.Name+" runtime loaded and found a device"
			return d, sel, nil
		}
	}
	if sim == nil {
		return nil, sel, errors.New("no backend is available and the simulator is not linked in")
	}
	d, err := sim.Open(opts)
	sel.Attempts = append(sel.Attempts, Attempt{Backend: sim.Name, Err: err})
	if err != nil {
		return nil, sel, err
	}
	var why []string
	for _, a := range sel.Attempts {
		if a.Err != nil {
			why = append(why, shortReason(a.Err))
		}
	}
	sel.Chosen = sim.Name
	if len(why) == 0 {
		sel.Reason = "auto: no GPU backend is linked in; using the simulated device"
	} else {
		sel.Reason = "auto: no GPU runtime loaded (" + strings.Join(why, "; ") + "); using the simulated device"
	}
	return d, sel, nil
}

// shortReason is an open error without the list of every path tried
// (doctor prints those).
func shortReason(err error) string {
	var ue *UnavailableError
	if errors.As(err, &ue) {
		r := ue.Reason
		if i := strings.Index(r, " (tried"); i > 0 {
			r = r[:i]
		}
		return ue.Backend + ": " + r
	}
	return err.Error()
}

func backendNames() []string {
	var out []string
	for _, b := range Backends() {
		out = append(out, b.Name)
	}
	return out
}
