package transport

import (
	"bufio"
	"bytes"
	"context"
	"crypto/tls"
	"encoding/base64"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/netip"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/miekg/dns"
	"golang.org/x/net/http2"
	"golang.org/x/net/http2/hpack"

	"github.com/svcdns/svc/dataplane"
	"github.com/svcdns/svc/test/testpki"
)

// fakeHandler answers every query with one A record (TTL 300) and
// records the client IDs it saw; with block set, answers wait for it.
type fakeHandler struct {
	mu    sync.Mutex
	ids   []string
	block chan struct{}
}

func (f *fakeHandler) ServeWireID(in []byte, _ netip.AddrPort, _ dataplane.Transport, id string, out []byte) ([]byte, bool) {
	f.mu.Lock()
	f.ids = append(f.ids, id)
	block := f.block
	f.mu.Unlock()
	if block != nil {
		<-block
	}
	m := new(dns.Msg)
	if err := m.Unpack(in); err != nil || m.Response || len(m.Question) != 1 {
		return out, false
	}
	r := new(dns.Msg)
	r.SetReply(m)
	rr, _ := dns.NewRR(m.Question[0].Name + " 300 IN A 192.0.2.1")
	r.Answer = []dns.RR{rr}
	b, err := r.Pack()
	if err != nil {
		return out, false
	}
	return append(out, b...), true
}

func (f *fakeHandler) sawID(id string) bool {
	f.mu.Lock()
	defer f.mu.Unlock()
	for _, x := range f.ids {
		if x == id {
			return true
		}
	}
	return false
}

// h2env is a lean HTTP/2 server on plain TCP (no TLS: the framing is
// what is tested; TestDoH2TLS covers the listener).
type h2env struct {
	t    testing.TB
	fh   *fakeHandler
	s    *Server
	d    *doh2Server
	addr string
	wg   sync.WaitGroup
}

func newH2Env(t testing.TB, idle time.Duration) *h2env {
	t.Helper()
	fh := &fakeHandler{}
	s, err := New(fh, Config{}, Options{})
	if err != nil {
		t.Fatal(err)
	}
	s.altSvc = `h3=":8443"; ma=86400`
	h := s.newDoHHandler(Listener{}, dataplane.TransportDoH, "doh")
	e := &h2env{t: t, fh: fh, s: s, d: newDoH2Server(s, h, idle)}
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	e.addr = ln.Addr().String()
	e.wg.Add(1)
	go func() {
		defer e.wg.Done()
		for {
			c, err := ln.Accept()
			if err != nil {
				return
			}
			e.wg.Add(1)
			go func() {
				defer e.wg.Done()
				e.d.serve(c, c)
			}()
		}
	}()
	t.Cleanup(func() {
		_ = ln.Close()
		e.fh.mu.Lock()
		if e.fh.block != nil {
			close(e.fh.block)
			e.fh.block = nil
		}
		e.fh.mu.Unlock()
		e.d.closeAll()
		done := make(chan struct{})
		go func() { e.wg.Wait(); close(done) }()
		select {
		case <-done:
		case <-time.After(10 * time.Second):
			t.Error("connections still served 10s after close")
		}
	})
	return e
}

// client is an http2.Transport speaking h2 over plain TCP.
func (e *h2env) client() *http.Client {
	tr := &http2.Transport{AllowHTTP: true, DialTLSContext: func(ctx context.Context, network, addr string, _ *tls.Config) (net.Conn, error) {
		var d net.Dialer
		return d.DialContext(ctx, "tcp", e.addr)
	}}
	e.t.Cleanup(tr.CloseIdleConnections)
	return &http.Client{Transport: tr, Timeout: 5 * time.Second}
}

func testQuery(t testing.TB, name string) []byte {
	m := new(dns.Msg)
	m.SetQuestion(name, dns.TypeA)
	b, err := m.Pack()
	if err != nil {
		t.Fatal(err)
	}
	return b
}

// lenHider hides a body's length: the request goes without content-length.
type lenHider struct{ io.Reader }

