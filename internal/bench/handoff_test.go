package bench

import (
	"context"
	"fmt"
	"math"
	"os"
	"runtime"
	"slices"
	"strconv"
	"strings"
	"sync/atomic"
	"syscall"
	"testing"
	"time"
	"unsafe"

	"miotool/internal/handle"
	"miotool/internal/hip"
	"miotool/internal/streams"
)

// flagKernel spins for ns nanoseconds and then, as its last act, writes
// value to flag, which lies in host-mapped memory: a host thread spinning
// on it learns the moment the kernel ends without asking the runtime. That
// moment is t0 of every hop below.
const flagKernel = "miotool_spin_flag"

const flagKernelText = `// miotool reclaim-latency kernel.
#if defined(__HIP_PLATFORM_AMD__) || defined(__HIPCC_RTC__)
__device__ static unsigned long long miotool_now_ns() {
  return wall_clock64() * 10ull;
}
#else
__device__ static unsigned long long miotool_now_ns() {
  unsigned long long t;
  asm volatile("mov.u64 %0, %%globaltimer;" : "=l"(t));
  return t;
}
#endif

extern "C" __global__ void miotool_spin_flag(unsigned long long ns, unsigned int* flag, unsigned int value) {
  unsigned long long start = miotool_now_ns();
  while (miotool_now_ns() - start < ns) {
  }
  __threadfence_system();
  *(volatile unsigned int*)flag = value;
}
`

// flagKernelPTX is the same kernel for a driver without NVRTC.
const flagKernelPTX = `//
// miotool reclaim-latency kernel
//
.version 6.0
.target sm_50
.address_size 64

.visible .entry miotool_spin_flag(
	.param .u64 miotool_spin_flag_ns,
	.param .u64 miotool_spin_flag_flag,
	.param .u32 miotool_spin_flag_value
)
{
	.reg .pred 	%p<2>;
	.reg .b32 	%r<2>;
	.reg .b64 	%rd<7>;

	ld.param.u64 	%rd1, [miotool_spin_flag_ns];
	ld.param.u64 	%rd5, [miotool_spin_flag_flag];
	ld.param.u32 	%r1, [miotool_spin_flag_value];
	mov.u64 	%rd2, %globaltimer;
$Lspin:
	mov.u64 	%rd3, %globaltimer;
	sub.s64 	%rd4, %rd3, %rd2;
	setp.lt.u64 	%p1, %rd4, %rd1;
	@%p1 bra 	$Lspin;
	cvta.to.global.u64 	%rd6, %rd5;
	membar.sys;
	st.volatile.global.u32 	[%rd6], %r1;
	ret;
}
`

// flagTwin is the simulator's kernel: a wait of ns, then an atomic store
// the watcher can load. Up to a millisecond it spins on the clock, as the
// GPU kernel does: a Go timer that short fires late where every thread of
// the process sleeps (the runtime then waits for timers in whole
// milliseconds), which would make the kernel end long after its Abandon.
// Longer waits take a timer, so the simulated stream stays busy without
// burning a core.
func flagTwin(mem hip.Memory, _, _ hip.Dim3, args []hip.KernelArg) error {
	ns, ok1 := args[0].(uint64)
	flag, ok2 := args[1].(hip.DevPtr)
	value, ok3 := args[2].(uint32)
	if len(args) != 3 || !ok1 || !ok2 || !ok3 {
		return fmt.Errorf("%s: arguments %v, want uint64, DevPtr, uint32", flagKernel, args)
	}
	b, err := mem.Bytes(flag, 4)
	if err != nil {
		return err
	}
	if d := time.Duration(ns); d <= time.Millisecond {
		for end := time.Now().Add(d); time.Now().Before(end); {
		}
	} else {
		t := time.NewTimer(d)
		<-t.C
	}
	atomic.StoreUint32((*uint32)(unsafe.Pointer(&b[0])), value)
	twinEnd.at.Store(benchClock.now())
	twinEnd.value.Store(value)
	return nil
}

