package transport

import (
	"bufio"
	"bytes"
	"errors"
	"io"
	"net"
	"net/http"
	"net/netip"
	"net/url"
	"slices"
	"strconv"
	"sync"
	"syscall"
	"time"
)

// DoH over HTTP/1.1 (RFC 9112) without net/http. net/http spent two reads
// per request (its background read), a goroutine hand-off, a Request with
// header maps and a chunkWriter on every answer: 54 µs of node CPU per
// answer against 30 µs for the same GET over the lean HTTP/2 server. The
// connection's goroutine parses each request from a buffered reader over
// the TLS connection, answers it with dohHandler.decode (the decisions of
// DoH3's ServeHTTP and of HTTP/2), and writes the answers of every request
// that arrived together (pipelining) in one TLS write, in order.
//
// Supported: keep-alive (HTTP/1.1 by default, HTTP/1.0 with
// "Connection: keep-alive"), "Connection: close", Content-Length and
// chunked request bodies, "Expect: 100-continue", absolute-form targets.
// A request that cannot be framed (garbled request line or field, no or
// several Host fields in HTTP/1.1, conflicting lengths, Content-Length and
// Transfer-Encoding together, a bad chunk) is answered 400 and the
// connection closed; a header block over h1MaxHeader bytes 431, a body
// over maxMessage 413 (both closing: the rest is not read), a transfer
// coding other than chunked 501, an HTTP version other than 1.x 505, an
// expectation other than 100-continue 417. HEAD is answered 405 without a
// body and the connection closed.

// h1MaxHeader bounds the request line and header fields together, as
// net/http's MaxHeaderBytes did (a GET's dns= parameter is part of it).
const h1MaxHeader = 16 << 10

// h1Error is a request the connection answers with status and, when
// close is set, ends with.
type h1Error struct {
	status int
	reason string // rejection metric
	close  bool
}

func (e *h1Error) Error() string { return http.StatusText(e.status) }

var (
	errH1Framing    = &h1Error{http.StatusBadRequest, "bad_request", true}
	errH1TooLarge   = &h1Error{http.StatusRequestHeaderFieldsTooLarge, "too_large", true}
	errH1BodyLarge  = &h1Error{http.StatusRequestEntityTooLarge, "too_large", true}
	errH1Version    = &h1Error{http.StatusHTTPVersionNotSupported, "bad_request", true}
	errH1Coding     = &h1Error{http.StatusNotImplemented, "bad_request", true}
	errH1Expect     = &h1Error{http.StatusExpectationFailed, "bad_request", false}
	errH1BadTarget  = &h1Error{http.StatusBadRequest, "bad_request", false}
	h1StatusLine100 = []byte("HTTP/1.1 100 Continue\r\n\r\n")
)

// h1req is one parsed request; its strings point into the connection's
// header buffer until the next request.
type h1req struct {
	method, path, rawQuery string
	ctype                  []string
	minor                  int // HTTP/1.minor
	contentLength          int64
	chunked                bool
	close                  bool // the connection ends after the answer
	expectContinue         bool
	hosts                  int
}

// h1Stream is what HTTP/1.1 is read from and written to: a *tls.Conn
// (anything else in the fuzz test).
type h1Stream interface {
	net.Conn
	CloseWrite() error
}

// h1conn is one HTTP/1.1 connection; only its goroutine uses it.
type h1conn struct {
	s      *Server
	h      *dohHandler
	conn   h1Stream
	raw    net.Conn
	br     *bufio.Reader
	hdr    []byte // the current request's header block (strings point here)
	ctype  [1]string
	out    []byte // answers not yet written
	client netip.AddrPort
	idle   time.Duration
	rc     syscall.RawConn // the socket, for parking (nil: never parks)
	done   func()          // called once the connection has ended

	readDL, writeDL time.Time // deadlines armed last (re-armed at half time)
}

// h1BusyWait is how long a quiet HTTP/1.1 connection waits inside
// crypto/tls before it parks on the socket instead (see park), as DoT
// does after dotBusyWait.
const h1BusyWait = time.Second

// h1Readers holds the connections' read buffers while they are parked.
var h1Readers = sync.Pool{New: func() any { return bufio.NewReaderSize(nil, 1<<10) }}

