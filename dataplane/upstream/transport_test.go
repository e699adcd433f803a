package upstream

import (
	"context"
	"crypto/tls"
	"encoding/binary"
	"errors"
	"io"
	"net"
	"net/http"
	"net/http/httptest"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/miekg/dns"
)

// TestForwardTransports sends queries over every transport to real servers
// on loopback and checks the answer, the client's ID, the upstream name and
// that connections are reused.
func TestForwardTransports(t *testing.T) {
	pki := newTestPKI(t)
	udp := startUDP(t, answerA("192.0.2.1"))
	tcp, tcpL := startTCP(t, answerA("192.0.2.2"))
	dot, dotL := startDoT(t, pki, nil, answerA("192.0.2.3"))
	doh := startDoH(t, pki, nil, answerA("192.0.2.4"))
	doq := startDoQ(t, pki, nil, answerA("192.0.2.5"))

	cases := []struct {
		name   string
		server string
		want   string
		conns  func() int64 // connections the server accepted; nil = not counted
	}{
		{"plain", udp, "192.0.2.1", nil},
		{"udp scheme", "udp://" + udp, "192.0.2.1", nil},
		{"tcp", "tcp://" + tcp, "192.0.2.2", tcpL.accepted.Load},
		{"dot", "tls://" + dot, "192.0.2.3", dotL.accepted.Load},
		{"doh", "https://" + doh.hostPort() + "/dns-query", "192.0.2.4", doh.conns.Load},
		{"doq", "quic://" + doq.hostPort(), "192.0.2.5", doq.conns.Load},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			r := newResolver(t, Config{
				Groups: map[string]GroupConfig{DefaultGroup: {Servers: []string{tc.server}, Strategy: Strict, Timeout: 3 * time.Second}},
				TLS:    &tls.Config{RootCAs: pki.Pool},
			})
			before := int64(0)
			if tc.conns != nil {
				before = tc.conns()
			}
			for i := range 3 {
				req := query("www.example.org", dns.TypeA)
				req.Id = uint16(1000 + i)
				resp, up, err := r.Forward(context.Background(), "", req, clientAddr)
				if err != nil {
					t.Fatalf("query %d: %v", i, err)
				}
				if got := firstA(t, resp); got != tc.want {
					t.Errorf("answer %s, want %s", got, tc.want)
				}
				if resp.Id != req.Id {
					t.Errorf("answer ID %d, want the client's %d", resp.Id, req.Id)
				}
				if up != tc.server {
					t.Errorf("upstream %q, want %q", up, tc.server)
				}
			}
			if tc.conns != nil {
				if n := tc.conns() - before; n != 1 {
					t.Errorf("server accepted %d connections for 3 queries, want 1 (reuse)", n)
				}
			}
		})
	}
	if n := doh.badProto.Load(); n != 0 {
		t.Errorf("%d DoH requests were not HTTP/2 POST application/dns-message", n)
	}
	if n := doh.nonZero.Load() + doq.nonZero.Load(); n != 0 {
		t.Errorf("%d DoH/DoQ queries carried a non-zero message ID", n)
	}
}

// TestTruncatedUDPRetriesOverTCP: TC=1 over UDP makes the query go again
// over TCP to the same address.
func TestTruncatedUDPRetriesOverTCP(t *testing.T) {
	truncated := func(req *dns.Msg) *dns.Msg {
		m := new(dns.Msg)
		m.SetReply(req)
		m.Truncated = true
		return m
	}
	addr := startUDPAndTCP(t, truncated, answerA("192.0.2.9"))
	r := newResolver(t, Config{Groups: map[string]GroupConfig{DefaultGroup: {Servers: []string{addr}, Strategy: Strict}}})
	resp, _, err := r.Forward(context.Background(), "", query("big.example", dns.TypeA), clientAddr)
	if err != nil {
		t.Fatal(err)
	}
	if resp.Truncated {
		t.Error("answer still truncated")
	}
	if got := firstA(t, resp); got != "192.0.2.9" {
		t.Errorf("answer %s, want the TCP answer 192.0.2.9", got)
	}
}

// rawTCPServer handles each accepted connection with serve; it stops at
// cleanup.
func rawTCPServer(t *testing.T, serve func(c net.Conn)) (string, *atomic.Int64) {
	t.Helper()
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	var accepted atomic.Int64
	var wg sync.WaitGroup
	wg.Add(1)
	go func() {
		defer wg.Done()
		for {
			c, err := l.Accept()
			if err != nil {
				return
			}
			accepted.Add(1)
			wg.Add(1)
			go func() {
				defer wg.Done()
				defer c.Close()
				_ = c.SetDeadline(time.Now().Add(5 * time.Second))
				serve(c)
			}()
		}
	}()
	t.Cleanup(func() {
		l.Close()
		wg.Wait()
	})
	return l.Addr().String(), &accepted
}

