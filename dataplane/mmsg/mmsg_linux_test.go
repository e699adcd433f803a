package mmsg

import (
	"encoding/binary"
	"testing"
	"time"

	"golang.org/x/sys/unix"
)

// hdrs points n message headers at n buffers of size bytes.
func hdrs(n, size int) ([]unix.Mmsghdr, [][]byte) {
	h := make([]unix.Mmsghdr, n)
	bufs := make([][]byte, n)
	iovs := make([]unix.Iovec, n)
	for i := range h {
		bufs[i] = make([]byte, size)
		iovs[i].Base = &bufs[i][0]
		iovs[i].SetLen(size)
		h[i].Hdr.Iov = &iovs[i]
		h[i].Hdr.SetIovlen(1)
	}
	return h, bufs
}

// On blocking descriptors (an AF_UNIX datagram pair, whose sender blocks
// while the receiver's queue is full) Send and Recv take the raw path when
// they can and fall back to waiting when they must: the receiver starts
// first and waits for the first datagram, the sender outruns the queue and
// waits for room, and every datagram arrives once, in order.
func TestSendRecvFallBackToWaiting(t *testing.T) {
	fds, err := unix.Socketpair(unix.AF_UNIX, unix.SOCK_DGRAM|unix.SOCK_CLOEXEC, 0)
	if err != nil {
		t.Fatal(err)
	}
	defer unix.Close(fds[0])
	defer unix.Close(fds[1])
	const total = 5000 // far more than a datagram socket queues (max_dgram_qlen, buffers)
	got := make(chan []uint32, 1)
	go func() {
		var seen []uint32
		rh, rb := hdrs(64, 8)
		for len(seen) < total {
			n, errno := Recv(uintptr(fds[1]), rh)
			if errno != 0 {
				t.Error("recv:", errno)
				break
			}
			for i := range n {
				if rh[i].Len != 4 {
					t.Errorf("datagram of %d bytes, want 4", rh[i].Len)
				}
				seen = append(seen, binary.BigEndian.Uint32(rb[i]))
			}
			if len(seen) < 100 {
				time.Sleep(time.Millisecond) // let the sender fill the queue
			}
		}
		got <- seen
	}()
	time.Sleep(20 * time.Millisecond) // the receiver waits first
	sh, sb := hdrs(64, 4)
	sent := 0
	for sent < total {
		k := min(64, total-sent)
		for i := range k {
			binary.BigEndian.PutUint32(sb[i], uint32(sent+i))
		}
		n, errno := Send(uintptr(fds[0]), sh[:k])
		if errno != 0 {
			t.Fatal("send:", errno)
		}
		if n < 1 || n > k {
			t.Fatalf("sendmmsg took %d of %d", n, k)
		}
		sent += n // the next round rewrites from where the kernel stopped
	}
	select {
	case seen := <-got:
		for i, v := range seen {
			if v != uint32(i) {
				t.Fatalf("datagram %d carries %d", i, v)
			}
		}
	case <-time.After(10 * time.Second):
		t.Fatal("receiver did not get every datagram in 10 s")
	}
}

// A non-blocking descriptor answers EAGAIN instead of waiting, for Recv and
// ReadNonblock alike; ReadNonblock reads a queued datagram and refuses an
// empty buffer.
func TestNonblockingAnswersEAGAIN(t *testing.T) {
	fds, err := unix.Socketpair(unix.AF_UNIX, unix.SOCK_DGRAM|unix.SOCK_CLOEXEC|unix.SOCK_NONBLOCK, 0)
	if err != nil {
		t.Fatal(err)
	}
	defer unix.Close(fds[0])
	defer unix.Close(fds[1])
	rh, _ := hdrs(4, 8)
	if n, errno := Recv(uintptr(fds[1]), rh); errno != unix.EAGAIN || n != 0 {
		t.Fatalf("Recv on an empty socket = %d, %v; want EAGAIN", n, errno)
	}
	buf := make([]byte, 8)
	if n, errno := ReadNonblock(uintptr(fds[1]), buf); errno != unix.EAGAIN || n != 0 {
		t.Fatalf("ReadNonblock on an empty socket = %d, %v; want EAGAIN", n, errno)
	}
	if _, err := unix.Write(fds[0], []byte("abc")); err != nil {
		t.Fatal(err)
	}
	if n, errno := ReadNonblock(uintptr(fds[1]), buf); errno != 0 || string(buf[:n]) != "abc" {
		t.Fatalf("ReadNonblock = %q, %v; want abc", buf[:n], errno)
	}
	if n, errno := Send(uintptr(fds[0]), nil); n != 0 || errno != 0 {
		t.Fatalf("Send of nothing = %d, %v", n, errno)
	}
	if n, errno := ReadNonblock(uintptr(fds[1]), nil); n != 0 || errno != unix.EINVAL {
		t.Fatalf("ReadNonblock into nothing = %d, %v; want EINVAL", n, errno)
	}
}
