package rules

// SetMapHostPages replaces how the probe maps host pages, for a test, and
// returns the undo.
func SetMapHostPages(f func(int) ([]byte, func() error, error)) (undo func()) {
	old := mapHostPages
	mapHostPages = f
	return func() { mapHostPages = old }
}
