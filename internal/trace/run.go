// Package trace runs a program with an observer of its GPU runtime calls
// and judges each stream capture it made: which call, on which thread and
// from which library, broke it, and which calls only a relaxed mode let
// through. The observer is a small C library (observer/), built on first
// use: a CUPTI injection library for CUDA (CUDA_INJECTION64_PATH) and an
// LD_PRELOAD interposer for HIP; it only reports, and this package does
// the analysis.
package trace

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"errors"
	"fmt"
	"io"
	"net"
	"os"
	"path/filepath"
	"strings"
	"syscall"
	"time"
)

// Environment variables the observer reads.
const (
	EnvSocket = "MIOTOOL_TRACE_SOCKET" // where to send records
	EnvCUPTI  = "MIOTOOL_TRACE_CUPTI"  // a libcupti to load when the program has none loaded
)

// DefaultGrace is how long an interrupted program has to exit after the
// forwarded signal before its group is killed.
const DefaultGrace = 5 * time.Second

// outputGrace bounds the wait, once the program has exited and its group
// has been killed, for what it left outside its group to end and for a
// copied output to drain.
const outputGrace = 2 * time.Second

// StdoutEnd says where the program left its standard output, so that what
// miotool writes there next can start a line of its own.
type StdoutEnd int

const (
	// StdoutAtLineStart: the program wrote nothing, or a newline last.
	// Read back from a regular file (the byte before where miotool writes
	// next), or seen by the copy of a writer that is no file.
	StdoutAtLineStart StdoutEnd = iota
	// StdoutMidLine: its last byte is not a newline.
	StdoutMidLine
	// StdoutPipe: a pipe, socket or device the program had as it is: what
	// it wrote cannot be read back without a copy in between, which would
	// change what the program sees.
	StdoutPipe
	// StdoutTerminal: a terminal the program had as it is: the cursor's
	// column cannot be read back either.
	StdoutTerminal
)

// NewlineFirst says whether miotool writes a newline before its result so
// that the result starts on a line of its own: when the program left its
// last line open, and when that cannot be known (a pipe or a terminal it
// wrote to itself), at the cost, there, of an empty line after a program
// whose last line was complete. On a regular file, or through a copy, it
// is exact.
func (e StdoutEnd) NewlineFirst() bool { return e != StdoutAtLineStart }

// Options say what to run and how.
type Options struct {
	// Program and its arguments; the program is looked up in $PATH
	// (of Env) when it has no slash.
	Program string
	Args    []string
	// Env is the program's environment, before the observer's variables
	// are added; nil means this process's.
	Env []string
	Dir string
	// The program's standard streams; nil means this process's own. A
	// file (a terminal, a pipe, a regular file) is given to the program as
	// it is, so that it sees what it would see without miotool: a terminal
	// is a terminal, and a pipe whose reader has gone gives it
	// SIGPIPE/EPIPE. Any other reader or writer is copied through a pipe.
	Stdin          io.Reader
	Stdout, Stderr io.Writer
	// Timeout is the watchdog: a program still running after it is killed
	// with its process group. Zero: none.
	Timeout time.Duration
	// Grace is how long an interrupted program may take to exit after the
	// forwarded signal (DefaultGrace when zero).
	Grace time.Duration
	// Observer is the observer library (Build makes one).
	Observer string
	// CUPTI is a libcupti for the observer to load when the program has
	// not loaded one; "" means FindCUPTI's.
	CUPTI string
	// Limits bound what is kept (DefaultLimits where zero).
	Limits Limits
	// Rules judge hazards; nil means BuiltinRules.
	Rules *RulesTables
	// InterruptSignal is the signal forwarded to the program's group when
	// ctx ends (SIGINT when nil or zero).
	InterruptSignal func() syscall.Signal
	// Started, when set, is told the program's process id (also its
	// process group's) once it runs.
	Started func(pid int)
	// Records, when set, gets every record the observer sent, as it came:
	// what Replay reads back.
	Records io.Writer

	// noGuard leaves out the watcher that kills the program's group when
	// miotool dies, so that a test can hold Pdeathsig alone.
	noGuard bool
	// leftover is the folder of the events socket, which the watcher
	// removes when miotool dies.
	leftover string
}

// UsageError is a program that cannot be run as given: a usage error.
type UsageError struct{ Err error }

func (e *UsageError) Error() string { return e.Err.Error() }
func (e *UsageError) Unwrap() error { return e.Err }

