//go:build !linux

package trace

import (
	"context"
	"errors"
)

// runProgram needs Linux: the observer reaches the program through
// LD_PRELOAD and CUDA's injection library, and the group and death-signal
// handling is Linux's.
func runProgram(ctx context.Context, o Options, path string, env []string) (Exit, error) {
	return Exit{}, errors.New("miotool trace runs on Linux only")
}
