//go:build unix

package cli

import (
	"bytes"
	"encoding/json"
	"errors"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"miotool/internal/report"
)

// A signal cancels the command's context with the signal as its cause;
// the command writes what it has, and Main exits 128+signal whatever the
// command returned.
func TestASignalEndsTheCommandWithItsStatus(t *testing.T) {
	for _, tt := range []struct {
		sig    syscall.Signal
		want   int
		reason string
		ret    func(err error) error
	}{
		{syscall.SIGINT, ExitInterrupted, "interrupted by SIGINT", func(err error) error { return err }},
		{syscall.SIGTERM, ExitTerminated, "interrupted by SIGTERM", func(err error) error { return err }},
		// A command that knows nothing of interruptions and fails with
		// the context's error still exits with the signal's status.
		{syscall.SIGINT, ExitInterrupted, "interrupted by SIGINT", func(error) error { return errors.New("context canceled") }},
	} {
		t.Run(tt.sig.String(), func(t *testing.T) {
			tc := newTestCLI(t)
			var reason string
			tc.runE = func() error {
				ctx := tc.f.Context
				if Interrupted(ctx) != nil {
					t.Fatal("interrupted before the signal")
				}
				if err := syscall.Kill(syscall.Getpid(), tt.sig); err != nil {
					t.Fatal(err)
				}
				select {
				case <-ctx.Done():
				case <-time.After(20 * time.Second):
					t.Fatal("the signal did not cancel the command's context")
				}
				reason = InterruptedReason(ctx).Error()
				return tt.ret(Interrupted(ctx))
			}
			if code := tc.run("probe"); code != tt.want {
				t.Errorf("exit %d, want %d (stderr %q)", code, tt.want, tc.errOut)
			}
			if reason != tt.reason {
				t.Errorf("reason %q, want %q", reason, tt.reason)
			}
		})
	}
}

func TestNoSignalNoInterruption(t *testing.T) {
	tc := newTestCLI(t)
	tc.runE = func() error { return Interrupted(tc.f.Context) }
	if code := tc.run("probe"); code != ExitOK {
		t.Fatalf("exit %d, want 0", code)
	}
}

// signalSelf sends sig to this process and waits for the command's
// context to end by it.
func signalSelf(t *testing.T, tc *testCLI, sig syscall.Signal) {
	t.Helper()
	if err := syscall.Kill(syscall.Getpid(), sig); err != nil {
		t.Fatal(err)
	}
	select {
	case <-tc.f.Context.Done():
	case <-time.After(20 * time.Second):
		t.Fatal("the signal did not cancel the command's context")
	}
}

// The result of a run a signal stopped says the status the process exits
// with, 143 for SIGTERM, in its JSON on stdout and in every file; a PASS
// rendered before the signal came is no PASS, since the run exits 130.
func TestASignalsStatusIsTheResults(t *testing.T) {
	for _, tt := range []struct {
		name     string
		sig      syscall.Signal
		rendered report.Verdict
		suite    bool
		want     int
	}{
		{"SIGTERM stopped it", syscall.SIGTERM, report.Interrupted, false, ExitTerminated},
		{"SIGINT stopped it", syscall.SIGINT, report.Interrupted, false, ExitInterrupted},
		{"SIGINT after it passed", syscall.SIGINT, report.Pass, false, ExitInterrupted},
		{"a suite SIGTERM stopped", syscall.SIGTERM, report.Interrupted, true, ExitTerminated},
	} {
		t.Run(tt.name, func(t *testing.T) {
			tc := newTestCLI(t)
			tc.checkRun = func() (*Outcome, error) {
				signalSelf(t, tc, tt.sig)
				if tt.suite {
					s := report.NewSuiteResult("small", time.Now())
					s.Checks = []*report.SuiteCheck{{Name: "a", Command: "miotool find", Expect: report.Pass}}
					s.Interrupted = InterruptedReason(tc.f.Context).Error()
					return Suite(s), nil
				}
				return Single(testResult(tt.rendered)), nil
			}
			junit := filepath.Join(t.TempDir(), "c.xml")
			if code := tc.run("check", "--format", "json", "--junit", junit); code != tt.want {
				t.Fatalf("exit %d, want %d: %s", code, tt.want, tc.errOut)
			}
			var doc struct {
				Verdict  report.Verdict `json:"verdict"`
				ExitCode int            `json:"exit_code"`
			}
			if err := json.Unmarshal(tc.out.Bytes(), &doc); err != nil || doc.Verdict != report.Interrupted || doc.ExitCode != tt.want {
				t.Errorf("stdout: %v %+v\n%s", err, doc, tc.out)
			}
			if got := readJUnit(t, readFile(t, junit)); got.Errors < 1 || got.Passed != 0 {
				t.Errorf("JUnit reads green: %+v", got)
			}
		})
	}
}

// SIGQUIT quits at once with every goroutine's stack on stderr and the
// status 131, not Go's 2, the usage code.
func TestSIGQUITQuitsWithItsOwnStatus(t *testing.T) {
	exited := make(chan int, 1)
	exitNow = func(code int) { exited <- code }
	t.Cleanup(func() { exitNow = os.Exit })
	var errOut syncBuffer
	stop := handleQuit(&errOut)
	defer stop()
	if err := syscall.Kill(syscall.Getpid(), syscall.SIGQUIT); err != nil {
		t.Fatal(err)
	}
	select {
	case code := <-exited:
		if code != 131 {
			t.Errorf("exit %d, want 131", code)
		}
	case <-time.After(20 * time.Second):
		t.Fatal("SIGQUIT did not end the run")
	}
	if got := errOut.String(); !strings.HasPrefix(got, "miotool: quit by SIGQUIT") || !strings.Contains(got, "goroutine ") {
		t.Errorf("stderr %.200q", got)
	}
}

// syncBuffer is a buffer that the quitting goroutine and the test share.
type syncBuffer struct {
	mu  sync.Mutex
	buf bytes.Buffer
}

func (b *syncBuffer) Write(p []byte) (int, error) {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.buf.Write(p)
}

func (b *syncBuffer) String() string {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.buf.String()
}

// A signal that comes once the runner has settled the exit status and
// written the result changes neither: the PASS written is the status the
// process exits with, and the command's context is not cancelled.
func TestASignalAfterTheResultChangesNothing(t *testing.T) {
	for _, sig := range []syscall.Signal{syscall.SIGINT, syscall.SIGTERM} {
		t.Run(sig.String(), func(t *testing.T) {
			tc := newTestCLI(t)
			handled := make(chan bool, 1)
			caughtHook = func(took bool) { handled <- took }
			t.Cleanup(func() { caughtHook = nil })
			var finished error
			tc.afterFinish = func() {
				if err := syscall.Kill(syscall.Getpid(), sig); err != nil {
					t.Fatal(err)
				}
				select {
				case took := <-handled:
					if took {
						t.Error("the late signal was taken as an interruption")
					}
				case <-time.After(20 * time.Second):
					t.Fatal("Main's handler did not see the signal")
				}
				finished = tc.f.Context.Err()
			}
			if code := tc.run("check", "--format", "json"); code != ExitOK {
				t.Fatalf("exit %d, want 0: %s", code, tc.errOut)
			}
			if finished != nil {
				t.Errorf("the late signal cancelled the command's context: %v", finished)
			}
			r, err := report.ReadJSON(tc.out)
			if err != nil || r.Verdict != report.Pass || r.ExitCode() != ExitOK {
				t.Errorf("stdout: %v %+v", err, r)
			}
		})
	}
}
