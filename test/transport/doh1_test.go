package transport_test

import (
	"bufio"
	"crypto/tls"
	"encoding/base64"
	"fmt"
	"io"
	"net"
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/svcdns/svc/dataplane"
	"github.com/svcdns/svc/dataplane/transport"
)

// h1Conn opens a TLS connection to the DoH listener with ALPN http/1.1.
func h1Conn(t *testing.T, st *stack) (*tls.Conn, *bufio.Reader) {
	t.Helper()
	c, err := tls.DialWithDialer(&net.Dialer{Timeout: 3 * time.Second}, "tcp", st.addr("doh").String(), st.pki.ClientTLS("http/1.1"))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { c.Close() })
	if p := c.ConnectionState().NegotiatedProtocol; p != "http/1.1" {
		t.Fatalf("ALPN %q", p)
	}
	_ = c.SetDeadline(time.Now().Add(5 * time.Second))
	return c, bufio.NewReader(c)
}

func readH1(t *testing.T, br *bufio.Reader, method string) (*http.Response, []byte) {
	t.Helper()
	resp, err := http.ReadResponse(br, &http.Request{Method: method})
	if err != nil {
		t.Fatal(err)
	}
	body, err := io.ReadAll(resp.Body)
	if err != nil {
		t.Fatal(err)
	}
	resp.Body.Close()
	return resp, body
}

// closed reports whether the server closed the connection (EOF within 2s).
func closed(br *bufio.Reader) bool {
	_, err := br.ReadByte()
	return err == io.EOF
}

