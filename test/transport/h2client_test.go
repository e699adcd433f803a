package transport_test

import (
	"bytes"
	"encoding/base64"
	"io"
	"testing"

	"golang.org/x/net/http2"
	"golang.org/x/net/http2/hpack"
)

// h2client is a bare HTTP/2 DoH client over an established (TLS)
// connection: GET requests written frame by frame, so tests control what
// reaches the server together.
type h2client struct {
	fr  *http2.Framer
	hb  bytes.Buffer
	enc *hpack.Encoder
}

// newH2Client sends the client preface and SETTINGS (with settings).
func newH2Client(t testing.TB, c io.ReadWriter, settings ...http2.Setting) *h2client {
	t.Helper()
	h := &h2client{fr: http2.NewFramer(c, c)}
	h.enc = hpack.NewEncoder(&h.hb)
	if _, err := io.WriteString(c, http2.ClientPreface); err != nil {
		t.Fatal(err)
	}
	if err := h.fr.WriteSettings(settings...); err != nil {
		t.Fatal(err)
	}
	return h
}

// get sends a GET for query id on stream sid.
func (h *h2client) get(t testing.TB, sid uint32, id uint16) error {
	h.hb.Reset()
	for _, f := range [][2]string{{":method", "GET"}, {":scheme", "https"}, {":authority", serverName},
		{":path", "/dns-query?dns=" + base64.RawURLEncoding.EncodeToString(query(t, id))}, {"accept", "application/dns-message"}} {
		_ = h.enc.WriteField(hpack.HeaderField{Name: f[0], Value: f[1]})
	}
	return h.fr.WriteHeaders(http2.HeadersFrameParam{StreamID: sid, BlockFragment: h.hb.Bytes(), EndStream: true, EndHeaders: true})
}

// mustGet is get that fails the test on a write error.
func (h *h2client) mustGet(t testing.TB, sid uint32) {
	t.Helper()
	if err := h.get(t, sid, uint16(sid)); err != nil {
		t.Fatal(err)
	}
}

// answers reads frames until n streams have ended with an answer,
// acknowledging the server's SETTINGS; a GOAWAY or a stream ending
// without a body fails the test.
func (h *h2client) answers(t testing.TB, n int) {
	t.Helper()
	for n > 0 {
		f, err := h.fr.ReadFrame()
		if err != nil {
			t.Fatal(err)
		}
		switch f := f.(type) {
		case *http2.SettingsFrame:
			if !f.IsAck() {
				_ = h.fr.WriteSettingsAck()
			}
		case *http2.HeadersFrame:
			if f.StreamEnded() {
				t.Fatalf("stream %d ended without a body", f.StreamID)
			}
		case *http2.DataFrame:
			if f.StreamEnded() {
				checkAnswer(t, f.Data())
				n--
			}
		case *http2.GoAwayFrame:
			t.Fatalf("GOAWAY %v", f.ErrCode)
		}
	}
}
