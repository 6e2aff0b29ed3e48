//go:build !amd64

package conv

// conv2x2Row is conv2x2RowGo where no vector version is written.
func conv2x2Row(top, bot, out []float32, coef *[5]float32) { conv2x2RowGo(top, bot, out, coef) }
