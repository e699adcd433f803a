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

// The body of POST /apply is read as a stream, one object at a time
// (bodyScanner): an object over store.MaxObjectBytes is refused as soon as
// that many bytes of it have been read, before it is decoded into maps (a
// JSON object decodes into ~25 times its size of heap), and the whole body
// is bounded by maxBulkBody.

// largeApplyBody is the size from which a body takes a slot of
// applyDecodes; smaller ones are decoded at once.
const largeApplyBody = 256 << 10

// maxLargeApplies is how many large bodies are decoded at once; others
// wait (bounded by the request's context).
const maxLargeApplies = 2

var errItemTooLarge = errors.New("object too large")

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

// errTooManyObjects: more than maxApplyObjects objects in one body.
var errTooManyObjects = errors.New("too many objects")

// decodeApplyBody reads one object, an array of objects or a List;
// sizeHint is the body's length when known (-1 otherwise).
func decodeApplyBody(r io.Reader, sizeHint int64) ([]map[string]any, *Error) {
	s := newBodyScanner(r, sizeHint, store.MaxObjectBytes)
	c, err := s.peek()
	if err != nil {
		if errors.Is(err, io.EOF) {
			return nil, errInvalid("body: an object or an array of objects is required")
		}
		return nil, readErr(0, err)
	}
	var raws []json.RawMessage
	keep := func(_ int, v []byte) error {
		if len(raws) == maxApplyObjects {
			return errTooManyObjects
		}
		raws = append(raws, bytes.Clone(v))
		return nil
	}
	switch c {
	case '[':
		if err := s.array(store.MaxObjectBytes, keep); err != nil {
			return nil, scanErr(err)
		}
	case '{':
		if e := decodeTopObject(s, &raws, keep); e != nil {
			return nil, e
		}
	default:
		return nil, errInvalid("body: an object or an array of objects is required")
	}
	if err := s.end(); err != nil {
		return nil, readErr(len(raws), err)
	}
	return finishItems(raws)
}

// decodeTopObject reads a body that is one object: a List, whose items are
// kept one by one under the object cap, or one object, which is held only
// while it stays under the cap.
func decodeTopObject(s *bodyScanner, raws *[]json.RawMessage, keep func(int, []byte) error) *Error {
	_, _ = s.readByte() // '{'
	fields := map[string]json.RawMessage{}
	var items []json.RawMessage
	isList := false
	size := 2
	for first := true; ; first = false {
		c, err := s.peek()
		if err != nil {
			return readErr(0, eofErr(err))
		}
		if c == '}' {
			_, _ = s.readByte()
			break
		}
		if !first {
			if c != ',' {
				return readErr(0, s.syntax(fmt.Sprintf("expected ',' or '}' after an object member, found %q", c)))
			}
			_, _ = s.readByte()
		}
		kb, err := s.value(store.MaxObjectBytes)
		if err != nil {
			return readErr(0, err)
		}
		var key string
		if len(kb) == 0 || kb[0] != '"' || !utf8.Valid(kb) || json.Unmarshal(kb, &key) != nil {
			return readErr(0, s.syntax("expected an object key (a string)"))
		}
		if err := s.expect(':'); err != nil {
			return readErr(0, err)
		}
		size += len(kb) + 1
		if key == "items" {
			if c, err := s.peek(); err == nil && c == '[' {
				if err := s.array(store.MaxObjectBytes, keep); err != nil {
					return scanErr(err)
				}
				items, *raws = *raws, nil
				isList = true
				fields[key] = nil
				continue
			}
		}
		v, err := s.value(store.MaxObjectBytes)
		if err != nil {
			return readErr(0, err)
		}
		if !json.Valid(v) {
			return errInvalid("body: %s: not valid JSON", key)
		}
		size += len(v) + 2
		if size > store.MaxObjectBytes && !isList {
			// Not yet known to be a List: bound what is held.
			return tooLargeObject(0)
		}
		fields[key] = bytes.Clone(v)
	}
	var kind string
	_ = json.Unmarshal(fields["kind"], &kind)
	if kind == "List" {
		if !isList {
			return errInvalid("items: a List needs an items array")
		}
		*raws = items
		return nil
	}
	if isList {
		b := []byte("[]")
		if len(items) > 0 {
			var err error
			if b, err = json.Marshal(items); err != nil {
				return errInvalid("items: %v", err)
			}
		}
		fields["items"] = b
	}
	b, err := json.Marshal(fields)
	if err != nil {
		return errInvalid("body: %v", err)
	}
	if len(b) > store.MaxObjectBytes {
		return tooLargeObject(0)
	}
	*raws = []json.RawMessage{b}
	return nil
}

// scanErr answers an error of bodyScanner.array.
func scanErr(err error) *Error {
	if errors.Is(err, errTooManyObjects) {
		return errInvalid("body: 1 to %d objects are accepted, got more", maxApplyObjects)
	}
	var ie *itemErr
	if errors.As(err, &ie) {
		return readErr(ie.i, ie.err)
	}
	return readErr(0, err)
}

func finishItems(raws []json.RawMessage) ([]map[string]any, *Error) {
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
	return decodeApplyBody(st.body, st.bodyLen)
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
