package transport_test

import (
	"bytes"
	"context"
	"crypto/tls"
	"encoding/base64"
	"encoding/binary"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/netip"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/miekg/dns"

	"github.com/svcdns/svc/dataplane/proxyproto"
	"github.com/svcdns/svc/dataplane/transport"
)

func dohClient(st *stack) *http.Client { return dohClientProto(st, "h2") }

// dohClientProto speaks HTTP/2 (proto "h2") or HTTP/1.1 ("http/1.1") to
// the DoH listener.
func dohClientProto(st *stack, proto string) *http.Client {
	tr := &http.Transport{
		TLSClientConfig:   st.pki.ClientTLS(),
		ForceAttemptHTTP2: proto == "h2",
		DialTLSContext: func(ctx context.Context, _, _ string) (net.Conn, error) {
			d := &tls.Dialer{Config: st.pki.ClientTLS(proto)}
			return d.DialContext(ctx, "tcp", st.addr("doh").String())
		},
	}
	if proto != "h2" {
		tr.TLSNextProto = map[string]func(string, *tls.Conn) http.RoundTripper{} // no HTTP/2
	}
	return &http.Client{Timeout: 5 * time.Second, Transport: tr}
}

// TestDoHStatus checks status codes, Cache-Control and Alt-Svc over HTTP/2
// and HTTP/1.1, with the lean servers and with net/http
// (listeners.dohServer stdlib).
func TestDoHStatus(t *testing.T) {
	for _, server := range []string{transport.DoHServerLean, transport.DoHServerStdlib} {
		for _, proto := range []string{"h2", "http/1.1"} {
			t.Run(server+"/"+proto, func(t *testing.T) { testDoHStatus(t, server, proto) })
		}
	}
}

func testDoHStatus(t *testing.T, server, proto string) {
	st := newStack(t, stackOpts{transport: func(c *transport.Config) { c.DoHServer = server }})
	c := dohClientProto(st, proto)
	major := map[string]int{"h2": 2, "http/1.1": 1}[proto]
	base := "https://" + serverName + "/dns-query"
	q := base64.RawURLEncoding.EncodeToString(query(t, 0))
	nx := new(dns.Msg)
	nx.SetQuestion("nope.example.com.", dns.TypeA)
	nxb, _ := nx.Pack()
	cases := []struct {
		name, method, url, ctype string
		body                     []byte
		status                   int
		cache                    string
	}{
		{"get", "GET", base + "?dns=" + q, "", nil, 200, "max-age=300"},
		{"post", "POST", base, "application/dns-message", query(t, 0), 200, "max-age=300"},
		{"nxdomain", "POST", base, "application/dns-message", nxb, 200, "max-age="},
		{"bad base64", "GET", base + "?dns=***", "", nil, 400, "no-store"},
		{"padded base64", "GET", base + "?dns=" + base64.URLEncoding.EncodeToString(query(t, 0)[:13]), "", nil, 400, "no-store"},
		{"missing dns", "GET", base, "", nil, 400, "no-store"},
		{"short", "POST", base, "application/dns-message", []byte{1, 2, 3}, 400, "no-store"},
		{"content type", "POST", base, "text/plain", query(t, 0), 415, "no-store"},
		{"method", "PUT", base, "application/dns-message", query(t, 0), 405, "no-store"},
		{"too large", "POST", base, "application/dns-message", make([]byte, 70000), 413, "no-store"},
		{"wrong path", "GET", "https://" + serverName + "/other?dns=" + q, "", nil, 404, "no-store"},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			req, _ := http.NewRequest(tc.method, tc.url, bytes.NewReader(tc.body))
			if tc.ctype != "" {
				req.Header.Set("Content-Type", tc.ctype)
			}
			resp, err := c.Do(req)
			if err != nil {
				t.Fatal(err)
			}
			body, _ := io.ReadAll(io.LimitReader(resp.Body, 1<<20))
			resp.Body.Close()
			if resp.StatusCode != tc.status {
				t.Fatalf("status %d, want %d: %s", resp.StatusCode, tc.status, body)
			}
			if resp.ProtoMajor != major {
				t.Errorf("proto %s, want %s", resp.Proto, proto)
			}
			if tc.status != 200 && resp.Header.Get("Content-Type") != "text/plain; charset=utf-8" {
				t.Errorf("error Content-Type %q", resp.Header.Get("Content-Type"))
			}
			if tc.status == 405 && resp.Header.Get("Allow") != "GET, POST" {
				t.Errorf("405 Allow %q, want GET, POST", resp.Header.Get("Allow"))
			}
			if tc.status == 200 && major == 1 && resp.ContentLength != int64(len(body)) {
				t.Errorf("Content-Length %d, body %d bytes", resp.ContentLength, len(body))
			}
			if cc := resp.Header.Get("Cache-Control"); !strings.HasPrefix(cc, tc.cache) {
				t.Errorf("Cache-Control %q, want %q", cc, tc.cache)
			}
			if tc.status == 200 {
				if want := fmt.Sprintf(`h3=":%d"`, st.addr("doh3").Port()); !strings.Contains(resp.Header.Get("Alt-Svc"), want) {
					t.Errorf("Alt-Svc %q, want %s", resp.Header.Get("Alt-Svc"), want)
				}
				if resp.Header.Get("Content-Type") != "application/dns-message" {
					t.Errorf("content type %q", resp.Header.Get("Content-Type"))
				}
			}
		})
	}
}

