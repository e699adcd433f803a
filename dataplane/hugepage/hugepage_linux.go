//go:build linux && !purego

package hugepage

import (
	"unsafe"

	"golang.org/x/sys/unix"
)

// Advise asks for huge pages under the aligned part of the n bytes at p and
// returns how many bytes the kernel now backs with them (0 when the array is
// smaller than Min, the kernel has no transparent huge pages, or it refuses:
// the array works the same on small pages). p must point to memory the
// caller has written and holds; the call copies it when it collapses pages,
// so it belongs where the array is built, never on a query's path.
func Advise(p unsafe.Pointer, n int) int {
	if n < Min {
		return 0
	}
	lo, hi := span(uintptr(p), uintptr(n))
	if hi == lo {
		return 0
	}
	// The slice only names the range for the system calls; it is never read.
	b := unsafe.Slice((*byte)(unsafe.Add(p, lo-uintptr(p))), hi-lo)
	if err := unix.Madvise(b, unix.MADV_HUGEPAGE); err != nil {
		return 0
	}
	// MADV_COLLAPSE (Linux 6.1) fails on older kernels and when no huge
	// page is free; khugepaged may still collapse the range later.
	if err := unix.Madvise(b, unix.MADV_COLLAPSE); err != nil {
		return 0
	}
	return int(hi - lo)
}
