// Package guard is the mutation check's own fixture: two guards, the tests
// that hold them, and patches (testdata/mutations) whose outcome the check
// must report as each patch's "expect:" line says.
package guard

// Clamp limits x to the range [lo, hi].
func Clamp(x, lo, hi int) int {
	if x < lo {
		return lo
	}
	if x > hi {
		return hi
	}
	return x
}

// Sum adds xs on a goroutine of its own, as work handed to a worker is.
func Sum(xs []int) int {
	total := make(chan int)
	go func() {
		s := 0
		for _, x := range xs {
			s += x
		}
		total <- s
	}()
	return <-total
}
