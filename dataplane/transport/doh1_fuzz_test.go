package transport

import (
	"bufio"
	"bytes"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"testing"
)

// pipeStream is one end of a net.Pipe as an h1Stream.
type pipeStream struct{ net.Conn }

func (pipeStream) CloseWrite() error { return nil }

// FuzzDoH1Conn feeds arbitrary bytes into the HTTP/1.1 server (net.Pipe,
// the real data plane): it must not panic, must end once the client hangs
// up, and what it wrote must parse as a sequence of HTTP/1.1 responses
// with the statuses the server is known to give.
func FuzzDoH1Conn(f *testing.F) {
	q := testQuery(f, "example.com.")
	get := "GET /dns-query?dns=AAABAAABAAAAAAAAB2V4YW1wbGUDY29tAAABAAE HTTP/1.1\r\nHost: x\r\n\r\n"
	f.Add([]byte(get + get))
	f.Add([]byte(fmt.Sprintf("POST /dns-query/id1 HTTP/1.1\r\nHost: x\r\nContent-Type: application/dns-message\r\nContent-Length: %d\r\n\r\n%s", len(q), q) + get))
	f.Add([]byte(fmt.Sprintf("POST https://x/dns-query HTTP/1.1\r\nHost: x\r\nContent-Type: application/dns-message\r\nTransfer-Encoding: chunked\r\nExpect: 100-continue\r\n\r\n%x;ext=1\r\n%s\r\n0\r\nTrailer: y\r\n\r\n", len(q), q)))
	f.Add([]byte("GET /dns-query HTTP/1.0\r\nConnection: keep-alive\r\nExpect: nope\r\nContent-Length: 3\r\n\r\nabcHEAD / HTTP/1.1\r\nHost: x\r\n\r\n"))
	f.Add([]byte("\r\nGET /%zz HTTP/1.1\r\nHost: x\r\nHost: y\r\n\r\n"))
	h := newTestHandler(f)
	s := h.s
	known := map[int]bool{100: true, 200: true, 400: true, 404: true, 405: true, 413: true, 415: true, 417: true, 431: true, 501: true, 505: true}
	f.Fuzz(func(t *testing.T, data []byte) {
		out := pipeRun(t, func(srv net.Conn) { s.serveDoH1(pipeStream{srv}, srv, h, nil) }, data)
		br := bufio.NewReader(bytes.NewReader(out))
		for {
			if _, err := br.Peek(1); errors.Is(err, io.EOF) {
				return
			}
			resp, err := http.ReadResponse(br, nil)
			if err != nil {
				t.Fatalf("server wrote what is not an HTTP response: %v\n%q", err, out)
			}
			if !known[resp.StatusCode] {
				t.Fatalf("status %d", resp.StatusCode)
			}
			_, _ = io.Copy(io.Discard, resp.Body)
		}
	})
}