// serveDoH1 serves an HTTP/1.1 connection whose TLS handshake is done
// until the client closes it, it idles out, it sends what cannot be
// framed, or the server shuts down; then it calls done (if not nil). A
// connection over a socket may go on on another goroutine (see park):
// serveDoH1 then returns first.
func (s *Server) serveDoH1(conn h1Stream, raw net.Conn, h *dohHandler, done func()) {
	s.mu.Lock()
	if s.closed {
		s.mu.Unlock()
		_ = raw.Close()
		if done != nil {
			done()
		}
		return
	}
	s.tcpConns[raw] = struct{}{}
	s.mu.Unlock()
	ap := addrPortOf(conn.RemoteAddr()) // the PROXY header's client, if any
	// A small reader: requests are a few hundred bytes, and longer lines
	// are collected in c.hdr; a parked connection gives it back.
	c := &h1conn{s: s, h: h, conn: conn, raw: raw, br: getH1Reader(conn), rc: rawConnOf(raw), done: done,
		client: netip.AddrPortFrom(ap.Addr().Unmap(), ap.Port()), idle: s.idle()}
	c.run()
}

// run serves until the connection ends, or until it has been quiet for
// h1BusyWait: it then waits for data on a new goroutine, which starts
// with the smallest stack (this one, grown by TLS and parsing, ends).
func (c *h1conn) run() {
	if c.serve() {
		c.s.wg.Add(1)
		go c.park()
		return
	}
	c.finish()
}

// park waits for the socket to be readable (within the idle deadline
// armed), holding no read buffer, then serves again.
func (c *h1conn) park() {
	defer c.s.wg.Done()
	if err := waitReadable(c.rc); err != nil || c.s.draining.Load() {
		c.finish()
		return
	}
	c.br = getH1Reader(c.conn)
	c.run()
}

// finish closes the connection and reports it ended.
func (c *h1conn) finish() {
	s := c.s
	s.mu.Lock()
	delete(s.tcpConns, c.raw)
	s.mu.Unlock()
	_ = c.raw.Close()
	c.putReader()
	if c.done != nil {
		c.done()
	}
}

func getH1Reader(conn h1Stream) *bufio.Reader {
	br := h1Readers.Get().(*bufio.Reader)
	br.Reset(conn)
	return br
}

func (c *h1conn) putReader() {
	if c.br != nil {
		c.br.Reset(nil)
		h1Readers.Put(c.br)
		c.br = nil
	}
}

// serve reads and answers requests; true means the connection has been
// quiet for h1BusyWait and should park (its idle deadline armed, its
// read buffer given back).
func (c *h1conn) serve() (park bool) {
	for {
		if c.br.Buffered() == 0 {
			// Everything that arrived is answered: write, then wait for
			// the next request within the idle timeout.
			if !c.flush() || c.s.draining.Load() {
				return false
			}
			// One deadline for both the wait and the request: a request
			// must arrive whole within the idle timeout of the moment the
			// connection fell idle (or of the moment it woke from
			// parking), so a client that trickles its request holds the
			// connection no longer than one that sends nothing.
			now := time.Now()
			idleEnd := now.Add(c.idle)
			if c.rc == nil {
				c.armRead(now, c.idle)
			} else {
				c.armRead(now, min(h1BusyWait, c.idle))
			}
			_, err := c.br.Peek(1)
			if err != nil {
				var ne net.Error
				if c.rc == nil || !errors.As(err, &ne) || !ne.Timeout() || c.br.Buffered() > 0 ||
					c.s.draining.Load() || !time.Now().Before(idleEnd) {
					return false
				}
				c.setReadDeadline(idleEnd)
				c.putReader()
				if cap(c.hdr) > 512 {
					c.hdr = nil
				}
				return true
			}
			if c.s.draining.Load() {
				return false
			}
			if c.rc != nil {
				c.setReadDeadline(idleEnd)
			}
		}
		r, err := c.readHeader()
		if err != nil {
			c.fail(err, r)
			var he *h1Error
			if errors.As(err, &he) && !he.close && !r.close {
				continue // answered; the connection is still framed
			}
			return false
		}
		if !c.answer(r) || r.close {
			c.flush()
			return false
		}
	}
}