// TestDoH1Wire holds DoH over HTTP/1.1 to the protocol on the wire:
// keep-alive, pipelined requests answered in order, Connection: close and
// HTTP/1.0, chunked and 100-continue bodies, and the framing errors a
// client can make (no Host, an oversize header block, a garbled request
// line, conflicting lengths), each answered with the status that names it
// and the connection closed where it can no longer be framed.
func TestDoH1Wire(t *testing.T) {
	st := newStack(t, stackOpts{})
	q := query(t, 0)
	get := "GET /dns-query?dns=" + base64.RawURLEncoding.EncodeToString(q) + " HTTP/1.1\r\nHost: dns.test\r\n\r\n"
	post := fmt.Sprintf("POST /dns-query/h1id HTTP/1.1\r\nHost: dns.test\r\nContent-Type: application/dns-message\r\nContent-Length: %d\r\n\r\n%s", len(q), q)

	t.Run("pipelined", func(t *testing.T) {
		c, br := h1Conn(t, st)
		// Three requests in one write: three answers, in order.
		if _, err := io.WriteString(c, get+post+get); err != nil {
			t.Fatal(err)
		}
		for i := range 3 {
			resp, body := readH1(t, br, "GET")
			if resp.StatusCode != 200 || resp.Close {
				t.Fatalf("answer %d: %s close=%v", i, resp.Status, resp.Close)
			}
			checkAnswer(t, body)
			if resp.Header.Get("Cache-Control") != "max-age=300" || resp.Header.Get("Date") == "" {
				t.Errorf("answer %d headers %v", i, resp.Header)
			}
		}
		if !st.rec.seen(dataplane.TransportDoH, "h1id") {
			t.Error("client ID from the path not passed")
		}
		// Still open: one more.
		if _, err := io.WriteString(c, get); err != nil {
			t.Fatal(err)
		}
		if resp, _ := readH1(t, br, "GET"); resp.StatusCode != 200 {
			t.Fatalf("after the pipeline: %s", resp.Status)
		}
	})
	t.Run("connection close", func(t *testing.T) {
		c, br := h1Conn(t, st)
		_, _ = io.WriteString(c, strings.Replace(get, "Host: dns.test\r\n", "Host: dns.test\r\nConnection: close\r\n", 1))
		resp, body := readH1(t, br, "GET")
		checkAnswer(t, body)
		if !resp.Close || !closed(br) {
			t.Error("Connection: close not honoured")
		}
	})
	t.Run("http/1.0", func(t *testing.T) {
		c, br := h1Conn(t, st)
		_, _ = io.WriteString(c, strings.Replace(get, "HTTP/1.1", "HTTP/1.0", 1))
		resp, body := readH1(t, br, "GET")
		checkAnswer(t, body)
		if resp.ProtoMinor != 1 && resp.ProtoMinor != 0 || !closed(br) {
			t.Errorf("HTTP/1.0 without keep-alive: proto %s, want the connection closed", resp.Proto)
		}
	})
	t.Run("chunked", func(t *testing.T) {
		c, br := h1Conn(t, st)
		_, _ = fmt.Fprintf(c, "POST /dns-query HTTP/1.1\r\nHost: dns.test\r\nContent-Type: application/dns-message\r\nTransfer-Encoding: chunked\r\n\r\n%x\r\n%s\r\n%x\r\n%s\r\n0\r\n\r\n", 5, q[:5], len(q)-5, q[5:])
		resp, body := readH1(t, br, "POST")
		if resp.StatusCode != 200 {
			t.Fatalf("chunked POST: %s %s", resp.Status, body)
		}
		checkAnswer(t, body)
	})
	t.Run("100-continue", func(t *testing.T) {
		c, br := h1Conn(t, st)
		_, _ = fmt.Fprintf(c, "POST /dns-query HTTP/1.1\r\nHost: dns.test\r\nContent-Type: application/dns-message\r\nContent-Length: %d\r\nExpect: 100-continue\r\n\r\n", len(q))
		line, err := br.ReadString('\n')
		if err != nil || !strings.HasPrefix(line, "HTTP/1.1 100 ") {
			t.Fatalf("want 100 Continue before the body, got %q %v", line, err)
		}
		if blank, _ := br.ReadString('\n'); blank != "\r\n" {
			t.Fatalf("100 Continue not followed by a blank line: %q", blank)
		}
		_, _ = c.Write(q)
		resp, body := readH1(t, br, "POST")
		if resp.StatusCode != 200 {
			t.Fatalf("%s", resp.Status)
		}
		checkAnswer(t, body)
	})
	for _, tc := range []struct {
		name, req string
		status    int
		close     bool
	}{
		{"no host", "GET /dns-query?dns=" + base64.RawURLEncoding.EncodeToString(q) + " HTTP/1.1\r\n\r\n", 400, true},
		{"garbled request line", "GARBAGE\r\n\r\n", 400, true},
		{"header block too large", "GET /dns-query HTTP/1.1\r\nHost: dns.test\r\nX-Big: " + strings.Repeat("a", 40000) + "\r\n\r\n", 431, true},
		{"two lengths", "POST /dns-query HTTP/1.1\r\nHost: dns.test\r\nContent-Type: application/dns-message\r\nContent-Length: 3\r\nContent-Length: 4\r\n\r\nabcd", 400, true},
		{"length and chunked", "POST /dns-query HTTP/1.1\r\nHost: dns.test\r\nContent-Type: application/dns-message\r\nContent-Length: 3\r\nTransfer-Encoding: chunked\r\n\r\n0\r\n\r\n", 400, true},
		{"unknown expectation", "GET /dns-query HTTP/1.1\r\nHost: dns.test\r\nExpect: magic\r\n\r\n", 417, false},
		{"version", "GET /dns-query HTTP/2.0\r\nHost: dns.test\r\n\r\n", 505, true},
		{"head", "HEAD /dns-query HTTP/1.1\r\nHost: dns.test\r\n\r\n", 405, true},
	} {
		t.Run(tc.name, func(t *testing.T) {
			c, br := h1Conn(t, st)
			_, _ = io.WriteString(c, tc.req)
			method := strings.SplitN(tc.req, " ", 2)[0]
			resp, body := readH1(t, br, method)
			if resp.StatusCode != tc.status {
				t.Fatalf("status %s (%q), want %d", resp.Status, body, tc.status)
			}
			if tc.close && !closed(br) {
				t.Error("connection left open after a request that cannot be framed")
			}
		})
	}
	t.Run("idle timeout", func(t *testing.T) {
		st := newStack(t, stackOpts{transport: func(c *transport.Config) { c.IdleTimeout = 300 * time.Millisecond }})
		c, br := h1Conn(t, st)
		_, _ = io.WriteString(c, get)
		if resp, _ := readH1(t, br, "GET"); resp.StatusCode != 200 {
			t.Fatal(resp.Status)
		}
		start := time.Now()
		if !closed(br) {
			t.Fatal("idle connection not closed")
		}
		if d := time.Since(start); d > 3*time.Second {
			t.Errorf("closed after %v, idle timeout 300ms", d)
		}
		// A request sent a byte every 50 ms (each its own TLS record, so
		// every byte is decrypted activity) must still arrive whole within
		// the idle timeout: the connection is closed after about 300 ms,
		// long before the request could be complete.
		c2, br2 := h1Conn(t, st)
		start = time.Now()
		closedEarly := make(chan bool, 1)
		go func() { closedEarly <- closed(br2) }()
		for i := 0; i < len(get); i++ {
			if _, err := c2.Write([]byte{get[i]}); err != nil {
				break
			}
			time.Sleep(50 * time.Millisecond)
			if time.Since(start) > 3*time.Second {
				break
			}
		}
		if !<-closedEarly {
			t.Fatal("trickling connection not closed")
		}
		if d := time.Since(start); d > 2*time.Second {
			t.Errorf("a trickled request held the connection %v, idle timeout 300ms", d)
		}
	})
}

// TestDoH1Idle: an HTTP/1.1 connection quiet for longer than the busy
// wait (it parks on the socket and gives its read buffer back) is still
// answered, also for a request that arrives in pieces, and one quiet for
// the idle timeout is closed.
func TestDoH1Idle(t *testing.T) {
	st := newStack(t, stackOpts{transport: func(c *transport.Config) { c.IdleTimeout = 2500 * time.Millisecond }})
	c, br := h1Conn(t, st)
	req := "GET /dns-query?dns=" + base64.RawURLEncoding.EncodeToString(query(t, 0)) + " HTTP/1.1\r\nHost: " + serverName + "\r\n\r\n"
	ask := func(parts ...string) {
		t.Helper()
		_ = c.SetDeadline(time.Now().Add(5 * time.Second))
		for i, p := range parts {
			if i > 0 {
				time.Sleep(50 * time.Millisecond)
			}
			if _, err := io.WriteString(c, p); err != nil {
				t.Fatal(err)
			}
		}
		resp, body := readH1(t, br, "GET")
		if resp.StatusCode != 200 {
			t.Fatalf("status %d", resp.StatusCode)
		}
		checkAnswer(t, body)
	}
	ask(req)
	time.Sleep(1500 * time.Millisecond) // past the 1s busy wait
	ask(req[:1], req[1:20], req[20:])
	time.Sleep(1500 * time.Millisecond)
	ask(req)
	expectIdleClose(t, c, func() bool { return closed(br) })
}
