package sim_test

import (
	"testing"

	"miotool/internal/hip"
)

func TestHostMemory(t *testing.T) {
	d := newDevice(t, hip.DialectCUDA, 0)
	b := must1[[]byte](t)(d.HostAlloc(4096))
	if len(b) != 4096 {
		t.Fatalf("HostAlloc(4096) gave %d bytes", len(b))
	}
	b[0], b[4095] = 1, 2 // host memory the program writes
	must(t, d.HostFree(b))
	wantCode(t, "a second HostFree", d.HostFree(b), hip.ErrInvalidValue)
	wantCode(t, "HostFree of memory HostAlloc did not give", d.HostFree(make([]byte, 8)), hip.ErrInvalidValue)
	_, err := d.HostAlloc(0)
	wantCode(t, "HostAlloc(0)", err, hip.ErrInvalidValue)

	pages := make([]byte, 8192)
	must(t, d.HostRegister(pages))
	wantCode(t, "registering it again", d.HostRegister(pages), hip.ErrHostMemoryRegistered)
	wantCode(t, "registering an overlapping range", d.HostRegister(pages[100:200]), hip.ErrHostMemoryRegistered)
	wantCode(t, "unregistering inside the range", d.HostUnregister(pages[100:]), hip.ErrHostMemoryNotRegistered)
	must(t, d.HostUnregister(pages))
	wantCode(t, "unregistering it again", d.HostUnregister(pages), hip.ErrHostMemoryNotRegistered)
	wantCode(t, "registering nothing", d.HostRegister(nil), hip.ErrInvalidValue)
}

// Each call of pinned host memory and module unload meets the capture
// rules: from another thread in global mode during a global capture it is
// refused on CUDA and invalidates the capture; HIP refuses the host-memory
// calls but not module unload.
func TestAddedActionsMeetTheCaptureRules(t *testing.T) {
	for _, tc := range []struct {
		dialect hip.Dialect
		name    string
		act     func(d hip.Device, st *addedState) error
		want    hip.Code
	}{
		{hip.DialectCUDA, "HostAlloc", func(d hip.Device, _ *addedState) error { _, err := d.HostAlloc(64); return err }, 900},
		{hip.DialectCUDA, "HostFree", func(d hip.Device, st *addedState) error { return d.HostFree(st.pinned) }, 900},
		{hip.DialectCUDA, "HostRegister", func(d hip.Device, st *addedState) error { return d.HostRegister(st.pages) }, 900},
		{hip.DialectCUDA, "HostUnregister", func(d hip.Device, st *addedState) error { return d.HostUnregister(st.registered) }, 900},
		{hip.DialectCUDA, "ModuleUnload", func(d hip.Device, st *addedState) error { return d.ModuleUnload(st.module) }, 900},
		{hip.DialectHIP, "HostAlloc", func(d hip.Device, _ *addedState) error { _, err := d.HostAlloc(64); return err }, 900},
		{hip.DialectHIP, "HostUnregister", func(d hip.Device, st *addedState) error { return d.HostUnregister(st.registered) }, 900},
		{hip.DialectHIP, "ModuleUnload", func(d hip.Device, st *addedState) error { return d.ModuleUnload(st.module) }, 0},
	} {
		t.Run(string(tc.dialect)+"/"+tc.name, func(t *testing.T) {
			d := newDevice(t, tc.dialect, 0)
			k := loadKernels(t, d, 0)
			st := &addedState{pages: make([]byte, 4096), registered: make([]byte, 4096)}
			st.pinned = must1[[]byte](t)(d.HostAlloc(64))
			must(t, d.HostRegister(st.registered))
			st.module = must1[hip.Module](t)(d.ModuleLoad(k.source()))
			a := must1[hip.Stream](t)(d.StreamCreate(hip.StreamNonBlocking))
			capT, othT := startThread(t), startThread(t)
			capT.do(t, "begin", func() {
				must(t, d.StreamBeginCapture(a, hip.CaptureModeGlobal))
				must(t, d.LaunchKernel(k.tiny, hip.D1(1), hip.D1(1), 0, a))
			})
			var err error
			othT.do(t, tc.name, func() { err = tc.act(d, st) })
			wantCode(t, tc.name+" from another thread", err, tc.want)
			var endErr error
			capT.do(t, "end", func() { _, endErr = d.StreamEndCapture(a) })
			wantEnd := hip.Success
			if tc.want != 0 {
				wantEnd = hip.ErrStreamCaptureInvalidated
			}
			wantCode(t, "end capture", endErr, wantEnd)

			// Outside a capture every one is allowed.
			if err := tc.act(d, st); tc.want != 0 && err != nil {
				t.Fatalf("%s outside a capture: %v", tc.name, err)
			}
		})
	}
}