func TestDoH2Requests(t *testing.T) {
	e := newH2Env(t, 30*time.Second)
	c := e.client()
	base := "http://doh.test/dns-query"
	q := testQuery(t, "www.example.com.")
	qs := base64.RawURLEncoding.EncodeToString(q)
	cases := []struct {
		name, method, url, ctype string
		body                     io.Reader
		status                   int
		cache                    string
		id                       string
	}{
		{"get", "GET", base + "?dns=" + qs, "", nil, 200, "max-age=300", ""},
		{"get clientid", "GET", base + "/Phone1?x=1&dns=" + qs, "", nil, 200, "max-age=300", "phone1"},
		{"get escaped", "GET", base + "/%70c2?dns=" + qs, "", nil, 200, "max-age=300", "pc2"},
		{"post", "POST", base, "application/dns-message", bytes.NewReader(q), 200, "max-age=300", ""},
		{"post clientid", "POST", base + "/tab-3/", "application/dns-message", bytes.NewReader(q), 200, "max-age=300", "tab-3"},
		{"post params", "POST", base, "application/dns-message; charset=x", bytes.NewReader(q), 200, "max-age=300", ""},
		{"post no length", "POST", base, "application/dns-message", lenHider{bytes.NewReader(q)}, 200, "max-age=300", ""},
		{"not a query", "POST", base, "application/dns-message", bytes.NewReader(append([]byte{0, 1, 0x80}, q[3:]...)), 400, "no-store", ""},
		{"bad base64", "GET", base + "?dns=***", "", nil, 400, "no-store", ""},
		{"missing dns", "GET", base, "", nil, 400, "no-store", ""},
		{"short get", "GET", base + "?dns=AAAA", "", nil, 400, "no-store", ""},
		{"short post", "POST", base, "application/dns-message", bytes.NewReader([]byte{1, 2, 3}), 400, "no-store", ""},
		{"empty post", "POST", base, "application/dns-message", nil, 400, "no-store", ""},
		{"content type", "POST", base, "text/plain", bytes.NewReader(q), 415, "no-store", ""},
		{"no content type", "POST", base, "", bytes.NewReader(q), 415, "no-store", ""},
		{"method", "PUT", base, "application/dns-message", bytes.NewReader(q), 405, "no-store", ""},
		{"head", "HEAD", base, "", nil, 405, "no-store", ""},
		{"too large", "POST", base, "application/dns-message", bytes.NewReader(make([]byte, 70000)), 413, "no-store", ""},
		{"too large no length", "POST", base, "application/dns-message", lenHider{bytes.NewReader(make([]byte, 200000))}, 413, "no-store", ""},
		{"wrong path", "GET", "http://doh.test/other?dns=" + qs, "", nil, 404, "no-store", ""},
		{"nested id", "GET", base + "/a/b?dns=" + qs, "", nil, 404, "no-store", ""},
		{"bad id", "GET", base + "/a_b?dns=" + qs, "", nil, 404, "no-store", ""},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			req, err := http.NewRequest(tc.method, tc.url, tc.body)
			if err != nil {
				t.Fatal(err)
			}
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
				t.Fatalf("status %d, want %d: %q", resp.StatusCode, tc.status, body)
			}
			if resp.ProtoMajor != 2 {
				t.Errorf("proto %s", resp.Proto)
			}
			if cc := resp.Header.Get("Cache-Control"); cc != tc.cache {
				t.Errorf("Cache-Control %q, want %q", cc, tc.cache)
			}
			if resp.Header.Get("Date") == "" {
				t.Error("no Date")
			}
			if tc.status != 200 {
				if tc.method != "HEAD" && string(body) != http.StatusText(tc.status)+"\n" {
					t.Errorf("body %q", body)
				}
				if ct := resp.Header.Get("Content-Type"); ct != "text/plain; charset=utf-8" {
					t.Errorf("content type %q", ct)
				}
				if tc.status == 405 && resp.Header.Get("Allow") != "GET, POST" {
					t.Errorf("Allow %q", resp.Header.Get("Allow"))
				}
				return
			}
			if resp.Header.Get("Content-Type") != contentType || resp.Header.Get("Alt-Svc") != e.s.altSvc {
				t.Errorf("headers %v", resp.Header)
			}
			if resp.ContentLength != int64(len(body)) {
				t.Errorf("content length %d, body %d", resp.ContentLength, len(body))
			}
			m := new(dns.Msg)
			if err := m.Unpack(body); err != nil || len(m.Answer) != 1 {
				t.Fatalf("answer %v %v", m, err)
			}
			if tc.id != "" && !e.fh.sawID(tc.id) {
				t.Errorf("client ID %q not seen: %v", tc.id, e.fh.ids)
			}
		})
	}
	// All of it on one connection, which is still good.
	resp, err := c.Get(base + "?dns=" + qs)
	if err != nil || resp.StatusCode != 200 {
		t.Fatalf("%v %v", resp, err)
	}
	resp.Body.Close()
}

