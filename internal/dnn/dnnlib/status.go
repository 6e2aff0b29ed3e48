package dnnlib

import (
	"errors"
	"fmt"
	"math"
	"strings"
)

// Status is a library's status type (cudnnStatus_t, miopenStatus_t):
// zero is success, and String names a code.
type Status interface {
	~int32
	String() string
}

// Error is a library call that returned a status other than success.
type Error[S Status] struct {
	Op     string // the C function, e.g. cudnnConvolutionForward
	Status S
	// Message is the library's own explanation of the failure, or the
	// text of a check made before the call; it may be empty.
	Message string
}

// Error reads "op: NAME (code): message"; a message that only repeats the
// status's name is left out.
func (e *Error[S]) Error() string {
	s := fmt.Sprintf("%s: %s (%d)", e.Op, e.Status, int32(e.Status))
	if m := strings.TrimSpace(e.Message); m != "" && m != e.Status.String() {
		s += ": " + m
	}
	return s
}

// StatusOf is the status of the first *Error[S] in err's chain: success
// for nil, foreign for an error that is not the library's.
func StatusOf[S Status](err error, foreign S) S {
	if err == nil {
		return 0
	}
	var e *Error[S]
	if errors.As(err, &e) {
		return e.Status
	}
	return foreign
}

// BadArg is an argument of op refused before it reaches the library, with
// the library's status for a bad parameter.
func BadArg[S Status](op string, bad S, format string, args ...any) error {
	return &Error[S]{Op: op, Status: bad, Message: fmt.Sprintf(format, args...)}
}

// Positive checks sizes that the library takes as C ints and names the
// first one below one or beyond a C int; names lists the sizes' names,
// separated by spaces ("n c h w").
func Positive[S Status](op string, bad S, names string, sizes ...int) error {
	labels := strings.Fields(names)
	for i, v := range sizes {
		if v >= 1 && v <= math.MaxInt32 {
			continue
		}
		name := fmt.Sprintf("size %d", i)
		if i < len(labels) {
			name = labels[i]
		}
		if v < 1 {
			return BadArg(op, bad, "%s=%d: want a positive size", name, v)
		}
		return BadArg(op, bad, "%s=%d: larger than a C int", name, v)
	}
	return nil
}

// Conv2d is a 2-D convolution's geometry.
type Conv2d struct {
	PadH, PadW       int
	StrideH, StrideW int
	DilH, DilW       int
}

// CheckConv2d refuses geometry no library accepts: negative padding, or a
// stride or dilation below one or beyond a C int.
func CheckConv2d[S Status](op string, bad S, g Conv2d) error {
	if g.PadH < 0 || g.PadW < 0 {
		return BadArg(op, bad, "padding %dx%d is negative", g.PadH, g.PadW)
	}
	return Positive(op, bad, "stride_h stride_w dilation_h dilation_w", g.StrideH, g.StrideW, g.DilH, g.DilW)
}
