//go:build !linux

package node

// dropBinaryPages is Linux-only (it reads /proc/self/maps); elsewhere the
// binary's pages stay as the kernel keeps them.
func dropBinaryPages() (int64, error) { return 0, nil }