// answer reads r's body and queues its answer; false ends the connection
// (after what is queued is written). Its buffers come from the pool for
// this request only: an idle connection holds none.
func (c *h1conn) answer(r *h1req) bool {
	bp, op := getBuf(), getBuf()
	defer putBuf(bp)
	defer putBuf(op)
	var bodyErr error
	readBody := func() ([]byte, error) {
		b, err := c.readBody(r, (*bp)[:0])
		*bp = b
		bodyErr = err
		return b, err
	}
	if r.expectContinue && (r.chunked || r.contentLength > 0) {
		// The body is always read (or the connection could not be
		// framed): ask for it at once.
		c.out = append(c.out, h1StatusLine100...)
		if !c.flush() {
			return false
		}
	}
	clientID, msg, code, reason := c.h.decode(r.method, r.path, r.rawQuery, r.ctype, r.contentLength, readBody, bp)
	if bodyErr == nil {
		// A body the decision did not read (GET, an error before it) is
		// read and dropped so the next request can be framed.
		_, bodyErr = c.readBody(r, (*op)[:0])
	}
	if bodyErr != nil {
		var he *h1Error
		if errors.As(bodyErr, &he) {
			c.fail(he, r)
		} else if errors.Is(bodyErr, errTooLarge) {
			c.fail(errH1BodyLarge, r)
		} else {
			c.fail(errH1Framing, r)
		}
		return false
	}
	if code != 0 {
		c.h.s.m.reject(c.h.name, reason)
		// HEAD gets 405 without a body; the connection then ends, so no
		// client can take the next answer for that body.
		c.errorResponse(r, code, r.close || r.method == http.MethodHead)
		return true
	}
	out, ok := c.s.h.ServeWireID(msg, c.client, c.h.transport, clientID, (*op)[:0])
	*op = out
	if !ok {
		c.h.s.m.reject(c.h.name, "bad_request")
		c.errorResponse(r, http.StatusBadRequest, r.close)
		return true
	}
	c.out = append(c.out, "HTTP/1.1 200 OK\r\nContent-Type: application/dns-message\r\nContent-Length: "...)
	c.out = strconv.AppendInt(c.out, int64(len(out)), 10)
	c.out = append(c.out, "\r\nCache-Control: "...)
	if ttl, ok := cacheTTL(out); ok {
		c.out = append(c.out, "max-age="...)
		c.out = strconv.AppendUint(c.out, uint64(ttl), 10)
	} else {
		c.out = append(c.out, "no-store"...)
	}
	if c.h.altSvc != nil {
		if a := c.h.altSvc(); a != "" {
			c.out = append(append(c.out, "\r\nAlt-Svc: "...), a...)
		}
	}
	c.endHeader(r)
	c.out = append(c.out, out...)
	return true
}

// endHeader appends Date, the connection's fate and the blank line.
func (c *h1conn) endHeader(r *h1req) {
	c.out = append(c.out, "\r\nDate: "...)
	c.out = append(c.out, httpDate()...)
	switch {
	case r != nil && r.close || c.s.draining.Load():
		c.out = append(c.out, "\r\nConnection: close"...)
		if r != nil {
			r.close = true
		}
	case r != nil && r.minor == 0:
		c.out = append(c.out, "\r\nConnection: keep-alive"...)
	}
	c.out = append(c.out, "\r\n\r\n"...)
}

// errorResponse queues a text/plain error like net/http's http.Error.
func (c *h1conn) errorResponse(r *h1req, code int, closing bool) {
	text := http.StatusText(code)
	c.out = append(c.out, "HTTP/1.1 "...)
	c.out = strconv.AppendInt(c.out, int64(code), 10)
	c.out = append(append(append(c.out, ' '), text...), "\r\nContent-Type: text/plain; charset=utf-8\r\nX-Content-Type-Options: nosniff\r\nCache-Control: no-store\r\nContent-Length: "...)
	c.out = strconv.AppendInt(c.out, int64(len(text)+1), 10)
	if code == http.StatusMethodNotAllowed {
		c.out = append(c.out, "\r\nAllow: GET, POST"...)
	}
	if r == nil {
		r = &h1req{}
	}
	r.close = r.close || closing
	c.endHeader(r)
	if r.method != http.MethodHead {
		c.out = append(append(c.out, text...), '\n')
	}
}