// dotConn dials DoT with the test CA.
func dotConn(t testing.TB, st *stack, cfg *tls.Config) *tls.Conn {
	t.Helper()
	c, err := tls.DialWithDialer(&net.Dialer{Timeout: 3 * time.Second}, "tcp", st.addr("dot").String(), cfg)
	if err != nil {
		t.Fatal(err)
	}
	return c
}

// TestDoTPipelineResumeReload: pipelined queries on one connection, ALPN
// dot, session resumption, and a certificate replaced on disk is served
// without a restart.
func TestDoTPipelineResumeReload(t *testing.T) {
	st := newStack(t, stackOpts{})
	cfg := st.pki.ClientTLS("dot")
	cfg.ClientSessionCache = tls.NewLRUClientSessionCache(4)
	c := dotConn(t, st, cfg)
	if p := c.ConnectionState().NegotiatedProtocol; p != "dot" {
		t.Fatalf("ALPN %q", p)
	}
	var buf []byte
	for i := range 20 {
		q := query(t, uint16(100+i))
		buf = binary.BigEndian.AppendUint16(buf, uint16(len(q)))
		buf = append(buf, q...)
	}
	_ = c.SetDeadline(time.Now().Add(5 * time.Second))
	if _, err := c.Write(buf); err != nil {
		t.Fatal(err)
	}
	var ids []int
	for range 20 {
		b := readDoT(t, c)
		ids = append(ids, int(checkAnswer(t, b).Id))
	}
	slices.Sort(ids)
	for i, id := range ids {
		if id != 100+i {
			t.Fatalf("ids %v", ids)
		}
	}
	c.Close()

	c2 := dotConn(t, st, cfg)
	// TLS 1.3 tickets arrive after the handshake: a query reads them.
	_ = c2.SetDeadline(time.Now().Add(3 * time.Second))
	q := query(t, 1)
	_, _ = c2.Write(append(binary.BigEndian.AppendUint16(nil, uint16(len(q))), q...))
	_, _ = io.ReadFull(c2, make([]byte, 2))
	c2.Close()
	c3 := dotConn(t, st, cfg)
	if !c3.ConnectionState().DidResume {
		t.Error("session not resumed")
	}
	c3.Close()

	st.pki.Issue(t, 77)
	deadline := time.Now().Add(5 * time.Second)
	for {
		c := dotConn(t, st, st.pki.ClientTLS("dot"))
		serial := c.ConnectionState().PeerCertificates[0].SerialNumber.Int64()
		c.Close()
		if serial == 77 {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("certificate not reloaded: serial %d", serial)
		}
		time.Sleep(50 * time.Millisecond)
	}
}

