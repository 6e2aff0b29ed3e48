package dnnlib_test

import (
	"errors"
	"strings"
	"testing"

	"miotool/internal/dl"
	"miotool/internal/dnn/dnnlib"
	"miotool/internal/dnn/dnnlib/dnntest"
	"miotool/internal/hip"
)

func TestLoadBindsAndRecordsTheLibrary(t *testing.T) {
	core := openMock(t)
	if mock.scale == 0 || mock.create == 0 {
		t.Fatal("Load left entry points unbound")
	}
	if info := core.Info(); info.Name != mockName || info.Loaded != stand.Path() || info.Version != "" {
		t.Fatalf("record before the version is known: %+v", info)
	}
	if core.Version() != (dnnlib.Version{}) {
		t.Fatalf("version %v before SetVersion", core.Version())
	}
	core.SetVersion(dnnlib.Version{Major: 3, Minor: 5, Patch: 1})
	if core.Info().Version != "3.5.1" || core.Version().Minor != 5 {
		t.Fatalf("after SetVersion: %+v, %v", core.Info(), core.Version())
	}
	if want := "libmockdnn 3.5.1 (" + stand.Path() + ")"; core.String() != want {
		t.Fatalf("String() = %q, want %q", core.String(), want)
	}
}

func TestLoadNamesAMissingSymbolWithTheHint(t *testing.T) {
	stand.Require(t)
	var absent uintptr
	table := append(mockTable(), dl.Symbol{Name: "dnnNoSuchCall", Addr: &absent})
	rec, err := dnnlib.Load(stand.Spec(mockName), table, "older than the stand-in?")
	var oe *dnnlib.OpenError
	var ms *dl.MissingSymbolError
	if !errors.As(err, &oe) || !errors.As(err, &ms) || ms.Symbol != "dnnNoSuchCall" {
		t.Fatalf("missing symbol: %v", err)
	}
	if !strings.HasSuffix(err.Error(), "has no symbol dnnNoSuchCall (older than the stand-in?)") {
		t.Fatalf("message %q", err.Error())
	}
	if oe.Library.Loaded != stand.Path() || rec.Loaded != stand.Path() {
		t.Fatalf("record %+v / %+v, want the stand-in loaded", oe.Library, rec)
	}
}

func TestLoadRecordsEveryPathTried(t *testing.T) {
	dnntest.WantNotFound(t, mockName, mockSoname, func(spec dl.SearchSpec) error {
		_, err := dnnlib.Load(spec, mockTable(), "unused")
		return err
	})
}

// fakeLib is a loaded library for Once.
type fakeLib struct{ rec hip.Library }

func (l *fakeLib) Info() hip.Library { return l.rec }

func TestOnceLoadsOnceAndLocates(t *testing.T) {
	found := hip.Library{Name: "libx", Loaded: "/x/libx.so.1", Version: "1.0.0"}
	tried := hip.Library{Name: "libx", Tried: []hip.PathAttempt{{Path: "/nowhere/libx.so.1"}}}
	for _, tt := range []struct {
		name string
		lib  *fakeLib
		err  error
		want hip.Library
	}{
		{"loaded", &fakeLib{rec: found}, nil, found},
		{"not found", nil, &dnnlib.OpenError{Library: tried, Err: errors.New("no libx")}, tried},
		{"failed before the search", nil, errors.New("no temporary folder"), hip.Library{Name: "libx"}},
	} {
		t.Run(tt.name, func(t *testing.T) {
			opens := 0
			once := dnnlib.NewOnce("libx", func() (*fakeLib, error) { opens++; return tt.lib, tt.err })
			if opens != 0 {
				t.Fatal("NewOnce loaded eagerly")
			}
			for range 2 {
				if l, err := once.Get(); l != tt.lib || err != tt.err {
					t.Fatalf("Get() = %v, %v", l, err)
				}
			}
			got := once.Locate()
			if got.Name != tt.want.Name || got.Loaded != tt.want.Loaded || got.Version != tt.want.Version || len(got.Tried) != len(tt.want.Tried) {
				t.Fatalf("Locate() = %+v, want %+v", got, tt.want)
			}
			if opens != 1 {
				t.Fatalf("loaded %d times, want once", opens)
			}
		})
	}
}

func TestLoadedPathPrefersTheDevicesRecord(t *testing.T) {
	dnntest.WantLoadedPath(t, func(d hip.Device) string { return dnnlib.LoadedPath(d, "librt", "librt.so.2") }, "librt", "librt.so.2")
}

func TestBindRuntime(t *testing.T) {
	stand.Require(t)
	var fn uintptr
	if err := dnnlib.BindRuntime("the test runtime", stand.Path(), -1, []dl.Symbol{{Name: "dnnCreate", Addr: &fn}}); err == nil ||
		err.Error() != "device ordinal -1 is negative" || fn != 0 {
		t.Fatalf("negative ordinal: %v (bound %#x)", err, fn)
	}
	missing := t.TempDir() + "/librt.so.9"
	if err := dnnlib.BindRuntime("the test runtime", missing, 0, nil); err == nil || !strings.HasPrefix(err.Error(), "opening the test runtime "+missing+": ") {
		t.Fatalf("missing runtime: %v", err)
	}
	must(t, dnnlib.BindRuntime("the test runtime", stand.Path(), 1, []dl.Symbol{{Name: "dnnCreate", Addr: &fn}}))
	if fn == 0 {
		t.Fatal("dnnCreate not bound")
	}
	var ms *dl.MissingSymbolError
	if err := dnnlib.BindRuntime("the test runtime", stand.Path(), 0, []dl.Symbol{{Name: "rtNoSuchCall", Addr: &fn}}); !errors.As(err, &ms) {
		t.Fatalf("missing symbol: %v", err)
	}
}