// fail answers err (an *h1Error, else 400) and flushes; the connection
// ends when err says so.
func (c *h1conn) fail(err error, r *h1req) {
	var he *h1Error
	if !errors.As(err, &he) {
		if isTimeoutOrEOF(err) {
			c.flush()
			return // nothing to answer: the client went away or stalled
		}
		he = errH1Framing
	}
	c.h.s.m.reject(c.h.name, he.reason)
	c.errorResponse(r, he.status, he.close)
	if c.flush() && (he.close || r != nil && r.close) {
		c.lingerClose()
	}
}

// lingerClose ends the write side and reads what the client still sends
// for a moment (bounded), so that closing with unread input (which makes
// the kernel send a reset) does not destroy the error answer before the
// client has read it.
func (c *h1conn) lingerClose() {
	_ = c.conn.CloseWrite()
	_ = c.conn.SetReadDeadline(time.Now().Add(500 * time.Millisecond))
	_, _ = io.Copy(io.Discard, io.LimitReader(c.raw, 256<<10))
}

func isTimeoutOrEOF(err error) bool {
	var ne net.Error
	return errors.Is(err, io.EOF) || errors.Is(err, io.ErrUnexpectedEOF) || errors.As(err, &ne) && ne.Timeout() ||
		errors.Is(err, net.ErrClosed)
}

// flush writes the queued answers in one TLS write.
func (c *h1conn) flush() bool {
	if len(c.out) == 0 {
		return true
	}
	c.armWrite(time.Now())
	_, err := c.conn.Write(c.out)
	c.out = c.out[:0]
	if cap(c.out) > 4<<10 {
		c.out = nil // not kept while idle
	}
	return err == nil
}

// armRead sets the read deadline to now+d unless the one armed is within
// a quarter of d of it (a timer update per request is not free): the
// deadline is then between 0.75d and d away.
func (c *h1conn) armRead(now time.Time, d time.Duration) {
	want := now.Add(d)
	if diff := want.Sub(c.readDL); diff < -d/4 || diff > d/4 {
		c.readDL = want
		_ = c.conn.SetReadDeadline(want)
	}
}

// setReadDeadline arms t unless it is armed already.
func (c *h1conn) setReadDeadline(t time.Time) {
	if !t.Equal(c.readDL) {
		c.readDL = t
		_ = c.conn.SetReadDeadline(t)
	}
}

func (c *h1conn) armWrite(now time.Time) {
	d := handshakeTimeout + 5*time.Second
	if c.writeDL.Sub(now) < d/2 {
		c.writeDL = now.Add(d)
		_ = c.conn.SetWriteDeadline(c.writeDL)
	}
}

