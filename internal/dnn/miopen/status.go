package miopen

import (
	"fmt"
	"strings"

	"miotool/internal/dl"
	"miotool/internal/dnn/dnnlib"
)

// Status is a miopenStatus_t.
type Status int32

// Status codes (miopen.h).
const (
	StatusSuccess              Status = 0
	StatusNotInitialized       Status = 1
	StatusInvalidValue         Status = 2
	StatusBadParm              Status = 3
	StatusAllocFailed          Status = 4
	StatusInternalError        Status = 5
	StatusNotImplemented       Status = 6
	StatusUnknownError         Status = 7
	StatusUnsupportedOp        Status = 8
	StatusGpuOperationsSkipped Status = 9
	StatusVersionMismatch      Status = 10
)

var statusNames = []string{
	"miopenStatusSuccess", "miopenStatusNotInitialized", "miopenStatusInvalidValue", "miopenStatusBadParm",
	"miopenStatusAllocFailed", "miopenStatusInternalError", "miopenStatusNotImplemented", "miopenStatusUnknownError",
	"miopenStatusUnsupportedOp", "miopenStatusGpuOperationsSkipped", "miopenStatusVersionMismatch",
}

// String is the code's name, e.g. miopenStatusUnknownError.
func (s Status) String() string {
	if s >= 0 && int(s) < len(statusNames) {
		return statusNames[s]
	}
	return fmt.Sprintf("miopenStatus(%d)", int32(s))
}

// Error is an MIOpen call that returned a status other than success. Its
// Message is miopenGetErrorString's text, or that of a check made before
// the call; it may be empty.
type Error = dnnlib.Error[Status]

// StatusOf is the status of the first *Error in err's chain: success for
// nil, StatusUnknownError for an error that is not MIOpen's.
func StatusOf(err error) Status { return dnnlib.StatusOf(err, StatusUnknownError) }

// errorString is the library's text for st, left out when it only repeats
// the code's name.
func (l *Library) errorString(st int32) string {
	s := strings.TrimSpace(dl.GoString(dl.CallPtr(l.api.getErrorString, uintptr(st))))
	if s == Status(st).String() {
		return ""
	}
	return s
}

func badArg(op, format string, args ...any) error {
	return dnnlib.BadArg(op, StatusBadParm, format, args...)
}
