package cli

import (
	"fmt"
	"io"
	"os"
	"strings"
	"sync"
	"time"
	"unicode/utf8"

	"golang.org/x/term"
)

// ProgressInterval is the shortest time between two redraws of a bar.
const ProgressInterval = 100 * time.Millisecond

// ProgressOptions tune a ProgressBar.
type ProgressOptions struct {
	// Width is the terminal's width in columns; 0 means 80.
	Width int
	// WidthSource, when set, is asked for the width before every redraw,
	// so that the bar follows a terminal that is resized; a value below 1
	// keeps the last good one (Width until then).
	WidthSource func() int
	// Now is the clock; nil means time.Now.
	Now func() time.Time
	// Interval is the shortest time between redraws; 0 means
	// ProgressInterval.
	Interval time.Duration
	// Tick redraws the bar every Interval from a goroutine of its own, so
	// that elapsed time and ETA move while no update arrives.
	Tick bool
}

// ProgressBar is one status line on a terminal: a label, done/total, a
// bar, the elapsed time and an estimate of the time left:
//
//	capture: case 3/8 [=======>            ] 0:12 elapsed, ETA 0:20
//
// It is redrawn at most once per interval and cleared by Done. The line is
// never wider than the terminal less one column (read before every
// redraw, and at once on SIGWINCH), so that it never wraps: on a narrow
// terminal the label gives way first (to a few characters), then the bar
// narrows and goes, then the words, the estimate and the elapsed time,
// down to the count.
//
// A terminal that narrows while the line is on it wraps the line to the
// new width (most reflow it: VTE, xterm.js, kitty, iTerm2, tmux), so that
// it then takes more than one row, and erasing the cursor's row alone
// would leave the rest above what comes next. So the bar keeps the cursor
// at the start of its line, where a reflow keeps it too (each draw ends
// with a carriage return), and every redraw and the final clear erase
// from there to the end of the screen (CSI J): every row the old line
// occupies now, at any old and new width, and nothing above it, on a
// terminal that cuts lines instead of wrapping them too.
//
// The estimate is the mean time of the steps done times the steps left,
// less what the current step has taken so far. It is shown only while it
// is honest: once a step is done and until the current step outlasts the
// mean; otherwise the bar says the elapsed time alone.
//
// All methods are safe for concurrent use, and do nothing on a nil bar.
type ProgressBar struct {
	mu       sync.Mutex
	w        io.Writer
	label    string
	done     int
	total    int
	start    time.Time
	doneAt   time.Time // when done last changed
	width    int       // the last good width
	lastDraw time.Time
	drawn    bool
	finished bool
	opts     ProgressOptions
	stop     chan struct{}
	stopped  chan struct{}
	// onDone runs once when the bar is done: it stops the resize watch.
	onDone func()
}

// NewProgressBar starts a bar that draws on w.
func NewProgressBar(w io.Writer, label string, opts ProgressOptions) *ProgressBar {
	if opts.Width <= 0 {
		opts.Width = 80
	}
	if opts.Now == nil {
		opts.Now = time.Now
	}
	if opts.Interval <= 0 {
		opts.Interval = ProgressInterval
	}
	b := &ProgressBar{w: w, label: label, opts: opts, start: opts.Now(), width: opts.Width}
	b.doneAt = b.start
	if opts.Tick {
		b.stop, b.stopped = make(chan struct{}), make(chan struct{})
		go b.tick()
	}
	return b
}

func (b *ProgressBar) tick() {
	defer close(b.stopped)
	t := time.NewTicker(b.opts.Interval)
	defer t.Stop()
	for {
		select {
		case <-b.stop:
			return
		case <-t.C:
			b.mu.Lock()
			if b.drawn || b.done > 0 || b.total > 0 {
				b.drawLocked()
			}
			b.mu.Unlock()
		}
	}
}

