package gputest

import (
	"fmt"
	"os"
	"sync"
	"testing"

	"miotool/internal/hip"
)

// GPU opens a backend's device on first use and keeps it for all of a
// package's GPU tests (a CUDA primary context costs a fraction of a second
// to create); where it cannot be opened the tests skip.
type GPU[D hip.Device] struct {
	Vendor string // "CUDA", "HIP": in the skip message
	Open   func(hip.OpenOptions) (hip.Device, error)

	once  sync.Once
	dev   D
	err   error // why no device opened: the tests skip
	wrong error // the backend opened something else: the tests fail
}

// Device is the open device; it skips t where there is none.
func (g *GPU[D]) Device(t testing.TB) D {
	t.Helper()
	g.once.Do(g.open)
	if g.wrong != nil {
		t.Fatal(g.wrong)
	}
	if g.err != nil {
		t.Skipf("no %s device: %v", g.Vendor, g.err)
	}
	return g.dev
}

func (g *GPU[D]) open() {
	d, err := g.Open(hip.OpenOptions{})
	if err != nil {
		g.err = err
		return
	}
	var ok bool
	if g.dev, ok = d.(D); !ok {
		d.Close()
		g.wrong = fmt.Errorf("the backend's Open returned a %T, not a %T", d, g.dev)
	}
}

// Close closes the device if one was opened.
func (g *GPU[D]) Close() {
	g.once.Do(func() { g.err = os.ErrClosed }) // nothing opens after this
	if g.err == nil && g.wrong == nil {
		g.dev.Close()
	}
}

// Main runs the tests, then the clean-ups (closing the GPU, removing the
// stand-ins), and exits with the tests' status. Call it from TestMain.
func Main(m *testing.M, cleanups ...func()) {
	code := m.Run()
	for _, c := range cleanups {
		c()
	}
	os.Exit(code)
}
