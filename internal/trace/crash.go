package trace

import (
	"context"
	"errors"
	"fmt"
	"net"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"syscall"
	"time"

	"miotool/internal/childproc"
)

// Environment variables the crash handler reads.
const (
	// EnvCrashSocket installs the observer's crash handler and names the
	// socket its records go to.
	EnvCrashSocket = "MIOTOOL_CRASH_SOCKET"
	// EnvCrashRun is the run token every process of a run inherits and its
	// crash records carry.
	EnvCrashRun = "MIOTOOL_CRASH_RUN"
)

// Crash is one crash a process of a run reported, symbolized.
type Crash struct {
	PID, TID   int
	Time       int64 // CLOCK_MONOTONIC nanoseconds
	Signal     int
	SignalName string // "SIGSEGV"
	Code       int    // si_code: > 0 raised by the kernel (a fault), <= 0 sent (kill, raise, abort)
	Addr       uint64 // the faulting address of SIGSEGV, SIGBUS, SIGILL and SIGFPE
	ThreadName string // the thread's OS name
	// Callers, innermost first: every frame, libc's and the runtime's
	// included (the signal trampoline, abort), the observer's own handler
	// excluded.
	Callers []Frame
	Omitted int
	// Python is the crashing thread's Python stack, read by the
	// signal-safe paths only.
	Python PyStack
}

// CrashWatch collects the crash records of many runs: each run's
// processes get Env(run) and report to one socket; Crashes(run) gives a
// run's, once the run has ended.
//
// A crash record says that a process received a fatal signal and what it
// was doing; it is sent before the program's own handler runs, so a
// program that handles the signal and lives on has a record too. The
// run's exit status says how it ended.
type CrashWatch struct {
	observer string
	dir      string
	path     string
	conn     *net.UnixConn
	symbols  *Symbolizer
	done     chan struct{}

	mu      sync.Mutex
	crashes map[string][]Crash
	marks   map[string]chan struct{}
	bad     int
}

// WatchCrashes builds (or takes from the cache) the observer and opens the
// socket crash records arrive on. observer "" means Build's; a given one
// is checked first (CheckObserver). An error of type *NoCompilerError says
// no compiler, one of type *ObserverError a given library that is not the
// observer.
func WatchCrashes(ctx context.Context, observer string) (*CrashWatch, error) {
	if observer == "" {
		var err error
		if observer, err = Build(ctx, BuildOptions{}); err != nil {
			return nil, err
		}
	} else if err := CheckObserver(observer); err != nil {
		return nil, err
	}
	abs, err := filepath.Abs(observer)
	if err != nil {
		return nil, err
	}
	dir, err := os.MkdirTemp("", "miotool-crash-")
	if err == nil && len(dir)+len("/crash") >= 108 {
		os.RemoveAll(dir)
		dir, err = os.MkdirTemp("/tmp", "miotool-crash-")
	}
	if err != nil {
		return nil, fmt.Errorf("crash socket: %w", err)
	}
	if strings.ContainsAny(abs, " :") {
		// LD_PRELOAD splits at spaces and colons.
		link := filepath.Join(dir, ObserverLibrary)
		if err := os.Symlink(abs, link); err != nil {
			os.RemoveAll(dir)
			return nil, err
		}
		abs = link
	}
	w := &CrashWatch{observer: abs, dir: dir, path: filepath.Join(dir, "crash"), symbols: NewSymbolizer(),
		done: make(chan struct{}), crashes: map[string][]Crash{}, marks: map[string]chan struct{}{}}
	w.conn, err = net.ListenUnixgram("unixgram", &net.UnixAddr{Name: w.path, Net: "unixgram"})
	if err != nil {
		os.RemoveAll(dir)
		return nil, fmt.Errorf("crash socket: %w", err)
	}
	_ = w.conn.SetReadBuffer(4 << 20)
	go w.read()
	return w, nil
}

