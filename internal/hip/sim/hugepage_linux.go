package sim

import (
	"syscall"
	"unsafe"
)

// hugePageSize is the size of a transparent huge page on x86-64 and arm64
// Linux.
const hugePageSize = 2 << 20

// adviseHugePages asks the kernel to back the 2 MiB-aligned part of a large
// block with transparent huge pages. A kernel with them in "madvise" mode
// (the common default) otherwise backs Go's heap with 4 KiB pages, and the
// simulated kernels stream through tens of MiB per launch: first touches
// then cost a page fault per 4 KiB and the streaming loops a TLB miss per
// 4 KiB. The advice changes no byte; a kernel that refuses it is ignored.
func adviseHugePages(b []byte) {
	if len(b) < 2*hugePageSize {
		return
	}
	start := uintptr(unsafe.Pointer(&b[0]))
	first := (start + hugePageSize - 1) &^ (hugePageSize - 1)
	last := (start + uintptr(len(b))) &^ (hugePageSize - 1)
	if last <= first {
		return
	}
	_ = syscall.Madvise(b[first-start:last-start], 14) // MADV_HUGEPAGE
}
