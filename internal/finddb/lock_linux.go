package finddb

import (
	"errors"
	"os"
	"syscall"
)

// Open-file-description record locks (Linux 3.15): owned by the open file,
// not the process, and conflicting with classic record locks.
const (
	fOFDGetlk = 36 // F_OFD_GETLK
	fOFDSetlk = 37 // F_OFD_SETLK
)

// wholeFile is a write lock of the whole file, as boost's file_lock takes.
func wholeFile(typ int16) syscall.Flock_t {
	return syscall.Flock_t{Type: typ, Whence: 0 /* SEEK_SET */, Start: 0, Len: 0}
}

// tryRecordLock tries once to take the exclusive record lock.
func tryRecordLock(f *os.File) (bool, error) {
	lk := wholeFile(syscall.F_WRLCK)
	err := syscall.FcntlFlock(f.Fd(), fOFDSetlk, &lk)
	if errors.Is(err, syscall.EAGAIN) || errors.Is(err, syscall.EACCES) {
		return false, nil
	}
	return err == nil, err
}

// recordLockHolder is the pid of a process holding a conflicting classic
// record lock (MIOpen's), 0 when no lock conflicts or the holder is an
// OFD lock, which has no pid.
func recordLockHolder(f *os.File) int {
	lk := wholeFile(syscall.F_WRLCK)
	if syscall.FcntlFlock(f.Fd(), fOFDGetlk, &lk) != nil || lk.Type == syscall.F_UNLCK || lk.Pid <= 0 {
		return 0
	}
	return int(lk.Pid)
}

func unlockRecord(f *os.File) {
	lk := wholeFile(syscall.F_UNLCK)
	_ = syscall.FcntlFlock(f.Fd(), fOFDSetlk, &lk)
}