// twinEnd is when the simulator's kernel made its last write, stamped by
// the kernel itself: on the simulator the kernel is Go code in this
// process, and on a loaded machine with few cores a spinning watcher
// thread is not always on a core to see the write when it happens.
var twinEnd struct {
	at    atomic.Int64
	value atomic.Uint32
}

func flagSource() *hip.KernelSource {
	return &hip.KernelSource{
		Name:    "miotool-bench-flag",
		Text:    flagKernelText,
		PTX:     flagKernelPTX,
		Kernels: []string{flagKernel},
		Twins:   map[string]hip.GoKernel{flagKernel: flagTwin},
	}
}

// clock is the benchmarks' one time base: nanoseconds since it was made.
type clock struct{ epoch time.Time }

func (c clock) now() int64 { return int64(time.Since(c.epoch)) }

var benchClock = clock{time.Now()}

// watcher is a goroutine locked to its OS thread that spins on a flag in
// host-mapped memory and stamps every new value: the kernel's end.
type watcher struct {
	flag  *atomic.Uint32
	seen  atomic.Uint32
	at    atomic.Int64
	stop  atomic.Bool
	ended chan struct{}
}

func watch(c clock, flag *atomic.Uint32) *watcher {
	w := &watcher{flag: flag, ended: make(chan struct{})}
	ready := make(chan struct{})
	go func() {
		runtime.LockOSThread()
		defer runtime.UnlockOSThread()
		defer close(w.ended)
		last := flag.Load()
		close(ready)
		for !w.stop.Load() {
			if v := flag.Load(); v != last {
				w.at.Store(c.now())
				w.seen.Store(v)
				last = v
			}
		}
	}()
	<-ready
	return w
}

// endOf waits until the kernel that writes value has been seen and returns
// when. On the simulator the kernel's own stamp is taken instead.
func (w *watcher) endOf(b *testing.B, value uint32, sim bool) int64 {
	seen, at := &twinEnd.value, &twinEnd.at
	if !sim {
		seen, at = &w.seen, &w.at
	}
	deadline := time.Now().Add(30 * time.Second)
	for seen.Load() != value {
		if time.Now().After(deadline) {
			b.Fatalf("the kernel's flag %d was never seen", value)
		}
		runtime.Gosched()
	}
	return at.Load()
}

func (w *watcher) close() {
	w.stop.Store(true)
	<-w.ended
}

// hopsKernel is how long the abandoned kernel runs after its Abandon: an
// evaluation that overran its deadline a little.
const hopsKernel = 50 * time.Microsecond

