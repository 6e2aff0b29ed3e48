package cudnn

import (
	"testing"

	"miotool/internal/dl"
	"miotool/internal/dnn/dnnlib/dnntest"
	"miotool/internal/hip/gpulib/gputest"
)

// The ABI tests run the binding against testdata/mockcudnn.c, built here
// with gcc into <tmp>/libcudnn.so.9. The stand-in logs each call with its
// arguments and computes on host memory, so a test passes Go buffers as
// device pointers and checks both the log and the numbers. Without gcc the
// tests skip.

// mockCtl are the stand-in's controls beyond the shared ones, and the
// driver call that sets the thread's context directly.
var mockCtl struct {
	setVersion, ctxRetains, currentCtx, perfLayout, ctxSetCurrent uintptr
}

var stand = dnntest.NewStandIn("testdata/mockcudnn.c", Soname,
	dl.Symbol{Name: "mock_set_version", Addr: &mockCtl.setVersion},
	dl.Symbol{Name: "mock_ctx_retains", Addr: &mockCtl.ctxRetains},
	dl.Symbol{Name: "mock_current_ctx", Addr: &mockCtl.currentCtx},
	dl.Symbol{Name: "mock_perf_layout", Addr: &mockCtl.perfLayout},
	dl.Symbol{Name: "cuCtxSetCurrent", Addr: &mockCtl.ctxSetCurrent},
)

func TestMain(m *testing.M) { gputest.Main(m, stand.Remove) }

// openStandIn builds and opens the stand-in and clears its log.
func openStandIn(t *testing.T) *Library {
	t.Helper()
	stand.Require(t)
	l, err := Open(stand.Spec(LibraryName))
	if err != nil {
		t.Fatal(err)
	}
	stand.ResetLog()
	return l
}

func failNext(call string, status Status) { stand.FailNext(call, int32(status)) }

// lockContext locks the test goroutine to its OS thread for the rest of
// the test and makes the stand-in's device 0 context current there.
func lockContext(t *testing.T) *Context {
	t.Helper()
	ctx, err := OpenContext(stand.Path(), 0)
	must(t, err)
	t.Cleanup(func() { _ = ctx.Close() })
	dnntest.LockThread(t, ctx.MakeCurrent)
	return ctx
}

var (
	must       = gputest.Must
	devPtr     = dnntest.DevPtr
	wantStatus = dnntest.WantStatus[Status]
	problem    = dnntest.Problem
)
