// Package mmsg moves batches of datagrams with sendmmsg and recvmmsg (and
// single reads) without giving the calling goroutine's P to the runtime
// when the kernel has the data or the room at once.
//
// A system call made through syscall.Syscall enters the runtime's syscall
// state. If it is still in the kernel at the runtime monitor's next tick
// (every 20 us while it finds work), the monitor takes the P away and
// wakes another thread to look for goroutines, and the caller must win a P
// back when it returns. On a node given one CPU (GOMAXPROCS 1) answering at
// full rate, a sendmmsg of 16 answers on loopback (which delivers them
// inline) spans such ticks: perf counted 16,000 context switches, 3,400
// futex wake-ups and 5,800 monitor sleeps per second, and the server's CPU
// per answer was 0.84-0.89 of Knot's rate (issue #27). Knot makes plain
// system calls.
//
// So each call is first made as a raw system call with MSG_DONTWAIT, which
// the kernel completes without sleeping: the runtime is not told, and
// nothing can take the P meanwhile. Only when the kernel would block
// (EAGAIN: nothing queued, or the send buffer full) is the call made again
// through syscall.Syscall, which may block with the P handed off as usual.
package mmsg

import (
	"unsafe"

	"golang.org/x/sys/unix"
)

// Send writes hdrs with sendmmsg and returns how many the kernel took. On a
// blocking descriptor it waits only when the send buffer is full; on a
// non-blocking one it then answers EAGAIN.
func Send(fd uintptr, hdrs []unix.Mmsghdr) (int, unix.Errno) {
	if len(hdrs) == 0 {
		return 0, 0
	}
	// The pointer is converted in each call expression, as unsafe.Pointer's
	// rule for system calls asks: hdrs stays alive and in place until the
	// call returns.
	n, _, errno := unix.RawSyscall6(unix.SYS_SENDMMSG, fd, uintptr(unsafe.Pointer(&hdrs[0])), uintptr(len(hdrs)), unix.MSG_DONTWAIT, 0, 0)
	if errno == unix.EAGAIN {
		n, _, errno = unix.Syscall6(unix.SYS_SENDMMSG, fd, uintptr(unsafe.Pointer(&hdrs[0])), uintptr(len(hdrs)), 0, 0, 0)
	}
	if errno != 0 {
		return 0, errno
	}
	return int(n), 0
}

// Recv reads up to len(hdrs) datagrams with recvmmsg. What is queued is
// taken at once; when nothing is, a blocking descriptor waits for the first
// datagram and takes what else has arrived with it (MSG_WAITFORONE), and a
// non-blocking one answers EAGAIN.
func Recv(fd uintptr, hdrs []unix.Mmsghdr) (int, unix.Errno) {
	if len(hdrs) == 0 {
		return 0, 0
	}
	n, _, errno := unix.RawSyscall6(unix.SYS_RECVMMSG, fd, uintptr(unsafe.Pointer(&hdrs[0])), uintptr(len(hdrs)), unix.MSG_DONTWAIT, 0, 0)
	if errno == unix.EAGAIN {
		n, _, errno = unix.Syscall6(unix.SYS_RECVMMSG, fd, uintptr(unsafe.Pointer(&hdrs[0])), uintptr(len(hdrs)), unix.MSG_WAITFORONE, 0, 0)
	}
	if errno != 0 {
		return 0, errno
	}
	return int(n), 0
}

// ReadNonblock reads one datagram from a non-blocking descriptor into b as
// a raw system call (it cannot sleep); EAGAIN means nothing is queued,
// EINVAL that b is empty.
func ReadNonblock(fd uintptr, b []byte) (int, unix.Errno) {
	if len(b) == 0 {
		return 0, unix.EINVAL
	}
	n, _, errno := unix.RawSyscall(unix.SYS_READ, fd, uintptr(unsafe.Pointer(&b[0])), uintptr(len(b)))
	if errno != 0 {
		return 0, errno
	}
	return int(n), 0
}
