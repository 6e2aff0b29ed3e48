package hip

import (
	"errors"
	"fmt"
)

// Code is a runtime status code. HIP and CUDA share the numbers this tool
// cares about (0, 1, 2, 600, 700, 719, 900-908), so one type serves both;
// only the printed names differ by dialect.
type Code int

// Named codes. The values are those of hipError_t and CUresult.
const (
	Success                     Code = 0
	ErrInvalidValue             Code = 1
	ErrOutOfMemory              Code = 2
	ErrNotInitialized           Code = 3
	ErrDeinitialized            Code = 4
	ErrNoDevice                 Code = 100
	ErrInvalidDevice            Code = 101
	ErrInvalidImage             Code = 200
	ErrInvalidContext           Code = 201
	ErrInvalidSource            Code = 300
	ErrFileNotFound             Code = 301
	ErrInvalidHandle            Code = 400
	ErrIllegalState             Code = 401
	ErrNotFound                 Code = 500
	ErrNotReady                 Code = 600
	ErrIllegalAddress           Code = 700
	ErrLaunchOutOfResources     Code = 701
	ErrLaunchTimeout            Code = 702
	ErrHostMemoryRegistered     Code = 712
	ErrHostMemoryNotRegistered  Code = 713
	ErrLaunchFailure            Code = 719
	ErrNotPermitted             Code = 800
	ErrNotSupported             Code = 801
	ErrStreamCaptureUnsupported Code = 900
	ErrStreamCaptureInvalidated Code = 901
	ErrStreamCaptureMerge       Code = 902
	ErrStreamCaptureUnmatched   Code = 903
	ErrStreamCaptureUnjoined    Code = 904
	ErrStreamCaptureIsolation   Code = 905
	ErrStreamCaptureImplicit    Code = 906
	ErrCapturedEvent            Code = 907
	ErrStreamCaptureWrongThread Code = 908
	ErrUnknown                  Code = 999
)

// Dialect selects the vendor vocabulary used to name codes and calls.
type Dialect string

// The two dialects.
const (
	DialectHIP  Dialect = "hip"
	DialectCUDA Dialect = "cuda"
)

// ParseDialect accepts "hip" or "cuda".
func ParseDialect(s string) (Dialect, error) {
	switch Dialect(s) {
	case DialectHIP, DialectCUDA:
		return Dialect(s), nil
	}
	return "", fmt.Errorf("unknown dialect %q (want hip or cuda)", s)
}

type codeNames struct{ hip, cuda string }

var names = map[Code]codeNames{
	Success:                     {"hipSuccess", "CUDA_SUCCESS"},
	ErrInvalidValue:             {"hipErrorInvalidValue", "CUDA_ERROR_INVALID_VALUE"},
	ErrOutOfMemory:              {"hipErrorOutOfMemory", "CUDA_ERROR_OUT_OF_MEMORY"},
	ErrNotInitialized:           {"hipErrorNotInitialized", "CUDA_ERROR_NOT_INITIALIZED"},
	ErrDeinitialized:            {"hipErrorDeinitialized", "CUDA_ERROR_DEINITIALIZED"},
	ErrNoDevice:                 {"hipErrorNoDevice", "CUDA_ERROR_NO_DEVICE"},
	ErrInvalidDevice:            {"hipErrorInvalidDevice", "CUDA_ERROR_INVALID_DEVICE"},
	ErrInvalidImage:             {"hipErrorInvalidImage", "CUDA_ERROR_INVALID_IMAGE"},
	ErrInvalidContext:           {"hipErrorInvalidContext", "CUDA_ERROR_INVALID_CONTEXT"},
	ErrInvalidSource:            {"hipErrorInvalidSource", "CUDA_ERROR_INVALID_SOURCE"},
	ErrFileNotFound:             {"hipErrorFileNotFound", "CUDA_ERROR_FILE_NOT_FOUND"},
	ErrInvalidHandle:            {"hipErrorInvalidHandle", "CUDA_ERROR_INVALID_HANDLE"},
	ErrIllegalState:             {"hipErrorIllegalState", "CUDA_ERROR_ILLEGAL_STATE"},
	ErrNotFound:                 {"hipErrorNotFound", "CUDA_ERROR_NOT_FOUND"},
	ErrNotReady:                 {"hipErrorNotReady", "CUDA_ERROR_NOT_READY"},
	ErrIllegalAddress:           {"hipErrorIllegalAddress", "CUDA_ERROR_ILLEGAL_ADDRESS"},
	ErrLaunchOutOfResources:     {"hipErrorLaunchOutOfResources", "CUDA_ERROR_LAUNCH_OUT_OF_RESOURCES"},
	ErrLaunchTimeout:            {"hipErrorLaunchTimeOut", "CUDA_ERROR_LAUNCH_TIMEOUT"},
	ErrHostMemoryRegistered:     {"hipErrorHostMemoryAlreadyRegistered", "CUDA_ERROR_HOST_MEMORY_ALREADY_REGISTERED"},
	ErrHostMemoryNotRegistered:  {"hipErrorHostMemoryNotRegistered", "CUDA_ERROR_HOST_MEMORY_NOT_REGISTERED"},
	ErrLaunchFailure:            {"hipErrorLaunchFailure", "CUDA_ERROR_LAUNCH_FAILED"},
	ErrNotPermitted:             {"hipErrorNotPermitted", "CUDA_ERROR_NOT_PERMITTED"},
	ErrNotSupported:             {"hipErrorNotSupported", "CUDA_ERROR_NOT_SUPPORTED"},
	ErrStreamCaptureUnsupported: {"hipErrorStreamCaptureUnsupported", "CUDA_ERROR_STREAM_CAPTURE_UNSUPPORTED"},
	ErrStreamCaptureInvalidated: {"hipErrorStreamCaptureInvalidated", "CUDA_ERROR_STREAM_CAPTURE_INVALIDATED"},
	ErrStreamCaptureMerge:       {"hipErrorStreamCaptureMerge", "CUDA_ERROR_STREAM_CAPTURE_MERGE"},
	ErrStreamCaptureUnmatched:   {"hipErrorStreamCaptureUnmatched", "CUDA_ERROR_STREAM_CAPTURE_UNMATCHED"},
	ErrStreamCaptureUnjoined:    {"hipErrorStreamCaptureUnjoined", "CUDA_ERROR_STREAM_CAPTURE_UNJOINED"},
	ErrStreamCaptureIsolation:   {"hipErrorStreamCaptureIsolation", "CUDA_ERROR_STREAM_CAPTURE_ISOLATION"},
	ErrStreamCaptureImplicit:    {"hipErrorStreamCaptureImplicit", "CUDA_ERROR_STREAM_CAPTURE_IMPLICIT"},
	ErrCapturedEvent:            {"hipErrorCapturedEvent", "CUDA_ERROR_CAPTURED_EVENT"},
	ErrStreamCaptureWrongThread: {"hipErrorStreamCaptureWrongThread", "CUDA_ERROR_STREAM_CAPTURE_WRONG_THREAD"},
	ErrUnknown:                  {"hipErrorUnknown", "CUDA_ERROR_UNKNOWN"},
}

