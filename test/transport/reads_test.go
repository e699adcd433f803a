package transport_test

import (
	"bufio"
	"crypto/tls"
	"encoding/binary"
	"io"
	"net"
	"net/netip"
	"os"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"
)

// blockingConn is a TCP connection on a blocking socket, outside Go's
// poller: each Read is exactly one read syscall that waits, so the
// client's share of the process's read syscalls is known (one per answer).
type blockingConn struct {
	fd int
	net.Conn
}

func dialBlocking(t *testing.T, addr netip.AddrPort) *blockingConn {
	t.Helper()
	fd, err := syscall.Socket(syscall.AF_INET, syscall.SOCK_STREAM|syscall.SOCK_CLOEXEC, 0)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = syscall.Close(fd) })
	tv := syscall.NsecToTimeval(int64(5 * time.Second))
	if err := syscall.SetsockoptTimeval(fd, syscall.SOL_SOCKET, syscall.SO_RCVTIMEO, &tv); err != nil {
		t.Fatal(err)
	}
	_ = syscall.SetsockoptInt(fd, syscall.IPPROTO_TCP, syscall.TCP_NODELAY, 1)
	if err := syscall.Connect(fd, &syscall.SockaddrInet4{Port: int(addr.Port()), Addr: addr.Addr().As4()}); err != nil {
		t.Fatal(err)
	}
	return &blockingConn{fd: fd}
}

func (c *blockingConn) Read(p []byte) (int, error) {
	n, err := syscall.Read(c.fd, p)
	for err == syscall.EINTR { // the runtime's preemption signal
		n, err = syscall.Read(c.fd, p)
	}
	if err != nil {
		return 0, err
	}
	if n == 0 {
		return 0, io.EOF
	}
	return n, nil
}

func (c *blockingConn) Write(p []byte) (int, error) {
	for off := 0; off < len(p); {
		n, err := syscall.Write(c.fd, p[off:])
		if err == syscall.EINTR {
			continue
		}
		if err != nil {
			return off, err
		}
		off += n
	}
	return len(p), nil
}

func (c *blockingConn) SetDeadline(time.Time) error      { return nil }
func (c *blockingConn) SetReadDeadline(time.Time) error  { return nil }
func (c *blockingConn) SetWriteDeadline(time.Time) error { return nil }
func (c *blockingConn) Close() error                     { return nil }

// readSyscalls is the process's count of read syscalls so far.
func readSyscalls(t *testing.T) int {
	t.Helper()
	f, err := os.Open("/proc/self/io")
	if err != nil {
		t.Skip("no /proc/self/io:", err)
	}
	defer f.Close()
	sc := bufio.NewScanner(f)
	for sc.Scan() {
		if v, ok := strings.CutPrefix(sc.Text(), "syscr: "); ok {
			n, err := strconv.Atoi(v)
			if err != nil {
				t.Fatal(err)
			}
			return n
		}
	}
	t.Skip("no syscr in /proc/self/io")
	return 0
}

// readsPerQuery bounds the read syscalls of the whole process per query
// with one query in flight: one for the client, one for the server. A
// server that reads until the socket is empty (as Go's Read does) pays a
// second read per query that finds nothing (EAGAIN) before it waits: 3.
const readsPerQuery = 2.3

// TestOneReadPerQuery: with one query in flight per connection (dnsperf's
// default, a stub resolver), the DoT and h2 DoH servers read the socket
// once per query, not once more to find it empty.
func TestOneReadPerQuery(t *testing.T) {
	st := newStack(t, stackOpts{})
	const queries = 300

	t.Run("dot", func(t *testing.T) {
		c := tls.Client(dialBlocking(t, st.addr("dot")), st.pki.ClientTLS("dot"))
		if err := c.Handshake(); err != nil {
			t.Fatal(err)
		}
		ask := func(id uint16) {
			q := query(t, id)
			if _, err := c.Write(append(binary.BigEndian.AppendUint16(nil, uint16(len(q))), q...)); err != nil {
				t.Fatal(err)
			}
			checkAnswer(t, readDoT(t, c))
		}
		ask(1) // takes the session tickets in
		before := readSyscalls(t)
		for i := range queries {
			ask(uint16(2 + i))
		}
		perQuery(t, readSyscalls(t)-before, queries)
	})

	t.Run("doh-h2", func(t *testing.T) {
		c := tls.Client(dialBlocking(t, st.addr("doh")), st.pki.ClientTLS("h2"))
		hc := newH2Client(t, c)
		ask := func(sid uint32) {
			hc.mustGet(t, sid)
			hc.answers(t, 1)
		}
		ask(1)
		ask(3) // the SETTINGS exchange and window updates are done
		before := readSyscalls(t)
		for i := range queries {
			ask(uint32(5 + 2*i))
		}
		perQuery(t, readSyscalls(t)-before, queries)
	})
}

func perQuery(t *testing.T, reads, queries int) {
	t.Helper()
	got := float64(reads) / float64(queries)
	t.Logf("%.2f read syscalls per query (client and server)", got)
	if got > readsPerQuery {
		t.Errorf("%.2f read syscalls per query, want at most %.1f (one for the client, one for the server)", got, readsPerQuery)
	}
}
