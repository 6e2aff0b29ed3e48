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
// It is redrawn at most once per interval and cleared by Done. All methods
// are safe for concurrent use, and do nothing on a nil bar.
type ProgressBar struct {
	mu       sync.Mutex
	w        io.Writer
	label    string
	done     int
	total    int
	start    time.Time
	lastDraw time.Time
	drawn    bool
	finished bool
	opts     ProgressOptions
	stop     chan struct{}
	stopped  chan struct{}
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
	b := &ProgressBar{w: w, label: label, opts: opts, start: opts.Now()}
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
	if b.stop != nil {
		close(b.stop)
		<-b.stopped
	}
	b.mu.Lock()
	defer b.mu.Unlock()
	if b.drawn {
		fmt.Fprint(b.w, "\r\x1b[K")
	}
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
	fmt.Fprint(b.w, "\r"+b.lineLocked(now)+"\x1b[K")
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

// barCells is the width of the bar itself.
const barCells = 20

func (b *ProgressBar) lineLocked(now time.Time) string {
	elapsed := now.Sub(b.start)
	var tail string
	if b.total > 0 {
		done := min(max(b.done, 0), b.total)
		filled := done * barCells / b.total
		bar := strings.Repeat("=", filled)
		if filled < barCells {
			bar += ">" + strings.Repeat(" ", barCells-filled-1)
		}
		eta := "--:--"
		if done > 0 {
			eta = clock(time.Duration(float64(elapsed) * float64(b.total-done) / float64(done)))
		}
		tail = fmt.Sprintf(" %d/%d [%s] %s elapsed, ETA %s", done, b.total, bar, clock(elapsed), eta)
	} else {
		tail = fmt.Sprintf(" %d, %s elapsed", b.done, clock(elapsed))
	}
	// The label gives way when the line would wrap, which would break the
	// carriage-return redraw.
	label := b.label
	room := b.opts.Width - 1 - utf8.RuneCountInString(tail)
	if n := utf8.RuneCountInString(label); n > room {
		if room <= 1 {
			label = ""
		} else {
			label = string([]rune(label)[:room-1]) + "…"
		}
	}
	return label + tail
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
// does nothing) when stderr is not a terminal or --no-progress is set.
func (f *Factory) ProgressBar(label string) *ProgressBar {
	if f.Global.NoProgress || !f.IOStreams.IsStderrTTY() {
		return nil
	}
	width := 0
	if file, ok := f.IOStreams.ErrOut.(*os.File); ok {
		if w, _, err := term.GetSize(int(file.Fd())); err == nil {
			width = w
		}
	}
	return NewProgressBar(f.IOStreams.ErrOut, label, ProgressOptions{Width: width, Now: f.Now, Tick: true})
}
