package amd

import (
	"errors"
	"path/filepath"
	"reflect"
	"strings"
	"testing"

	"miotool/internal/dl"
	"miotool/internal/hip"
)

func TestTooOldReason(t *testing.T) {
	lib := hip.Library{Name: "libamdhip64", Loaded: "/usr/lib/x86_64-linux-gnu/libamdhip64.so.5.2.21153"}
	discovery := &hip.Error{Op: "Init", Code: hip.ErrInvalidDevice, Dialect: hip.DialectHIP}
	need := "miotool needs HIP 6.0 or newer (libamdhip64.so.6 or .so.7, from ROCm 6 or later)"
	tests := []struct {
		name      string
		version   int32
		missing   []string
		discovery error
		want      string
	}{
		{"ROCm 5.2 without a device", 50221153, []string{"hipGetDevicePropertiesR0600", "hipLaunchHostFunc"}, discovery,
			"ROCm 5.2 (HIP 5.2.21153, " + lib.Loaded + ") is too old: " + need +
				"; it lacks hipGetDevicePropertiesR0600, hipLaunchHostFunc; its device discovery failed as well: hipInit: hipErrorInvalidDevice (101)"},
		{"a device and every symbol", 50700000, nil, nil,
			"ROCm 5.7 (HIP 5.7.0, " + lib.Loaded + ") is too old: " + need},
		{"no version", 0, []string{"hipRuntimeGetVersion"}, nil,
			"a HIP runtime of unknown version (" + lib.Loaded + ") is too old: " + need + "; it lacks hipRuntimeGetVersion"},
	}
	for _, tt := range tests {
		p := &runtimeProbe{rt: &runtimeLib{}, version: tt.version, missing: tt.missing, discovery: tt.discovery}
		p.rt.Lib = lib
		if got := p.tooOldReason(); got != tt.want {
			t.Errorf("%s:\n got %q\nwant %q", tt.name, got, tt.want)
		}
	}
}

// emptySearch finds nothing: libamdhip64's current sonames in an empty
// folder, without the loader's search.
func emptySearch(t *testing.T) dl.SearchSpec {
	spec := runtimeSearch()
	spec.Dirs, spec.SkipLoaderPath = []string{t.TempDir()}, true
	return spec
}

// TestOpenRuntimeOlderRuntime runs openRuntime's fallback against the
// stand-in in the role of the HIP 5 library, its version set as a test
// needs it.
func TestOpenRuntimeOlderRuntime(t *testing.T) {
	standIns.Require(t)
	setVersion := func(v int) { mockCall(mockCtl.setRuntimeVersion, uintptr(v)) }
	setInit := func(r int) { mockCall(mockCtl.setInit, uintptr(r)) }
	t.Cleanup(func() { setVersion(70151234); setInit(0) })
	var ue *hip.UnavailableError

	t.Run("nothing anywhere", func(t *testing.T) {
		current := emptySearch(t)
		_, want := loadRuntime(current)
		_, err := openRuntime(current, emptySearch(t))
		if err == nil || !reflect.DeepEqual(err, want) {
			t.Fatalf("got %v, want the first search's own error %v", err, want)
		}
	})

	t.Run("HIP 5", func(t *testing.T) {
		setVersion(50221153)
		current := emptySearch(t)
		_, err := openRuntime(current, mockRuntimeSpec())
		if !errors.As(err, &ue) || ue.Backend != "hip" {
			t.Fatalf("want a *hip.UnavailableError, got %T %v", err, err)
		}
		want := "ROCm 5.2 (HIP 5.2.21153, " + standIns.Path(0) + ") is too old: miotool needs HIP 6.0 or newer"
		if !strings.HasPrefix(ue.Reason, want) || strings.Contains(ue.Reason, "lacks") || strings.Contains(ue.Reason, "discovery") {
			t.Fatalf("reason %q, want %q and nothing missing or failing", ue.Reason, want+"...")
		}
		lib := ue.Libraries[0]
		var paths []string
		for _, a := range lib.Tried {
			paths = append(paths, a.Path)
		}
		wantPaths := []string{
			filepath.Join(current.Dirs[0], "libamdhip64.so.7"), filepath.Join(current.Dirs[0], "libamdhip64.so.6"), standIns.Path(0),
		}
		if !reflect.DeepEqual(paths, wantPaths) || lib.Loaded != standIns.Path(0) || lib.Version != "5.2.21153" {
			t.Fatalf("library record %+v, want the attempts %q", lib, wantPaths)
		}
	})

	t.Run("HIP 5 without a device", func(t *testing.T) {
		setVersion(50221153)
		setInit(int(hip.ErrNoDevice))
		_, err := openRuntime(emptySearch(t), mockRuntimeSpec())
		if !errors.As(err, &ue) || !strings.HasSuffix(ue.Reason, "; its device discovery failed as well: hipInit: hipErrorNoDevice (100)") {
			t.Fatalf("reason %v", err)
		}
		setInit(0)
	})

	t.Run("HIP 7 under the old name", func(t *testing.T) {
		setVersion(70151234)
		current := emptySearch(t)
		_, want := loadRuntime(current)
		_, err := openRuntime(current, mockRuntimeSpec())
		if !reflect.DeepEqual(err, want) {
			t.Fatalf("got %v, want the first search's own error %v", err, want)
		}
	})

	t.Run("a refused library is not searched past", func(t *testing.T) {
		setVersion(50221153)
		// A library that loads but lacks HIP's symbols.
		current := emptySearch(t)
		current.Dirs = []string{filepath.Dir(standIns.Path(1))}
		current.Sonames = []string{filepath.Base(standIns.Path(1))}
		_, err := openRuntime(current, mockRuntimeSpec())
		if !errors.As(err, &ue) || !strings.Contains(ue.Reason, "has no symbol hipInit") || strings.Contains(ue.Reason, "too old") {
			t.Fatalf("got %v, want the refusal of the library that loaded", err)
		}
		for _, a := range ue.Libraries[0].Tried {
			if a.Path == standIns.Path(0) {
				t.Fatalf("the older runtime was searched after a library loaded: %+v", ue.Libraries[0].Tried)
			}
		}
	})
}

// TestProbeRuntimeListsEveryMissingSymbol probes a library with none of
// HIP's symbols: every name of the table is listed, nothing is called.
func TestProbeRuntimeListsEveryMissingSymbol(t *testing.T) {
	standIns.Require(t)
	p, err := probeRuntime(mockHIPRTCSpec())
	must(t, err)
	var l runtimeLib
	if want := dl.SymbolNames(l.symbols()); !reflect.DeepEqual(p.missing, want) {
		t.Fatalf("missing %q, want every name %q", p.missing, want)
	}
	if p.version != 0 || p.discovery == nil || !strings.Contains(p.discovery.Error(), "lacks hipInit") {
		t.Fatalf("version %d, discovery %v", p.version, p.discovery)
	}
}