func readTCPQuery(c net.Conn) (*dns.Msg, error) {
	var lb [2]byte
	if _, err := io.ReadFull(c, lb[:]); err != nil {
		return nil, err
	}
	buf := make([]byte, binary.BigEndian.Uint16(lb[:]))
	if _, err := io.ReadFull(c, buf); err != nil {
		return nil, err
	}
	m := new(dns.Msg)
	return m, m.Unpack(buf)
}

func writeTCP(c net.Conn, m *dns.Msg) error {
	out, err := m.Pack()
	if err != nil {
		return err
	}
	_, err = c.Write(append(binary.BigEndian.AppendUint16(nil, uint16(len(out))), out...))
	return err
}

// TestTCPServerClosingConnections: a server that closes the connection
// after one answer (idle close) costs no failed query, and one that closes
// without answering fails over to the next server.
func TestTCPServerClosingConnections(t *testing.T) {
	oneShot, accepted := rawTCPServer(t, func(c net.Conn) {
		req, err := readTCPQuery(c)
		if err != nil {
			return
		}
		_ = writeTCP(c, answerA("192.0.2.10")(req))
	})
	r := newResolver(t, Config{Groups: map[string]GroupConfig{DefaultGroup: {Servers: []string{"tcp://" + oneShot}, Strategy: Strict}}})
	for i := range 3 {
		resp, _, err := r.Forward(context.Background(), "", query("a.example", dns.TypeA), clientAddr)
		if err != nil {
			t.Fatalf("query %d after the server closed the pooled connection: %v", i, err)
		}
		if got := firstA(t, resp); got != "192.0.2.10" {
			t.Fatalf("answer %s", got)
		}
	}
	if n := accepted.Load(); n != 3 {
		t.Errorf("server accepted %d connections, want 3 (one per query)", n)
	}

	slammer, _ := rawTCPServer(t, func(c net.Conn) {
		_, _ = readTCPQuery(c) // read, then close without answering
	})
	good, _ := startTCP(t, answerA("192.0.2.11"))
	r2 := newResolver(t, Config{Groups: map[string]GroupConfig{DefaultGroup: {
		Servers: []string{"tcp://" + slammer, "tcp://" + good}, Strategy: Strict, Timeout: time.Second,
	}}})
	start := time.Now()
	resp, up, err := r2.Forward(context.Background(), "", query("b.example", dns.TypeA), clientAddr)
	if err != nil {
		t.Fatal(err)
	}
	if up != "tcp://"+good || firstA(t, resp) != "192.0.2.11" {
		t.Errorf("answer from %s, want the second server", up)
	}
	if d := time.Since(start); d > 900*time.Millisecond {
		t.Errorf("failover took %v: a closed connection must not wait for the timeout", d)
	}
	if got := errorCount(t, r2, DefaultGroup, "tcp://"+slammer, reasonNetwork); got != 1 {
		t.Errorf("network errors of the closing server = %v, want 1", got)
	}
}

// TestAnswerMustMatchQuestion: an answer for another name is refused and
// the next server asked.
func TestAnswerMustMatchQuestion(t *testing.T) {
	liar := startUDP(t, func(req *dns.Msg) *dns.Msg {
		other := req.Copy()
		other.Question[0].Name = "evil.example."
		return answerA("203.0.113.66")(other)
	})
	good := startUDP(t, answerA("192.0.2.12"))
	r := newResolver(t, Config{Groups: map[string]GroupConfig{DefaultGroup: {
		Servers: []string{liar, good}, Strategy: Strict, Timeout: time.Second,
	}}})
	resp, up, err := r.Forward(context.Background(), "", query("Mixed.Example", dns.TypeA), clientAddr)
	if err != nil {
		t.Fatal(err)
	}
	if up != good || firstA(t, resp) != "192.0.2.12" {
		t.Errorf("answer from %s: %v", up, resp)
	}
	if got := errorCount(t, r, DefaultGroup, liar, reasonMismatch); got != 1 {
		t.Errorf("mismatch errors = %v, want 1", got)
	}
}

// TestDoHErrors: a DoH server answering with an HTTP error or a body too
// large to be a DNS message is a failure.
func TestDoHErrors(t *testing.T) {
	pki := newTestPKI(t)
	failing := startDoH(t, pki, nil, drop) // 503
	r := newResolver(t, Config{
		Groups: map[string]GroupConfig{DefaultGroup: {Servers: []string{"https://" + failing.hostPort() + "/dns-query"}, Strategy: Strict, Timeout: time.Second}},
		TLS:    &tls.Config{RootCAs: pki.Pool},
	})
	_, _, err := r.Forward(context.Background(), "", query("x.example", dns.TypeA), clientAddr)
	if !errors.Is(err, errHTTP) {
		t.Errorf("error %v, want an HTTP error", err)
	}
}

