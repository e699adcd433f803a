//go:build (amd64 || arm64) && !purego

package prefetch

import "unsafe"

// Line asks the CPU to start loading the cache line at addr and returns at
// once (PREFETCHT0, PRFM PLDL1KEEP). A plain load would do the same work
// but hold up the instructions after it until the line arrives. addr must
// point into memory the caller holds; a prefetch never faults.
//
//go:noescape
func Line(addr unsafe.Pointer)
