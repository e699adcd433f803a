package upstream

import (
	"net"
	"syscall"
	"unsafe"

	"golang.org/x/sys/unix"
)

// udpSendBatch is how many queries one sendmmsg writes at most.
const udpSendBatch = 64

// udpWriter is the sendmmsg state of one pooled (connected) socket; only
// its flusher uses it.
type udpWriter struct {
	rc   syscall.RawConn
	hdrs [udpSendBatch]unix.Mmsghdr
	iovs [udpSendBatch]unix.Iovec
	n    int
	sent int
	err  error
	fn   func(fd uintptr) bool
}

func (w *udpWriter) init(c *net.UDPConn) {
	w.rc, _ = c.SyscallConn()
	w.fn = w.send
}

// writeBatch writes the queued queries; each one the kernel refuses fails
// its query.
func (s *udpSock) writeBatch(batch []udpOut, arena []byte) {
	w := &s.w
	if w.rc == nil {
		for _, o := range batch {
			if _, err := s.c.Write(arena[o.off : o.off+o.n]); err != nil {
				s.failSend(o, err)
			}
		}
		return
	}
	for len(batch) > 0 {
		k := min(len(batch), udpSendBatch)
		for i, o := range batch[:k] {
			w.iovs[i].Base = &arena[o.off]
			w.iovs[i].SetLen(o.n)
			h := &w.hdrs[i].Hdr
			h.Name, h.Namelen = nil, 0 // connected
			h.Iov = &w.iovs[i]
			h.SetIovlen(1)
		}
		w.n, w.sent = k, 0
		for w.sent < w.n {
			w.err = nil
			if err := w.rc.Write(w.fn); err != nil {
				for _, o := range batch[w.sent:k] { // closed
					s.failSend(o, err)
				}
				break
			}
			if w.err != nil {
				s.failSend(batch[w.sent], w.err) // the first unsent one was refused
				w.sent++
			}
		}
		for i := range k {
			w.iovs[i].Base = nil
		}
		batch = batch[k:]
	}
}

func (w *udpWriter) send(fd uintptr) bool {
	n, _, errno := unix.Syscall6(unix.SYS_SENDMMSG, fd, uintptr(unsafe.Pointer(&w.hdrs[w.sent])), uintptr(w.n-w.sent), 0, 0, 0)
	switch errno {
	case 0:
		w.sent += int(n)
		return true
	case unix.EAGAIN, unix.EINTR:
		return false
	}
	w.err = errno
	return true
}

// readDatagram waits for the next datagram on c and reads it into a buffer
// ans takes sized to it: a peek with MSG_TRUNC tells the size first, so a
// query waiting on a fresh socket holds no answer buffer.
func readDatagram(c net.Conn, ans *msgBuf) ([]byte, error) {
	uc, ok := c.(*net.UDPConn)
	if !ok {
		return readDatagramFull(c, ans)
	}
	rc, err := uc.SyscallConn()
	if err != nil {
		return readDatagramFull(c, ans)
	}
	var one [1]byte
	size := 0
	var perr error
	err = rc.Read(func(fd uintptr) bool {
		n, _, e := unix.Recvfrom(int(fd), one[:], unix.MSG_PEEK|unix.MSG_TRUNC)
		if e == unix.EAGAIN || e == unix.EINTR {
			return false
		}
		size, perr = n, e
		return true
	})
	if err != nil {
		return nil, err
	}
	if perr != nil {
		return nil, perr
	}
	buf := ans.take(min(max(size, 1), maxMsgSize))
	n, err := c.Read(buf)
	if err != nil {
		return nil, err
	}
	return buf[:n], nil
}
