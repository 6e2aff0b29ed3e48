package gputest

import (
	"errors"
	"path/filepath"
	"reflect"
	"slices"
	"strings"
	"testing"

	"miotool/internal/dl"
	"miotool/internal/hip"
	"miotool/internal/hip/gpulib"
)

// CheckBinding checks a backend's binding table: every entry fills a field
// of its own, and every entry point of funcs, which the device core calls
// unchecked, is filled by one.
func CheckBinding(t *testing.T, table []dl.Symbol, funcs *gpulib.RuntimeFuncs) {
	t.Helper()
	seen := map[*uintptr]string{}
	for _, s := range table {
		if s.Addr == nil {
			t.Errorf("%s has no destination", s.Name)
			continue
		}
		if prev, dup := seen[s.Addr]; dup {
			t.Errorf("%s and %s fill the same field", prev, s.Name)
		}
		seen[s.Addr] = s.Name
	}
	v := reflect.ValueOf(funcs).Elem()
	for i := range v.NumField() {
		addr := v.Field(i).Addr().Interface().(*uintptr)
		if _, ok := seen[addr]; !ok {
			t.Errorf("no symbol fills RuntimeFuncs.%s", v.Type().Field(i).Name)
		}
	}
}

// CheckRegistered checks that backend registered itself as a GPU backend
// tried in auto order order.
func CheckRegistered(t *testing.T, backend string, order int) {
	t.Helper()
	for _, b := range hip.Backends() {
		if b.Name == backend {
			if !b.GPU || b.Order != order || b.Open == nil {
				t.Fatalf("registration %+v", b)
			}
			return
		}
	}
	t.Fatalf("the %s backend is not registered", backend)
}

// OpenUnavailable selects backend on a machine without its runtime and
// checks the error: the backend's *hip.UnavailableError, with the record of
// library lib in which the loader's own search for each of sonames comes
// first, every attempt is of one of sonames, and the reason lists them all.
func OpenUnavailable(t *testing.T, backend, lib string, sonames ...string) *hip.UnavailableError {
	t.Helper()
	_, _, err := hip.Select(backend, hip.OpenOptions{})
	var ue *hip.UnavailableError
	if !errors.As(err, &ue) {
		t.Fatalf("want *hip.UnavailableError, got %T %v", err, err)
	}
	if ue.Backend != backend || !strings.Contains(err.Error(), "backend "+backend+" unavailable") {
		t.Fatalf("error %+v", ue)
	}
	if len(ue.Libraries) != 1 || ue.Libraries[0].Name != lib || len(ue.Libraries[0].Tried) < len(sonames) {
		t.Fatalf("libraries %+v", ue.Libraries)
	}
	tried := ue.Libraries[0].Tried
	for i, soname := range sonames {
		if tried[i].Path != soname {
			t.Errorf("the loader's own search must come first, in order %q: %+v", sonames, tried[:len(sonames)])
			break
		}
	}
	for _, a := range tried {
		if !strings.Contains(ue.Reason, a.Path) {
			t.Errorf("reason %q does not list the attempt %s", ue.Reason, a.Path)
		}
		if !slices.Contains(sonames, filepath.Base(a.Path)) {
			t.Errorf("tried %s: only %q may be opened", a.Path, sonames)
		}
	}
	return ue
}

// LogLibraries logs what d loaded and tried, for the record of a GPU run.
func LogLibraries(t *testing.T, d hip.Device) []hip.Library {
	t.Helper()
	libs := d.Libraries()
	for _, l := range libs {
		t.Logf("library %s: loaded %q version %q tried %s", l.Name, l.Loaded, l.Version, dl.FormatAttempts(l.Tried))
	}
	return libs
}