// rawConn is a hand-driven HTTP/2 client connection.
type rawConn struct {
	t    testing.TB
	c    net.Conn
	fr   *http2.Framer
	bw   *bufio.Writer
	enc  *hpack.Encoder
	hbuf bytes.Buffer
}

func (e *h2env) raw(t testing.TB, settings ...http2.Setting) *rawConn {
	t.Helper()
	c, err := net.DialTimeout("tcp", e.addr, 3*time.Second)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { c.Close() })
	_ = c.SetDeadline(time.Now().Add(10 * time.Second))
	r := &rawConn{t: t, c: c, bw: bufio.NewWriter(c)}
	r.fr = http2.NewFramer(r.bw, bufio.NewReader(c))
	r.fr.ReadMetaHeaders = hpack.NewDecoder(4096, nil)
	r.enc = hpack.NewEncoder(&r.hbuf)
	_, _ = r.bw.WriteString(http2.ClientPreface)
	_ = r.fr.WriteSettings(settings...)
	r.flush()
	return r
}

func (r *rawConn) flush() {
	if err := r.bw.Flush(); err != nil {
		r.t.Fatal(err)
	}
}

// flood writes what is buffered; the server may close the connection
// meanwhile (that is what a flood test expects).
func (r *rawConn) flood() { _ = r.bw.Flush() }

// headers encodes a request header block.
func (r *rawConn) headers(method, path string, extra ...string) []byte {
	r.hbuf.Reset()
	f := []string{":method", method, ":scheme", "https", ":authority", "doh.test", ":path", path}
	f = append(f, extra...)
	for i := 0; i < len(f); i += 2 {
		_ = r.enc.WriteField(hpack.HeaderField{Name: f[i], Value: f[i+1]})
	}
	return bytes.Clone(r.hbuf.Bytes())
}

// post sends a whole POST request on stream id.
func (r *rawConn) post(id uint32, q []byte) {
	blk := r.headers("POST", "/dns-query", "content-type", contentType)
	_ = r.fr.WriteHeaders(http2.HeadersFrameParam{StreamID: id, BlockFragment: blk, EndHeaders: true})
	_ = r.fr.WriteData(id, true, q)
}

// until reads frames until match returns true; it fails on EOF.
func (r *rawConn) until(what string, match func(http2.Frame) bool) {
	r.t.Helper()
	for {
		f, err := r.fr.ReadFrame()
		if err != nil {
			r.t.Fatalf("waiting for %s: %v", what, err)
		}
		if match(f) {
			return
		}
	}
}

// goAway waits for a GOAWAY with code and then the end of the connection.
func (r *rawConn) goAway(code http2.ErrCode) {
	r.t.Helper()
	r.until("GOAWAY "+code.String(), func(f http2.Frame) bool {
		g, ok := f.(*http2.GoAwayFrame)
		if ok && g.ErrCode != code {
			r.t.Fatalf("GOAWAY %v, want %v", g.ErrCode, code)
		}
		return ok
	})
	r.eof()
}