// TestProxyProtocol: a loopback proxy (no secret needed) sends PROXY v2
// headers over UDP and TCP (kdig +proxy) and DoT and DoH (Go: kdig 3.2 puts
// no header before TLS); the
// query log sees the real client. A peer outside proxyProtocolFrom is served
// directly, and its header is rejected.
func TestProxyProtocol(t *testing.T) {
	pol := &proxyproto.Policy{From: []netip.Prefix{netip.MustParsePrefix("127.0.0.1/32")}}
	st := newStack(t, stackOpts{proxy: pol})
	kdig := tool(t, "kdig")
	port := func(k string) string { return fmt.Sprint(st.addr(k).Port()) }
	for i, args := range [][]string{
		{"-p", port("udp"), "+notcp"},
		{"-p", port("tcp"), "+tcp"},
	} {
		src := fmt.Sprintf("203.0.113.%d", 10+i)
		all := append([]string{"@127.0.0.1", "+retry=0", "+timeout=3", "+proxy=" + src + "#5353-127.0.0.1#53"}, args...)
		out := run(t, kdig, append(all, "www.example.com", "A")...)
		if !strings.Contains(out, "192.0.2.1") {
			t.Fatalf("%v: %s", args, out)
		}
		waitClient(t, st, src)
	}
	proxied := func(kind, src string) net.Conn {
		raw, err := net.DialTimeout("tcp", st.addr(kind).String(), 3*time.Second)
		if err != nil {
			t.Fatal(err)
		}
		hdr := proxyproto.Append(nil, netip.MustParseAddrPort(src+":4242"), st.addr(kind), nil)
		if _, err := raw.Write(hdr); err != nil {
			t.Fatal(err)
		}
		return raw
	}
	dc := tls.Client(proxied("dot", "203.0.113.20"), st.pki.ClientTLS("dot"))
	_ = dc.SetDeadline(time.Now().Add(3 * time.Second))
	q := query(t, 9)
	if _, err := dc.Write(append(binary.BigEndian.AppendUint16(nil, uint16(len(q))), q...)); err != nil {
		t.Fatal(err)
	}
	if _, err := io.ReadFull(dc, make([]byte, 2)); err != nil {
		t.Fatal(err)
	}
	dc.Close()
	waitClient(t, st, "203.0.113.20")
	hc := &http.Client{Timeout: 5 * time.Second, Transport: &http.Transport{
		ForceAttemptHTTP2: true, TLSClientConfig: st.pki.ClientTLS(),
		DialContext: func(context.Context, string, string) (net.Conn, error) { return proxied("doh", "203.0.113.21"), nil },
	}}
	resp, err := hc.Post("https://"+serverName+"/dns-query", "application/dns-message", bytes.NewReader(query(t, 0)))
	if err != nil {
		t.Fatal(err)
	}
	resp.Body.Close()
	hc.CloseIdleConnections()
	waitClient(t, st, "203.0.113.21")

	// 127.0.0.2 is not listed: served directly, a header from it rejected.
	laddr := &net.UDPAddr{IP: net.IPv4(127, 0, 0, 2)}
	uc, err := net.DialUDP("udp", laddr, net.UDPAddrFromAddrPort(st.addr("udp")))
	if err != nil {
		t.Fatal(err)
	}
	defer uc.Close()
	ask := func(b []byte) bool {
		_ = uc.SetDeadline(time.Now().Add(500 * time.Millisecond))
		if _, err := uc.Write(b); err != nil {
			t.Fatal(err)
		}
		_, err := uc.Read(make([]byte, 1500))
		return err == nil
	}
	if !ask(query(t, 5)) {
		t.Error("unlisted peer without header not served")
	}
	hdr := proxyproto.Append(nil, netip.MustParseAddrPort("198.51.100.9:1"), netip.MustParseAddrPort("127.0.0.1:53"), nil)
	if ask(append(hdr, query(t, 6)...)) {
		t.Error("header from unlisted peer answered")
	}
	// Listed peer without a header: rejected.
	uc1, err := net.DialUDP("udp", nil, net.UDPAddrFromAddrPort(st.addr("udp")))
	if err != nil {
		t.Fatal(err)
	}
	defer uc1.Close()
	_ = uc1.SetDeadline(time.Now().Add(300 * time.Millisecond))
	_, _ = uc1.Write(query(t, 7))
	if _, err := uc1.Read(make([]byte, 1500)); err == nil {
		t.Error("listed peer without header answered")
	}
}

func waitClient(t *testing.T, st *stack, src string) {
	t.Helper()
	deadline := time.Now().Add(2 * time.Second)
	for !slices.Contains(st.log.clients("www.example.com."), netip.MustParseAddr(src)) {
		if time.Now().After(deadline) {
			t.Fatalf("log clients %v, want %s", st.log.clients("www.example.com."), src)
		}
		time.Sleep(10 * time.Millisecond)
	}
}

// TestDoTIdle: a connection quiet for longer than the busy wait (the
// reader parks on the socket) is still answered, a query split across
// writes is reassembled, and a connection quiet for the idle timeout is
// closed.
func TestDoTIdle(t *testing.T) {
	st := newStack(t, stackOpts{transport: func(c *transport.Config) { c.IdleTimeout = 2500 * time.Millisecond }})
	c := dotConn(t, st, st.pki.ClientTLS("dot"))
	defer c.Close()
	q := query(t, 7)
	frame := append(binary.BigEndian.AppendUint16(nil, uint16(len(q))), q...)
	ask := func(parts ...[]byte) {
		t.Helper()
		_ = c.SetDeadline(time.Now().Add(5 * time.Second))
		for i, p := range parts {
			if i > 0 {
				time.Sleep(50 * time.Millisecond)
			}
			if _, err := c.Write(p); err != nil {
				t.Fatal(err)
			}
		}
		resp := readDoT(t, c)
		checkAnswer(t, resp)
	}
	ask(frame)
	time.Sleep(1500 * time.Millisecond) // past the 1s busy wait
	ask(frame[:1], frame[1:5], frame[5:])
	time.Sleep(1500 * time.Millisecond)
	ask(frame)
	expectIdleClose(t, c, func() bool {
		_, err := c.Read(make([]byte, 1))
		return err != nil
	})
}