// TestDoTRejectsUntrustedCertificate: without the test CA the handshake
// fails; with it given as CAFile it succeeds.
func TestDoTCertificateTrust(t *testing.T) {
	pki := newTestPKI(t)
	dot, _ := startDoT(t, pki, nil, answerA("192.0.2.13"))
	groups := map[string]GroupConfig{DefaultGroup: {Servers: []string{"tls://" + dot}, Strategy: Strict, Timeout: time.Second}}

	untrusted := newResolver(t, Config{Groups: groups})
	if _, _, err := untrusted.Forward(context.Background(), "", query("x.example", dns.TypeA), clientAddr); err == nil {
		t.Error("query over TLS to an untrusted certificate succeeded")
	}

	caFile := t.TempDir() + "/ca.pem"
	if err := writeFile(caFile, pki.CAPEM); err != nil {
		t.Fatal(err)
	}
	trusted := newResolver(t, Config{Groups: groups, CAFile: caFile})
	resp, _, err := trusted.Forward(context.Background(), "", query("x.example", dns.TypeA), clientAddr)
	if err != nil {
		t.Fatal(err)
	}
	if firstA(t, resp) != "192.0.2.13" {
		t.Errorf("answer %v", resp)
	}
}

// TestDoQRedialsAfterServerRestart: the shared QUIC connection dies with
// the server; the next queries dial the restarted server.
func TestDoQRedialsAfterServerRestart(t *testing.T) {
	pki := newTestPKI(t)
	first := startDoQ(t, pki, nil, answerA("192.0.2.70"))
	addr := first.hostPort()
	r := newResolver(t, Config{
		Groups: map[string]GroupConfig{DefaultGroup: {Servers: []string{"quic://" + addr}, Strategy: Strict, Timeout: 300 * time.Millisecond}},
		TLS:    &tls.Config{RootCAs: pki.Pool},
	})
	if _, _, err := r.Forward(context.Background(), "", query("q.example", dns.TypeA), clientAddr); err != nil {
		t.Fatal(err)
	}
	first.stop()
	second := startDoQAt(t, addr, pki, nil, answerA("192.0.2.71"))
	var got string
	for i := range 3 { // at most one query may time out on the forgotten connection
		resp, _, err := r.Forward(context.Background(), "", query("q.example", dns.TypeA), clientAddr)
		if err == nil {
			got = firstA(t, resp)
			break
		}
		t.Logf("query %d after restart: %v", i, err)
	}
	if got != "192.0.2.71" {
		t.Fatalf("no answer from the restarted server (got %q)", got)
	}
	if n := second.conns.Load(); n != 1 {
		t.Errorf("restarted server saw %d connections, want 1", n)
	}
}

// TestDoHOversizedBody: a body larger than any DNS message is refused
// without reading it all.
func TestDoHOversizedBody(t *testing.T) {
	pki := newTestPKI(t)
	srv := httptest.NewUnstartedServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set("Content-Type", "application/dns-message")
		chunk := make([]byte, 16<<10)
		for range 64 { // 1 MiB, bounded
			if _, err := w.Write(chunk); err != nil {
				return
			}
		}
	}))
	srv.EnableHTTP2 = true
	srv.TLS = pki.serverTLS(nil, "h2")
	srv.StartTLS()
	t.Cleanup(srv.Close)
	r := newResolver(t, Config{
		Groups: map[string]GroupConfig{DefaultGroup: {Servers: []string{"https://" + srv.Listener.Addr().String() + "/dns-query"}, Strategy: Strict, Timeout: 2 * time.Second}},
		TLS:    &tls.Config{RootCAs: pki.Pool},
	})
	_, _, err := r.Forward(context.Background(), "", query("big.example", dns.TypeA), clientAddr)
	if !errors.Is(err, errMalformed) {
		t.Errorf("error %v, want malformed (too large)", err)
	}
}

func TestForwardRejectsBadQueries(t *testing.T) {
	r := newResolver(t, group1(Strict, time.Second, "192.0.2.1"))
	two := query("a.example", dns.TypeA)
	two.Question = append(two.Question, two.Question[0])
	for name, req := range map[string]*dns.Msg{"nil": nil, "no question": new(dns.Msg), "two questions": two} {
		if _, _, err := r.Forward(context.Background(), "", req, clientAddr); err == nil {
			t.Errorf("%s: accepted", name)
		}
	}
}