// readHeader reads the request line and header fields. On an error the
// request is returned as far as it was parsed (for the answer's framing).
func (c *h1conn) readHeader() (*h1req, error) {
	r := &h1req{contentLength: -1, minor: 1}
	if cap(c.hdr) > 4<<10 {
		c.hdr = nil // an idle connection keeps no large header buffer
	}
	c.hdr = c.hdr[:0]
	line, err := c.readLine()
	if err != nil {
		return r, err
	}
	// RFC 9112 2.2: empty lines before the request line are ignored.
	for n := 0; len(line) == 0 && n < 4; n++ {
		if line, err = c.readLine(); err != nil {
			return r, err
		}
	}
	method, rest, ok1 := bytes.Cut(line, []byte{' '})
	target, version, ok2 := bytes.Cut(rest, []byte{' '})
	if !ok1 || !ok2 || len(method) == 0 || len(target) == 0 || !isToken(method) {
		return r, errH1Framing
	}
	r.method = string(method)
	switch {
	case string(version) == "HTTP/1.1":
	case string(version) == "HTTP/1.0":
		r.minor, r.close = 0, true
	case bytes.HasPrefix(version, []byte("HTTP/")) && len(version) == 8 && version[6] == '.':
		return r, errH1Version
	default:
		return r, errH1Framing
	}
	var te, cl, conn [][]byte
	var expect []byte
	nctype := 0
	for {
		line, err := c.readLine()
		if err != nil {
			return r, err
		}
		if len(line) == 0 {
			break
		}
		name, value, ok := bytes.Cut(line, []byte{':'})
		if !ok || len(name) == 0 || !isToken(name) {
			return r, errH1Framing // also obs-fold and space before the colon
		}
		value = bytes.Trim(value, " \t")
		switch {
		case asciiEqualFold(name, "host"):
			r.hosts++
		case asciiEqualFold(name, "content-length"):
			cl = append(cl, value)
		case asciiEqualFold(name, "transfer-encoding"):
			te = append(te, value)
		case asciiEqualFold(name, "content-type"):
			nctype++
			if nctype == 1 {
				c.ctype[0] = string(value)
			}
		case asciiEqualFold(name, "connection"):
			conn = append(conn, value)
		case asciiEqualFold(name, "expect"):
			expect = value
		}
	}
	if nctype == 1 {
		r.ctype = c.ctype[:]
	} else if nctype > 1 {
		r.ctype = []string{c.ctype[0], ""} // two: refused as not one type
	}
	for _, v := range conn {
		for _, tok := range bytes.Split(v, []byte{','}) {
			tok = bytes.Trim(tok, " \t")
			switch {
			case asciiEqualFold(tok, "close"):
				r.close = true
			case asciiEqualFold(tok, "keep-alive") && r.minor == 0:
				r.close = false
			}
		}
	}
	if r.minor == 1 && r.hosts != 1 {
		return r, errH1Framing
	}
	if len(te) > 0 {
		if len(cl) > 0 {
			return r, errH1Framing // smuggling: RFC 9112 6.1
		}
		if len(te) != 1 || !asciiEqualFold(te[0], "chunked") {
			return r, errH1Coding
		}
		r.chunked = true
	}
	if len(cl) > 1 {
		return r, errH1Framing
	}
	if len(cl) == 1 {
		n, err := strconv.ParseInt(string(cl[0]), 10, 64)
		if err != nil || n < 0 || cl[0][0] == '+' {
			return r, errH1Framing
		}
		r.contentLength = n
		if n > maxMessage {
			return r, errH1BodyLarge // not read: the connection ends
		}
	}
	if expect != nil {
		if !asciiEqualFold(expect, "100-continue") {
			// The body, if any, still follows: it is read and dropped.
			return r, c.expectFailed(r)
		}
		r.expectContinue = true
	}
	if err := c.parseTarget(r, target); err != nil {
		return r, c.dropBodyAfter(r, err)
	}
	return r, nil
}

// expectFailed drops r's body and answers 417 without closing.
func (c *h1conn) expectFailed(r *h1req) error {
	return c.dropBodyAfter(r, errH1Expect)
}

// dropBodyAfter reads r's body away so the connection stays framed, then
// returns err (or the body's own framing error).
func (c *h1conn) dropBodyAfter(r *h1req, err error) error {
	bp := getBuf()
	defer putBuf(bp)
	if _, berr := c.readBody(r, (*bp)[:0]); berr != nil {
		if errors.Is(berr, errTooLarge) {
			return errH1BodyLarge
		}
		if !isTimeoutOrEOF(berr) {
			return errH1Framing
		}
		return berr
	}
	return err
}

// parseTarget takes the path and query of an origin-form or absolute-form
// target.
func (c *h1conn) parseTarget(r *h1req, target []byte) error {
	t := string(target)
	if t[0] != '/' {
		u, err := url.ParseRequestURI(t)
		if err != nil || u.Scheme != "https" && u.Scheme != "http" || u.Host == "" {
			return errH1BadTarget
		}
		r.path, r.rawQuery = u.Path, u.RawQuery
		return nil
	}
	path, q, _ := stringsCut(t, '?')
	if bytes.IndexByte(target, '%') >= 0 {
		p, err := url.PathUnescape(path)
		if err != nil {
			return errH1BadTarget
		}
		path = p
	}
	r.path, r.rawQuery = path, q
	return nil
}

func stringsCut(s string, sep byte) (before, after string, found bool) {
	for i := 0; i < len(s); i++ {
		if s[i] == sep {
			return s[:i], s[i+1:], true
		}
	}
	return s, "", false
}

