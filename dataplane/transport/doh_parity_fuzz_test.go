package transport

import (
	"bufio"
	"bytes"
	"context"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/http/httptest"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/quic-go/quic-go/http3"
	"golang.org/x/net/http2"
	"golang.org/x/net/http2/hpack"

	"github.com/svcdns/svc/test/testpki"
)

// FuzzDoHParity sends the same request to the lean HTTP/1.1 server, the
// lean HTTP/2 server (both over net.Pipe), dohHandler.ServeHTTP (the
// handler of listeners.dohServer stdlib) and a DoH3 listener (quic-go's
// http3 over loopback, one connection), in front of the real data plane:
// all four must answer with the same status. An HTTP/2
// stream error (PROTOCOL_ERROR) stands for a 400 over HTTP/1.1. Requests
// HTTP/1.1 cannot carry in a request line or header (characters outside
// RFC 3986 in the target, controls in the content type) are skipped.
func FuzzDoHParity(f *testing.F) {
	q := testQuery(f, "example.com.")
	f.Add("GET", "/dns-query?dns=AAABAAABAAAAAAAAB2V4YW1wbGUDY29tAAABAAE", "", []byte(nil))
	f.Add("POST", "/dns-query/Id-1", contentType, q)
	f.Add("POST", "/dns-query", "application/dns-message; charset=x", q)
	f.Add("POST", "/dns-query", "text/plain", q)
	f.Add("POST", "/dns-query/", contentType, []byte{1, 2, 3})
	f.Add("GET", "/dns-query?x=1&dns=%41AAB", "", []byte(nil))
	f.Add("PUT", "/dns-query", contentType, q)
	f.Add("HEAD", "/other", "", []byte(nil))
	f.Add("GET", "/dns-query/a%2Fb?dns=AAAA", "", []byte(nil))
	h := newTestHandler(f)
	d := newDoH2Server(h.s, h, time.Minute)
	h3 := parityH3Client(f, h.s.h)
	f.Fuzz(func(t *testing.T, method, target, ctype string, body []byte) {
		if !parityInput(method, target, ctype) || len(body) > maxMessage {
			return
		}
		s1 := parityH1(t, h, method, target, ctype, body)
		s2 := parityH2(t, d, method, target, ctype, body)
		if s1 != s2 && !(s1 == "400" && s2 == "rst:PROTOCOL_ERROR") {
			t.Fatalf("%s %q content-type %q, %d body bytes: HTTP/1.1 %s, HTTP/2 %s", method, target, ctype, len(body), s1, s2)
		}
		req, err := http.NewRequest(method, "https://x"+target, bytes.NewReader(body))
		if err != nil {
			return // not a URL net/http (and quic-go) would parse
		}
		if ctype != "" {
			req.Header.Set("Content-Type", ctype)
		}
		req.RemoteAddr = "192.0.2.1:5"
		req.ProtoMajor = 3
		w := httptest.NewRecorder()
		h.ServeHTTP(w, req)
		if s3 := strconv.Itoa(w.Code); s3 != s1 {
			t.Fatalf("%s %q content-type %q, %d body bytes: HTTP/1.1 %s, ServeHTTP (DoH3, stdlib) %s", method, target, ctype, len(body), s1, s3)
		}
		if s3 := h3(t, method, target, ctype, body); s3 != s1 {
			t.Fatalf("%s %q content-type %q, %d body bytes: HTTP/1.1 %s, HTTP/3 %s", method, target, ctype, len(body), s1, s3)
		}
	})
}

// parityInput: a request both HTTP/1.1 and HTTP/2 can carry unchanged.
func parityInput(method, target, ctype string) bool {
	if method == "" || len(method) > 10 || method == http.MethodConnect {
		return false
	}
	for _, c := range method {
		if c < 'A' || c > 'Z' {
			return false
		}
	}
	if !strings.HasPrefix(target, "/") || len(target) > 1000 {
		return false
	}
	for _, c := range []byte(target) {
		if !(c >= 'a' && c <= 'z' || c >= 'A' && c <= 'Z' || c >= '0' && c <= '9' || strings.IndexByte("-._~%!$&'()*+,;=:@/?", c) >= 0) {
			return false
		}
	}
	if strings.TrimSpace(ctype) != ctype || len(ctype) > 200 {
		return false
	}
	for _, c := range []byte(ctype) {
		if c < 0x20 || c > 0x7e {
			return false
		}
	}
	return true
}