// Run starts the program with the observer, reads its events until it has
// ended, and returns what was seen. The program's own standard streams
// pass through untouched; it runs in a process group of its own, which is
// killed when it ends (no descendant outlives it), when the watchdog fires,
// and, on Linux, when miotool dies. When ctx ends, the group gets the
// interrupt signal, Grace to exit, then SIGKILL, and the result is
// marked interrupted. An error means the program could not be started or
// the trace could not be set up; a *UsageError is a program or observer
// that does not exist or cannot be executed.
func Run(ctx context.Context, o Options) (*Result, error) {
	if o.Rules == nil {
		// The shipped tables judge only what the program did: they are
		// read while it runs, not before it starts, where reading them
		// would add to every traced command's time.
		go func() { _, _ = BuiltinRules() }()
	}
	env := o.Env
	if env == nil {
		env = os.Environ()
	}
	path, err := LookProgram(o.Program, env, o.Dir)
	if err != nil {
		return nil, err
	}
	if err := CheckObserver(o.Observer); err != nil {
		return nil, &UsageError{err}
	}
	observer, err := filepath.Abs(o.Observer)
	if err != nil {
		return nil, err
	}

	sock, err := listen()
	if err != nil {
		return nil, err
	}
	defer sock.close()
	if strings.ContainsAny(observer, " :") {
		// LD_PRELOAD splits at spaces and colons: reach the library
		// through a link whose path has neither.
		link := filepath.Join(sock.dir, ObserverLibrary)
		if err := os.Symlink(observer, link); err != nil {
			return nil, err
		}
		observer = link
	}
	cupti := o.CUPTI
	if cupti == "" {
		cupti = FindCUPTI(env)
	}
	// The observer's variables: LD_PRELOAD and CUDA_INJECTION64_PATH
	// (a program's own injection library is chained, never dropped) and
	// the socket (an outer trace's kept beside it). The crash handler is
	// repeat's: a trace changes none of the program's signal handling.
	if env, err = ObserverEnv(env, observer, sock.path); err != nil {
		return nil, err
	}
	if cupti != "" {
		env = setEnv(env, EnvCUPTI, cupti)
	}

	symbols := NewSymbolizer()
	coll := newCollector(o.Limits, symbols.Frames)
	coll.tables = o.Rules
	token := randomToken()
	readDone := make(chan struct{})
	go func() {
		defer close(readDone)
		sock.read(coll, token, o.Records)
	}()

	o.leftover = sock.dir
	exit, err := runProgram(ctx, o, path, env)
	// Every record the program's processes sent before they ended is
	// queued before this marker; read up to it.
	sock.sendEOF(token)
	select {
	case <-readDone:
	case <-time.After(10 * time.Second):
		sock.conn.Close()
		<-readDone
	}
	if err != nil {
		return nil, err
	}
	if o.Rules == nil {
		if _, err := BuiltinRules(); err != nil {
			return nil, err
		}
	}
	r := coll.result()
	r.Program, r.Path, r.Args, r.Observer, r.Exit = o.Program, path, o.Args, observer, exit
	r.Executable = InspectProgram(path)
	return r, nil
}

func unwrapPath(err error) error {
	var pe *os.PathError
	if errors.As(err, &pe) {
		return pe.Err
	}
	return err
}

// LookProgram is the executable that Run would start for program, in
// environment env (nil: this process's) and folder dir, resolved as a
// shell would: a name with a slash as given (relative to dir), one without
// in env's $PATH. A program that is not there or cannot be executed is a
// *UsageError, said in one line.
func LookProgram(program string, env []string, dir string) (string, error) {
	if env == nil {
		env = os.Environ()
	}
	path, err := programPath(program, lookupEnv(env, "PATH"), dir)
	if err != nil {
		return "", &UsageError{err}
	}
	return path, nil
}

// programPath resolves the program as a shell would: a name with a slash
// as given (relative to dir), one without in path.
func programPath(program, path, dir string) (string, error) {
	if program == "" {
		return "", errors.New("no program given")
	}
	check := func(p string) error {
		st, err := os.Stat(p)
		switch {
		case err != nil:
			return unwrapPath(err)
		case st.IsDir():
			return errors.New("is a directory")
		case st.Mode().Perm()&0o111 == 0:
			return errors.New("permission denied (not executable)")
		}
		return nil
	}
	if strings.Contains(program, "/") {
		p := program
		if !filepath.IsAbs(p) && dir != "" {
			p = filepath.Join(dir, p)
		}
		if err := check(p); err != nil {
			return "", fmt.Errorf("program %s: %v", program, err)
		}
		return p, nil
	}
	if p := lookPath(program, path); p != "" {
		return p, nil
	}
	return "", fmt.Errorf("program %s: not found in $PATH", program)
}

