// Package libtarget is what the commands with --target share: opening the
// device for a library target, and the flag's spellings.
package libtarget

import (
	"errors"
	"fmt"
	"time"

	"miotool/internal/cli"
	"miotool/internal/dnn/target"
	"miotool/internal/hip"
	"miotool/internal/report"
)

// Open opens the device for a scenario run through a real library:
// the library must load, the device open, and the library support that
// device. With a nil device, r is the result to write (a skip, or the
// open's failure). cleanup releases the library; call it in every case,
// after closing the device.
func Open(s *cli.Scenario, check string, t target.Name, start time.Time) (dev hip.Device, r *report.Result, cleanup func()) {
	release := func() { _ = target.Cleanup() } // a left temporary folder is not worth failing for
	if err := target.Available(t); err != nil {
		return nil, cli.OpenFailedResult(check, s.CommandLine, start, s.Now(), s.Global.Backend, hip.Selection{}, err), func() {}
	}
	dev, r = s.Open(check, start)
	if dev == nil {
		return nil, r, release
	}
	if err := target.Supports(t, dev); err != nil {
		backend := dev.Props().Backend
		dev.Close()
		return nil, cli.OpenFailedResult(check, s.CommandLine, start, s.Now(), s.Global.Backend, hip.Selection{Chosen: backend}, WithBackendHint(err)), release
	}
	return dev, r, release
}

// WithBackendHint adds to a target's refusal of the device the flag that
// picks the backend it runs on.
func WithBackendHint(err error) error {
	var u *target.UnavailableError
	if errors.As(err, &u) && u.NeedsBackend != "" {
		return fmt.Errorf("%w (run with %s)", err, cli.BackendFlag(u.NeedsBackend))
	}
	return err
}

// Flag is how a user asks for library target t: "--target miopen", as
// doctor's library table names it.
func Flag(t target.Name) string { return "--target " + string(t) }

// StatusFlag is target t as a checklist status names it:
// "Passes with --target=miopen".
func StatusFlag(t target.Name) string { return "--target=" + string(t) }