// BenchmarkHops is the reclaim path of one abandoned evaluation, hop by
// hop, each measured from the kernel's own last write (t0): the driver's
// callback thread starting (the floor: the tracker's own callback under
// worker; a bare host function queued after the done event under
// poller-beside-callback), the reclaim thread awake with work (worker
// woken by the callback; poller seeing the done event), the deallocator
// starting, and the scratch freed; abandon is the Abandon call itself,
// before t0 (negative) as in a find that gives up on work still running,
// and woken the reclaim thread's last wake before the free (the poller's
// by its Abandon, the worker's by the callback): a poller woken after t0
// was asleep when the work ended. Medians and p90 in µs. For the poller,
// polls is how many done-event queries the reclaim took and ns-per-poll
// their mean period from its last wake to the done event seen: about a
// query's own cost when it polls back to back, far more where its queries
// block. worker-futex is the worker without its spin: the futex wake
// alone. poller queues no host function anywhere, as the policy itself
// does not; poller-beside-callback is the same with the benchmark's bare
// host function queued behind the done event, the callback floor, as in a
// process where other code queues host functions. The isolated variants
// pause before each evaluation's launch until the reclaim thread (and the
// driver's callback thread) have gone to sleep, as after any idle period,
// and then launch, record and abandon at once, so the kernel still runs
// when it is abandoned: worker-isolated, where Abandon wakes the worker
// (paying a system call, see BenchmarkPaired), worker-isolated-nowake
// (streams.Options.NoAbandonWake), where the callback does,
// poller-isolated, where Abandon wakes the sleeping poller to poll the
// done event, and poller-isolated-announced, where the evaluation's
// deadline was announced at its start (Tracker.AbandonBy, as find does)
// and the benchmark waits for it as find does, spinning: the poller wakes
// shortly before it and is awake at the Abandon. BenchmarkColdReclaim
// pairs the isolated worker and pollers in one loop. On the simulator t0
// is stamped by the kernel's Go twin itself (see twinEnd).
func BenchmarkHops(b *testing.B) {
	for _, v := range []struct {
		name   string
		policy streams.Policy
		opts   streams.Options
		how    hopHow
	}{
		{"worker", streams.Worker, streams.Options{}, hopHow{}},
		{"worker-futex", streams.Worker, streams.Options{Spin: -1}, hopHow{}},
		{"worker-isolated", streams.Worker, streams.Options{}, hopHow{pause: true}},
		{"worker-isolated-nowake", streams.Worker, streams.Options{NoAbandonWake: true}, hopHow{pause: true}},
		{"poller", streams.Poller, streams.Options{}, hopHow{}},
		{"poller-beside-callback", streams.Poller, streams.Options{}, hopHow{floor: true}},
		{"poller-isolated", streams.Poller, streams.Options{}, hopHow{pause: true}},
		{"poller-isolated-announced", streams.Poller, streams.Options{}, hopHow{pause: true, announce: true}},
	} {
		b.Run(v.name, func(b *testing.B) {
			r := newHopRig(b)
			tr := r.tracker(b, v.policy, v.opts)
			var hops hopSeries
			how := v.how
			how.overrun = hopsKernel
			for b.Loop() {
				hops.add(r.once(b, tr, how))
			}
			hops.report(b, "")
		})
	}
}

// BenchmarkColdReclaim is the realistic case of a find that abandons one
// evaluation long after the last: worker-isolated, poller-isolated and
// poller-isolated-announced of BenchmarkHops, turn about in one loop (so
// that all see the same machine), each on its own tracker, each evaluation
// launched after a pause in which every reclaim thread and the driver's
// callback thread went to sleep. ratio-worker/poller and
// ratio-worker/announced are the worker's median kernel-end-to-free-start
// over the poller's, computed in this run. The overrun is how long the
// kernel runs after its Abandon: 50 µs ends within the reclaim threads'
// spin (Options.Spin), 2 ms long after it, when the poller sleeps a
// sixteenth of the drain's age between polls and the worker sleeps until
// the callback wakes it.
func BenchmarkColdReclaim(b *testing.B) {
	for _, v := range []struct {
		name    string
		overrun time.Duration
	}{{"overrun-50us", hopsKernel}, {"overrun-2ms", 2 * time.Millisecond}} {
		overrun := v.overrun
		b.Run(v.name, func(b *testing.B) {
			r := newHopRig(b)
			type contender struct {
				prefix string
				tr     *streams.Tracker
				how    hopHow
				hops   hopSeries
			}
			cs := []*contender{
				{prefix: "worker-", tr: r.tracker(b, streams.Worker, streams.Options{})},
				{prefix: "poller-", tr: r.tracker(b, streams.Poller, streams.Options{})},
				{prefix: "announced-", tr: r.tracker(b, streams.Poller, streams.Options{}), how: hopHow{announce: true}},
			}
			turn := 0
			for b.Loop() {
				for i := range cs {
					c := cs[(turn+i)%len(cs)]
					how := c.how
					how.pause, how.overrun = true, overrun
					c.hops.add(r.once(b, c.tr, how))
				}
				turn++
			}
			for _, c := range cs {
				c.hops.report(b, c.prefix)
			}
			worker := quantile(cs[0].hops[hopFreeStart], 0.5)
			if pf := quantile(cs[1].hops[hopFreeStart], 0.5); pf > 0 {
				b.ReportMetric(worker/pf, "ratio-worker/poller")
			}
			if af := quantile(cs[2].hops[hopFreeStart], 0.5); af > 0 {
				b.ReportMetric(worker/af, "ratio-worker/announced")
			}
		})
	}
}

