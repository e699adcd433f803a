package transport

import (
	"encoding/base64"
	"strconv"
	"testing"
	"time"

	"golang.org/x/net/http2"
	"golang.org/x/net/http2/hpack"
)

func TestIndexedOnly(t *testing.T) {
	for _, tc := range []struct {
		b    []byte
		want bool
	}{
		{nil, true},
		{[]byte{0x88}, true},                              // :status 200 (static 8)
		{[]byte{0x88, 0xbe, 0xc0}, true},                  // dynamic 62, 64
		{[]byte{0xff, 0x80, 0x01, 0x88}, true},            // index 127+128: two continuation bytes
		{[]byte{0xff, 0x80}, false},                       // truncated index
		{[]byte{0x88, 0x40, 0x01, 'a', 0x01, 'b'}, false}, // literal, incremental indexing
		{[]byte{0x20, 0x88}, false},                       // table size update first
	} {
		if got := indexedOnly(tc.b); got != tc.want {
			t.Errorf("indexedOnly(% x) = %v, want %v", tc.b, got, tc.want)
		}
	}
}

// Answers on one connection reuse their header block while the fields
// are the same and the encoder's table unchanged; every block still
// decodes to the right fields, and after the client shrinks the table
// the next block starts with the size update (RFC 7541 4.2).
func TestDoH2ResponseHeaderBlocks(t *testing.T) {
	e := newH2Env(t, 30*time.Second)
	r := e.raw(t)
	r.fr.ReadMetaHeaders = nil // raw blocks, decoded here
	dec := hpack.NewDecoder(4096, nil)
	q := base64.RawURLEncoding.EncodeToString(testQuery(t, "cache.example."))
	id := uint32(1)
	ask := func(wantSizeUpdate bool) {
		t.Helper()
		_ = r.fr.WriteHeaders(http2.HeadersFrameParam{StreamID: id, BlockFragment: r.headers("GET", "/dns-query?dns="+q),
			EndStream: true, EndHeaders: true})
		r.flush()
		var fields map[string]string
		r.until("the answer", func(f http2.Frame) bool {
			switch f := f.(type) {
			case *http2.SettingsFrame:
				if !f.IsAck() {
					_ = r.fr.WriteSettingsAck()
					r.flush()
				}
			case *http2.HeadersFrame:
				if f.StreamID != id {
					t.Fatalf("headers on stream %d", f.StreamID)
				}
				blk := f.HeaderBlockFragment()
				if got := len(blk) > 0 && blk[0]&0xe0 == 0x20; got != wantSizeUpdate {
					t.Fatalf("stream %d: table size update first: %v, want %v (% x)", id, got, wantSizeUpdate, blk)
				}
				hf, err := dec.DecodeFull(blk)
				if err != nil {
					t.Fatalf("stream %d: %v", id, err)
				}
				fields = map[string]string{}
				for _, h := range hf {
					fields[h.Name] = h.Value
				}
			case *http2.DataFrame:
				if f.StreamEnded() {
					if fields[":status"] != "200" || fields["content-type"] != contentType ||
						fields["content-length"] != strconv.Itoa(len(f.Data())) || fields["date"] == "" ||
						fields["cache-control"] == "" {
						t.Fatalf("stream %d: fields %v for a %d-byte answer", id, fields, len(f.Data()))
					}
					return true
				}
			}
			return false
		})
		id += 2
	}
	for range 6 {
		ask(false)
	}
	_ = r.fr.WriteSettings(http2.Setting{ID: http2.SettingHeaderTableSize, Val: 0})
	r.flush()
	ask(true)
	for range 3 {
		ask(false)
	}
}
