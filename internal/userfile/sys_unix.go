//go:build unix

package userfile

import (
	"fmt"
	"io/fs"
	"os"
	"slices"
	"syscall"
)

// Open flags: never follow a link at the last step (a temporary file is
// created, never reached through a link put there); never wait for a
// FIFO's other end.
const (
	openNoFollow = syscall.O_NOFOLLOW
	openNonBlock = syscall.O_NONBLOCK
)

// linkCount is the number of hard links to the file info describes.
func linkCount(info fs.FileInfo) int {
	if st, ok := info.Sys().(*syscall.Stat_t); ok {
		return int(st.Nlink)
	}
	return 1
}

// ids are the writer's user and groups; tests make the writer another
// user.
var ids = struct {
	euid, egid func() int
	groups     func() ([]int, error)
}{os.Geteuid, os.Getegid, os.Getgroups}

// foreignOwner says why a new file of this process could not have the
// owner or group of the file info describes ("" when it could): only root
// gives a file to another user, and a user gives it only a group of their
// own.
func foreignOwner(info fs.FileInfo) string {
	st, ok := info.Sys().(*syscall.Stat_t)
	if !ok || ids.euid() == 0 {
		return ""
	}
	if int(st.Uid) != ids.euid() {
		return fmt.Sprintf("belongs to user %d", st.Uid)
	}
	if int(st.Gid) == ids.egid() {
		return ""
	}
	if groups, err := ids.groups(); err == nil && slices.Contains(groups, int(st.Gid)) {
		return ""
	}
	return fmt.Sprintf("belongs to group %d, not one of this user's", st.Gid)
}

// keepOwner gives f the owner and group of old where they differ.
func keepOwner(f *os.File, old fs.FileInfo) error {
	want, ok := old.Sys().(*syscall.Stat_t)
	if !ok {
		return nil
	}
	have, err := f.Stat()
	if err != nil {
		return err
	}
	got, ok := have.Sys().(*syscall.Stat_t)
	if !ok || got.Uid == want.Uid && got.Gid == want.Gid {
		return nil
	}
	if err := f.Chown(int(want.Uid), int(want.Gid)); err != nil {
		return fmt.Errorf("cannot keep the file's owner %d:%d: %w", want.Uid, want.Gid, err)
	}
	return nil
}
