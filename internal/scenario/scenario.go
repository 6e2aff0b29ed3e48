// Package scenario is the vocabulary every scenario's cases share: a case's
// outcome in one word (Pass, Fail, Inconclusive, Interrupted) and who launches during a
// capture (Variant). The scenarios themselves live in its subpackages:
// capture (capture and replay), stress and find.
package scenario

import (
	"fmt"
)

// Outcome is a case's result in one word.
type Outcome string

// Outcomes.
const (
	Pass         Outcome = "PASS"
	Fail         Outcome = "FAIL"
	Inconclusive Outcome = "INCONCLUSIVE"
	// Interrupted: a signal stopped the case while it ran; it has no
	// outcome of its own.
	Interrupted Outcome = "INTERRUPTED"
)

// Variant says who launches during the capture.
type Variant string

// Capture variants.
const (
	// SameThread: the thread whose handle's find abandoned a stream
	// captures a convolution through that handle.
	SameThread Variant = "same-thread"
	// OtherThread: one thread captures through its own handle while
	// another thread launches through the handle whose find abandoned a
	// stream (a capture on another stream and thread, which global mode
	// still exposes).
	OtherThread Variant = "other-thread"
)

// Variants lists both.
var Variants = []Variant{SameThread, OtherThread}

// ParseVariant accepts same-thread, other-thread.
func ParseVariant(s string) (Variant, error) {
	for _, v := range Variants {
		if string(v) == s {
			return v, nil
		}
	}
	return "", fmt.Errorf("unknown variant %q (want same-thread or other-thread)", s)
}

// JoinDetail joins two parts of a case's detail with "; ", leaving out an
// empty first part.
func JoinDetail(a, b string) string {
	if a == "" {
		return b
	}
	return a + "; " + b
}

// FirstError keeps the first error of a sequence of cleanups.
type FirstError struct{ Err error }

// Add keeps err when it is the first non-nil one.
func (k *FirstError) Add(err error) {
	if err != nil && k.Err == nil {
		k.Err = err
	}
}
