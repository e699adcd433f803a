//go:build !linux

package transport

import "syscall"

// quickAck is Linux's TCP_QUICKACK; elsewhere the kernel decides.
func quickAck(syscall.RawConn) {}