func (r *rawConn) eof() {
	r.t.Helper()
	for {
		if _, err := r.fr.ReadFrame(); err != nil {
			if errors.Is(err, io.EOF) || errors.Is(err, net.ErrClosed) || strings.Contains(err.Error(), "reset") {
				return
			}
			r.t.Fatalf("want the connection closed: %v", err)
		}
	}
}

func TestDoH2RapidReset(t *testing.T) {
	e := newH2Env(t, 30*time.Second)
	r := e.raw(t)
	q := base64.RawURLEncoding.EncodeToString(testQuery(t, "a.example."))
	for i := range 400 {
		id := uint32(2*i + 1)
		_ = r.fr.WriteHeaders(http2.HeadersFrameParam{StreamID: id, BlockFragment: r.headers("GET", "/dns-query?dns="+q), EndHeaders: true, EndStream: true})
		_ = r.fr.WriteRSTStream(id, http2.ErrCodeCancel)
	}
	r.flood()
	r.goAway(http2.ErrCodeEnhanceYourCalm)
}

func TestDoH2RefusedStream(t *testing.T) {
	e := newH2Env(t, 30*time.Second)
	r := e.raw(t)
	// 100 POST streams wait for their bodies; the 101st is refused.
	for i := range h2MaxStreams + 1 {
		_ = r.fr.WriteHeaders(http2.HeadersFrameParam{StreamID: uint32(2*i + 1), BlockFragment: r.headers("POST", "/dns-query", "content-type", contentType), EndHeaders: true})
	}
	r.flush()
	refused := uint32(2*h2MaxStreams + 1)
	r.until("REFUSED_STREAM", func(f http2.Frame) bool {
		rst, ok := f.(*http2.RSTStreamFrame)
		if ok && (rst.StreamID != refused || rst.ErrCode != http2.ErrCodeRefusedStream) {
			t.Fatalf("RST_STREAM %d %v", rst.StreamID, rst.ErrCode)
		}
		return ok
	})
	// The open streams are still served.
	_ = r.fr.WriteData(1, true, testQuery(t, "b.example."))
	r.flush()
	r.until("answer", func(f http2.Frame) bool {
		d, ok := f.(*http2.DataFrame)
		return ok && d.StreamID == 1 && d.StreamEnded()
	})
}

func TestDoH2HeaderLimits(t *testing.T) {
	e := newH2Env(t, 30*time.Second)
	t.Run("list too large: 431", func(t *testing.T) {
		r := e.raw(t)
		var extra []string
		for i := range 20 {
			extra = append(extra, fmt.Sprintf("x-pad-%d", i), strings.Repeat("v", 1000))
		}
		blk := r.headers("GET", "/dns-query?dns=AAAA", extra...)
		_ = r.fr.WriteHeaders(http2.HeadersFrameParam{StreamID: 1, BlockFragment: blk[:10000], EndStream: true})
		_ = r.fr.WriteContinuation(1, true, blk[10000:])
		r.flush()
		r.until("431", func(f http2.Frame) bool {
			h, ok := f.(*http2.MetaHeadersFrame)
			if ok && h.PseudoValue("status") != "431" {
				t.Fatalf("status %s", h.PseudoValue("status"))
			}
			return ok
		})
	})
	t.Run("continuation flood", func(t *testing.T) {
		r := e.raw(t)
		blk := r.headers("GET", "/dns-query")
		_ = r.fr.WriteHeaders(http2.HeadersFrameParam{StreamID: 1, BlockFragment: blk[:1]})
		for range 1000 {
			_ = r.fr.WriteContinuation(1, false, nil)
		}
		r.flood()
		r.goAway(http2.ErrCodeEnhanceYourCalm)
	})
	t.Run("block larger than the buffer", func(t *testing.T) {
		r := e.raw(t)
		_ = r.fr.WriteHeaders(http2.HeadersFrameParam{StreamID: 1, BlockFragment: make([]byte, 16000)})
		_ = r.fr.WriteContinuation(1, false, make([]byte, 16000))
		r.flood()
		r.goAway(http2.ErrCodeEnhanceYourCalm)
	})
	t.Run("frame too large", func(t *testing.T) {
		r := e.raw(t)
		_ = r.fr.WriteData(1, true, make([]byte, 20000))
		r.flood()
		r.goAway(http2.ErrCodeFrameSize)
	})
}