// workerAsleep is how long after its last work a reclaim thread is surely
// asleep: a benchmark's pause, not a synchronization.
const workerAsleep = 4 * streams.DefaultSpin

// The figures of one evaluation: the hops in µs from the kernel's end,
// then the poller's queries.
const (
	hopAbandon = iota
	hopWoken
	hopCallback
	hopAwake
	hopFreeStart
	hopFreed
	hopPolls      // queries the reclaim took (poller)
	hopPollPeriod // their mean period in ns from the last wake (poller)
	numFigures
)

// numHops counts the figures that are moments.
const numHops = hopPolls

var hopNames = [numFigures]string{"us-abandon", "us-woken", "us-callback", "us-awake", "us-free-start", "us-freed", "polls", "ns-per-poll"}

// hopSeries holds each figure of every evaluation; a NaN (a figure the
// evaluation did not have) is left out.
type hopSeries [numFigures][]float64

func (h *hopSeries) add(one [numFigures]float64) {
	for i, v := range one {
		if !math.IsNaN(v) {
			h[i] = append(h[i], v)
		}
	}
}

// report gives p50 and p90 of every figure it has (the Abandon's p50
// only).
func (h *hopSeries) report(b *testing.B, prefix string) {
	for i, name := range hopNames {
		if len(h[i]) == 0 {
			continue
		}
		unit, rest, _ := strings.Cut(name, "-")
		if unit != "us" && unit != "ns" {
			unit, rest = "", name
		}
		metric := func(q string) string {
			if unit == "" {
				return prefix + rest + "-" + q
			}
			return unit + "-" + prefix + rest + "-" + q
		}
		b.ReportMetric(quantile(h[i], 0.5), metric("p50"))
		if i != hopAbandon {
			b.ReportMetric(quantile(h[i], 0.9), metric("p90"))
		}
	}
}

// hopRig is what a reclaim-latency measurement needs: the device, a flag
// in host-mapped memory the kernel writes last, the kernel, an allocator
// that stamps the free, the flag's watcher (on a GPU) and the moments the
// trackers' traces stamp. Its measurements run one at a time.
type hopRig struct {
	d     hip.Device
	hm    hip.HostMapped
	flag  *atomic.Uint32
	kern  hip.Function
	onSim bool
	w     *watcher
	alloc *handle.Allocator
	value uint32

	woken, callback, awake, freeStart, freed atomic.Int64
}

func newHopRig(b *testing.B) *hopRig {
	d := device(b)
	mapper, ok := d.(hip.HostMapper)
	if !ok {
		b.Skipf("the %s backend has no host-mapped memory", d.Props().Backend)
	}
	hm, err := mapper.HostAllocMapped(64)
	if err != nil {
		b.Skipf("host-mapped memory: %v", err)
	}
	b.Cleanup(func() { _ = mapper.HostFreeMapped(hm) })
	r := &hopRig{d: d, hm: hm, flag: (*atomic.Uint32)(hm.Host), onSim: d.Props().Backend == "sim"}
	r.flag.Store(0)
	m, err := d.ModuleLoad(flagSource())
	must(b, err)
	b.Cleanup(func() { _ = d.ModuleUnload(m) })
	r.kern, err = d.ModuleGetFunction(m, flagKernel)
	must(b, err)
	c := benchClock
	r.alloc = &handle.Allocator{
		Alloc: d.Malloc,
		Free: func(p hip.DevPtr) error {
			r.freeStart.Store(c.now())
			err := d.Free(p)
			r.freed.Store(c.now())
			return err
		},
	}
	if !r.onSim {
		r.w = watch(c, r.flag)
		b.Cleanup(r.w.close)
	}
	return r
}

