package childproc

import (
	"io"
	"os"
	"os/exec"
	"sync"
	"time"
)

// stream is one of the child's standard streams: a file it is given as
// it is, or a pipe this process copies through.
type stream struct {
	child  *os.File      // the child's: nil gives it the null device
	mine   *os.File      // this process's end of a pipe; nil when the child has a file of the caller's
	copied chan struct{} // closed when the copy has ended
	tail   *tail         // a captured output's kept end
	last   *lastByte     // a copied output's last byte
}

// streams are the child's three standard streams.
type streams struct{ in, out, err *stream }

func openStreams(s Spec, keep int) (*streams, error) {
	in, err := inputStream(s.Stdin)
	if err != nil {
		return nil, err
	}
	out, err := outputStream(s.Stdout, keep)
	if err != nil {
		in.abort()
		return nil, err
	}
	errOut, err := outputStream(s.Stderr, keep)
	if err != nil {
		in.abort()
		out.abort()
		return nil, err
	}
	return &streams{in, out, errOut}, nil
}

func inputStream(r io.Reader) (*stream, error) {
	if r == nil {
		return &stream{}, nil
	}
	if f, ok := r.(*os.File); ok && f != nil {
		return &stream{child: f}, nil
	}
	pr, pw, err := os.Pipe()
	if err != nil {
		return nil, err
	}
	s := &stream{child: pr, mine: pw, copied: make(chan struct{})}
	go func() {
		defer close(s.copied)
		_, _ = io.Copy(pw, r)
		_ = pw.Close() // the end of the input, for the child
	}()
	return s, nil
}

func outputStream(w io.Writer, keep int) (*stream, error) {
	if f, ok := w.(*os.File); ok && f != nil {
		return &stream{child: f}, nil
	}
	pr, pw, err := os.Pipe()
	if err != nil {
		return nil, err
	}
	s := &stream{child: pw, mine: pr, copied: make(chan struct{})}
	var dst io.Writer
	if w == nil {
		s.tail = &tail{keep: keep}
		dst = s.tail
	} else {
		s.last = &lastByte{w: w}
		dst = s.last
	}
	go func() {
		defer close(s.copied)
		_, _ = io.Copy(dst, pr)
		// A writer that failed is a reader that has gone: the child's
		// next write gets EPIPE, as it would from a pipe of its own.
		_ = pr.Close()
	}()
	return s, nil
}

// attach gives the streams to cmd.
func (s *streams) attach(cmd *exec.Cmd) {
	if s.in.child != nil {
		cmd.Stdin = s.in.child
	}
	cmd.Stdout, cmd.Stderr = s.out.child, s.err.child
}

// started closes the child's ends of the pipes: it has its own copies.
func (s *streams) started() {
	for _, st := range []*stream{s.in, s.out, s.err} {
		if st.mine != nil {
			_ = st.child.Close()
		}
	}
}

// abort undoes openStreams for a child that did not start.
func (s *streams) abort() {
	s.started()
	s.in.abort()
	s.out.abort()
	s.err.abort()
}

func (st *stream) abort() {
	if st.mine == nil {
		return
	}
	_ = st.mine.Close()
	if st.tail != nil || st.last != nil {
		<-st.copied // an output's copy ends with its closed pipe
	}
}

// finish ends the input's copy (the child is gone: nobody reads what is
// left) and waits, until deadline, for the outputs' copies to drain. It
// says whether an output pipe was still held at the deadline; its copy is
// then cut there.
func (s *streams) finish(deadline time.Time) (held bool) {
	timer := time.NewTimer(time.Until(deadline))
	defer timer.Stop()
	if s.in.mine != nil {
		_ = s.in.mine.Close()
		select {
		case <-s.in.copied:
		case <-timer.C:
			// A reader that blocks for ever: its copy is left to end
			// with it.
			timer.Reset(0)
		}
	}
	for _, st := range []*stream{s.out, s.err} {
		if st.mine == nil {
			continue
		}
		select {
		case <-st.copied:
		case <-timer.C:
			held = true
			timer.Reset(0) // the other stream gets no more time
			_ = st.mine.Close()
			<-st.copied
		}
		_ = st.mine.Close()
	}
	return held
}

// results are the captured outputs, and where the child left its
// standard output.
func (s *streams) results() (stdout, stderr Output, end LineEnd) {
	if s.out.tail != nil {
		stdout = s.out.tail.output()
	}
	if s.err.tail != nil {
		stderr = s.err.tail.output()
	}
	switch {
	case s.out.tail != nil:
		end = lineEndOf(s.out.tail.lastByte())
	case s.out.last != nil:
		end = lineEndOf(s.out.last.b, s.out.last.wrote)
	default:
		end = fileLineEnd(s.out.child)
	}
	return stdout, stderr, end
}

func lineEndOf(b byte, wrote bool) LineEnd {
	if !wrote || b == '\n' {
		return LineStart
	}
	return LineOpen
}

// lastByte passes writes on to w and keeps the last byte written. Only the
// copy writes to it; it is read once the copy has ended.
type lastByte struct {
	w     io.Writer
	b     byte
	wrote bool
}

func (l *lastByte) Write(p []byte) (int, error) {
	n, err := l.w.Write(p)
	if n > 0 {
		l.b, l.wrote = p[n-1], true
	}
	return n, err
}

// tail keeps the last keep bytes written to it.
type tail struct {
	mu    sync.Mutex
	keep  int
	buf   []byte
	start int // buf[start:] is kept
	cut   int64
}

func (t *tail) Write(p []byte) (int, error) {
	t.mu.Lock()
	defer t.mu.Unlock()
	n := len(p)
	if len(p) >= t.keep {
		t.cut += int64(len(t.buf)-t.start) + int64(len(p)-t.keep)
		t.buf, t.start = append(t.buf[:0], p[len(p)-t.keep:]...), 0
		return n, nil
	}
	t.buf = append(t.buf, p...)
	if over := len(t.buf) - t.start - t.keep; over > 0 {
		t.start += over
		t.cut += int64(over)
	}
	// Move the kept bytes down once the dropped ones outweigh them, so a
	// long stream costs amortized constant time per byte.
	if t.start > t.keep {
		t.buf, t.start = append(t.buf[:0], t.buf[t.start:]...), 0
	}
	return n, nil
}

func (t *tail) output() Output {
	t.mu.Lock()
	defer t.mu.Unlock()
	d := append([]byte(nil), t.buf[t.start:]...)
	if t.cut > 0 {
		d = afterFirstLine(d)
	}
	return Output{Data: d, Cut: t.cut + int64(len(t.buf)-t.start-len(d))}
}

// lastByte is the last byte written, and whether any was.
func (t *tail) lastByte() (byte, bool) {
	t.mu.Lock()
	defer t.mu.Unlock()
	if len(t.buf) == t.start {
		return 0, false
	}
	return t.buf[len(t.buf)-1], true
}

// afterFirstLine drops d's first, partial, line when d has another.
func afterFirstLine(d []byte) []byte {
	for i, c := range d {
		if c == '\n' && i+1 < len(d) {
			return d[i+1:]
		}
	}
	return d
}