// TestDoH2FlowControl: a client window of 3 bytes per stream still gets
// the whole answer, in DATA frames it allows.
func TestDoH2FlowControl(t *testing.T) {
	e := newH2Env(t, 30*time.Second)
	r := e.raw(t, http2.Setting{ID: http2.SettingInitialWindowSize, Val: 3})
	q := testQuery(t, "flow.example.")
	r.post(1, q)
	r.post(3, q)
	r.flush()
	got := map[uint32][]byte{}
	ended := 0
	r.until("two answers", func(f http2.Frame) bool {
		switch f := f.(type) {
		case *http2.DataFrame:
			if len(f.Data()) > 3 {
				t.Fatalf("DATA of %d bytes in a 3-byte window", len(f.Data()))
			}
			got[f.StreamID] = append(got[f.StreamID], f.Data()...)
			if f.StreamEnded() {
				ended++
			} else {
				_ = r.fr.WriteWindowUpdate(f.StreamID, uint32(len(f.Data())))
				r.flush()
			}
		case *http2.SettingsFrame:
			if !f.IsAck() {
				_ = r.fr.WriteSettingsAck()
				r.flush()
			}
		}
		return ended == 2
	})
	for id, b := range got {
		m := new(dns.Msg)
		if err := m.Unpack(b); err != nil || len(m.Answer) != 1 {
			t.Fatalf("stream %d: %d bytes: %v", id, len(b), err)
		}
	}
	// A window raised past 2^31-1 is a flow-control error.
	_ = r.fr.WriteWindowUpdate(0, 1<<31-1)
	r.flood()
	r.goAway(http2.ErrCodeFlowControl)
}

func TestDoH2PingSettings(t *testing.T) {
	e := newH2Env(t, 30*time.Second)
	r := e.raw(t)
	_ = r.fr.WritePing(false, [8]byte{1, 2, 3})
	r.flush()
	acks := 0
	r.until("PING ack and SETTINGS ack", func(f http2.Frame) bool {
		switch f := f.(type) {
		case *http2.PingFrame:
			if !f.IsAck() || f.Data != [8]byte{1, 2, 3} {
				t.Fatalf("ping %+v", f)
			}
			acks++
		case *http2.SettingsFrame:
			if f.IsAck() {
				acks++
				break
			}
			if v, ok := f.Value(http2.SettingMaxConcurrentStreams); !ok || v != h2MaxStreams {
				t.Errorf("MAX_CONCURRENT_STREAMS %d %v", v, ok)
			}
			_ = r.fr.WriteSettingsAck()
			r.flush()
		}
		return acks == 2
	})
	// A flood of PINGs (or SETTINGS, or empty DATA) is cut off.
	for range h2ControlSlack + 10 {
		_ = r.fr.WritePing(false, [8]byte{})
	}
	r.flood()
	r.goAway(http2.ErrCodeEnhanceYourCalm)
}