// tracker makes a tracker of policy whose trace stamps the rig's moments.
// It closes before the rig's device does.
func (r *hopRig) tracker(b *testing.B, policy streams.Policy, opts streams.Options) *streams.Tracker {
	c := benchClock
	opts.Policy, opts.MaxDraining = policy, 2
	opts.Trace = &streams.Trace{
		CallbackEntered: func() { r.callback.Store(c.now()) },
		Awake:           func() { r.awake.Store(c.now()) },
		Woken:           func() { r.woken.Store(c.now()) },
	}
	tr, err := streams.New(r.d, opts)
	must(b, err)
	b.Cleanup(func() { _ = tr.Close() })
	return tr
}

// hopHow is how one evaluation is run: how long its kernel runs after
// its Abandon; pause first lets every reclaim thread fall asleep; floor
// queues the benchmark's bare host function behind the done event (the
// worker's callback is the tracker's own); announce tells the tracker the
// Abandon's time at the slot's start (AbandonBy) and waits for it
// spinning, as find waits for its deadline.
type hopHow struct {
	overrun                time.Duration
	pause, floor, announce bool
}

// once abandons one evaluation on tr about how.overrun before its kernel
// ends, waits for its scratch to be freed and returns the hops.
func (r *hopRig) once(b *testing.B, tr *streams.Tracker, how hopHow) [numFigures]float64 {
	c, d := benchClock, r.d
	r.value++
	r.callback.Store(0)
	scratch, err := r.alloc.Alloc(1 << 20)
	must(b, err)
	slot, err := tr.Acquire(context.Background())
	must(b, err)
	p := &freedPin{free: r.alloc.Free, ptr: scratch, done: make(chan struct{})}
	tr.Pin(slot, p)
	switch {
	case how.announce:
		due := time.Now()
		if how.pause {
			due = due.Add(workerAsleep)
		}
		tr.AbandonBy(slot, due)
		for time.Now().Before(due) {
			runtime.Gosched()
		}
	case how.pause:
		time.Sleep(workerAsleep)
	}
	polls0 := tr.Counters().Polls
	must(b, d.LaunchKernel(r.kern, hip.D1(1), hip.D1(1), 0, slot.Stream(), uint64(how.overrun), r.hm.Dev, r.value))
	ev, err := d.EventCreate(hip.EventDisableTiming)
	must(b, err)
	must(b, d.EventRecord(ev, slot.Stream()))
	floor := how.floor && tr.Policy() == streams.Poller
	if floor {
		must(b, d.LaunchHostFunc(slot.Stream(), func() { r.callback.Store(c.now()) }))
	}
	abandoned := c.now()
	tr.Abandon(slot, ev)
	select {
	case <-p.done:
	case <-time.After(30 * time.Second):
		b.Fatal("scratch not freed within 30 s")
	}
	polls := float64(tr.Counters().Polls - polls0)
	t0 := r.w.endOf(b, r.value, r.onSim)
	if floor || tr.Policy() == streams.Worker {
		for deadline := time.Now().Add(30 * time.Second); r.callback.Load() == 0; runtime.Gosched() {
			if time.Now().After(deadline) {
				b.Fatal("the host function never ran")
			}
		}
	}
	var out [numFigures]float64
	for i, at := range [numHops]int64{abandoned, r.woken.Load(), r.callback.Load(), r.awake.Load(), r.freeStart.Load(), r.freed.Load()} {
		out[i] = float64(at-t0) / 1e3
		if at == 0 {
			out[i] = math.NaN()
		}
	}
	out[hopPolls], out[hopPollPeriod] = math.NaN(), math.NaN()
	if tr.Policy() == streams.Poller && polls > 0 {
		out[hopPolls] = polls
		if since := max(r.woken.Load(), abandoned); r.awake.Load() > since {
			out[hopPollPeriod] = float64(r.awake.Load()-since) / polls
		}
	}
	return out
}

