package cli

import (
	"errors"
	"time"

	"miotool/internal/hip"
	"miotool/internal/report"
)

// OpenFunc selects and opens a backend; hip.Select is one.
type OpenFunc func(backend string, opts hip.OpenOptions) (hip.Device, hip.Selection, error)

// OpenVerdict classifies a failure to open a device: SKIP when the
// requested backend, library or device is not there, ERROR otherwise.
func OpenVerdict(err error) report.Verdict {
	var unavailable *hip.UnavailableError
	switch {
	case err == nil:
		return report.Pass
	case errors.As(err, &unavailable), errors.Is(err, hip.ErrUnknownBackend):
		return report.Skip
	}
	switch hip.CodeOf(err) {
	case hip.ErrNoDevice, hip.ErrInvalidDevice:
		return report.Skip
	}
	return report.Error
}

// StartResult begins a result for check with the backend and device that
// will run it.
func StartResult(check, command string, start time.Time, sel hip.Selection, dev hip.Device) *report.Result {
	r := report.New(check, command, start)
	r.Backend = sel.Chosen
	r.BackendReason = SelectionReason(sel)
	if dev != nil {
		r.Device = DeviceOf(dev.Props())
	}
	return r
}

// DeviceOf is the report's view of a device.
func DeviceOf(p hip.Props) report.Device {
	return report.Device{Name: p.Name, Arch: p.Arch, Description: p.String()}
}

// OpenFailedResult is the result of a check whose device could not be
// opened: SKIP or ERROR (see OpenVerdict), with the reason as summary and
// every backend tried as a note.
func OpenFailedResult(check, command string, start, end time.Time, requested hip.BackendName, sel hip.Selection, err error) *report.Result {
	r := report.New(check, command, start)
	r.Backend = string(requested)
	r.BackendReason = requestedReason(requested)
	if requested == "" || requested == hip.BackendAuto {
		r.BackendReason = "auto"
	}
	for _, a := range sel.Attempts {
		if a.Err != nil && a.Err.Error() != err.Error() {
			r.Note("backend %s: %v", a.Backend, a.Err)
		}
	}
	var unavailable *hip.UnavailableError
	if errors.As(err, &unavailable) {
		for _, lib := range unavailable.Libraries {
			for _, t := range lib.Tried {
				if t.Err != "" {
					r.Note("%s: %s: %s", lib.Name, t.Path, t.Err)
				}
			}
		}
	}
	r.Finish(OpenVerdict(err), err.Error(), end)
	return r
}