type addedState struct {
	pinned, pages, registered []byte
	module                    hip.Module
}

func TestLegacyStream(t *testing.T) {
	d := newDevice(t, hip.DialectCUDA, 2)
	// The first handle a device gives out is not the legacy stream's, and
	// the legacy stream has a queue of its own: created streams are spread
	// over the device's queues as if it were not there.
	s := must1[hip.Stream](t)(d.StreamCreate(0))
	if s == hip.StreamLegacy {
		t.Fatal("a created stream got the legacy stream's handle")
	}
	k := loadKernels(t, d, 0)
	x := must1[hip.DevPtr](t)(d.Malloc(64))
	must(t, d.LaunchKernel(k.poke, hip.D1(1), hip.D1(1), 0, hip.StreamLegacy, x, int32(8)))
	must(t, d.StreamSynchronize(hip.StreamLegacy))
	got := make([]byte, 8)
	must(t, d.MemcpyDtoH(got, x))
	if got[0] != 0xAB || got[7] != 0xAB {
		t.Fatalf("the legacy stream did not run its kernel: %x", got)
	}
	wantCode(t, "destroying the legacy stream", d.StreamDestroy(hip.StreamLegacy), hip.ErrInvalidHandle)
	wantCode(t, "a capture on the legacy stream", d.StreamBeginCapture(hip.StreamLegacy, hip.CaptureModeGlobal), hip.ErrStreamCaptureUnsupported)
	var queues []int
	for _, h := range []hip.Stream{s, must1[hip.Stream](t)(d.StreamCreate(0)), must1[hip.Stream](t)(d.StreamCreate(0))} {
		queues = append(queues, must1[int](t)(d.StreamQueue(h)))
	}
	if queues[0] != 0 || queues[1] != 1 || queues[2] != 0 {
		t.Fatalf("three streams sit on queues %v, want [0 1 0]", queues)
	}
}

// Work on the legacy stream is refused (906) by CUDA while a blocking
// stream captures, and invalidates that capture only; a non-blocking
// capture does not mind. HIP minds neither.
func TestLegacyStreamWorkDuringCapture(t *testing.T) {
	for _, tc := range []struct {
		dialect  hip.Dialect
		flags    hip.StreamFlags
		want     hip.Code
		otherEnd hip.Code // the non-blocking capture begun beside it
	}{
		{hip.DialectCUDA, 0, hip.ErrStreamCaptureImplicit, hip.Success},
		{hip.DialectCUDA, hip.StreamNonBlocking, hip.Success, hip.Success},
		{hip.DialectHIP, 0, hip.Success, hip.Success},
	} {
		kind := "blocking"
		if tc.flags&hip.StreamNonBlocking != 0 {
			kind = "non-blocking"
		}
		t.Run(string(tc.dialect)+"/"+kind, func(t *testing.T) {
			d := newDevice(t, tc.dialect, 0)
			k := loadKernels(t, d, 0)
			x := must1[hip.DevPtr](t)(d.Malloc(64))
			a := must1[hip.Stream](t)(d.StreamCreate(tc.flags))
			side := must1[hip.Stream](t)(d.StreamCreate(hip.StreamNonBlocking))
			capT, othT := startThread(t), startThread(t)
			capT.do(t, "begin", func() {
				must(t, d.StreamBeginCapture(a, hip.CaptureModeRelaxed))
				must(t, d.StreamBeginCapture(side, hip.CaptureModeRelaxed))
			})
			var err error
			othT.do(t, "legacy launch", func() {
				err = hip.WithCaptureMode(d, hip.CaptureModeRelaxed, func() error {
					return d.LaunchKernel(k.poke, hip.D1(1), hip.D1(1), 0, hip.StreamLegacy, x, int32(8))
				})
			})
			wantCode(t, "a kernel on the legacy stream", err, tc.want)
			var endA, endSide error
			capT.do(t, "end", func() {
				_, endA = d.StreamEndCapture(a)
				_, endSide = d.StreamEndCapture(side)
			})
			wantA := hip.Success
			if tc.want != 0 {
				wantA = hip.ErrStreamCaptureInvalidated
			}
			wantCode(t, "end of the capture on A", endA, wantA)
			wantCode(t, "end of the non-blocking capture beside it", endSide, tc.otherEnd)
			must(t, d.StreamSynchronize(hip.StreamLegacy))
		})
	}
}