// freedPin is a scratch buffer pinned by the benchmark; done closes once
// freed.
type freedPin struct {
	free func(hip.DevPtr) error
	ptr  hip.DevPtr
	done chan struct{}
}

func (p *freedPin) Bytes() int { return 1 << 20 }
func (p *freedPin) Release() error {
	err := p.free(p.ptr)
	close(p.done)
	return err
}

func quantile(xs []float64, q float64) float64 {
	if len(xs) == 0 {
		return 0
	}
	s := slices.Clone(xs)
	slices.Sort(s)
	return s[min(len(s)-1, int(q*float64(len(s))))]
}

// BenchmarkPaired compares what runs on the caller's thread with its bare
// runtime floor, the two alternating in one loop so that both see the same
// machine, and Handle.Run under worker and poller against a raw
// LaunchKernel, in blocks of launches. The ratio of medians is the figure:
// goal ≤ 1.1 for Abandon, 1.00 ± 0.02 for Run.
//
// Abandon (bookkeeping, the host function's enqueue, and a wake of the
// worker when it sleeps) is timed against a bare host-function enqueue on
// the same kind of stream in the same state: each iteration acquires a
// slot, starts a kernel on it and records its done event, then times
// either Abandon or a bare enqueue on that slot, turn about; after a bare
// enqueue the slot is abandoned untimed, so both turns leave the tracker
// and the driver the same work. Variants: worker (the default spin: a run
// of Abandons finds the worker spinning), worker-futex (no spin: no
// Abandon ever wakes the worker), worker-isolated (each turn comes after
// the worker has gone to sleep, so Abandon pays the wake that keeps its
// callback's latency low; see BenchmarkHops), worker-isolated-nowake
// (streams.Options.NoAbandonWake: it does not), and split, which also
// times the enqueue inside Abandon (ns-launch-in-abandon-p50) to tell the
// driver's share from the tracker's own (ns-own-p50). wakes/abandon is the
// share of timed Abandons that woke the worker.
func BenchmarkPaired(b *testing.B) {
	for _, v := range []struct {
		name     string
		opts     streams.Options
		isolated bool
		split    bool
	}{
		{"worker", streams.Options{}, false, false},
		{"worker-futex", streams.Options{Spin: -1}, false, false},
		{"worker-isolated", streams.Options{}, true, false},
		{"worker-isolated-nowake", streams.Options{NoAbandonWake: true}, true, false},
		{"split", streams.Options{}, false, true},
	} {
		b.Run("abandon-vs-enqueue/"+v.name, func(b *testing.B) { benchPairedAbandon(b, v.opts, v.isolated, v.split) })
	}
	for _, p := range []streams.Policy{streams.Worker, streams.Poller} {
		b.Run("run-vs-raw/"+string(p), func(b *testing.B) { benchPairedRun(b, p) })
	}
}

// launchTimer times the host-function enqueues made through it while on.
type launchTimer struct {
	hip.Device
	on   bool
	last time.Duration
}

func (l *launchTimer) LaunchHostFunc(s hip.Stream, fn func()) error {
	if !l.on {
		return l.Device.LaunchHostFunc(s, fn)
	}
	t0 := time.Now()
	err := l.Device.LaunchHostFunc(s, fn)
	l.last = time.Since(t0)
	return err
}