func TestDoH2Protocol(t *testing.T) {
	e := newH2Env(t, 30*time.Second)
	q := testQuery(t, "p.example.")
	t.Run("first frame not SETTINGS", func(t *testing.T) {
		c, err := net.Dial("tcp", e.addr)
		if err != nil {
			t.Fatal(err)
		}
		defer c.Close()
		_ = c.SetDeadline(time.Now().Add(5 * time.Second))
		fr := http2.NewFramer(c, c)
		_, _ = io.WriteString(c, http2.ClientPreface)
		_ = fr.WritePing(false, [8]byte{})
		r := &rawConn{t: t, c: c, fr: fr}
		r.goAway(http2.ErrCodeProtocol)
	})
	t.Run("bad preface", func(t *testing.T) {
		c, err := net.Dial("tcp", e.addr)
		if err != nil {
			t.Fatal(err)
		}
		defer c.Close()
		_ = c.SetDeadline(time.Now().Add(5 * time.Second))
		_, _ = io.WriteString(c, "GET / HTTP/1.1\r\nHost: x\r\n\r\n")
		r := &rawConn{t: t, c: c, fr: http2.NewFramer(c, c)}
		r.goAway(http2.ErrCodeProtocol)
	})
	t.Run("stream id going down", func(t *testing.T) {
		r := e.raw(t)
		r.post(5, q)
		r.post(3, q)
		r.flood()
		r.goAway(http2.ErrCodeProtocol)
	})
	t.Run("DATA on a closed stream", func(t *testing.T) {
		r := e.raw(t)
		r.post(1, q)
		r.flush()
		_ = r.fr.WriteData(1, true, q)
		r.flush()
		r.until("RST_STREAM STREAM_CLOSED", func(f http2.Frame) bool {
			rst, ok := f.(*http2.RSTStreamFrame)
			return ok && rst.StreamID == 1 && rst.ErrCode == http2.ErrCodeStreamClosed
		})
	})
	t.Run("content-length mismatch", func(t *testing.T) {
		r := e.raw(t)
		blk := r.headers("POST", "/dns-query", "content-type", contentType, "content-length", "5")
		_ = r.fr.WriteHeaders(http2.HeadersFrameParam{StreamID: 1, BlockFragment: blk, EndHeaders: true})
		_ = r.fr.WriteData(1, true, q)
		r.flush()
		r.until("RST_STREAM PROTOCOL_ERROR", func(f http2.Frame) bool {
			rst, ok := f.(*http2.RSTStreamFrame)
			return ok && rst.StreamID == 1 && rst.ErrCode == http2.ErrCodeProtocol
		})
	})
	t.Run("connection header", func(t *testing.T) {
		r := e.raw(t)
		blk := r.headers("GET", "/dns-query?dns=AAAA", "connection", "close")
		_ = r.fr.WriteHeaders(http2.HeadersFrameParam{StreamID: 1, BlockFragment: blk, EndHeaders: true, EndStream: true})
		r.flush()
		r.until("RST_STREAM PROTOCOL_ERROR", func(f http2.Frame) bool {
			rst, ok := f.(*http2.RSTStreamFrame)
			return ok && rst.StreamID == 1 && rst.ErrCode == http2.ErrCodeProtocol
		})
	})
	t.Run("small frames from the peer's max frame size", func(t *testing.T) {
		// The answer still arrives; SETTINGS_MAX_FRAME_SIZE cannot go
		// below 16384, so this checks the largest accepted value too.
		r := e.raw(t, http2.Setting{ID: http2.SettingMaxFrameSize, Val: 1<<24 - 1}, http2.Setting{ID: http2.SettingHeaderTableSize, Val: 0})
		r.post(1, q)
		r.post(3, q)
		r.flush()
		n := 0
		r.until("answers", func(f http2.Frame) bool {
			if d, ok := f.(*http2.DataFrame); ok && d.StreamEnded() {
				n++
			}
			if h, ok := f.(*http2.MetaHeadersFrame); ok && h.PseudoValue("status") != "200" {
				t.Fatalf("status %q", h.PseudoValue("status"))
			}
			return n == 2
		})
	})
}

