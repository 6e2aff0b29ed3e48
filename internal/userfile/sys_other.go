//go:build !unix

package userfile

import (
	"io/fs"
	"os"
)

// The open flags this system has no word for.
const (
	openNoFollow = 0
	openNonBlock = 0
)

// linkCount is 1 where the system does not say.
func linkCount(fs.FileInfo) int { return 1 }

// foreignOwner is "": where there are no Unix owners, a new file takes
// nothing from the old one's.
func foreignOwner(fs.FileInfo) string { return "" }

func keepOwner(*os.File, fs.FileInfo) error { return nil }
