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
		// at is when the update came, since the start; running is how
		// long the next step has run since.
		at, running time.Duration
		width       int
		want        string
	}{
		{"start", "capture: case", 0, 8, 0, 3 * time.Second, 0, "capture: case 0/8 [>                   ] 0:03 elapsed"},
		{"part way", "capture: case", 3, 8, 12 * time.Second, 0, 0, "capture: case 3/8 [=======>            ] 0:12 elapsed, ETA 0:20"},
		{"the next step running", "capture: case", 3, 8, 12 * time.Second, 3 * time.Second, 0, "capture: case 3/8 [=======>            ] 0:15 elapsed, ETA 0:17"},
		{"the next step outlasts the mean", "capture: case", 3, 8, 12 * time.Second, 5 * time.Second, 0, "capture: case 3/8 [=======>            ] 0:17 elapsed"},
		{"done", "suite pr12265", 8, 8, 90 * time.Second, 0, 0, "suite pr12265 8/8 [====================] 1:30 elapsed"},
		{"over an hour", "stress", 1, 4, 70 * time.Minute, 0, 0, "stress 1/4 [=====>              ] 1:10:00 elapsed, ETA 3:30:00"},
		{"unknown total", "find:", 12, 0, 3 * time.Second, 0, 0, "find: 12, 0:03 elapsed"},
		{"done past total", "x", 9, 8, time.Second, 0, 0, "x 8/8 [====================] 0:01 elapsed"},
		{"narrow terminal", "suite pr12265: capture-global-worker [GPU_MAX_HW_QUEUES=3]", 1, 2, time.Second, 0, 70,
			"suite pr12265: cap… 1/2 [==========>         ] 0:01 elapsed, ETA 0:01"},
		{"50 columns", "suite pr12265: capture-global-worker [GPU_MAX_HW_QUEUES=3]", 1, 2, time.Second, 0, 50,
			"suite pr12265: c… 1/2 [=====>    ] 0:01, ETA 0:01"},
		{"40 columns", "suite pr12265: capture-global-worker [GPU_MAX_HW_QUEUES=3]", 1, 2, time.Second, 0, 40,
			"suite pr12265: capt… 1/2 0:01, ETA 0:01"},
		{"20 columns", "suite pr12265: capture-global-worker [GPU_MAX_HW_QUEUES=3]", 1, 2, time.Second, 0, 20,
			"suite pr12265:… 1/2"},
		{"8 columns", "suite pr12265", 1, 2, time.Second, 0, 8, " 1/2"},
		{"3 columns", "suite pr12265", 100, 200, time.Second, 0, 3, " …"},
		{"a label with a line break", "capture\ncase", 1, 2, time.Second, 0, 0, "capture case 1/2 [==========>         ] 0:01 elapsed, ETA 0:01"},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			clock := newClock()
			b := NewProgressBar(&bytes.Buffer{}, tc.label, ProgressOptions{Now: clock.Now, Width: tc.width})
			clock.Advance(tc.at)
			b.Update(tc.done, tc.total)
			clock.Advance(tc.running)
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

// terminal replays what a bar wrote, as a terminal of the given width
// would show it: it fails on a redraw that is wider than the width less
// one or holds a line break, and returns how many lines the output took.
type terminal struct {
	t     *testing.T
	width func() int
	lines int
	buf   bytes.Buffer
}

func (term *terminal) Write(p []byte) (int, error) {
	term.t.Helper()
	w := term.width()
	if bytes.ContainsAny(p, "\n") {
		term.t.Errorf("a redraw at %d columns emits a line break: %q", w, p)
		term.lines++
	}
	for _, seg := range strings.Split(string(p), "\r") {
		seg = strings.ReplaceAll(seg, "\x1b[J", "")
		if n := utf8.RuneCountInString(seg); n > w-1 {
			term.t.Errorf("a redraw of %d columns on a %d-column terminal wraps: %q", n, w, seg)
		}
	}
	return term.buf.Write(p)
}

// At 40, 80 and 200 columns, resized in between, every redraw is one
// line that fits; a resize redraws at once, at the new width.
func TestProgressBarFollowsTheTerminalWidth(t *testing.T) {
	var mu sync.Mutex
	width := 40
	widthNow := func() int { mu.Lock(); defer mu.Unlock(); return width }
	resize := func(w int) { mu.Lock(); width = w; mu.Unlock() }
	clock := newClock()
	term := &terminal{t: t, width: widthNow}
	label := "suite pr12265: capture-global-worker [GPU_MAX_HW_QUEUES=3]"
	b := NewProgressBar(term, label, ProgressOptions{Now: clock.Now, WidthSource: widthNow})
	b.Update(0, 30)
	steps := 0
	step := func() {
		clock.Advance(ProgressInterval + time.Second)
		steps++
		b.Update(steps, 30)
	}
	for _, w := range []int{40, 80, 200, 52, 40, 80} {
		before := term.buf.Len()
		resize(w)
		b.Resized()
		if term.buf.Len() == before {
			t.Errorf("a resize to %d columns did not redraw", w)
		}
		if got := b.Line(); w >= 80 && !strings.Contains(got, label) && w == 200 {
			t.Errorf("at %d columns the label is cut: %q", w, got)
		}
		for range 4 {
			step()
		}
	}
	b.Done()
	if term.lines != 0 {
		t.Errorf("the bar took %d lines beyond its own", term.lines)
	}
	if !strings.HasSuffix(term.buf.String(), eraseLine) {
		t.Errorf("not cleared: %q", term.buf.String())
	}
	// A width source that fails keeps the last good width.
	resize(0)
	b2 := NewProgressBar(&bytes.Buffer{}, label, ProgressOptions{Now: clock.Now, Width: 50, WidthSource: widthNow})
	if n := utf8.RuneCountInString(b2.Line()); n > 49 {
		t.Errorf("with no width from the source, a line of %d columns", n)
	}
}

// The estimate counts down while the current step runs, and gives way to
// the elapsed time alone once the step outlasts the mean: a long last
// check does not make it drift.
func TestProgressBarETAIsHonest(t *testing.T) {
	clock := newClock()
	b := NewProgressBar(&bytes.Buffer{}, "suite", ProgressOptions{Now: clock.Now})
	for i := 1; i <= 8; i++ {
		clock.Advance(10 * time.Second)
		b.Update(i, 9)
	}
	if got := b.Line(); !strings.HasSuffix(got, "1:20 elapsed, ETA 0:10") {
		t.Errorf("after 8 of 9 steps of 10 s: %q", got)
	}
	clock.Advance(6 * time.Second)
	if got := b.Line(); !strings.HasSuffix(got, "1:26 elapsed, ETA 0:04") {
		t.Errorf("6 s into the last step: %q", got)
	}
	for _, d := range []time.Duration{5 * time.Second, time.Minute, time.Hour} {
		clock.Advance(d)
		if got := b.Line(); strings.Contains(got, "ETA") || !strings.HasSuffix(got, " elapsed") {
			t.Errorf("the last step has outlasted the mean: %q", got)
		}
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
	if n := strings.Count(out.String(), eraseLine); n != 1 {
		t.Errorf("%d draws within 50ms, want 1:\n%q", n, out.String())
	}
	clock.Advance(ProgressInterval)
	b.Update(51, 100)
	if n := strings.Count(out.String(), eraseLine); n != 2 {
		t.Errorf("%d draws after an interval passed, want 2", n)
	}
	if !strings.Contains(out.String(), "work 51/100") {
		t.Errorf("the redraw does not show the latest count:\n%q", out.String())
	}
	b.Done()
	if !strings.HasSuffix(out.String(), eraseLine) {
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
	if !strings.HasSuffix(w.buf.String(), eraseLine) {
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
