package upstream

import (
	"net"
	"syscall"

	"golang.org/x/sys/unix"

	"github.com/svcdns/svc/dataplane/mmsg"
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
	// The reader's state for rc.Read (readNext), made once: a closure
	// per read would be an allocation per answer.
	rbuf  []byte
	rn    int
	rerr  error
	rfl   *flushers
	readF func(fd uintptr) bool
}

func (w *udpWriter) init(c *net.UDPConn) {
	w.rc, _ = c.SyscallConn()
	w.fn = w.send
	w.readF = w.recv
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
	n, errno := mmsg.Send(fd, w.hdrs[w.sent:w.n])
	switch errno {
	case 0:
		w.sent += n
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

// readNext reads the next datagram on s into buf. Before it would block,
// it flushes the work fl holds (the answers of async queries, queued by
// their callbacks), so the answers read in one wake-up go out together.
func (s *udpSock) readNext(buf []byte, fl *flushers) (int, error) {
	w := &s.w
	if w.rc == nil {
		fl.flush()
		return s.c.Read(buf)
	}
	w.rbuf, w.rfl, w.rn, w.rerr = buf, fl, 0, nil
	err := w.rc.Read(w.readF)
	w.rbuf, w.rfl = nil, nil
	if err != nil {
		return 0, err
	}
	if w.rerr != nil {
		return 0, &net.OpError{Op: "read", Net: "udp", Err: w.rerr}
	}
	return w.rn, nil
}

func (w *udpWriter) recv(fd uintptr) bool {
	var errno unix.Errno
	for {
		w.rn, errno = mmsg.ReadNonblock(fd, w.rbuf)
		if errno != unix.EINTR {
			break
		}
	}
	w.rerr = nil
	if errno != 0 {
		w.rerr = errno
	}
	if errno == unix.EAGAIN {
		w.rfl.flush()
		return false // wait for the next datagram
	}
	return true
}