// parityH1 sends the request to the HTTP/1.1 server and returns the
// status of its answer.
func parityH1(t *testing.T, h *dohHandler, method, target, ctype string, body []byte) string {
	cli, srv := net.Pipe()
	done := make(chan struct{})
	go func() {
		defer close(done)
		h.s.serveDoH1(pipeStream{srv}, srv, h, nil)
	}()
	defer func() {
		_ = cli.Close()
		select {
		case <-done:
		case <-time.After(5 * time.Second):
			t.Fatal("HTTP/1.1 connection still served 5s after the client closed")
		}
	}()
	var req bytes.Buffer
	fmt.Fprintf(&req, "%s %s HTTP/1.1\r\nHost: x\r\nConnection: close\r\n", method, target)
	if ctype != "" {
		fmt.Fprintf(&req, "Content-Type: %s\r\n", ctype)
	}
	fmt.Fprintf(&req, "Content-Length: %d\r\n\r\n", len(body))
	req.Write(body)
	go func() {
		_ = cli.SetWriteDeadline(time.Now().Add(5 * time.Second))
		_, _ = cli.Write(req.Bytes())
	}()
	_ = cli.SetReadDeadline(time.Now().Add(5 * time.Second))
	resp, err := http.ReadResponse(bufio.NewReader(cli), nil)
	if err != nil {
		t.Fatalf("HTTP/1.1: no response: %v", err)
	}
	return strconv.Itoa(resp.StatusCode)
}

// parityH2 sends the request on stream 1 of an HTTP/2 connection and
// returns the status of its answer, or "rst:<code>" for a stream reset.
func parityH2(t *testing.T, d *doh2Server, method, target, ctype string, body []byte) string {
	cli, srv := net.Pipe()
	done := make(chan struct{})
	go func() {
		defer close(done)
		d.serve(srv, srv)
	}()
	defer func() {
		_ = cli.Close()
		select {
		case <-done:
		case <-time.After(5 * time.Second):
			t.Fatal("HTTP/2 connection still served 5s after the client closed")
		}
	}()
	var out bytes.Buffer
	out.WriteString(http2.ClientPreface)
	fr := http2.NewFramer(&out, nil)
	var hb bytes.Buffer
	enc := hpack.NewEncoder(&hb)
	fields := []string{":method", method, ":scheme", "https", ":authority", "x", ":path", target}
	if ctype != "" {
		fields = append(fields, "content-type", ctype)
	}
	fields = append(fields, "content-length", strconv.Itoa(len(body)))
	for i := 0; i < len(fields); i += 2 {
		_ = enc.WriteField(hpack.HeaderField{Name: fields[i], Value: fields[i+1]})
	}
	_ = fr.WriteSettings()
	_ = fr.WriteHeaders(http2.HeadersFrameParam{StreamID: 1, BlockFragment: hb.Bytes(), EndHeaders: true, EndStream: len(body) == 0})
	for rest := body; len(rest) > 0; {
		n := min(len(rest), h2MaxFrame)
		_ = fr.WriteData(1, n == len(rest), rest[:n])
		rest = rest[n:]
	}
	go func() {
		_ = cli.SetWriteDeadline(time.Now().Add(5 * time.Second))
		_, _ = cli.Write(out.Bytes())
	}()
	_ = cli.SetReadDeadline(time.Now().Add(5 * time.Second))
	rf := http2.NewFramer(nil, bufio.NewReader(cli))
	rf.ReadMetaHeaders = hpack.NewDecoder(4096, nil)
	for {
		f, err := rf.ReadFrame()
		if err != nil {
			t.Fatalf("HTTP/2: no answer on stream 1: %v", err)
		}
		switch f := f.(type) {
		case *http2.MetaHeadersFrame:
			if f.StreamID == 1 {
				return f.PseudoValue("status")
			}
		case *http2.RSTStreamFrame:
			if f.StreamID == 1 {
				return "rst:" + f.ErrCode.String()
			}
		case *http2.GoAwayFrame:
			t.Fatalf("HTTP/2: GOAWAY %v", f.ErrCode)
		}
	}
}

// parityH3Client starts a DoH3 listener (quic-go's http3 server, as in
// production) in front of handler and returns a function that sends a
// request to it over one HTTP/3 connection and returns the status.
func parityH3Client(f *testing.F, handler Handler) func(t *testing.T, method, target, ctype string, body []byte) string {
	p := testpki.New(f)
	s, err := New(handler, Config{DoH3: []Listener{{Address: "127.0.0.1:0", CertFile: p.CertFile, KeyFile: p.KeyFile}}}, Options{})
	if err != nil {
		f.Fatal(err)
	}
	if err := s.Start(context.Background()); err != nil {
		f.Fatal(err)
	}
	f.Cleanup(func() {
		ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
		defer cancel()
		_ = s.Shutdown(ctx)
	})
	rt := &http3.Transport{TLSClientConfig: p.ClientTLS()}
	f.Cleanup(func() { _ = rt.Close() })
	base := "https://" + s.Addrs("doh3")[0].String()
	return func(t *testing.T, method, target, ctype string, body []byte) string {
		req, err := http.NewRequest(method, base+target, bytes.NewReader(body))
		if err != nil {
			t.Fatalf("HTTP/3 request: %v", err)
		}
		if ctype != "" {
			req.Header.Set("Content-Type", ctype)
		}
		ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
		defer cancel()
		resp, err := rt.RoundTrip(req.WithContext(ctx))
		if err != nil {
			t.Fatalf("HTTP/3: %v", err)
		}
		_, _ = io.Copy(io.Discard, resp.Body)
		resp.Body.Close()
		return strconv.Itoa(resp.StatusCode)
	}
}
