//go:build unix

package node

import "syscall"

// nofile is the process's file-descriptor limit (0 when unknown).
func nofile() uint64 {
	var r syscall.Rlimit
	if err := syscall.Getrlimit(syscall.RLIMIT_NOFILE, &r); err != nil {
		return 0
	}
	return r.Cur
}