func lookupEnv(env []string, key string) string {
	for i := len(env) - 1; i >= 0; i-- {
		if k, v, ok := strings.Cut(env[i], "="); ok && k == key {
			return v
		}
	}
	return ""
}

// setEnv sets key in env, replacing every earlier setting.
func setEnv(env []string, key, value string) []string {
	out := make([]string, 0, len(env)+1)
	for _, kv := range env {
		if k, _, _ := strings.Cut(kv, "="); k != key {
			out = append(out, kv)
		}
	}
	return append(out, key+"="+value)
}

func randomToken() string {
	b := make([]byte, 16)
	_, _ = rand.Read(b)
	return hex.EncodeToString(b)
}

// FindCUPTI is a libcupti beside the CUDA installation the environment
// names or the usual places, newest first; "" when there is none. The
// observer prefers a copy the program has already loaded (PyTorch's).
func FindCUPTI(env []string) string {
	var roots []string
	for _, k := range []string{"CUDA_HOME", "CUDA_PATH", "CUDA_ROOT"} {
		if v := lookupEnv(env, k); v != "" {
			roots = append(roots, v)
		}
	}
	roots = append(roots, "/usr/local/cuda")
	for _, v := range []string{"13", "12", "11"} {
		m, _ := filepath.Glob("/usr/local/cuda-" + v + "*")
		roots = append(roots, m...)
	}
	var dirs []string
	for _, r := range roots {
		dirs = append(dirs, filepath.Join(r, "extras", "CUPTI", "lib64"), filepath.Join(r, "lib64"),
			filepath.Join(r, "targets", "x86_64-linux", "lib"))
	}
	dirs = append(dirs, "/usr/lib/x86_64-linux-gnu", "/usr/lib64")
	for _, v := range []string{"13", "12", "11"} {
		for _, d := range dirs {
			p := filepath.Join(d, "libcupti.so."+v)
			if st, err := os.Stat(p); err == nil && st.Mode().IsRegular() {
				return p
			}
		}
	}
	return ""
}

// ---- the events socket ----

type eventSocket struct {
	dir, path string
	conn      *net.UnixConn
}

// listen makes the socket the observers send to, in a private folder.
func listen() (*eventSocket, error) {
	dir, err := os.MkdirTemp("", "miotool-trace-")
	if err == nil && (len(dir)+3 >= 108 || strings.Contains(dir, ":")) {
		// A Unix socket path has room for 107 bytes, and the observer's
		// list of sockets (nested traces) is joined with colons.
		os.RemoveAll(dir)
		dir, err = os.MkdirTemp("/tmp", "miotool-trace-")
	}
	if err != nil {
		return nil, fmt.Errorf("trace socket: %w", err)
	}
	s := &eventSocket{dir: dir, path: filepath.Join(dir, "ev")}
	s.conn, err = net.ListenUnixgram("unixgram", &net.UnixAddr{Name: s.path, Net: "unixgram"})
	if err != nil {
		os.RemoveAll(dir)
		return nil, fmt.Errorf("trace socket: %w", err)
	}
	_ = s.conn.SetReadBuffer(8 << 20)
	return s, nil
}

func (s *eventSocket) close() {
	s.conn.Close()
	os.RemoveAll(s.dir)
}

// read folds records into c until the end marker with token arrives or
// the socket is closed.
func (s *eventSocket) read(c *collector, token string, records io.Writer) {
	buf := make([]byte, 1<<16)
	for {
		n, err := s.conn.Read(buf)
		if err != nil {
			return
		}
		for _, line := range strings.Split(strings.TrimRight(string(buf[:n]), "\n"), "\n") {
			e, err := ParseEvent([]byte(line))
			if err != nil {
				c.malformed++
				continue
			}
			if e.Kind == kindEOF {
				if e.Text == token {
					return
				}
				continue
			}
			if records != nil {
				_, _ = io.WriteString(records, line+"\n")
			}
			c.add(e)
		}
	}
}

func (s *eventSocket) sendEOF(token string) {
	conn, err := net.DialUnix("unixgram", nil, &net.UnixAddr{Name: s.path, Net: "unixgram"})
	if err != nil {
		s.conn.Close()
		return
	}
	defer conn.Close()
	if _, err := conn.Write([]byte("MT1\teof\t0\t0\t0\t" + token + "\n")); err != nil {
		s.conn.Close()
	}
}