// Update sets how much is done out of total; a total of 0 means unknown
// (the bar then shows the count and elapsed time only).
func (b *ProgressBar) Update(done, total int) {
	if b == nil {
		return
	}
	b.mu.Lock()
	defer b.mu.Unlock()
	if done != b.done {
		b.doneAt = b.opts.Now()
	}
	b.done, b.total = done, total
	b.drawLocked()
}

// SetLabel changes the text in front of the bar, e.g. to the current step.
func (b *ProgressBar) SetLabel(label string) {
	if b == nil {
		return
	}
	b.mu.Lock()
	defer b.mu.Unlock()
	b.label = label
}

// Resized redraws a bar already on screen at once, at the width its
// source gives now; the terminal's SIGWINCH calls it.
func (b *ProgressBar) Resized() {
	if b == nil {
		return
	}
	b.mu.Lock()
	defer b.mu.Unlock()
	if b.drawn {
		b.lastDraw = time.Time{}
		b.drawLocked()
	}
}

// Done stops the bar and clears its line. Later calls do nothing.
func (b *ProgressBar) Done() {
	if b == nil {
		return
	}
	b.mu.Lock()
	if b.finished {
		b.mu.Unlock()
		return
	}
	b.finished = true
	b.mu.Unlock()
	if b.onDone != nil {
		b.onDone()
	}
	if b.stop != nil {
		close(b.stop)
		<-b.stopped
	}
	b.mu.Lock()
	defer b.mu.Unlock()
	if b.drawn {
		fmt.Fprint(b.w, eraseLine)
	}
}

// eraseLine erases the bar's line from its start, where the cursor is, to
// the end of the screen: every row the line takes, whatever the terminal's
// width is now and was when it was drawn.
const eraseLine = "\r\x1b[J"

// Above writes line and a line break to w above the bar: when the bar is
// drawn on w, it erases the bar first and draws it again below the line at
// once, so that the line is never mixed with the bar. On a nil bar, one
// not drawn yet or one on another writer, it writes the line alone.
func (b *ProgressBar) Above(w io.Writer, line string) {
	if b == nil {
		fmt.Fprintln(w, line)
		return
	}
	b.mu.Lock()
	defer b.mu.Unlock()
	if !b.drawn || b.finished || w != b.w {
		fmt.Fprintln(w, line)
		return
	}
	fmt.Fprint(b.w, eraseLine+line+"\n")
	b.lastDraw = time.Time{}
	b.drawLocked()
}

// drawLocked redraws unless the last draw was less than an interval ago.
func (b *ProgressBar) drawLocked() {
	if b.finished {
		return
	}
	now := b.opts.Now()
	if b.drawn && now.Sub(b.lastDraw) < b.opts.Interval {
		return
	}
	b.lastDraw, b.drawn = now, true
	fmt.Fprint(b.w, eraseLine+b.lineLocked(now)+"\r")
}

// Line is the text the bar would draw now (tests and logs).
func (b *ProgressBar) Line() string {
	if b == nil {
		return ""
	}
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.lineLocked(b.opts.Now())
}

// widthLocked is the terminal's width now: the source's, else the last
// good one.
func (b *ProgressBar) widthLocked() int {
	if b.opts.WidthSource != nil {
		if w := b.opts.WidthSource(); w > 0 {
			b.width = w
		}
	}
	return b.width
}

// barCells is the width of the bar itself, at its widest.
const barCells = 20

// minLabel is how much of the label the bar keeps before its own parts
// give way.
const minLabel = 12

func (b *ProgressBar) lineLocked(now time.Time) string {
	room := b.widthLocked() - 1 // the last column wraps on some terminals
	label := strings.Map(func(r rune) rune {
		if r < 0x20 || r == 0x7f {
			return ' ' // a line break would make the redraw two lines
		}
		return r
	}, b.label)
	keep := min(utf8.RuneCountInString(label), minLabel)
	tails := b.tailsLocked(now)
	for i, tail := range tails {
		left := room - utf8.RuneCountInString(tail)
		if left >= keep || i == len(tails)-1 {
			if left < 4 {
				left = 0 // a label of a letter or two says nothing
			}
			return fit(label, left) + fit(tail, room)
		}
	}
	return ""
}

