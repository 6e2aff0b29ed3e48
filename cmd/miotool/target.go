package main

import (
	"time"

	"miotool/internal/cli"
	"miotool/internal/hip"
	"miotool/internal/report"
	"miotool/internal/repro"
)

// openTarget opens the device for a scenario run through a real library:
// the library must load, the device open, and the library support that
// device. With a nil device, r is the result to write (a skip, or the
// open's failure). cleanup releases the library; call it in every case,
// after closing the device.
func openTarget(s *cli.Scenario, check string, target repro.Target, start time.Time) (dev hip.Device, r *report.Result, cleanup func()) {
	release := func() { _ = repro.TargetCleanup() } // a left temporary folder is not worth failing for
	if err := repro.TargetAvailable(string(target)); err != nil {
		return nil, cli.OpenFailedResult(check, s.CommandLine, start, s.Now(), s.Global.Backend, hip.Selection{}, err), func() {}
	}
	dev, r = s.Open(check, start)
	if dev == nil {
		return nil, r, release
	}
	if err := repro.TargetSupports(string(target), dev); err != nil {
		backend := dev.Props().Backend
		dev.Close()
		return nil, cli.OpenFailedResult(check, s.CommandLine, start, s.Now(), s.Global.Backend, hip.Selection{Chosen: backend}, err), release
	}
	return dev, r, release
}