// expectIdleClose checks that a connection with an idle timeout of 2.5s,
// just used, ends (ended reads it and reports the end) after about that
// long.
func expectIdleClose(t *testing.T, c net.Conn, ended func() bool) {
	t.Helper()
	start := time.Now()
	_ = c.SetDeadline(time.Now().Add(10 * time.Second))
	if !ended() {
		t.Fatal("read data on an idle connection")
	}
	if d := time.Since(start); d < 2*time.Second || d > 5*time.Second {
		t.Fatalf("idle connection closed after %v, want ~2.5s", d)
	}
}

// TestTrickleIsIdle: bytes that never complete a TLS record are not
// activity. A client that opens a record and sends its body a byte at a
// time is closed at the idle timeout, not kept for as long as it trickles
// (DoT, and DoH over HTTP/2).
func TestTrickleIsIdle(t *testing.T) {
	st := newStack(t, stackOpts{transport: func(c *transport.Config) { c.IdleTimeout = 500 * time.Millisecond }})
	for _, kind := range []string{"dot", "doh"} {
		t.Run(kind, func(t *testing.T) {
			raw, err := net.DialTimeout("tcp", st.addr(kind).String(), 3*time.Second)
			if err != nil {
				t.Fatal(err)
			}
			defer raw.Close()
			if kind == "dot" {
				c := tls.Client(raw, st.pki.ClientTLS("dot"))
				_ = c.SetDeadline(time.Now().Add(5 * time.Second))
				q := query(t, 9)
				if _, err := c.Write(append(binary.BigEndian.AppendUint16(nil, uint16(len(q))), q...)); err != nil {
					t.Fatal(err)
				}
				checkAnswer(t, readDoT(t, c))
			} else {
				c := tls.Client(raw, st.pki.ClientTLS("h2"))
				_ = c.SetDeadline(time.Now().Add(5 * time.Second))
				hc := newH2Client(t, c)
				hc.mustGet(t, 1)
				hc.answers(t, 1)
			}
			trickleUntilClosed(t, raw)
		})
	}
}

// trickleUntilClosed opens an application-data record of 1000 bytes on
// raw and sends its body a byte per 100ms until the server closes the
// connection, which must happen at about the 500ms idle timeout.
func trickleUntilClosed(t *testing.T, raw net.Conn) {
	t.Helper()
	stop := make(chan struct{})
	defer close(stop)
	go func() {
		if _, err := raw.Write([]byte{23, 3, 3, 0x03, 0xe8}); err != nil {
			return
		}
		for range 60 {
			select {
			case <-stop:
				return
			case <-time.After(100 * time.Millisecond):
			}
			if _, err := raw.Write([]byte{0}); err != nil {
				return
			}
		}
	}()
	start := time.Now()
	_ = raw.SetReadDeadline(time.Now().Add(4 * time.Second))
	_, err := io.Copy(io.Discard, raw) // until the server closes (EOF or reset)
	var ne net.Error
	if errors.As(err, &ne) && ne.Timeout() {
		t.Fatalf("still open after %v of trickle, idle timeout 500ms", time.Since(start))
	}
	if d := time.Since(start); d > 2*time.Second {
		t.Fatalf("closed after %v, want about the 500ms idle timeout", d)
	}
}

// TestDoTLargeQuery: a query larger than the reader's pooled buffers and
// than one TLS record (EDNS padding to 20,000 bytes, RFC 7830) arrives
// over several socket reads and records and is answered, with a small
// query pipelined behind it on the same connection.
func TestDoTLargeQuery(t *testing.T) {
	st := newStack(t, stackOpts{})
	c := dotConn(t, st, st.pki.ClientTLS("dot"))
	defer c.Close()
	_ = c.SetDeadline(time.Now().Add(5 * time.Second))
	m := new(dns.Msg)
	m.SetQuestion("www.example.com.", dns.TypeA)
	m.Id = 77
	m.SetEdns0(4096, false)
	m.IsEdns0().Option = append(m.IsEdns0().Option, &dns.EDNS0_PADDING{Padding: make([]byte, 20000)})
	big, err := m.Pack()
	if err != nil {
		t.Fatal(err)
	}
	small := query(t, 78)
	var out []byte
	for _, q := range [][]byte{big, small} {
		out = binary.BigEndian.AppendUint16(out, uint16(len(q)))
		out = append(out, q...)
	}
	if _, err := c.Write(out); err != nil {
		t.Fatal(err)
	}
	ids := map[uint16]bool{}
	for range 2 {
		ids[checkAnswer(t, readDoT(t, c)).Id] = true
	}
	if !ids[77] || !ids[78] {
		t.Fatalf("answered ids %v, want 77 and 78", ids)
	}
}
