package transport

import (
	"errors"
	"strings"

	"golang.org/x/net/http/httpguts"
	"golang.org/x/net/http2"
	"golang.org/x/net/http2/hpack"
)

// Header blocks are decoded here rather than by the Framer's
// ReadMetaHeaders, which allocates a frame, a field slice and two
// closures per request: h2headers and its field slice are reused from
// block to block. The checks are those of ReadMetaHeaders (RFC 9113
// 8.2, 8.3): valid names and values, pseudo-header fields first, known
// and not repeated, the header list bounded by h2MaxHeaderList (beyond
// it the block is Truncated: 431), and a block far beyond the bound is a
// connection error before it is decoded.

// h2headers is a decoded header block: the HEADERS frame and its fields,
// pseudo-header fields first. Valid until the next block is read.
type h2headers struct {
	*http2.HeadersFrame
	fields    []hpack.HeaderField
	npseudo   int
	Truncated bool // the list exceeded h2MaxHeaderList; fields are partial
}

// PseudoValue is the value of pseudo-header field ":"+name, or "".
func (h *h2headers) PseudoValue(name string) string {
	for _, f := range h.fields[:h.npseudo] {
		if f.Name[1:] == name {
			return f.Value
		}
	}
	return ""
}

func (h *h2headers) PseudoFields() []hpack.HeaderField  { return h.fields[:h.npseudo] }
func (h *h2headers) RegularFields() []hpack.HeaderField { return h.fields[h.npseudo:] }

// hdecoder is the connection's header-block decoder state (reader only).
type hdecoder struct {
	dec        *hpack.Decoder
	h          h2headers
	remain     uint32 // header list bytes left
	trailers   uint32 // the same for "trailer" fields
	sawRegular bool
	invalid    bool
}

func newHDecoder() *hdecoder {
	d := &hdecoder{}
	d.dec = hpack.NewDecoder(4096, d.emit)
	d.dec.SetMaxStringLength(h2MaxHeaderList)
	return d
}

var (
	errHeaderField  = errors.New("http2: invalid header field")
	errPseudoFields = errors.New("http2: invalid pseudo-header fields")
)

func (d *hdecoder) emit(f hpack.HeaderField) {
	if !httpguts.ValidHeaderFieldValue(f.Value) {
		d.invalid = true
	}
	pseudo := strings.HasPrefix(f.Name, ":")
	if pseudo {
		if d.sawRegular {
			d.invalid = true
		}
	} else {
		d.sawRegular = true
		if !validFieldName(f.Name) {
			d.invalid = true
		}
	}
	if d.invalid {
		d.dec.SetEmitEnabled(false)
		return
	}
	remain, size := &d.remain, f.Size()
	if f.Name == "trailer" {
		n := strings.Count(f.Value, ",") + 1
		remain, size = &d.trailers, uint32(len(f.Value)-n+1)+uint32(n)*hpack.HeaderField{}.Size()
	}
	if size > *remain {
		d.dec.SetEmitEnabled(false)
		d.h.Truncated = true
		d.remain, d.trailers = 0, 0
		return
	}
	*remain -= size
	d.h.fields = append(d.h.fields, f)
	if pseudo {
		d.h.npseudo++
	}
}

// read decodes the block that starts with hf, reading its CONTINUATION
// frames from fr (frameReady made sure they are buffered).
func (d *hdecoder) read(fr *http2.Framer, hf *http2.HeadersFrame) (*h2headers, error) {
	h := &d.h
	clear(h.fields)
	h.HeadersFrame, h.fields, h.npseudo, h.Truncated = hf, h.fields[:0], 0, false
	d.remain, d.trailers, d.sawRegular, d.invalid = h2MaxHeaderList, h2MaxHeaderList, false, false
	d.dec.SetEmitEnabled(true)
	frag, ended := hf.HeaderBlockFragment(), hf.HeadersEnded()
	for {
		// Far past the bound (or past an invalid field): not worth
		// decoding; the peer's compression state is lost with it.
		if int64(len(frag)) > 2*int64(d.remain+d.trailers) || d.invalid {
			return nil, http2.ConnectionError(http2.ErrCodeProtocol)
		}
		if _, err := d.dec.Write(frag); err != nil {
			return nil, http2.ConnectionError(http2.ErrCodeCompression)
		}
		if ended {
			break
		}
		f, err := fr.ReadFrame()
		if err != nil {
			return nil, err
		}
		cf := f.(*http2.ContinuationFrame) // the Framer checks the sequence
		frag, ended = cf.HeaderBlockFragment(), cf.HeadersEnded()
	}
	if err := d.dec.Close(); err != nil {
		return nil, http2.ConnectionError(http2.ErrCodeCompression)
	}
	if d.invalid {
		return nil, http2.StreamError{StreamID: hf.StreamID, Code: http2.ErrCodeProtocol, Cause: errHeaderField}
	}
	if !pseudoFieldsOK(h.PseudoFields()) {
		return nil, http2.StreamError{StreamID: hf.StreamID, Code: http2.ErrCodeProtocol, Cause: errPseudoFields}
	}
	return h, nil
}

// pseudoFieldsOK: only request or only response pseudo-header fields,
// each at most once.
func pseudoFieldsOK(pf []hpack.HeaderField) bool {
	var req, resp bool
	for i, f := range pf {
		switch f.Name {
		case ":method", ":path", ":scheme", ":authority", ":protocol":
			req = true
		case ":status":
			resp = true
		default:
			return false
		}
		for _, g := range pf[:i] {
			if g.Name == f.Name {
				return false
			}
		}
	}
	return !(req && resp)
}

// validFieldName: a token in lower case (RFC 9113 8.2.1).
func validFieldName(v string) bool {
	if v == "" {
		return false
	}
	for _, r := range v {
		if !httpguts.IsTokenRune(r) || 'A' <= r && r <= 'Z' {
			return false
		}
	}
	return true
}
