//go:build (!amd64 && !arm64) || purego

package prefetch

import "unsafe"

// Line does nothing where the package has no prefetch instruction (and with
// the purego tag): a prefetcher then only costs its arithmetic.
func Line(unsafe.Pointer) {}
