package api

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"strings"
	"unicode/utf8"

	"github.com/svcdns/svc/internal/store"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
)

// The body of POST /apply is read as a stream, one object at a time: an
// object over store.MaxObjectBytes is refused as soon as that many bytes
// of it have been read, before it is decoded into maps (a JSON object
// decodes into ~25 times its size of heap), and the whole body is bounded
// by maxBulkBody.

// itemSlack is how far the decoder may read past an object's start
// beyond the object cap: json.Decoder reads ahead in chunks.
const itemSlack = 64 << 10

// largeApplyBody is the size from which a body takes a slot of
// applyDecodes; smaller ones are decoded at once.
const largeApplyBody = 256 << 10

// maxLargeApplies is how many large bodies are decoded at once; others
// wait (bounded by the request's context).
const maxLargeApplies = 2

var errItemTooLarge = errors.New("object too large")

// capReader fails once more than limit bytes past mark have been read.
type capReader struct {
	r     io.Reader
	n     int64 // bytes read so far
	mark  int64 // where the current object starts
	limit int64 // -1: no per-object limit
}

func (c *capReader) Read(p []byte) (int, error) {
	if c.limit >= 0 && c.n-c.mark > c.limit {
		return 0, errItemTooLarge
	}
	n, err := c.r.Read(p)
	c.n += int64(n)
	return n, err
}

func tooLargeObject(i int) *Error {
	return newErr(http.StatusRequestEntityTooLarge, KeyTooLarge,
		fmt.Sprintf("body[%d]: the object is larger than %d bytes (1.5 MiB), the limit of one object", i, store.MaxObjectBytes),
		"split the object")
}

func tooLargeBody() *Error {
	return newErr(http.StatusRequestEntityTooLarge, KeyTooLarge,
		fmt.Sprintf("body: larger than %d bytes (16 MiB), the limit of one request", maxBulkBody),
		"apply the objects in several requests")
}

// readErr turns a read or syntax error of the body into the answer.
func readErr(i int, err error) *Error {
	var mb *http.MaxBytesError
	switch {
	case errors.As(err, &mb):
		return tooLargeBody()
	case errors.Is(err, errItemTooLarge):
		return tooLargeObject(i)
	case errors.Is(err, io.EOF), errors.Is(err, io.ErrUnexpectedEOF):
		return errInvalid("body: the JSON ends early")
	}
	return errInvalid("body: %v", err)
}

// objectDecoder decodes one object at a time under the object cap.
type objectDecoder struct {
	cr  *capReader
	dec *json.Decoder
}

func newObjectDecoder(r io.Reader) *objectDecoder {
	cr := &capReader{r: r, limit: -1}
	dec := json.NewDecoder(cr)
	dec.UseNumber()
	return &objectDecoder{cr: cr, dec: dec}
}

// raw reads the next value, refusing one over the object cap.
func (d *objectDecoder) raw(i int) (json.RawMessage, *Error) {
	d.cr.mark = d.dec.InputOffset()
	d.cr.limit = store.MaxObjectBytes + itemSlack
	defer func() { d.cr.limit = -1 }()
	var m json.RawMessage
	if err := d.dec.Decode(&m); err != nil {
		return nil, readErr(i, err)
	}
	if len(m) > store.MaxObjectBytes {
		return nil, tooLargeObject(i)
	}
	return m, nil
}

// decodeApplyBody reads one object, an array of objects or a List.
func decodeApplyBody(r io.Reader) ([]map[string]any, *Error) {
	d := newObjectDecoder(r)
	tok, err := d.dec.Token()
	if err != nil {
		if errors.Is(err, io.EOF) {
			return nil, errInvalid("body: an object or an array of objects is required")
		}
		return nil, readErr(0, err)
	}
	var raws []json.RawMessage
	switch tok {
	case json.Delim('['):
		if raws, err2 := d.array(); err2 != nil {
			return nil, err2
		} else {
			return finishItems(d, raws)
		}
	case json.Delim('{'):
		// Either a List (items streamed) or one object (under the cap).
		fields := map[string]json.RawMessage{}
		var items []json.RawMessage
		size := 2
		for d.dec.More() {
			kt, err := d.dec.Token()
			if err != nil {
				return nil, readErr(0, err)
			}
			key, _ := kt.(string)
			if key == "items" {
				if t, err := d.peekArray(); err != nil {
					return nil, err
				} else if t {
					if items, err = d.array(); err != nil {
						return nil, err
					}
					fields[key] = nil
					continue
				}
			}
			v, e := d.raw(0)
			if e != nil {
				return nil, e
			}
			size += len(key) + len(v) + 4
			if size > store.MaxObjectBytes+itemSlack && items == nil {
				// Not yet known to be a List: bound what is held.
				return nil, tooLargeObject(0)
			}
			fields[key] = v
		}
		if _, err := d.dec.Token(); err != nil {
			return nil, readErr(0, err)
		}
		var kind string
		_ = json.Unmarshal(fields["kind"], &kind)
		if kind == "List" {
			if _, ok := fields["items"]; !ok || items == nil {
				return nil, errInvalid("items: a List needs an items array")
			}
			raws = items
		} else {
			if items != nil {
				b, _ := json.Marshal(items)
				fields["items"] = b
			}
			b, err := json.Marshal(fields)
			if err != nil {
				return nil, errInvalid("body: %v", err)
			}
			if len(b) > store.MaxObjectBytes {
				return nil, tooLargeObject(0)
			}
			raws = []json.RawMessage{b}
		}
		return finishItems(d, raws)
	}
	return nil, errInvalid("body: an object or an array of objects is required")
}