// TestDoH2GracefulShutdown: GOAWAY(NO_ERROR) names the last stream, the
// stream in flight is still answered, then the connection closes.
func TestDoH2GracefulShutdown(t *testing.T) {
	e := newH2Env(t, 30*time.Second)
	block := make(chan struct{})
	e.fh.mu.Lock()
	e.fh.block = block
	e.fh.mu.Unlock()
	r := e.raw(t)
	r.post(1, testQuery(t, "g.example."))
	r.flush()
	deadline := time.Now().Add(5 * time.Second)
	for {
		e.fh.mu.Lock()
		n := len(e.fh.ids)
		e.fh.mu.Unlock()
		if n == 1 {
			break
		}
		if time.Now().After(deadline) {
			t.Fatal("query not dispatched")
		}
		time.Sleep(5 * time.Millisecond)
	}
	go e.d.shutdown()
	r.until("GOAWAY", func(f http2.Frame) bool {
		g, ok := f.(*http2.GoAwayFrame)
		if ok && (g.ErrCode != http2.ErrCodeNo || g.LastStreamID != 1) {
			t.Fatalf("GOAWAY %v last %d", g.ErrCode, g.LastStreamID)
		}
		return ok
	})
	// A stream opened after the GOAWAY is ignored, not an error.
	r.post(3, testQuery(t, "late.example."))
	r.flush()
	e.fh.mu.Lock()
	close(block)
	e.fh.block = nil
	e.fh.mu.Unlock()
	r.until("answer", func(f http2.Frame) bool {
		switch f := f.(type) {
		case *http2.GoAwayFrame:
			t.Fatalf("second GOAWAY %v", f.ErrCode)
		case *http2.RSTStreamFrame:
			t.Fatalf("RST_STREAM %d %v", f.StreamID, f.ErrCode)
		case *http2.MetaHeadersFrame:
			if f.StreamID != 1 {
				t.Fatalf("answer on stream %d opened after GOAWAY", f.StreamID)
			}
		}
		d, ok := f.(*http2.DataFrame)
		return ok && d.StreamID == 1 && d.StreamEnded()
	})
	r.eof()
	// New connections are refused while draining.
	c, err := net.Dial("tcp", e.addr)
	if err == nil {
		_ = c.SetDeadline(time.Now().Add(3 * time.Second))
		if _, err := c.Read(make([]byte, 1)); err == nil {
			t.Error("a new connection was served after shutdown")
		}
		c.Close()
	}
}

// TestDoH2SlowReader: a client that sends queries but reads nothing
// (net.Pipe: no socket buffers) is dropped after the write timeout.
func TestDoH2SlowReader(t *testing.T) {
	old := h2WriteTimeout
	h2WriteTimeout = 200 * time.Millisecond
	defer func() { h2WriteTimeout = old }()
	e := newH2Env(t, 30*time.Second)
	cli, srv := net.Pipe()
	defer cli.Close()
	done := make(chan struct{})
	go func() {
		defer close(done)
		e.d.serve(srv, srv)
	}()
	r := &rawConn{t: t, c: cli, bw: bufio.NewWriter(cli)}
	r.fr = http2.NewFramer(r.bw, cli)
	r.enc = hpack.NewEncoder(&r.hbuf)
	// Read the server's preface (SETTINGS, WINDOW_UPDATE), then only write.
	for range 2 {
		if _, err := r.fr.ReadFrame(); err != nil {
			t.Fatal(err)
		}
	}
	go func() {
		_, _ = r.bw.WriteString(http2.ClientPreface)
		_ = r.fr.WriteSettings()
		for i := range 50 {
			r.post(uint32(2*i+1), testQuery(t, "slow.example."))
		}
		_ = r.bw.Flush()
	}()
	select {
	case <-done:
	case <-time.After(5 * time.Second):
		t.Fatal("a connection that does not read is still served after 5s")
	}
}

func TestDoH2IdleTimeout(t *testing.T) {
	e := newH2Env(t, 300*time.Millisecond)
	r := e.raw(t)
	r.post(1, testQuery(t, "i.example."))
	r.flush()
	start := time.Now()
	r.goAway(http2.ErrCodeNo)
	if d := time.Since(start); d > 3*time.Second {
		t.Fatalf("idle connection closed after %v", d)
	}
}

