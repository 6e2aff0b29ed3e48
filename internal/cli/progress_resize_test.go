package cli

import (
	"fmt"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"
)

// screen is a terminal emulator just large enough for the progress bar: it
// prints text with auto-wrap at its width and understands "\r", "\n" (as
// the tty sends it, a carriage return and a line feed), CSI K (erase to
// the end of the row) and CSI J (erase to the end of the screen). A resize
// either reflows its lines to the new width, as VTE, xterm.js, kitty,
// iTerm2 and tmux do, or cuts them at it, as xterm does.
type screen struct {
	mu     sync.Mutex
	t      *testing.T
	width  int
	reflow bool
	// lines are the logical lines: a line longer than the width takes
	// several rows. The cursor is a line and an offset in it; pending is
	// the wrap pending after a character written in the last column.
	lines   [][]rune
	line    int
	off     int
	pending bool
}

func newScreen(t *testing.T, width int, reflow bool) *screen {
	return &screen{t: t, width: width, reflow: reflow, lines: [][]rune{nil}}
}

// Width is the terminal's width now, for the bar's WidthSource.
func (s *screen) Width() int {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.width
}

func (s *screen) Write(p []byte) (int, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	text := string(p)
	for len(text) > 0 {
		switch {
		case strings.HasPrefix(text, "\x1b[K"):
			s.eraseRow()
			text = text[3:]
		case strings.HasPrefix(text, "\x1b[J"):
			if l := s.lines[s.line]; s.off < len(l) {
				s.lines[s.line] = l[:s.off]
			}
			s.lines = s.lines[:s.line+1]
			text = text[3:]
		case strings.HasPrefix(text, "\x1b"):
			s.t.Errorf("an escape sequence the bar does not use: %q", text)
			return len(p), nil
		case text[0] == '\r':
			s.off, s.pending = s.rowStart(), false
			text = text[1:]
		case text[0] == '\n':
			s.off, s.pending = s.rowStart()+s.width, false
			if s.off >= len(s.lines[s.line]) {
				s.line, s.off = s.line+1, 0
				if s.line == len(s.lines) {
					s.lines = append(s.lines, nil)
				}
			}
			text = text[1:]
		default:
			r := []rune(text)[0]
			s.put(r)
			text = text[len(string(r)):]
		}
	}
	return len(p), nil
}

// rowStart is the offset of the first column of the cursor's row.
func (s *screen) rowStart() int {
	if s.pending {
		return (s.off - 1) / s.width * s.width
	}
	return s.off / s.width * s.width
}

func (s *screen) put(r rune) {
	l := s.lines[s.line]
	for len(l) < s.off {
		l = append(l, ' ')
	}
	if s.off == len(l) {
		l = append(l, r)
	} else {
		l[s.off] = r
	}
	s.lines[s.line] = l
	s.off++
	s.pending = s.off%s.width == 0
}

// eraseRow erases from the cursor to the end of its row.
func (s *screen) eraseRow() {
	l := s.lines[s.line]
	end := s.rowStart() + s.width
	if s.off >= len(l) {
		return
	}
	if end >= len(l) {
		s.lines[s.line] = l[:s.off]
		return
	}
	for i := s.off; i < end; i++ {
		l[i] = ' '
	}
}

// Resize changes the width: the lines reflow to it, or are cut into the
// rows they had and each cut at it.
func (s *screen) Resize(width int) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if !s.reflow {
		var rows [][]rune
		line, off := 0, 0
		for i, l := range s.lines {
			start := len(rows)
			for len(l) > s.width {
				rows = append(rows, l[:s.width])
				l = l[s.width:]
			}
			rows = append(rows, l)
			if i == s.line {
				line = start + s.rowStart()/s.width
				off = min(s.off-s.rowStart(), width-1)
			}
		}
		for i, r := range rows {
			rows[i] = r[:min(len(r), width)]
		}
		s.lines, s.line, s.off = rows, line, off
	}
	s.width, s.pending = width, false
}

// Rows is what the screen shows, row by row, trailing blanks dropped, and
// the empty rows at the end too.
func (s *screen) Rows() []string {
	s.mu.Lock()
	defer s.mu.Unlock()
	var rows []string
	for _, l := range s.lines {
		for {
			n := min(len(l), s.width)
			rows = append(rows, strings.TrimRight(string(l[:n]), " "))
			l = l[n:]
			if len(l) == 0 {
				break
			}
		}
	}
	for len(rows) > 0 && rows[len(rows)-1] == "" {
		rows = rows[:len(rows)-1]
	}
	return rows
}

