package miopen

import (
	"os"
	"testing"

	"miotool/internal/dl"
	"miotool/internal/dnn/dnnlib/dnntest"
	"miotool/internal/hip/gpulib/gputest"
)

// The ABI tests run the binding against testdata/mockmiopen.c, built here
// with gcc into <tmp>/libMIOpen.so.1. The stand-in logs each call with its
// arguments and computes on host memory, so a test passes Go buffers as
// device pointers and checks both the log and the numbers. Without gcc the
// tests skip.

// mockCtl are the stand-in's controls beyond the shared ones.
var mockCtl struct {
	envAtLoad, threadDevice, layout uintptr
}

var stand = dnntest.NewStandIn("testdata/mockmiopen.c", Soname,
	dl.Symbol{Name: "mock_env_at_load", Addr: &mockCtl.envAtLoad},
	dl.Symbol{Name: "mock_thread_device", Addr: &mockCtl.threadDevice},
	dl.Symbol{Name: "mock_layout", Addr: &mockCtl.layout},
)

// firstLib is the first Open of the process, with the default options: it
// set the environment the stand-in saw at load.
var firstLib *Library

func TestMain(m *testing.M) {
	// The first Open must find the find-db switch unset to set it itself.
	os.Unsetenv(EnvDisableFindDB)
	stand.FirstLoad = func(s *dnntest.StandIn) (err error) {
		firstLib, err = Open(s.Spec(LibraryName), Options{})
		return err
	}
	gputest.Main(m, removeFirstUserDB, stand.Remove)
}

func removeFirstUserDB() {
	if firstLib != nil {
		firstLib.RemoveUserDB()
	}
}

// openStandIn builds the stand-in, opens it once per process with the
// default options, and clears its log.
func openStandIn(t testing.TB) *Library {
	t.Helper()
	stand.Require(t)
	stand.ResetLog()
	return firstLib
}

func failNext(call string, status Status) { stand.FailNext(call, int32(status)) }

// lockDevice locks the test goroutine to its OS thread for the rest of the
// test and selects stand-in device ordinal there.
func lockDevice(t *testing.T, ordinal int) *DeviceSelector {
	t.Helper()
	sel, err := OpenDeviceSelector(stand.Path(), ordinal)
	must(t, err)
	dnntest.LockThread(t, sel.Select)
	return sel
}

var (
	must       = gputest.Must
	devPtr     = dnntest.DevPtr
	wantStatus = dnntest.WantStatus[Status]
	problem    = dnntest.Problem
)