// Name is the vendor's name for c, e.g. hipErrorStreamCaptureInvalidated or
// CUDA_ERROR_STREAM_CAPTURE_INVALIDATED. Codes without a name print as
// hipError(<n>) / CUDA_ERROR(<n>).
func (c Code) Name(d Dialect) string {
	if n, ok := names[c]; ok {
		if d == DialectCUDA {
			return n.cuda
		}
		return n.hip
	}
	if d == DialectCUDA {
		return fmt.Sprintf("CUDA_ERROR(%d)", int(c))
	}
	return fmt.Sprintf("hipError(%d)", int(c))
}

// Short is the name without the vendor prefix, e.g. STREAM_CAPTURE_INVALIDATED
// for CUDA; HIP names are returned whole. Used in compact tables.
func (c Code) Short(d Dialect) string {
	n := c.Name(d)
	if d == DialectCUDA {
		if len(n) > 11 && n[:11] == "CUDA_ERROR_" {
			return n[11:]
		}
		if n == "CUDA_SUCCESS" {
			return "SUCCESS"
		}
	}
	return n
}

// Known reports whether c has a name in the table.
func (c Code) Known() bool { _, ok := names[c]; return ok }

// Error is a failed runtime call: the operation, the numeric code and the
// dialect that names it. Op is vendor-neutral (e.g. "StreamQuery"); Error()
// prints it with the vendor's prefix (hipStreamQuery / cuStreamQuery).
type Error struct {
	Op      string
	Code    Code
	Dialect Dialect
	// Detail is optional extra text from the runtime or the backend
	// (a compile log, the symbol that failed).
	Detail string
}

// Call is the vendor spelling of the operation, e.g. hipStreamQuery.
func (e *Error) Call() string { return CallName(e.Op, e.Dialect) }

func (e *Error) Error() string {
	s := fmt.Sprintf("%s: %s (%d)", e.Call(), e.Code.Name(e.Dialect), int(e.Code))
	if e.Detail != "" {
		s += ": " + e.Detail
	}
	return s
}

// NewError builds an *Error; a Success code yields nil so backends can
// return Errorf(...) straight from a status.
func NewError(d Dialect, op string, c Code) error {
	if c == Success {
		return nil
	}
	return &Error{Op: op, Code: c, Dialect: d}
}

// CodeOf extracts the runtime code from err: Success for nil, the code of an
// *Error anywhere in the chain, ErrUnknown otherwise.
func CodeOf(err error) Code {
	if err == nil {
		return Success
	}
	var e *Error
	if errors.As(err, &e) {
		return e.Code
	}
	return ErrUnknown
}

// IsNotReady reports whether err is the "not ready" answer of a query,
// which is a normal result rather than a failure.
func IsNotReady(err error) bool { return CodeOf(err) == ErrNotReady }
