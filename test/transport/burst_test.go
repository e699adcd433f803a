package transport_test

import (
	"crypto/tls"
	"encoding/binary"
	"net"
	"testing"
	"time"

	"golang.org/x/sys/unix"
)

// heldConn holds the TLS client's writes (one TLS record each) until
// release, which sends them in one syscall: a burst of queries arriving in
// one TCP segment, as from a busy stub resolver or dnsperf.
type heldConn struct {
	*net.TCPConn
	hold bool
	buf  []byte
}

func (h *heldConn) Write(p []byte) (int, error) {
	if h.hold {
		h.buf = append(h.buf, p...)
		return len(p), nil
	}
	return h.TCPConn.Write(p)
}

func (h *heldConn) release(t *testing.T) {
	t.Helper()
	h.hold = false
	if _, err := h.TCPConn.Write(h.buf); err != nil {
		t.Fatal(err)
	}
	h.buf = nil
}

// segsIn is how many TCP segments the socket has received (TCP_INFO).
func (h *heldConn) segsIn(t *testing.T) uint32 {
	t.Helper()
	rc, err := h.SyscallConn()
	if err != nil {
		t.Fatal(err)
	}
	var info *unix.TCPInfo
	var gerr error
	if err := rc.Control(func(fd uintptr) {
		info, gerr = unix.GetsockoptTCPInfo(int(fd), unix.IPPROTO_TCP, unix.TCP_INFO)
	}); err != nil || gerr != nil {
		t.Fatal(err, gerr)
	}
	return info.Segs_in
}

func dialHeld(t *testing.T, addr string, cfg *tls.Config) (*tls.Conn, *heldConn) {
	t.Helper()
	raw, err := net.DialTimeout("tcp", addr, 3*time.Second)
	if err != nil {
		t.Fatal(err)
	}
	h := &heldConn{TCPConn: raw.(*net.TCPConn)}
	c := tls.Client(h, cfg)
	t.Cleanup(func() { _ = c.Close() })
	_ = c.SetDeadline(time.Now().Add(10 * time.Second))
	if err := c.Handshake(); err != nil {
		t.Fatal(err)
	}
	return c, h
}

// burstSegments bounds the segments a burst of 16 answers may take: the
// server reads the 16 records in one read and answers them in one write
// (plus, at most, a stray ACK or window update); one write per query
// would be 16.
const burstQueries, burstSegments = 16, 3

// TestBurstAnsweredInOneWrite: queries that arrive together, each in its
// own TLS record, are answered together. crypto/tls hands the server one
// record per Read; without polling what it already holds, the server
// would write (and the client receive) one segment per query.
func TestBurstAnsweredInOneWrite(t *testing.T) {
	st := newStack(t, stackOpts{})

	for _, v := range []struct {
		name       string
		maxVersion uint16
	}{{"dot", 0}, {"dot-tls1.2", tls.VersionTLS12}} {
		t.Run(v.name, func(t *testing.T) { burstDoT(t, st, v.maxVersion) })
	}

	t.Run("doh-h2", func(t *testing.T) {
		c, h := dialHeld(t, st.addr("doh").String(), st.pki.ClientTLS("h2"))
		hc := newH2Client(t, c)
		hc.mustGet(t, 1)
		hc.answers(t, 1)
		time.Sleep(50 * time.Millisecond)
		before := h.segsIn(t)
		h.hold = true
		for i := range burstQueries {
			hc.mustGet(t, uint32(3+2*i))
		}
		h.release(t)
		hc.answers(t, burstQueries)
		if n := h.segsIn(t) - before; n > burstSegments {
			t.Errorf("%d answers came in %d segments, want at most %d", burstQueries, n, burstSegments)
		}
	})
}

// burstDoT sends a DoT burst (TLS version at most maxVersion; 0: the default)
// and counts the segments of the answers.
func burstDoT(t *testing.T, st *stack, maxVersion uint16) {
	cfg := st.pki.ClientTLS("dot")
	cfg.MaxVersion = maxVersion
	c, h := dialHeld(t, st.addr("dot").String(), cfg)
	ask := func(id uint16) {
		q := query(t, id)
		if _, err := c.Write(append(binary.BigEndian.AppendUint16(nil, uint16(len(q))), q...)); err != nil {
			t.Fatal(err)
		}
	}
	read := func() {
		b := readDoT(t, c)
		checkAnswer(t, b)
	}
	ask(1) // a first round trip takes the session tickets in
	read()
	time.Sleep(50 * time.Millisecond) // delayed ACKs of the warm-up are out
	before := h.segsIn(t)
	h.hold = true
	for i := range burstQueries {
		ask(uint16(10 + i))
	}
	h.release(t)
	for range burstQueries {
		read()
	}
	if n := h.segsIn(t) - before; n > burstSegments {
		t.Errorf("%d answers came in %d segments, want at most %d", burstQueries, n, burstSegments)
	}
}
