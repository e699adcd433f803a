//go:build !linux || purego

package hugepage

import "unsafe"

// Advise does nothing where the kernel has no madvise huge pages (and with
// the purego tag, the escape hatch to plain small pages): the array works
// the same.
func Advise(unsafe.Pointer, int) int { return 0 }