// The terminal narrows while the bar is on it, once or twice, with or
// without a SIGWINCH the bar sees, and at the very end: what stays on the
// screen is what was there before the bar and the result, on a terminal
// that reflows the bar's line and on one that cuts it. Every user of the
// bar (capture, replay, stress-threads, report --suite) draws it through
// Factory.ProgressBar, that is NewProgressBar.
func TestProgressBarLeavesNoFragmentWhenTheTerminalNarrows(t *testing.T) {
	label := "replay: policy worker [GPU_MAX_HW_QUEUES=3, MIOPEN_NAIVE_TIMEOUT=300]"
	for _, reflow := range []bool{true, false} {
		for _, tt := range []struct {
			name string
			// widths are the terminal's widths, one per step; a step
			// resizes, tells the bar when winch is set, then draws.
			widths []int
			winch  bool
			// last is the width the terminal takes just before Done.
			last int
		}{
			{"narrower, with SIGWINCH", []int{120, 50, 50}, true, 0},
			{"narrower, no SIGWINCH", []int{120, 50, 50}, false, 0},
			{"narrower twice between two draws", []int{120, 60, 25}, false, 0},
			{"wider, then narrower", []int{60, 140, 33}, true, 0},
			{"narrower just before the end", []int{120, 120}, false, 31},
			{"down to a few columns", []int{100, 10, 100}, true, 10},
		} {
			t.Run(fmt.Sprintf("reflow=%v/%s", reflow, tt.name), func(t *testing.T) {
				scr := newScreen(t, tt.widths[0], reflow)
				fmt.Fprint(scr, "$ miotool\n")
				clock := newClock()
				b := NewProgressBar(scr, label, ProgressOptions{Now: clock.Now, WidthSource: scr.Width})
				for i, w := range tt.widths {
					if w != scr.Width() {
						scr.Resize(w)
						if tt.winch {
							b.Resized()
						}
					}
					clock.Advance(ProgressInterval + time.Second)
					b.Update(i+1, 8)
					if rows := scr.Rows(); len(rows) != 2 || rows[1] != strings.TrimRight(b.Line(), " ") {
						t.Fatalf("at %d columns, after a draw, the screen shows %q, not the command and the bar", w, rows)
					}
				}
				if tt.last != 0 {
					scr.Resize(tt.last)
				}
				b.Done()
				fmt.Fprint(scr, "all: PASS\n")
				want := []string{"$ miotool", "all: PASS"}
				if got := scr.Rows(); !slices.Equal(got, want) {
					t.Errorf("the screen after the result:\n%s\nwant:\n%s", strings.Join(got, "\n"), strings.Join(want, "\n"))
				}
			})
		}
	}
}

// The emulator itself: a line longer than the width wraps; a reflowing
// narrower terminal moves the cursor to the row the offset falls in,
// where CSI K erases only that row; a cutting one keeps the cursor in its
// row.
func TestScreenEmulator(t *testing.T) {
	scr := newScreen(t, 10, true)
	fmt.Fprint(scr, "0123456789abcde")
	if got := scr.Rows(); !slices.Equal(got, []string{"0123456789", "abcde"}) {
		t.Fatalf("wrap: %q", got)
	}
	scr.Resize(5)
	fmt.Fprint(scr, "\r\x1b[KX")
	if got := scr.Rows(); !slices.Equal(got, []string{"01234", "56789", "abcde", "X"}) {
		t.Fatalf("reflow, then a carriage return and CSI K at the end of the text: %q", got)
	}
	cut := newScreen(t, 10, false)
	fmt.Fprint(cut, "top\n0123456")
	cut.Resize(4)
	fmt.Fprint(cut, "\r\x1b[JX")
	if got := cut.Rows(); !slices.Equal(got, []string{"top", "X"}) {
		t.Fatalf("cut, then a carriage return and CSI J: %q", got)
	}
}

// A line written above the bar takes the bar's place, whole, and the bar
// is drawn again below it; with no bar drawn, the line is written alone.
func TestALineAboveTheBar(t *testing.T) {
	scr := newScreen(t, 80, true)
	fmt.Fprint(scr, "$ miotool\n")
	clock := newClock()
	b := NewProgressBar(scr, "find:", ProgressOptions{Now: clock.Now, WidthSource: scr.Width})
	b.Above(scr, "before the bar")
	b.Update(1, 0)
	scr.Resize(12)
	b.Above(scr, "miotool: warning: the find-db is locked")
	// The 12-column terminal wraps every long line.
	want := []string{"$ miotool", "before the b", "ar", "miotool: war", "ning: the fi", "nd-db is loc", "ked", strings.TrimRight(b.Line(), " ")}
	if got := scr.Rows(); !slices.Equal(got, want) {
		t.Errorf("screen %q, want %q", got, want)
	}
	b.Done()
	b.Above(scr, "after")
	var none *ProgressBar
	none.Above(scr, "no bar")
	if got := scr.Rows(); !slices.Equal(got, append(want[:7:7], "after", "no bar")) {
		t.Errorf("screen %q", got)
	}
}