// Env is what run `run` adds to its environment so that its processes,
// and every process they start, report a crash: LD_PRELOAD with the
// observer first and this process's own LD_PRELOAD after it (EnvFor keeps
// another environment's), the socket, the run token. It asks for the
// crash handler only: no trace records, no CUPTI subscription.
func (w *CrashWatch) Env(run string) []string {
	env := os.Environ()
	return w.EnvFor(env, run)[len(env):]
}

// EnvFor is env with Env(run)'s settings, its own LD_PRELOAD kept after
// the observer.
func (w *CrashWatch) EnvFor(env []string, run string) []string {
	preload := w.observer
	for _, p := range strings.FieldsFunc(lookupEnv(env, "LD_PRELOAD"), func(r rune) bool { return r == ':' || r == ' ' }) {
		if p != w.observer {
			preload += ":" + p
		}
	}
	out := append([]string{}, env...)
	return append(out, "LD_PRELOAD="+preload, EnvCrashSocket+"="+w.path, EnvCrashRun+"="+run)
}

// Crashes returns, and forgets, the crashes reported by run's processes,
// in the order they arrived. Call it once the run's processes have ended:
// every record they sent before is read first.
func (w *CrashWatch) Crashes(run string) []Crash {
	w.sync()
	w.mu.Lock()
	defer w.mu.Unlock()
	out := w.crashes[run]
	delete(w.crashes, run)
	return out
}

// Malformed counts the datagrams that were no crash record.
func (w *CrashWatch) Malformed() int {
	w.mu.Lock()
	defer w.mu.Unlock()
	return w.bad
}

// sync waits until the reader has taken every datagram sent before it:
// the socket delivers in order, so a mark of its own coming back means
// the rest are in.
func (w *CrashWatch) sync() {
	token := randomToken()
	ch := make(chan struct{})
	w.mu.Lock()
	w.marks[token] = ch
	w.mu.Unlock()
	defer func() {
		w.mu.Lock()
		delete(w.marks, token)
		w.mu.Unlock()
	}()
	conn, err := net.DialUnix("unixgram", nil, &net.UnixAddr{Name: w.path, Net: "unixgram"})
	if err != nil {
		return
	}
	defer conn.Close()
	if _, err := conn.Write([]byte("MT1\t" + kindEOF + "\t0\t0\t0\t" + token + "\n")); err != nil {
		return
	}
	select {
	case <-ch:
	case <-w.done:
	case <-time.After(10 * time.Second):
	}
}

func (w *CrashWatch) read() {
	defer close(w.done)
	buf := make([]byte, 1<<16)
	for {
		n, err := w.conn.Read(buf)
		if err != nil {
			return
		}
		for _, line := range strings.Split(strings.TrimRight(string(buf[:n]), "\n"), "\n") {
			w.take(line)
		}
	}
}

func (w *CrashWatch) take(line string) {
	e, err := ParseEvent([]byte(line))
	w.mu.Lock()
	defer w.mu.Unlock()
	switch {
	case err != nil:
		w.bad++
	case e.Kind == kindEOF:
		if ch, ok := w.marks[e.Text]; ok {
			close(ch)
			delete(w.marks, e.Text)
		}
	case e.Kind == kindCrash:
		w.crashes[e.Run] = append(w.crashes[e.Run], crashOf(e, w.symbols))
	}
}

func crashOf(e Event, symbols *Symbolizer) Crash {
	return Crash{PID: e.PID, TID: e.TID, Time: e.Time, Signal: e.Signal,
		SignalName: childproc.SignalName(syscall.Signal(e.Signal)), Code: e.SignalCode, Addr: e.Addr,
		ThreadName: e.ThreadName, Callers: symbols.Frames(e.Callers), Omitted: e.Omitted, Python: e.Python}
}

// Close stops watching and removes the socket.
func (w *CrashWatch) Close() error {
	err := w.conn.Close()
	<-w.done
	if rerr := os.RemoveAll(w.dir); rerr != nil && err == nil {
		err = rerr
	}
	if errors.Is(err, net.ErrClosed) {
		err = nil
	}
	return err
}
