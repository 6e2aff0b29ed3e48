package cli

import (
	"bytes"
	"strings"
	"sync"
	"testing"
	"time"
	"unicode/utf8"

	"miotool/internal/buildinfo"
)

// fakeClock is a clock tests move by hand.
type fakeClock struct {
	mu sync.Mutex
	t  time.Time
}

func (c *fakeClock) Now() time.Time { c.mu.Lock(); defer c.mu.Unlock(); return c.t }

func (c *fakeClock) Advance(d time.Duration) { c.mu.Lock(); c.t = c.t.Add(d); c.mu.Unlock() }

func newClock() *fakeClock { return &fakeClock{t: time.Date(2026, 12, 1, 9, 0, 0, 0, time.UTC)} }

func TestProgressBarLine(t *testing.T) {
	cases := []struct {
		name        string
		label       string
		done, total int
		elapsed     time.Duration
		width       int
		want        string
	}{
		{"start", "capture: case", 0, 8, 0, 0, "capture: case 0/8 [>                   ] 0:00 elapsed, ETA --:--"},
		{"part way", "capture: case", 3, 8, 12 * time.Second, 0, "capture: case 3/8 [=======>            ] 0:12 elapsed, ETA 0:20"},
		{"done", "suite pr12265", 8, 8, 90 * time.Second, 0, "suite pr12265 8/8 [====================] 1:30 elapsed, ETA 0:00"},
		{"over an hour", "stress", 1, 4, 70 * time.Minute, 0, "stress 1/4 [=====>              ] 1:10:00 elapsed, ETA 3:30:00"},
		{"unknown total", "find:", 12, 0, 3 * time.Second, 0, "find: 12, 0:03 elapsed"},
		{"done past total", "x", 9, 8, time.Second, 0, "x 8/8 [====================] 0:01 elapsed, ETA 0:00"},
		{"narrow terminal", "suite pr12265: capture-global-worker [GPU_MAX_HW_QUEUES=3]", 1, 2, time.Second, 70,
			"suite pr12265: cap… 1/2 [==========>         ] 0:01 elapsed, ETA 0:01"},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			clock := newClock()
			b := NewProgressBar(&bytes.Buffer{}, tc.label, ProgressOptions{Now: clock.Now, Width: tc.width})
			b.Update(tc.done, tc.total)
			clock.Advance(tc.elapsed)
			got := b.Line()
			if got != tc.want {
				t.Errorf("line\n got %q\nwant %q", got, tc.want)
			}
			width := tc.width
			if width == 0 {
				width = 80
			}
			if n := utf8.RuneCountInString(got); n >= width {
				t.Errorf("line of %d columns on a %d-column terminal would wrap", n, width)
			}
		})
	}
}

// Updates closer together than the interval draw once; the end clears
// the line.
func TestProgressBarRedrawsAtMostOncePerInterval(t *testing.T) {
	clock := newClock()
	var out bytes.Buffer
	b := NewProgressBar(&out, "work", ProgressOptions{Now: clock.Now})
	for i := 1; i <= 50; i++ {
		b.Update(i, 100)
		clock.Advance(time.Millisecond)
	}
	if n := strings.Count(out.String(), "\r"); n != 1 {
		t.Errorf("%d draws within 50ms, want 1:\n%q", n, out.String())
	}
	clock.Advance(ProgressInterval)
	b.Update(51, 100)
	if n := strings.Count(out.String(), "\r"); n != 2 {
		t.Errorf("%d draws after an interval passed, want 2", n)
	}
	if !strings.Contains(out.String(), "work 51/100") {
		t.Errorf("the redraw does not show the latest count:\n%q", out.String())
	}
	b.Done()
	if !strings.HasSuffix(out.String(), "\r\x1b[K") {
		t.Errorf("the line is not cleared at the end: %q", out.String())
	}
	before := out.Len()
	b.Done()
	b.Update(99, 100)
	if out.Len() != before {
		t.Errorf("the bar drew after Done: %q", out.String()[before:])
	}
}

func TestProgressBarThatNeverDrewWritesNothing(t *testing.T) {
	var out bytes.Buffer
	b := NewProgressBar(&out, "quick", ProgressOptions{Tick: true})
	b.Done()
	if out.Len() != 0 {
		t.Errorf("wrote %q", out.String())
	}
	var none *ProgressBar
	none.Update(1, 2)
	none.SetLabel("x")
	none.Done()
	if none.Line() != "" {
		t.Error("a nil bar has a line")
	}
}

// signalWriter reports each write on a channel.
type signalWriter struct {
	mu     sync.Mutex
	buf    bytes.Buffer
	writes chan struct{}
}

func (w *signalWriter) Write(p []byte) (int, error) {
	w.mu.Lock()
	defer w.mu.Unlock()
	select {
	case w.writes <- struct{}{}:
	default:
	}
	return w.buf.Write(p)
}

// With Tick, elapsed time moves on screen while no update comes.
func TestProgressBarTicks(t *testing.T) {
	w := &signalWriter{writes: make(chan struct{}, 1)}
	b := NewProgressBar(w, "slow", ProgressOptions{Tick: true, Interval: 5 * time.Millisecond})
	t.Cleanup(b.Done)
	b.Update(1, 3)
	deadline := time.After(20 * time.Second)
	for draws := 0; draws < 3; {
		select {
		case <-w.writes:
			draws++
		case <-deadline:
			t.Fatal("the bar was not redrawn without updates")
		}
	}
	b.Done()
	w.mu.Lock()
	defer w.mu.Unlock()
	if !strings.HasSuffix(w.buf.String(), "\r\x1b[K") {
		t.Errorf("not cleared: %q", w.buf.String())
	}
}

func TestFactoryProgressBarOnlyOnATerminal(t *testing.T) {
	for _, c := range []struct{ tty, off, want bool }{{false, false, false}, {true, true, false}, {true, false, true}} {
		ios, _, _, _ := Test()
		ios.SetStderrTTY(c.tty)
		f := NewFactory(ios, buildinfo.Info{})
		f.Global.NoProgress = c.off
		b := f.ProgressBar("x")
		if (b != nil) != c.want {
			t.Errorf("tty %v no-progress %v: bar %v", c.tty, c.off, b != nil)
		}
		b.Done()
	}
}