func benchPairedAbandon(b *testing.B, opts streams.Options, isolated, split bool) {
	d := device(b)
	k := load(b, d)
	var dev hip.Device = d
	timer := &launchTimer{Device: d}
	if split {
		dev = timer
	}
	opts.Policy, opts.MaxDraining = streams.Worker, 64
	tr, err := streams.New(dev, opts)
	must(b, err)
	defer tr.Close()
	noop := func() {}
	var abandon, enqueue, inside, own []float64
	timedAbandons, wakes := 0, int64(0)
	turn := 0
	for b.Loop() {
		s, err := tr.Acquire(context.Background())
		must(b, err)
		tr.Pin(s, pin{})
		k.spinOn(b, d, s.Stream(), 20*time.Microsecond)
		ev, err := d.EventCreate(hip.EventDisableTiming)
		must(b, err)
		must(b, d.EventRecord(ev, s.Stream()))
		if isolated {
			time.Sleep(workerAsleep)
		}
		if turn++; turn%2 == 1 {
			before := tr.Counters().AbandonWakes
			timer.on = split
			t0 := time.Now()
			tr.Abandon(s, ev)
			ns := float64(time.Since(t0).Nanoseconds())
			timer.on = false
			abandon = append(abandon, ns)
			if split {
				inside = append(inside, float64(timer.last.Nanoseconds()))
				own = append(own, ns-float64(timer.last.Nanoseconds()))
			}
			timedAbandons++
			wakes += tr.Counters().AbandonWakes - before
			continue
		}
		t0 := time.Now()
		must(b, d.LaunchHostFunc(s.Stream(), noop))
		enqueue = append(enqueue, float64(time.Since(t0).Nanoseconds()))
		tr.Abandon(s, ev)
	}
	a, e := quantile(abandon, 0.5), quantile(enqueue, 0.5)
	b.ReportMetric(a, "ns-abandon-p50")
	b.ReportMetric(e, "ns-enqueue-p50")
	b.ReportMetric(a/e, "ratio-abandon/enqueue")
	if split {
		b.ReportMetric(quantile(inside, 0.5), "ns-launch-in-abandon-p50")
		b.ReportMetric(quantile(own, 0.5), "ns-own-p50")
	}
	if timedAbandons > 0 {
		b.ReportMetric(float64(wakes)/float64(timedAbandons), "wakes/abandon")
	}
}

// runBlock is the number of launches timed together in BenchmarkPaired's
// Run comparison; the stream is synchronized between blocks, untimed.
const runBlock = 64

func benchPairedRun(b *testing.B, policy streams.Policy) {
	d := device(b)
	k := load(b, d)
	h, err := handle.New(d, handle.Options{Policy: policy, MaxDraining: 2})
	must(b, err)
	defer h.Close()
	st := h.Stream()
	one := hip.D1(1)
	var run, raw []float64
	i := uint32(0)
	block := func(viaHandle bool) float64 {
		t0 := time.Now()
		for range runBlock {
			i++
			if viaHandle {
				err = h.Run(k.tiny, one, one, 0, k.out, i)
			} else {
				err = d.LaunchKernel(k.tiny, one, one, 0, st, k.out, i)
			}
			must(b, err)
		}
		ns := float64(time.Since(t0).Nanoseconds()) / runBlock
		must(b, d.StreamSynchronize(st))
		return ns
	}
	for b.Loop() {
		// Alternate which goes first, so neither always follows a sync.
		if len(run)%2 == 0 {
			raw = append(raw, block(false))
			run = append(run, block(true))
		} else {
			run = append(run, block(true))
			raw = append(raw, block(false))
		}
	}
	r, w := quantile(run, 0.5), quantile(raw, 0.5)
	b.ReportMetric(r, "ns-run-p50")
	b.ReportMetric(w, "ns-raw-p50")
	b.ReportMetric(r/w, "ratio-run/raw")
}

// pollerDrain is how long the abandoned kernel of BenchmarkPollerCPU runs.
const pollerDrain = 200 * time.Millisecond

