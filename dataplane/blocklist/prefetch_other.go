//go:build (!amd64 && !arm64) || purego

package blocklist

import "unsafe"

// prefetch does nothing where the package has no prefetch instruction (and
// with the purego tag): Prefetch then only costs the hash.
func prefetch(unsafe.Pointer) {}
