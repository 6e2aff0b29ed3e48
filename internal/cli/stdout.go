package cli

import (
	"errors"
	"io"
	"io/fs"
	"sync"
)

// stdoutWriter is standard output as a command writes it under Main. The
// first write that fails is kept, and every later write fails with it at
// once, so that Main can say the output was lost and exit 3 whoever wrote
// it (a result, cobra's help or usage, a completion script, the version),
// many of which do not look at write errors.
type stdoutWriter struct {
	mu  sync.Mutex
	w   io.Writer
	err *stdoutError
}

// stdoutError is a failed write to standard output.
type stdoutError struct{ err error }

func (e *stdoutError) Error() string { return "writing to standard output: " + e.err.Error() }
func (e *stdoutError) Unwrap() error { return e.err }

// isStdoutError reports whether err is a failed write to standard output,
// which Main reports once, whatever else returned it.
func isStdoutError(err error) bool {
	var se *stdoutError
	return errors.As(err, &se)
}

func (s *stdoutWriter) Write(p []byte) (int, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.err != nil {
		return 0, s.err
	}
	n, err := s.w.Write(p)
	if err == nil && n < len(p) {
		err = io.ErrShortWrite
	}
	if err != nil {
		// "write /dev/stdout: broken pipe" says the path twice over.
		var pe *fs.PathError
		if errors.As(err, &pe) {
			err = pe.Err
		}
		s.err = &stdoutError{err}
		return n, s.err
	}
	return n, nil
}

// failed is the write that failed, or nil.
func (s *stdoutWriter) failed() error {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.err == nil {
		return nil
	}
	return s.err
}
