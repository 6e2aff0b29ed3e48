package sim_test

import (
	"testing"

	"miotool/internal/hip"
	"miotool/internal/hip/sim"
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
// rules: from another thread in global mode during a global capture it
// answers what the device's rule table says (refused and invalidating the
// capture, or allowed), and outside a capture it is allowed. The table's
// values are held to configs/rules by internal/rules; here the device
// applies them. HIP's rows, from its source, refuse the host-memory calls
// and not module unload, so every guard is seen refusing.
func TestAddedActionsMeetTheCaptureRules(t *testing.T) {
	alloc := func(d hip.Device, _ *addedState) error { _, err := d.HostAlloc(64); return err }
	free := func(d hip.Device, st *addedState) error { return d.HostFree(st.pinned) }
	register := func(d hip.Device, st *addedState) error { return d.HostRegister(st.pages) }
	unregister := func(d hip.Device, st *addedState) error { return d.HostUnregister(st.registered) }
	unload := func(d hip.Device, st *addedState) error { return d.ModuleUnload(st.module) }
	refusals := map[hip.Dialect]int{}
	for _, tc := range []struct {
		action sim.Action
		act    func(d hip.Device, st *addedState) error
	}{
		{sim.ActionHostAlloc, alloc}, {sim.ActionHostFree, free}, {sim.ActionHostRegister, register},
		{sim.ActionHostUnregister, unregister}, {sim.ActionModuleUnload, unload},
	} {
		for _, dialect := range []hip.Dialect{hip.DialectCUDA, hip.DialectHIP} {
			rule, _ := sim.Rules(dialect).Lookup(sim.Key{Action: tc.action, ThreadMode: hip.CaptureModeGlobal, CaptureMode: hip.CaptureModeGlobal})
			if rule.Refused {
				refusals[dialect]++
			}
			t.Run(string(dialect)+"/"+tc.action.String(), func(t *testing.T) {
				d := newDevice(t, dialect, 0)
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
				othT.do(t, tc.action.String(), func() { err = tc.act(d, st) })
				wantCode(t, tc.action.String()+" from another thread", err, rule.Code)
				var endErr error
				capT.do(t, "end", func() { _, endErr = d.StreamEndCapture(a) })
				wantEnd := hip.Success
				if rule.Refused {
					wantEnd = hip.ErrStreamCaptureInvalidated
				}
				wantCode(t, "end capture", endErr, wantEnd)

				// Outside a capture it is allowed (a refused call left
				// its target as it was).
				if err := tc.act(d, st); rule.Refused && err != nil {
					t.Fatalf("%s outside a capture: %v", tc.action, err)
				}
			})
		}
	}
	if refusals[hip.DialectHIP] != 4 {
		t.Errorf("HIP's rows refuse %d of the five calls from another global-mode thread, want the four of host memory", refusals[hip.DialectHIP])
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
	// CUDA's rows are documented, not measured: what the device does is
	// its table's (a refusal that invalidates), which the first case
	// needs to be seen.
	blocking, _ := sim.Rules(hip.DialectCUDA).Lookup(sim.Key{Action: sim.ActionLegacyStreamLaunchBlockingCapture,
		ThreadMode: hip.CaptureModeRelaxed, CaptureMode: hip.CaptureModeRelaxed})
	if !blocking.Refused || blocking.Effect != sim.EffectInvalidate {
		t.Fatalf("CUDA's row of legacy-stream work against a blocking capture: %+v; the test needs a refusal that invalidates", blocking)
	}
	for _, tc := range []struct {
		dialect  hip.Dialect
		flags    hip.StreamFlags
		want     hip.Code
		otherEnd hip.Code // the non-blocking capture begun beside it
	}{
		{hip.DialectCUDA, 0, blocking.Code, hip.Success},
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
