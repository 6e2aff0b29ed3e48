package rules_test

import (
	"encoding/binary"
	"testing"
	"time"

	"miotool/internal/hip"
	_ "miotool/internal/hip/cuda"
	"miotool/internal/rules"
)

// The probe's kernels on a real GPU, both as compiled from the source and
// from the PTX fallback: the tiny kernel stores its value, and the spin
// kernel keeps its stream busy for at least the time asked. Skipped where
// no CUDA device opens.
func TestKernelsOnGPU(t *testing.T) {
	d, _, err := hip.Select("cuda", hip.OpenOptions{})
	if err != nil {
		t.Skipf("no CUDA device: %v", err)
	}
	t.Cleanup(func() { _ = d.Close() })

	full := rules.Kernels()
	ptxOnly := rules.Kernels()
	ptxOnly.Name, ptxOnly.Text = "miotool-rules-ptx", ""
	for _, src := range []*hip.KernelSource{full, ptxOnly} {
		t.Run(src.Name, func(t *testing.T) {
			m, err := d.ModuleLoad(src)
			if err != nil {
				t.Fatal(err)
			}
			t.Cleanup(func() { _ = d.ModuleUnload(m) })
			spin, err := d.ModuleGetFunction(m, rules.SpinKernel)
			if err != nil {
				t.Fatal(err)
			}
			tiny, err := d.ModuleGetFunction(m, rules.TinyKernel)
			if err != nil {
				t.Fatal(err)
			}
			s, err := d.StreamCreate(hip.StreamNonBlocking)
			if err != nil {
				t.Fatal(err)
			}
			t.Cleanup(func() { _ = d.StreamDestroy(s) })
			buf, err := d.Malloc(4)
			if err != nil {
				t.Fatal(err)
			}
			t.Cleanup(func() { _ = d.Free(buf) })

			if err := d.LaunchKernel(tiny, hip.D1(1), hip.D1(1), 0, s, buf, uint32(7)); err != nil {
				t.Fatal(err)
			}
			if err := d.StreamSynchronize(s); err != nil {
				t.Fatal(err)
			}
			out := make([]byte, 4)
			if err := d.MemcpyDtoH(out, buf); err != nil {
				t.Fatal(err)
			}
			if got := binary.LittleEndian.Uint32(out); got != 7 {
				t.Errorf("tiny kernel stored %d, want 7", got)
			}

			start, _ := d.EventCreate(hip.EventDefault)
			stop, _ := d.EventCreate(hip.EventDefault)
			t.Cleanup(func() { _ = d.EventDestroy(start); _ = d.EventDestroy(stop) })
			const want = 20 * time.Millisecond
			if err := d.EventRecord(start, s); err != nil {
				t.Fatal(err)
			}
			if err := d.LaunchKernel(spin, hip.D1(1), hip.D1(1), 0, s, uint64(want.Nanoseconds())); err != nil {
				t.Fatal(err)
			}
			if err := d.EventRecord(stop, s); err != nil {
				t.Fatal(err)
			}
			if err := d.EventSynchronize(stop); err != nil {
				t.Fatal(err)
			}
			ms, err := d.EventElapsedTime(start, stop)
			if err != nil {
				t.Fatal(err)
			}
			// A lower bound only: the kernel must not end early.
			if got := time.Duration(float64(ms) * float64(time.Millisecond)); got < want*95/100 {
				t.Errorf("spin kernel took %v, want at least %v", got, want)
			}
			t.Logf("%s: spin of %v took %.2f ms", src.Name, want, ms)
		})
	}
}