// readLine returns one header line without its CRLF (or bare LF), counted
// against h1MaxHeader; the bytes stay valid until the next request (they
// are copied into c.hdr, which the request's strings point into).
func (c *h1conn) readLine() ([]byte, error) {
	line, err := c.br.ReadSlice('\n')
	if errors.Is(err, bufio.ErrBufferFull) {
		// A line longer than the reader's buffer: collect it in c.hdr.
		start := len(c.hdr)
		c.hdr = append(c.hdr, line...)
		for errors.Is(err, bufio.ErrBufferFull) {
			if len(c.hdr) > h1MaxHeader {
				return nil, errH1TooLarge
			}
			line, err = c.br.ReadSlice('\n')
			c.hdr = append(c.hdr, line...)
		}
		if err != nil {
			return nil, err
		}
		if len(c.hdr) > h1MaxHeader {
			return nil, errH1TooLarge
		}
		return trimEOL(c.hdr[start:]), nil
	}
	if err != nil {
		return nil, err
	}
	if len(c.hdr)+len(line) > h1MaxHeader {
		return nil, errH1TooLarge
	}
	start := len(c.hdr)
	c.hdr = append(c.hdr, line...)
	return trimEOL(c.hdr[start:]), nil
}

func trimEOL(b []byte) []byte {
	b = b[:len(b)-1]
	if len(b) > 0 && b[len(b)-1] == '\r' {
		b = b[:len(b)-1]
	}
	return b
}

// readBody appends r's body to b (at most maxMessage bytes: errTooLarge)
// and marks it read, so a second call returns nothing.
func (c *h1conn) readBody(r *h1req, b []byte) ([]byte, error) {
	if r.chunked {
		r.chunked = false
		return c.readChunked(b)
	}
	n := r.contentLength
	if n <= 0 {
		return b, nil
	}
	r.contentLength = 0
	if n > maxMessage {
		return b, errTooLarge
	}
	start := len(b)
	b = slices.Grow(b, int(n))[:start+int(n)]
	if _, err := io.ReadFull(c.br, b[start:]); err != nil {
		return b[:start], err
	}
	return b, nil
}

// readChunked decodes a chunked body (RFC 9112 7.1), trailers dropped.
func (c *h1conn) readChunked(b []byte) ([]byte, error) {
	for {
		line, err := c.br.ReadSlice('\n')
		if err != nil {
			if errors.Is(err, bufio.ErrBufferFull) {
				return b, errH1Framing
			}
			return b, err
		}
		line = trimEOL(line)
		if i := bytes.IndexByte(line, ';'); i >= 0 {
			line = line[:i] // chunk extensions
		}
		line = bytes.TrimRight(line, " \t")
		if len(line) == 0 || len(line) > 8 {
			return b, errH1Framing
		}
		size, err := strconv.ParseUint(string(line), 16, 32)
		if err != nil {
			return b, errH1Framing
		}
		if size == 0 {
			break
		}
		if len(b)+int(size) > maxMessage {
			return b, errTooLarge
		}
		start := len(b)
		b = slices.Grow(b, int(size))[:start+int(size)]
		if _, err := io.ReadFull(c.br, b[start:]); err != nil {
			return b[:start], err
		}
		crlf, err := c.br.ReadSlice('\n')
		if err != nil || len(trimEOL(crlf)) != 0 {
			return b, errH1Framing
		}
	}
	// Trailer fields, then the final blank line.
	for range 64 {
		line, err := c.br.ReadSlice('\n')
		if err != nil {
			return b, errH1Framing
		}
		if len(trimEOL(line)) == 0 {
			return b, nil
		}
	}
	return b, errH1Framing
}

// isToken: RFC 9110 5.6.2 tchar.
func isToken(b []byte) bool {
	for _, ch := range b {
		if ch >= 0x80 || !tokenTable[ch] {
			return false
		}
	}
	return true
}

var tokenTable = func() (t [128]bool) {
	for ch := '0'; ch <= '9'; ch++ {
		t[ch] = true
	}
	for ch := 'a'; ch <= 'z'; ch++ {
		t[ch], t[ch-'a'+'A'] = true, true
	}
	for _, ch := range "!#$%&'*+-.^_`|~" {
		t[ch] = true
	}
	return t
}()

// asciiEqualFold compares b with lower-case ASCII s, ignoring b's case.
func asciiEqualFold(b []byte, s string) bool {
	if len(b) != len(s) {
		return false
	}
	for i := range b {
		ch := b[i]
		if 'A' <= ch && ch <= 'Z' {
			ch += 'a' - 'A'
		}
		if ch != s[i] {
			return false
		}
	}
	return true
}
