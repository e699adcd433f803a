package api

import (
	"bufio"
	"errors"
	"fmt"
	"io"
)

// bodyScanner splits the body of POST /apply into its objects without
// decoding them. json.Decoder reads a value into a buffer that doubles as
// it grows (and leaves the smaller ones as garbage), so a refused 12 MiB
// object cost ~5.5x the object cap in heap; this scanner copies each value
// into one scratch buffer sized once from the body's length and the cap,
// so a refused object costs about the cap. It checks only the structure
// that finds where a value ends (brackets, strings, separators at the top
// level); each object it returns is then decoded, which checks the rest.
type bodyScanner struct {
	r       *bufio.Reader
	off     int64  // bytes consumed
	scratch []byte // reused for every value; copied out when kept
}

// errSyntax is a structural error at the top level of the body.
type errSyntax struct {
	off int64
	msg string
}

func (e *errSyntax) Error() string { return fmt.Sprintf("%s at byte %d", e.msg, e.off) }

func newBodyScanner(r io.Reader, sizeHint int64, limit int) *bodyScanner {
	n := int64(limit) + 1
	if sizeHint >= 0 && sizeHint+1 < n {
		n = sizeHint + 1
	}
	if n < 512 {
		n = 512
	}
	return &bodyScanner{r: bufio.NewReaderSize(r, 32<<10), scratch: make([]byte, 0, n)}
}

func (s *bodyScanner) syntax(msg string) error { return &errSyntax{off: s.off, msg: msg} }

func (s *bodyScanner) readByte() (byte, error) {
	c, err := s.r.ReadByte()
	if err == nil {
		s.off++
	}
	return c, err
}

// peek returns the next byte that is not JSON white space, unconsumed;
// io.EOF at the end of the body.
func (s *bodyScanner) peek() (byte, error) {
	for {
		c, err := s.r.ReadByte()
		if err != nil {
			return 0, err
		}
		switch c {
		case ' ', '\t', '\r', '\n':
			s.off++
			continue
		}
		_ = s.r.UnreadByte()
		return c, nil
	}
}

// expect consumes c (after white space) or fails naming what was found.
func (s *bodyScanner) expect(c byte) error {
	got, err := s.peek()
	if err != nil {
		return eofErr(err)
	}
	if got != c {
		return s.syntax(fmt.Sprintf("expected %q, found %q", c, got))
	}
	_, _ = s.readByte()
	return nil
}

func eofErr(err error) error {
	if errors.Is(err, io.EOF) {
		return io.ErrUnexpectedEOF
	}
	return err
}

// value reads the next JSON value and returns its bytes, valid until the
// next call (copy to keep). More than limit bytes fail with
// errItemTooLarge as soon as the limit is passed.
func (s *bodyScanner) value(limit int) ([]byte, error) {
	first, err := s.peek()
	if err != nil {
		return nil, eofErr(err)
	}
	buf := s.scratch[:0]
	defer func() { s.scratch = buf[:0] }()
	put := func(c byte) error {
		if len(buf) >= limit {
			return errItemTooLarge
		}
		buf = append(buf, c)
		return nil
	}
	switch first {
	case '{', '[':
		depth, inString, escaped := 0, false, false
		for {
			c, err := s.readByte()
			if err != nil {
				return nil, eofErr(err)
			}
			if err := put(c); err != nil {
				return nil, err
			}
			switch {
			case inString:
				switch {
				case escaped:
					escaped = false
				case c == '\\':
					escaped = true
				case c == '"':
					inString = false
				}
			case c == '"':
				inString = true
			case c == '{' || c == '[':
				depth++
			case c == '}' || c == ']':
				depth--
				if depth == 0 {
					return buf, nil
				}
			}
		}
	case '"':
		_, _ = s.readByte()
		buf = append(buf, '"')
		escaped := false
		for {
			c, err := s.readByte()
			if err != nil {
				return nil, eofErr(err)
			}
			if err := put(c); err != nil {
				return nil, err
			}
			switch {
			case escaped:
				escaped = false
			case c == '\\':
				escaped = true
			case c == '"':
				return buf, nil
			}
		}
	case ',', ':', '}', ']':
		return nil, s.syntax(fmt.Sprintf("expected a value, found %q", first))
	default:
		// A number or a literal: up to the next delimiter.
		for {
			c, err := s.r.ReadByte()
			if errors.Is(err, io.EOF) {
				return buf, nil
			}
			if err != nil {
				return nil, err
			}
			switch c {
			case ' ', '\t', '\r', '\n', ',', ']', '}', ':':
				_ = s.r.UnreadByte()
				return buf, nil
			}
			s.off++
			if err := put(c); err != nil {
				return nil, err
			}
		}
	}
}

// array reads the elements of an array whose '[' is next, calling each
// with its bytes (valid during the call).
func (s *bodyScanner) array(limit int, each func(i int, v []byte) error) error {
	if err := s.expect('['); err != nil {
		return err
	}
	c, err := s.peek()
	if err != nil {
		return eofErr(err)
	}
	if c == ']' {
		_, _ = s.readByte()
		return nil
	}
	for i := 0; ; i++ {
		v, err := s.value(limit)
		if err != nil {
			return &itemErr{i: i, err: err}
		}
		if err := each(i, v); err != nil {
			return err
		}
		c, err := s.peek()
		if err != nil {
			return &itemErr{i: i + 1, err: eofErr(err)}
		}
		_, _ = s.readByte()
		switch c {
		case ',':
		case ']':
			return nil
		default:
			return &itemErr{i: i + 1, err: s.syntax(fmt.Sprintf("expected ',' or ']' after an element, found %q", c))}
		}
	}
}

// itemErr places an error at an element of the body.
type itemErr struct {
	i   int
	err error
}

func (e *itemErr) Error() string { return e.err.Error() }
func (e *itemErr) Unwrap() error { return e.err }

// end succeeds when only white space is left.
func (s *bodyScanner) end() error {
	c, err := s.peek()
	if errors.Is(err, io.EOF) {
		return nil
	}
	if err != nil {
		return err
	}
	return s.syntax(fmt.Sprintf("trailing data after the JSON value (%q)", c))
}