// peekArray reports whether the next value is an array, consuming its '['.
func (d *objectDecoder) peekArray() (bool, *Error) {
	// json.Decoder cannot peek a value's type; read the buffered bytes.
	rest, _ := io.ReadAll(io.LimitReader(d.dec.Buffered(), 64))
	rest = bytes.TrimLeft(rest, " \t\r\n:")
	if len(rest) == 0 || rest[0] != '[' {
		return false, nil
	}
	if _, err := d.dec.Token(); err != nil {
		return false, readErr(0, err)
	}
	return true, nil
}

// array reads the elements of an array whose '[' was consumed.
func (d *objectDecoder) array() ([]json.RawMessage, *Error) {
	var out []json.RawMessage
	for i := 0; d.dec.More(); i++ {
		if len(out) == maxApplyObjects {
			return nil, errInvalid("body: 1 to %d objects are accepted, got more", maxApplyObjects)
		}
		m, e := d.raw(i)
		if e != nil {
			return nil, e
		}
		out = append(out, m)
	}
	if _, err := d.dec.Token(); err != nil {
		return nil, readErr(len(out), err)
	}
	return out, nil
}

func finishItems(d *objectDecoder, raws []json.RawMessage) ([]map[string]any, *Error) {
	if _, err := d.dec.Token(); err == nil {
		return nil, errInvalid("body: trailing data after the JSON value")
	} else if !errors.Is(err, io.EOF) {
		return nil, readErr(len(raws), err)
	}
	if len(raws) == 0 || len(raws) > maxApplyObjects {
		return nil, errInvalid("body: 1 to %d objects are accepted, got %d", maxApplyObjects, len(raws))
	}
	out := make([]map[string]any, len(raws))
	for i, raw := range raws {
		if t := bytes.TrimSpace(raw); len(t) == 0 || t[0] != '{' {
			return nil, errInvalid("body[%d]: must be an object", i)
		}
		u := &unstructured.Unstructured{}
		if err := u.UnmarshalJSON(raw); err != nil {
			return nil, errInvalid("body[%d]: %v", i, err)
		}
		if !utf8.Valid(raw) {
			// The decoder replaced the bad bytes with U+FFFD: name where.
			return nil, errInvalid("body[%d]: %s: invalid UTF-8; text must be UTF-8 encoded", i, replacedAt("", u.Object))
		}
		raws[i] = nil // let the raw bytes go as the maps grow
		out[i] = u.Object
	}
	return out, nil
}

// applyBody reads the request body of POST /apply, holding a slot of the
// server's large-decode limit while a large body is decoded.
func (s *Server) applyBody(ctx context.Context) ([]map[string]any, *Error) {
	st := state(ctx)
	if st == nil || st.body == nil {
		return nil, errInvalid("body: an object or an array of objects is required")
	}
	if st.bodyLen < 0 || st.bodyLen > largeApplyBody {
		select {
		case s.applyDecodes <- struct{}{}:
			defer func() { <-s.applyDecodes }()
		case <-ctx.Done():
			return nil, fromError(ctx.Err())
		}
	}
	return decodeApplyBody(st.body)
}

// replacedAt names the first field holding U+FFFD (in a key or a value).
func replacedAt(path string, v any) string {
	const bad = "\uFFFD"
	switch t := v.(type) {
	case map[string]any:
		for k, x := range t {
			p := k
			if path != "" {
				p = path + "." + k
			}
			if strings.Contains(k, bad) {
				return p
			}
			if q := replacedAt(p, x); q != "" {
				return q
			}
		}
	case []any:
		for i, x := range t {
			if q := replacedAt(fmt.Sprintf("%s[%d]", path, i), x); q != "" {
				return q
			}
		}
	case string:
		if strings.Contains(t, bad) {
			return path
		}
	}
	return ""
}
