//go:build unix

package cli

import (
	"errors"
	"syscall"
	"testing"
	"time"
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
