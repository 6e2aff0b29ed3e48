//go:build !amd64

package conv

type vectorWidth struct {
	name string
	use  func() (restore func())
}

func vectorWidths() []vectorWidth {
	return []vectorWidth{{"scalar", func() func() { return func() {} }}}
}
