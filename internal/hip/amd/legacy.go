package amd

import (
	"errors"
	"fmt"
	"strings"
	"unsafe"

	"miotool/internal/dl"
	"miotool/internal/hip"
)

// minHIPMajor is the oldest HIP miotool binds: 6.0 brought
// hipGetDevicePropertiesR0600, and no HIP 5 runtime exports
// hipLaunchHostFunc (the 5.2 header declares it all the same).
const minHIPMajor = 6

// legacyRuntimeSearch finds a HIP 5 runtime (ROCm 5.x, e.g. Debian's
// libamdhip64-5), which miotool cannot use, so that the error can say what
// was found and why it does not serve instead of "not found".
func legacyRuntimeSearch() dl.SearchSpec {
	return dl.SearchSpec{
		Name:    "libamdhip64",
		Sonames: []string{"libamdhip64.so.5"},
		Dirs:    rocmLibDirs(),
	}
}

// openRuntime loads the runtime current finds. Where current finds no
// library at all, it looks with legacy for a HIP 5 runtime and, if one is
// there, returns why that one cannot serve instead of "not found"; its
// library record then lists the attempts of both searches.
func openRuntime(current, legacy dl.SearchSpec) (*runtimeLib, error) {
	rt, err := loadRuntime(current)
	var ue *hip.UnavailableError
	if err == nil || !errors.As(err, &ue) || len(ue.Libraries) == 0 || ue.Libraries[0].Loaded != "" {
		return rt, err
	}
	old, probeErr := probeRuntime(legacy)
	if probeErr != nil || old.major() >= minHIPMajor {
		// Nothing older, or a new runtime under the old name, which is
		// not what the search is for: the first search's own error.
		return nil, err
	}
	lib := ue.Libraries[0]
	lib.Tried = append(append([]hip.PathAttempt(nil), lib.Tried...), old.rt.Lib.Tried...)
	lib.Loaded, lib.Version = old.rt.Lib.Loaded, old.rt.Lib.Version
	return nil, &hip.UnavailableError{Backend: backendName, Reason: old.tooOldReason(), Libraries: []hip.Library{lib}}
}

// runtimeProbe is a HIP runtime looked at without being used: its version,
// the symbols of the binding table it lacks, and how its device discovery
// went.
type runtimeProbe struct {
	rt      *runtimeLib // bound as far as the library allows
	version int32       // HIP_VERSION; 0 when it would not say
	missing []string    // binding-table names the library does not export
	// discovery is hipInit's or hipGetDeviceCount's failure through the
	// backend's error mapping; nil when the runtime counts a device.
	discovery error
}

// probeRuntime opens the library spec finds and binds every symbol of the
// backend's table that it has, listing the rest. The error is only for a
// library that does not load; the probe then holds the attempts.
func probeRuntime(spec dl.SearchSpec) (*runtimeProbe, error) {
	p := &runtimeProbe{rt: newRuntimeLib()}
	h, lib, err := dl.Open(spec)
	p.rt.Lib = lib
	if err != nil {
		return p, err
	}
	table := p.rt.symbols()
	for i := range table {
		table[i].Optional = true
	}
	if err := dl.Bind(dl.Lookup(h), lib.Loaded, table); err != nil {
		return p, err
	}
	for _, s := range table {
		if *s.Addr == 0 {
			p.missing = append(p.missing, s.Name)
		}
	}
	if p.rt.api.runtimeGetVersion != 0 && dl.Call(p.rt.api.runtimeGetVersion, uintptr(unsafe.Pointer(&p.version))) != 0 {
		p.version = 0
	}
	p.rt.readVersions()
	p.discovery = p.rt.discoverDevices()
	return p, nil
}

// major is the HIP major version; 0 when unknown.
func (p *runtimeProbe) major() int32 { return p.version / 10000000 }

// discoverDevices initialises the runtime and counts its devices, as Open
// does, and returns the first failure in HIP's terms.
func (r *runtimeLib) discoverDevices() error {
	if r.Funcs.Init == 0 || r.Funcs.DeviceGetCount == 0 {
		return errors.New("the library lacks hipInit or hipGetDeviceCount")
	}
	if err := r.Status.Err("Init", dl.Call(r.Funcs.Init, 0)); err != nil {
		return err
	}
	var count int32
	if err := r.Status.Err("DeviceGetCount", dl.Call(r.Funcs.DeviceGetCount, uintptr(unsafe.Pointer(&count)))); err != nil {
		return err
	}
	if count == 0 {
		return errors.New("no HIP device is present")
	}
	return nil
}

// tooOldReason says what was found, what miotool needs and what the found
// runtime lacks, e.g. "ROCm 5.2 (HIP 5.2.21153, /usr/lib/.../
// libamdhip64.so.5.2.21153) is too old: miotool needs HIP 6.0 or newer
// (libamdhip64.so.6 or .so.7, from ROCm 6 or later); it lacks
// hipGetDevicePropertiesR0600, hipLaunchHostFunc; its device discovery
// failed as well: hipInit: hipErrorInvalidDevice (101)".
func (p *runtimeProbe) tooOldReason() string {
	found := fmt.Sprintf("a HIP runtime of unknown version (%s)", p.rt.Lib.Loaded)
	if major, minor := p.major(), p.version/100000%100; major > 0 {
		found = fmt.Sprintf("ROCm %d.%d (HIP %s, %s)", major, minor, formatHIPVersion(p.version), p.rt.Lib.Loaded)
	}
	var b strings.Builder
	fmt.Fprintf(&b, "%s is too old: miotool needs HIP %d.0 or newer (libamdhip64.so.%d or .so.7, from ROCm %d or later)",
		found, minHIPMajor, minHIPMajor, minHIPMajor)
	if len(p.missing) > 0 {
		fmt.Fprintf(&b, "; it lacks %s", strings.Join(p.missing, ", "))
	}
	if p.discovery != nil {
		fmt.Fprintf(&b, "; its device discovery failed as well: %v", p.discovery)
	}
	return b.String()
}