// BenchmarkPollerCPU is what the poller costs the host, in percent of one
// core, while one abandoned slot drains for 200 ms (the poller spins
// briefly, then sleeps with a backed-off period) and for as long again with
// nothing draining (goal: 0). The kernel runs on the device (a timer on the
// simulator). pct-core-* is the whole process's CPU time, which also counts
// the Go runtime's own threads and the driver's; pct-thread-* is the
// poller's own OS thread alone (Linux: its schedstat), which tells the
// poller's idle cost from the process's background. Between the two
// windows the poller spins on its wake word for Options.Spin after the
// slot went home, then sleeps: the idle window starts after a settling
// pause that covers it, and us-thread-per-drain is the poller's CPU time
// from the Abandon to the end of that pause, the spin that keeps a run of
// Abandons from waking it (see BenchmarkHops/poller) included.
func BenchmarkPollerCPU(b *testing.B) {
	d := device(b)
	k := load(b, d)
	var tid atomic.Int64
	tr, err := streams.New(d, streams.Options{Policy: streams.Poller, MaxDraining: 2,
		Trace: &streams.Trace{Started: func() { tid.Store(int64(syscall.Gettid())) }}})
	must(b, err)
	defer tr.Close()
	var draining, idle, threadDraining, threadIdle, perDrain []float64
	for b.Loop() {
		s, err := tr.Acquire(context.Background())
		must(b, err)
		p := &freedPin{free: func(hip.DevPtr) error { return nil }, done: make(chan struct{})}
		tr.Pin(s, p)
		k.spinOn(b, d, s.Stream(), pollerDrain)
		ev, err := d.EventCreate(hip.EventDisableTiming)
		must(b, err)
		must(b, d.EventRecord(ev, s.Stream()))
		cpu0, th0, t0 := processCPU(b), threadCPU(tid.Load()), time.Now()
		tr.Abandon(s, ev)
		<-p.done
		elapsed := float64(time.Since(t0))
		draining = append(draining, 100*float64(processCPU(b)-cpu0)/elapsed)
		// The thread exists from the first Abandon on.
		if th0 >= 0 {
			threadDraining = append(threadDraining, 100*float64(threadCPU(tid.Load())-th0)/elapsed)
		}
		time.Sleep(workerAsleep) // the spin after the drain: a pause, not a synchronization
		if th0 >= 0 {
			perDrain = append(perDrain, float64(threadCPU(tid.Load())-th0)/1e3)
		}
		cpu0, th0, t0 = processCPU(b), threadCPU(tid.Load()), time.Now()
		time.Sleep(pollerDrain) // measuring idle cost: nothing to wait for
		elapsed = float64(time.Since(t0))
		idle = append(idle, 100*float64(processCPU(b)-cpu0)/elapsed)
		if th0 >= 0 {
			threadIdle = append(threadIdle, 100*float64(threadCPU(tid.Load())-th0)/elapsed)
		}
	}
	b.ReportMetric(quantile(draining, 0.5), "pct-core-draining")
	b.ReportMetric(quantile(idle, 0.5), "pct-core-idle")
	if len(threadIdle) > 0 {
		b.ReportMetric(quantile(threadDraining, 0.5), "pct-thread-draining")
		b.ReportMetric(quantile(threadIdle, 0.5), "pct-thread-idle")
		b.ReportMetric(quantile(perDrain, 0.5), "us-thread-per-drain")
	}
	b.ReportMetric(float64(tr.Counters().Polls)/float64(b.N), "polls/drain")
}

// processCPU is the process's user and system time so far.
func processCPU(b *testing.B) time.Duration {
	var ru syscall.Rusage
	must(b, syscall.Getrusage(syscall.RUSAGE_SELF, &ru))
	return time.Duration(ru.Utime.Nano() + ru.Stime.Nano())
}

// threadCPU is the CPU time so far of the process's thread tid, from
// /proc/self/task/TID/schedstat (Linux); -1 where that cannot be read.
func threadCPU(tid int64) time.Duration {
	if tid <= 0 {
		return -1
	}
	raw, err := os.ReadFile(fmt.Sprintf("/proc/self/task/%d/schedstat", tid))
	if err != nil {
		return -1
	}
	fields := strings.Fields(string(raw))
	if len(fields) == 0 {
		return -1
	}
	ns, err := strconv.ParseInt(fields[0], 10, 64)
	if err != nil {
		return -1
	}
	return time.Duration(ns)
}
