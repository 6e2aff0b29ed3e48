package cli

import (
	"fmt"

	"miotool/internal/userfile"
)

// writeOutputFiles writes every file or none: each is first staged (a
// file that can be replaced is written beside its target), the files
// written in place (one with other hard links, a symlink's target, a
// device such as /dev/null, a FIFO, a file of another owner: see
// userfile) are written next, and the staged ones renamed over their
// targets last, so that a run that cannot save one of its files (a full
// disk) leaves every renamed target as it was, and no file says PASS of a
// run that exits 3. Every file keeps its mode, owner and links.
func writeOutputFiles(files []outputFile) error {
	staged := make([]*userfile.Staged, 0, len(files))
	discard := func() {
		for _, s := range staged {
			s.Discard()
		}
	}
	for _, f := range files {
		s, err := userfile.Stage(f.path, f.data, userfile.Options{})
		if err != nil {
			discard()
			return fmt.Errorf("%s %s: %w", f.flag, f.path, unwrapPath(err))
		}
		staged = append(staged, s)
	}
	for _, inPlace := range []bool{true, false} {
		for i, s := range staged {
			if s.InPlace() != inPlace {
				continue
			}
			if err := s.Commit(); err != nil {
				discard()
				return fmt.Errorf("%s %s: %w", files[i].flag, files[i].path, unwrapPath(err))
			}
		}
	}
	return nil
}