// TestDoH2TLS runs the real listener: h2 goes to the lean server,
// HTTP/1.1 to net/http, both answered; Shutdown ends both.
func TestDoH2TLS(t *testing.T) {
	fh := &fakeHandler{}
	s, certs := startTLSDoH(t, fh)
	stopped := false
	defer func() {
		if !stopped {
			_ = s.Shutdown(context.Background())
		}
	}()
	addr := s.Addrs("doh")[0].String()
	q := testQuery(t, "tls.example.")
	for _, proto := range []string{"h2", "http/1.1"} {
		tc := certs.ClientTLS(proto)
		var rt http.RoundTripper
		if proto == "h2" {
			rt = &http2.Transport{TLSClientConfig: tc, DialTLSContext: func(ctx context.Context, _, _ string, cfg *tls.Config) (net.Conn, error) {
				d := tls.Dialer{Config: cfg}
				return d.DialContext(ctx, "tcp", addr)
			}}
		} else {
			rt = &http.Transport{TLSClientConfig: tc, DialTLSContext: func(ctx context.Context, _, _ string) (net.Conn, error) {
				d := tls.Dialer{Config: tc}
				return d.DialContext(ctx, "tcp", addr)
			}}
		}
		c := &http.Client{Transport: rt, Timeout: 5 * time.Second}
		resp, err := c.Post("https://doh.test/dns-query/"+map[string]string{"h2": "h2", "http/1.1": "http11"}[proto], contentType, bytes.NewReader(q))
		if err != nil {
			t.Fatalf("%s: %v", proto, err)
		}
		body, _ := io.ReadAll(resp.Body)
		resp.Body.Close()
		if resp.StatusCode != 200 || resp.ProtoMajor != map[string]int{"h2": 2, "http/1.1": 1}[proto] || len(body) < 12 {
			t.Fatalf("%s: %s %d %d bytes", proto, resp.Proto, resp.StatusCode, len(body))
		}
		if resp.Header.Get("Content-Length") != strconv.Itoa(len(body)) && resp.ContentLength != int64(len(body)) {
			t.Errorf("%s: content length %d", proto, resp.ContentLength)
		}
	}
	if !fh.sawID("h2") || !fh.sawID("http11") {
		t.Errorf("client IDs %v", fh.ids)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	stopped = true
	if err := s.Shutdown(ctx); err != nil {
		t.Fatal(err)
	}
}

// startTLSDoH starts a DoH listener with a certificate made for the test
// (for testpki.ServerName); the caller shuts it down.
func startTLSDoH(t *testing.T, h Handler) (*Server, *testpki.PKI) {
	t.Helper()
	p := testpki.New(t)
	s, err := New(h, Config{DoH: []Listener{{Address: "127.0.0.1:0", CertFile: p.CertFile, KeyFile: p.KeyFile}}}, Options{})
	if err != nil {
		t.Fatal(err)
	}
	if err := s.Start(context.Background()); err != nil {
		t.Fatal(err)
	}
	return s, p
}

// TestH2Load drives the lean server (TLS) with nghttp2's h2load when
// SVC_H2LOAD names the binary (Debian: nghttp2-client): POST queries on
// many streams and connections, every one must get a 2xx answer.
//
//	SVC_H2LOAD=/usr/bin/h2load go test ./dataplane/transport -run H2Load -v
func TestH2Load(t *testing.T) {
	bin := os.Getenv("SVC_H2LOAD")
	if bin == "" {
		t.Skip("SVC_H2LOAD not set")
	}
	s, certs := startTLSDoH(t, &fakeHandler{})
	dir := certs.Dir
	t.Cleanup(func() {
		ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
		defer cancel()
		_ = s.Shutdown(ctx)
	})
	body := filepath.Join(dir, "q")
	if err := os.WriteFile(body, testQuery(t, "h2load.example."), 0o600); err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	const n = 20000
	url := fmt.Sprintf("https://%s/dns-query/h2load", s.Addrs("doh")[0])
	out, err := exec.CommandContext(ctx, bin, "-n", strconv.Itoa(n), "-c", "10", "-m", "50", "-d", body,
		"-H", "content-type: application/dns-message", url).CombinedOutput()
	t.Logf("%s", out)
	if err != nil {
		t.Fatalf("h2load: %v", err)
	}
	if want := fmt.Sprintf("%d succeeded, 0 failed, 0 errored", n); !strings.Contains(string(out), want) {
		t.Fatalf("want %q", want)
	}
	if !strings.Contains(string(out), fmt.Sprintf("status codes: %d 2xx", n)) {
		t.Fatal("not every answer was 2xx")
	}
}
