package gpulib

import "miotool/internal/hip"

// StatusMapper turns runtime status codes into *hip.Error values. HIP and
// CUDA share the numbers of every code hip names, so the code passes
// through unchanged; only the dialect that prints it differs.
type StatusMapper struct {
	Dialect hip.Dialect
	// ErrorName, when set, names codes hip has no name for (from
	// cuGetErrorName / hipGetErrorName); the name goes into Detail so that
	// e.g. CUDA_ERROR_STUB_LIBRARY (34) is still readable.
	ErrorName func(code int32) string
}

// Err returns nil for a zero status, else an *hip.Error for op.
func (m StatusMapper) Err(op string, status int32) error {
	if status == 0 {
		return nil
	}
	e := &hip.Error{Op: op, Code: hip.Code(status), Dialect: m.Dialect}
	if !e.Code.Known() && m.ErrorName != nil {
		e.Detail = m.ErrorName(status)
	}
	return e
}

// Errorf returns an *hip.Error with a code and detail chosen by the
// backend itself (bad arguments, a missing compiler).
func (m StatusMapper) Errorf(op string, code hip.Code, detail string) error {
	return &hip.Error{Op: op, Code: code, Dialect: m.Dialect, Detail: detail}
}
