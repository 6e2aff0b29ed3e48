//go:build unix

package cli

import (
	"io/fs"
	"syscall"
)

// linkCount is the number of hard links to the file info describes.
func linkCount(info fs.FileInfo) int {
	if st, ok := info.Sys().(*syscall.Stat_t); ok {
		return int(st.Nlink)
	}
	return 1
}
