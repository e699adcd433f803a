package transport

import (
	"bytes"
	"io"
	"net"
	"testing"
	"time"

	"golang.org/x/net/http2"
	"golang.org/x/net/http2/hpack"
)

// h2Seed returns the frames of a client that sends SETTINGS and then the
// requests built by reqs on a fresh framer.
func h2Seed(reqs func(fr *http2.Framer, hdr func(...string) []byte)) []byte {
	var out bytes.Buffer
	fr := http2.NewFramer(&out, nil)
	var hb bytes.Buffer
	enc := hpack.NewEncoder(&hb)
	hdr := func(f ...string) []byte {
		hb.Reset()
		for i := 0; i+1 < len(f); i += 2 {
			_ = enc.WriteField(hpack.HeaderField{Name: f[i], Value: f[i+1]})
		}
		return bytes.Clone(hb.Bytes())
	}
	_ = fr.WriteSettings(http2.Setting{ID: http2.SettingInitialWindowSize, Val: 5})
	reqs(fr, hdr)
	return out.Bytes()
}

// FuzzDoH2Conn feeds arbitrary bytes after the client preface into a
// lean HTTP/2 server connection (net.Pipe, the real data plane): the
// server must not panic, and must end the connection once the client
// hangs up, with every answer goroutine done.
func FuzzDoH2Conn(f *testing.F) {
	q := testQuery(f, "example.com.")
	post := []string{":method", "POST", ":scheme", "https", ":authority", "x", ":path", "/dns-query/id1", "content-type", contentType}
	f.Add(h2Seed(func(fr *http2.Framer, hdr func(...string) []byte) {
		_ = fr.WriteHeaders(http2.HeadersFrameParam{StreamID: 1, BlockFragment: hdr(post...), EndHeaders: true})
		_ = fr.WriteData(1, true, q)
		_ = fr.WriteHeaders(http2.HeadersFrameParam{StreamID: 3, BlockFragment: hdr(":method", "GET", ":scheme", "https", ":path", "/dns-query?dns=AAABAAABAAAAAAAAB2V4YW1wbGUDY29tAAABAAE"), EndHeaders: true, EndStream: true})
		_ = fr.WriteWindowUpdate(1, 100)
		_ = fr.WriteWindowUpdate(0, 100)
	}))
	f.Add(h2Seed(func(fr *http2.Framer, hdr func(...string) []byte) {
		blk := hdr(post...)
		_ = fr.WriteHeaders(http2.HeadersFrameParam{StreamID: 1, BlockFragment: blk[:3]})
		_ = fr.WriteContinuation(1, true, blk[3:])
		_ = fr.WriteData(1, false, q[:5])
		_ = fr.WriteRSTStream(1, http2.ErrCodeCancel)
		_ = fr.WritePing(false, [8]byte{1})
		_ = fr.WriteSettings(http2.Setting{ID: http2.SettingInitialWindowSize, Val: 1 << 20}, http2.Setting{ID: http2.SettingHeaderTableSize, Val: 0})
		_ = fr.WritePriority(3, http2.PriorityParam{StreamDep: 1, Weight: 3})
		_ = fr.WriteGoAway(0, http2.ErrCodeNo, nil)
	}))
	f.Add([]byte{0, 0, 0, 4, 0, 0, 0, 0, 0, 0, 0, 0, 1, 0, 0, 0, 1})
	h := newTestHandler(f)
	d := newDoH2Server(h.s, h, time.Minute)
	f.Fuzz(func(t *testing.T, data []byte) {
		pipeRun(t, func(srv net.Conn) { d.serve(srv, srv) }, []byte(http2.ClientPreface), data)
	})
}

// pipeRun serves one net.Pipe connection with serve, writes the chunks
// as the client (stopping at the first that fails), lets the server
// answer, hangs up, and returns what the server wrote. The server must
// return within 5 s of the hang-up.
func pipeRun(t *testing.T, serve func(srv net.Conn), chunks ...[]byte) []byte {
	t.Helper()
	cli, srv := net.Pipe()
	done := make(chan struct{})
	go func() {
		defer close(done)
		serve(srv)
	}()
	var out bytes.Buffer
	drained := make(chan struct{})
	go func() {
		defer close(drained)
		_, _ = io.Copy(&out, cli)
	}()
	_ = cli.SetWriteDeadline(time.Now().Add(2 * time.Second))
	for _, c := range chunks {
		if _, err := cli.Write(c); err != nil {
			break
		}
	}
	// Let the server answer what it read, then hang up.
	time.Sleep(time.Millisecond)
	_ = cli.Close()
	select {
	case <-done:
	case <-time.After(5 * time.Second):
		t.Fatal("server connection still running 5s after the client closed")
	}
	<-drained
	return out.Bytes()
}