// tailsLocked are the parts after the label, longest first: count, bar,
// elapsed time and estimate, then fewer words, a shorter bar, no bar, no
// estimate, down to the count alone.
func (b *ProgressBar) tailsLocked(now time.Time) []string {
	elapsed := clock(now.Sub(b.start))
	if b.total <= 0 {
		return []string{fmt.Sprintf(" %d, %s elapsed", b.done, elapsed), fmt.Sprintf(" %d, %s", b.done, elapsed), fmt.Sprintf(" %d", b.done)}
	}
	done := min(max(b.done, 0), b.total)
	count := fmt.Sprintf(" %d/%d", done, b.total)
	eta, honest := b.etaLocked(now, done)
	bar := func(cells int) string {
		filled := done * cells / b.total
		s := strings.Repeat("=", filled)
		if filled < cells {
			s += ">" + strings.Repeat(" ", cells-filled-1)
		}
		return " [" + s + "]"
	}
	// The words go first, then the bar narrows and goes, then the
	// estimate, then the elapsed time.
	var tails []string
	if honest {
		tails = append(tails, count+bar(barCells)+" "+elapsed+" elapsed, ETA "+eta)
		for _, part := range []string{count + bar(barCells), count + bar(barCells/2), count} {
			tails = append(tails, part+" "+elapsed+", ETA "+eta)
		}
	} else {
		tails = append(tails, count+bar(barCells)+" "+elapsed+" elapsed")
	}
	for _, part := range []string{count + bar(barCells), count + bar(barCells/2), count} {
		tails = append(tails, part+" "+elapsed)
	}
	return append(tails, count)
}

// etaLocked is the time left: the mean time of the done steps times the
// steps left, less what the current step has taken so far. It is not
// honest (false) before a step is done, once all are, or once the current
// step has run longer than the mean.
func (b *ProgressBar) etaLocked(now time.Time, done int) (string, bool) {
	if done <= 0 || done >= b.total {
		return "", false
	}
	mean := b.doneAt.Sub(b.start) / time.Duration(done)
	running := now.Sub(b.doneAt)
	if running > mean {
		return "", false
	}
	return clock(mean*time.Duration(b.total-done) - running), true
}

// fit is s cut to n columns, "…" where it was cut; "" when n < 2.
func fit(s string, n int) string {
	switch c := utf8.RuneCountInString(s); {
	case c <= n:
		return s
	case n < 2:
		return ""
	}
	return string([]rune(s)[:n-1]) + "…"
}

// clock prints a duration as m:ss, or h:mm:ss from an hour on.
func clock(d time.Duration) string {
	s := int(d.Round(time.Second) / time.Second)
	if s >= 3600 {
		return fmt.Sprintf("%d:%02d:%02d", s/3600, s/60%60, s%60)
	}
	return fmt.Sprintf("%d:%02d", s/60, s%60)
}

// ProgressBar returns a bar on stderr for long work, or nil (a bar that
// does nothing) when stderr is not a terminal or --no-progress is set. It
// reads the terminal's width before every redraw and redraws on SIGWINCH.
func (f *Factory) ProgressBar(label string) *ProgressBar {
	if f.Global.NoProgress || !f.IOStreams.IsStderrTTY() {
		return nil
	}
	opts := ProgressOptions{Now: f.Now, Tick: true}
	file, isFile := f.IOStreams.ErrOut.(*os.File)
	if isFile {
		opts.WidthSource = func() int {
			w, _, err := term.GetSize(int(file.Fd()))
			if err != nil {
				return 0
			}
			return w
		}
	}
	b := NewProgressBar(f.IOStreams.ErrOut, label, opts)
	if isFile {
		b.onDone = watchResize(b.Resized)
	}
	return b
}
