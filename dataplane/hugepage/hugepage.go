// Package hugepage asks the kernel to back a large, read-mostly array with
// transparent huge pages (2 MiB on amd64 and arm64).
//
// A block list of a million names spreads its hash slots and filter over
// about 12 MiB and reads them at random, one line per lookup: with 4 KiB
// pages nearly every lookup also misses the TLB and waits for a page walk
// (the prefetch instruction of dataplane/prefetch stalls on it, 4-6% of a
// busy server's samples under the block workload). Backed by 2 MiB pages
// the whole array needs six TLB entries.
//
// The Go runtime does not ask for huge pages itself, and most hosts set
// transparent huge pages to "madvise": only ranges that ask get them.
// Advise asks for the 2 MiB-aligned part of an array already written
// (MADV_HUGEPAGE, then MADV_COLLAPSE, which copies it into huge pages at
// once instead of waiting for khugepaged). The memory stays on the Go heap,
// owned and freed by the garbage collector as before.
package hugepage

// Size is the huge page size Advise aligns to.
const Size = 2 << 20

// Min is the smallest array Advise asks for: below two huge pages the
// aligned part may be empty and the TLB gain is small.
const Min = 2 * Size

// span returns the Size-aligned part [lo, hi) of [p, p+n), empty when
// there is none.
func span(p, n uintptr) (lo, hi uintptr) {
	lo = (p + Size - 1) &^ (Size - 1)
	hi = (p + n) &^ (Size - 1)
	if hi <= lo {
		return 0, 0
	}
	return lo, hi
}
