package transport

// A lean HTTP/2 server for DoH connections that negotiate ALPN "h2"
// (RFC 9113, RFC 8484). HTTP/1.1 connections stay on net/http.
//
// One goroutine per connection reads frames (x/net/http2 Framer; header
// blocks decoded by h2headers.go with hpack) and keeps the stream table; a complete
// request is answered on its own goroutine (the pipeline may wait on an
// upstream, and one slow answer must not hold the others of the
// connection), which encodes the response (hpack, HEADERS, DATA within
// the peer's flow-control windows) into the connection's write buffer
// under the connection lock. Whoever finds no writer at work writes the
// whole buffer in one system call (as DoT does): the answers of one read
// batch leave together. Error responses (404, 405, 413, 415, 400) are
// written by the reader itself.
//
// Protections: at most h2MaxStreams streams open per connection (more
// are refused with REFUSED_STREAM), and a stream reset by the client
// keeps its slot until its answer is computed; a connection whose client
// resets (or gets refused) more than a quarter of its streams, beyond
// h2ResetSlack, gets GOAWAY ENHANCE_YOUR_CALM (rapid reset,
// CVE-2023-44487). Control frames (SETTINGS, PING, PRIORITY,
// WINDOW_UPDATE, empty DATA, unknown types) are budgeted: h2ControlSlack
// plus h2ControlPerStream per stream opened. A header block must arrive
// whole within the read buffer (h2ReadBuffer) and in at most
// h2MaxContinuations frames (CONTINUATION flood), and decodes to at most
// 16 KiB (larger: 431). Request bodies are bounded by the message size
// and by the connection receive window (h2ConnWindow bytes buffered per
// connection); answers waiting for the peer's flow-control window are
// bounded by h2MaxBlocked bytes; pending output by h2MaxPendingOut (the
// reader stops reading until it drains); every write has a deadline
// (h2WriteTimeout, slow readers are dropped). Requests must be complete
// within h2BodyTimeout; connections without streams close after the idle
// timeout.

import (
	"bufio"
	"bytes"
	"crypto/tls"
	"errors"
	"io"
	"net"
	"net/http"
	"net/netip"
	"net/url"
	"os"
	"runtime"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"syscall"
	"time"

	"golang.org/x/net/http2"
	"golang.org/x/net/http2/hpack"
)

const (
	h2MaxStreams       = 100       // SETTINGS_MAX_CONCURRENT_STREAMS
	h2MaxHeaderList    = 16 << 10  // SETTINGS_MAX_HEADER_LIST_SIZE
	h2MaxFrame         = 16384     // our SETTINGS_MAX_FRAME_SIZE (the default)
	h2ReadBuffer       = 24 << 10  // read buffer: a frame or a whole header block
	h2MaxContinuations = 32        // CONTINUATION frames per header block
	h2StreamWindow     = 65535     // our SETTINGS_INITIAL_WINDOW_SIZE (the default)
	h2ConnWindow       = 256 << 10 // our connection receive window
	h2MaxPendingOut    = 256 << 10 // queued output before the reader waits
	h2MaxBlocked       = 1 << 20   // buffer bytes of answers waiting for flow-control windows, per connection
	h2MaxBlockedTotal  = 64 << 20  // the same, every connection of every DoH listener
	h2MaxHeaderRejects = 4         // 431s per connection; the next oversized block: GOAWAY (HPACK bomb)
	h2ResetSlack       = 100       // client resets and refused streams allowed before the ratio applies
	h2ControlSlack     = 1000      // control frames allowed ...
	h2ControlPerStream = 2         // ... plus this many per stream opened
	h2WindowThreshold  = 16 << 10  // return receive window in steps of this
	h2RecentResets     = 8         // reset streams remembered (DATA in flight ignored)
)

const (
	h2BodyTimeout = handshakeTimeout + 5*time.Second // a request must end in this (net/http's ReadTimeout)
	h2Linger      = time.Second                      // reading on after GOAWAY, before closing
)

// h2WriteTimeout bounds one write: a peer that does not read is dropped
// (a variable for tests).
var h2WriteTimeout = 10 * time.Second

// h2StallTimeout bounds how long an answer may wait for the peer's
// flow-control window; then the connection gets GOAWAY ENHANCE_YOUR_CALM
// (a client that opens streams and never grants window holds their
// answers). A variable for tests.
var h2StallTimeout = 10 * time.Second

// doh2Server holds the lean HTTP/2 connections of one DoH listener.
type doh2Server struct {
	s    *Server
	h    *dohHandler
	idle time.Duration

	mu       sync.Mutex
	conns    map[*h2conn]struct{}
	draining bool
}

func newDoH2Server(s *Server, h *dohHandler, idle time.Duration) *doh2Server {
	return &doh2Server{s: s, h: h, idle: idle, conns: map[*h2conn]struct{}{}}
}

// shutdown sends GOAWAY to every connection; each closes when its
// streams are answered.
func (d *doh2Server) shutdown() {
	d.mu.Lock()
	d.draining = true
	conns := make([]*h2conn, 0, len(d.conns))
	for c := range d.conns {
		conns = append(conns, c)
	}
	d.mu.Unlock()
	for _, c := range conns {
		c.drain()
	}
}

// closeAll closes every connection at once.
func (d *doh2Server) closeAll() {
	d.mu.Lock()
	defer d.mu.Unlock()
	d.draining = true
	for c := range d.conns {
		_ = c.raw.Close()
	}
}

// serve runs one connection whose TLS handshake (if any) is done: conn
// is read and written, raw is closed to abort. It returns when the
// connection is closed and every answer of it is done.
func (d *doh2Server) serve(conn, raw net.Conn) {
	c := newH2Conn(d, conn, raw)
	d.mu.Lock()
	if d.draining {
		d.mu.Unlock()
		_ = raw.Close()
		return
	}
	d.conns[c] = struct{}{}
	d.mu.Unlock()
	c.run()
	d.mu.Lock()
	delete(d.conns, c)
	d.mu.Unlock()
}

// h2stream is one request stream. Fields are guarded by h2conn.mu,
// except that the request fields are the responder's while running.
type h2stream struct {
	c        *h2conn
	id       uint32
	clientID string
	get      bool
	head     bool
	body     *[]byte // the request message (GET: decoded dns=)
	declLen  int64   // content-length, -1 if none
	start    time.Time

	collecting bool  // a POST body is being read
	remoteDone bool  // END_STREAM received
	running    bool  // a responder goroutine has the stream
	responded  bool  // response HEADERS written
	sentEnd    bool  // END_STREAM written
	reset      bool  // reset by either side
	peerReset  bool  // reset by the client
	connHeld   int   // connection window bytes held by the buffered body
	recvWin    int64 // our receive window for the stream
	recvOwed   int   // received bytes not yet returned to the window
	recvd      int64 // DATA payload bytes received

	sendWin int64
	pending []byte  // response body not yet sent (flow control)
	out     *[]byte // owns pending
	blocked bool    // in h2conn.blocked
	// blockedSince and blockedCap: when the answer started waiting for
	// window, and the buffer bytes it holds meanwhile (counted against
	// h2MaxBlocked and h2MaxBlockedTotal).
	blockedSince time.Time
	blockedCap   int
}

var h2streamPool = sync.Pool{New: func() any { return new(h2stream) }}

// h2conn is one HTTP/2 connection.
type h2conn struct {
	d     *doh2Server
	conn  net.Conn        // TLS (or plain, in tests)
	batch *batchConn      // under conn's TLS; nil in tests on plain conns
	rc    syscall.RawConn // the TCP socket, for quickAck; nil if none
	// flushCuts is the writer's copy of cuts (reused).
	flushCuts []int
	raw       net.Conn
	br        *bufio.Reader
	fr        *http2.Framer // reads only
	hdec      *hdecoder     // header blocks (reader only)
	hr        bytes.Reader  // frame header peeks
	rdl       time.Time     // the read deadline set (reader only)
	tr        tlsReads      // under br
	readErr   error         // the read side ended (reader only)
	client    netip.AddrPort

	wg sync.WaitGroup // responders

	mu   sync.Mutex
	cond sync.Cond // a write round ended
	wbuf *[]byte   // queued output; nil when empty
	// cuts are offsets in wbuf where an answer ends: each answer goes out
	// as its own TLS record (batchConn keeps it to one syscall).
	cuts  []int
	spare *[]byte
	fw    *http2.Framer // writes only, into wbuf (c.Write)
	enc   *hpack.Encoder
	hbuf  bytes.Buffer
	wdl   time.Time // the write deadline set (the writer only)
	// The last 200 response's header block, reusable while lastOKValid.
	lastOK      okHeaders
	lastOKBlock []byte
	lastOKValid bool
	writing     bool
	failed      bool // a write failed or the connection is closed
	closed      bool // the reader is done: responders drop answers
	closeAfter  bool // close when the output is written

	streams       map[uint32]*h2stream
	blocked       []*h2stream // oldest first
	blockedLen    int         // buffer bytes held by blocked answers
	stallTimer    *time.Timer // fires h2StallTimeout after the oldest blocked answer
	headerRejects int         // 431s answered (HPACK bomb)
	maxStreamID   uint32
	opened        int // streams the client opened
	running       int // responder goroutines
	resets        int // streams the client reset or we refused
	control       int // control frames received
	idleSince     time.Time
	recent        [h2RecentResets]uint32
	recentN       int

	sawSettings   bool
	unackedSet    int
	goAway        bool // GOAWAY sent
	goAwayID      uint32
	peerInitWin   int64
	peerMaxFrame  int
	connSendWin   int64
	connRecvWin   int64
	connRecvOwed  int
	bodyDeadlines int  // streams collecting a body
	bodyAwaited   bool // a request of this read batch awaits its body
}

func newH2Conn(d *doh2Server, conn, raw net.Conn) *h2conn {
	c := &h2conn{d: d, conn: conn, raw: raw,
		client:       addrPortOf(conn.RemoteAddr()),
		streams:      make(map[uint32]*h2stream),
		peerInitWin:  65535,
		peerMaxFrame: 16384,
		connSendWin:  65535,
		connRecvWin:  65535,
		idleSince:    time.Now(),
	}
	c.cond.L = &c.mu
	if tc, ok := conn.(*tls.Conn); ok {
		c.batch, _ = tc.NetConn().(*batchConn)
	}
	c.rc = rawConnOf(raw)
	c.tr = tlsReads{conn: conn, batch: c.batch}
	c.takeReader()
	c.fr = http2.NewFramer(nil, h2FrameReader{c})
	c.fr.SetMaxReadFrameSize(h2MaxFrame)
	c.fr.MaxHeaderListSize = h2MaxHeaderList
	c.hdec = newHDecoder()
	c.fr.SetReuseFrames()
	c.fw = http2.NewFramer(c, nil)
	c.enc = hpack.NewEncoder(&c.hbuf)
	return c
}

// The read buffer (h2ReadBuffer, half of an idle connection's memory) is
// pooled: a connection gives it back when a read batch leaves nothing
// buffered and nothing unread in crypto/tls (the feeder then waits on the
// socket without buffers), and takes one when data arrives.
var h2Readers = sync.Pool{New: func() any { return bufio.NewReaderSize(nil, h2ReadBuffer) }}

// takeReader makes sure the connection has its read buffer.
func (c *h2conn) takeReader() {
	if c.br == nil {
		c.br = h2Readers.Get().(*bufio.Reader)
		c.br.Reset(&c.tr)
	}
}

// releaseReader gives the read buffer back when it holds nothing.
func (c *h2conn) releaseReader() {
	if c.br != nil && c.br.Buffered() == 0 {
		c.br.Reset(nil)
		h2Readers.Put(c.br)
		c.br = nil
	}
}

// h2FrameReader is the read Framer's reader: the connection's read buffer
// of the moment.
type h2FrameReader struct{ c *h2conn }

func (r h2FrameReader) Read(p []byte) (int, error) { return r.c.br.Read(p) }

// Write appends to the output buffer (the write Framer's writer; mu held).
func (c *h2conn) Write(b []byte) (int, error) {
	if c.failed {
		return len(b), nil
	}
	if c.wbuf == nil {
		if c.spare != nil {
			c.wbuf, c.spare = c.spare, nil
		} else {
			c.wbuf = getBuf()
		}
	}
	*c.wbuf = append(*c.wbuf, b...)
	return len(b), nil
}

// flushLocked writes the output buffer unless a writer is at work (it
// will). Called with mu held; mu is released while writing.
func (c *h2conn) flushLocked() {
	if c.writing {
		return
	}
	c.writing = true
	for {
		if c.failed || c.wbuf == nil || len(*c.wbuf) == 0 {
			break
		}
		b := c.wbuf
		c.wbuf = nil
		cuts := append(c.flushCuts[:0], c.cuts...)
		c.cuts = c.cuts[:0]
		c.mu.Unlock()
		err := c.writeRecords(*b, cuts)
		c.mu.Lock()
		c.flushCuts = cuts
		*b = (*b)[:0]
		if c.spare == nil {
			c.spare = b
		} else {
			putBuf(b)
		}
		if err != nil {
			c.failLocked()
		}
		c.cond.Broadcast()
	}
	if c.closeAfter && !c.failed && (c.wbuf == nil || len(*c.wbuf) == 0) {
		// Wake the reader: it closes the connection (run).
		_ = c.conn.SetReadDeadline(time.Now())
	}
	if c.spare != nil && c.wbuf == nil {
		putBuf(c.spare) // an idle connection holds no output buffer
		c.spare = nil
	}
	c.writing = false
	c.cond.Broadcast()
}

// writeRecords writes out, one TLS record per answer (ends at cuts), in
// one syscall when the TLS connection sits on a batchConn.
func (c *h2conn) writeRecords(out []byte, cuts []int) error {
	if now := time.Now(); c.wdl.Sub(now) < h2WriteTimeout/2 {
		// Re-armed at half time only: each change is a timer update.
		c.wdl = now.Add(h2WriteTimeout)
		_ = c.conn.SetWriteDeadline(c.wdl)
	}
	if len(cuts) == 0 || c.batch == nil {
		_, err := c.conn.Write(out)
		return err
	}
	c.batch.begin()
	start := 0
	var err error
	for _, end := range cuts {
		if err == nil && end > start {
			_, err = c.conn.Write(out[start:end])
		}
		start = end
	}
	if err == nil && start < len(out) {
		_, err = c.conn.Write(out[start:])
	}
	if e := c.batch.end(); err == nil {
		err = e
	}
	return err
}

// cutLocked marks the end of an answer in the output buffer.
func (c *h2conn) cutLocked() {
	if c.wbuf != nil {
		c.cuts = append(c.cuts, len(*c.wbuf))
	}
}

// failLocked marks the connection dead and closes it (wakes the reader).
func (c *h2conn) failLocked() {
	if c.failed {
		return
	}
	c.failed = true
	if c.wbuf != nil {
		putBuf(c.wbuf)
		c.wbuf = nil
		c.cuts = c.cuts[:0]
	}
	// Not Close: the reader may call this from inside the feeder's
	// RawConn.Read, which Close would wait for. run closes at the end.
	abortConn(c.raw)
	c.cond.Broadcast()
}

// connErrorLocked sends GOAWAY with code and closes after it is written.
func (c *h2conn) connErrorLocked(code http2.ErrCode) {
	if !c.goAway || code != http2.ErrCodeNo {
		_ = c.fw.WriteGoAway(c.maxStreamID, code, nil)
	}
	c.goAway = true
	c.goAwayID = c.maxStreamID
	c.closeAfter = true
}

// drain starts a graceful shutdown: GOAWAY now, close when idle.
func (c *h2conn) drain() {
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.closed || c.failed {
		return
	}
	if !c.goAway {
		c.goAway = true
		c.goAwayID = c.maxStreamID
		_ = c.fw.WriteGoAway(c.maxStreamID, http2.ErrCodeNo, nil)
	}
	if len(c.streams) == 0 {
		c.closeAfter = true
	}
	c.flushLocked()
}

// run serves the connection until it ends.
func (c *h2conn) run() {
	defer func() {
		c.mu.Lock()
		c.closed = true
		if c.stallTimer != nil {
			c.stallTimer.Stop()
		}
		c.flushLocked()
		for c.writing {
			c.cond.Wait()
		}
		linger := c.goAway && !c.failed
		c.mu.Unlock()
		if linger {
			// Closing with unread input would reset the connection and
			// could destroy the GOAWAY before the client reads it: read
			// and drop what the client still sends, for a short while.
			_ = c.conn.SetReadDeadline(time.Now().Add(h2Linger))
			c.takeReader()
			_, _ = io.CopyN(io.Discard, c.br, h2ReadBuffer*4)
		}
		if c.br != nil {
			c.br.Reset(nil) // unread input is dropped with the connection
			c.releaseReader()
		}
		c.mu.Lock()
		c.failLocked()
		c.mu.Unlock()
		_ = c.raw.Close()
		c.wg.Wait()
		c.mu.Lock()
		for _, st := range c.streams {
			c.freeStream(st)
		}
		clear(c.streams)
		c.blocked = nil
		if c.spare != nil {
			putBuf(c.spare)
			c.spare = nil
		}
		c.mu.Unlock()
	}()
	// Server preface: our SETTINGS and the connection window.
	c.mu.Lock()
	_ = c.fw.WriteSettings(
		http2.Setting{ID: http2.SettingMaxConcurrentStreams, Val: h2MaxStreams},
		http2.Setting{ID: http2.SettingMaxHeaderListSize, Val: h2MaxHeaderList},
	)
	c.unackedSet = 1
	_ = c.fw.WriteWindowUpdate(0, h2ConnWindow-65535)
	c.connRecvWin = h2ConnWindow
	c.flushLocked()
	c.mu.Unlock()

	_ = c.conn.SetReadDeadline(time.Now().Add(handshakeTimeout))
	var pre [len(http2.ClientPreface)]byte
	if _, err := io.ReadFull(c.br, pre[:]); err != nil || string(pre[:]) != http2.ClientPreface {
		if err == nil {
			c.mu.Lock()
			c.connErrorLocked(http2.ErrCodeProtocol)
			c.mu.Unlock()
		}
		return
	}
	// Then the feeder reads the socket (see feeder); on plain connections
	// (tests) the reader blocks in frameReady.
	var f *feeder
	if c.batch != nil && c.rc != nil {
		f = &feeder{rc: c.rc, b: c.batch}
		c.batch.fed = true
		defer func() {
			c.batch.release()
			c.batch.fed = false // the linger above reads the socket again
		}()
	}
	if !c.serveBatch() { // what arrived with the preface
		return
	}
	for {
		var err error
		if f != nil {
			err = f.run(c.serveBatch)
		} else if _, err = c.frameReady(true); err == nil {
			if !c.serveBatch() {
				return
			}
			continue
		}
		var ne net.Error
		switch {
		case err == nil:
			return // serveBatch stopped, or the socket ended
		case errors.As(err, &ne) && ne.Timeout():
			c.rdl = time.Time{}
			if c.timeout() && c.serveBatch() {
				continue
			}
		case errors.Is(err, errHeaderBlock):
			c.mu.Lock()
			c.connErrorLocked(http2.ErrCodeEnhanceYourCalm)
			c.mu.Unlock()
		}
		return
	}
}

// serveBatch handles every frame that has arrived, then ends the read
// batch: what the reader queued (and answered itself) goes out in one
// write, and the read deadline is set. False ends the connection.
func (c *h2conn) serveBatch() bool {
	c.takeReader()
	for {
		ready, err := c.frameReady(false)
		if err != nil {
			c.mu.Lock()
			c.connErrorLocked(http2.ErrCodeEnhanceYourCalm)
			c.mu.Unlock()
			return false
		}
		if !ready {
			if c.pull() {
				continue
			}
			if c.readErr != nil {
				return false // EOF, reset or a TLS error
			}
			break
		}
		f, err := c.fr.ReadFrame()
		if hf, ok := f.(*http2.HeadersFrame); ok && err == nil {
			// Decoded here, before processFrame may ignore the frame:
			// every block updates the HPACK state.
			f, err = c.hdec.read(c.fr, hf)
		}
		c.mu.Lock()
		if err == nil {
			err = c.processFrame(f)
		}
		if err != nil {
			var se http2.StreamError
			var ce http2.ConnectionError
			switch {
			case errors.As(err, &se):
				c.streamErrorLocked(se.StreamID, se.Code)
				err = nil
				// A stream the client made us reset by a malformed frame
				// counts as a client reset (MadeYouReset, CVE-2025-8671,
				// as x/net counts it): its answer may still be computed.
				// REFUSED_STREAM was counted when refused.
				if se.Code != http2.ErrCodeRefusedStream {
					c.resets++
					if e := c.checkResets(); e != nil {
						c.connErrorLocked(http2.ErrCodeEnhanceYourCalm)
					}
				}
			case errors.As(err, &ce):
				c.connErrorLocked(http2.ErrCode(ce))
			case errors.Is(err, http2.ErrFrameTooLarge):
				c.connErrorLocked(http2.ErrCodeFrameSize)
			default:
				c.failLocked()
			}
		}
		stop := c.failed || c.closeAfter
		c.mu.Unlock()
		if stop {
			return false
		}
	}
	// End of a read batch: send what the reader queued (and answered
	// itself), and wait while the peer lags behind.
	c.mu.Lock()
	c.returnConnWindowLocked(true)
	if c.bodyAwaited {
		// A client with Nagle's algorithm on (dnsperf) sends a POST's body
		// only once its headers are acknowledged. An answer written now
		// carries the ACK; with nothing to write, the kernel's delayed ACK
		// would hold the request up to 40 ms: acknowledge at once.
		c.bodyAwaited = false
		if c.bodyDeadlines > 0 && (c.wbuf == nil || len(*c.wbuf) == 0) {
			quickAck(c.rc)
		}
	}
	c.flushLocked()
	for !c.failed && c.wbuf != nil && len(*c.wbuf) > h2MaxPendingOut {
		if !c.writing {
			c.flushLocked()
			continue
		}
		c.cond.Wait()
	}
	if c.failed || c.closeAfter && !c.writing && c.wbuf == nil {
		c.mu.Unlock()
		return false
	}
	now := time.Now()
	dl := c.readDeadlineLocked(now)
	c.mu.Unlock()
	// A deadline that fires early only re-arms (timeout): keep the current
	// one unless it is later or due soon.
	if dl.Before(c.rdl) || c.rdl.Sub(now) < c.d.idle/2 {
		c.rdl = dl
		_ = c.conn.SetReadDeadline(dl)
	}
	// The feeder now waits on the socket: when crypto/tls holds nothing
	// unread either, the read buffer is not needed until data arrives.
	if c.batch != nil && c.batch.fed && c.batch.drained() {
		c.releaseReader()
	}
	return true
}

// pull moves what crypto/tls can return without waiting (what the feeder
// fed it, records it holds) into the read buffer; it reports whether the
// buffer grew. crypto/tls returns one record per Read. An error other
// than "nothing more for now" ends the connection (readErr).
func (c *h2conn) pull() bool {
	if c.batch == nil || !c.batch.fed {
		return false
	}
	n := c.br.Buffered()
	if n >= h2ReadBuffer {
		return false
	}
	if c.batch.drained() {
		return false // every record fed was read: nothing more now
	}
	_, err := c.br.Peek(n + 1)
	if c.br.Buffered() > n {
		return true
	}
	if errors.Is(err, os.ErrDeadlineExceeded) {
		c.batch.sync()
	} else if err != nil {
		c.readErr = err
	}
	return false
}

// tlsReads tells the batchConn what each Read of the TLS connection
// returned (see batchConn.took).
type tlsReads struct {
	conn  net.Conn
	batch *batchConn
}

func (r *tlsReads) Read(p []byte) (int, error) {
	n, err := r.conn.Read(p)
	if r.batch != nil {
		r.batch.took(n, len(p))
	}
	return n, err
}

// frameReady reports whether the next frame (for HEADERS without
// END_HEADERS: the whole header block) is in the read buffer; with
// block it reads until it is. Reads never consume a partial frame, so a
// read deadline can interrupt them and ReadFrame never blocks. A header
// block longer than the buffer or than h2MaxContinuations frames is
// errHeaderBlock (CONTINUATION flood).
func (c *h2conn) frameReady(block bool) (bool, error) {
	off, frames := 0, 0
	for {
		if c.br.Buffered() < off+9 {
			if !block {
				return false, nil
			}
			if _, err := c.br.Peek(off + 9); err != nil {
				return false, err
			}
		}
		b, _ := c.br.Peek(off + 9)
		c.hr.Reset(b[off:])
		fh, err := http2.ReadFrameHeader(&c.hr)
		if err != nil {
			return false, err
		}
		if fh.Length > h2MaxFrame {
			return true, nil // ReadFrame reports it
		}
		end := off + 9 + int(fh.Length)
		if end > h2ReadBuffer {
			return false, errHeaderBlock
		}
		if c.br.Buffered() < end {
			if !block {
				return false, nil
			}
			if _, err := c.br.Peek(end); err != nil {
				return false, err
			}
		}
		cont := fh.Type == http2.FrameHeaders || fh.Type == http2.FrameContinuation || fh.Type == http2.FramePushPromise
		if (frames > 0 && fh.Type != http2.FrameContinuation) || !cont || fh.Flags.Has(http2.FlagHeadersEndHeaders) {
			return true, nil // the Framer checks the sequence
		}
		frames++
		if frames > h2MaxContinuations {
			return false, errHeaderBlock
		}
		off = end
	}
}

var errHeaderBlock = errors.New("http2: header block too large or in too many frames")

// readDeadlineLocked: idle timeout without streams, the oldest body's
// deadline while bodies are read, else the idle timeout from now.
func (c *h2conn) readDeadlineLocked(now time.Time) time.Time {
	if len(c.streams) == 0 {
		return c.idleSince.Add(c.d.idle)
	}
	dl := now.Add(c.d.idle)
	if c.bodyDeadlines > 0 {
		for _, st := range c.streams {
			if !st.remoteDone {
				if t := st.start.Add(h2BodyTimeout); t.Before(dl) {
					dl = t
				}
			}
		}
	}
	return dl
}

// timeout handles a read deadline: true means go on reading.
func (c *h2conn) timeout() bool {
	c.mu.Lock()
	defer c.mu.Unlock()
	now := time.Now()
	if len(c.streams) == 0 {
		if now.Before(c.idleSince.Add(c.d.idle)) {
			return true
		}
		c.connErrorLocked(http2.ErrCodeNo)
		c.flushLocked()
		return false
	}
	for _, st := range c.streams {
		if !st.remoteDone && now.Sub(st.start) >= h2BodyTimeout {
			c.streamErrorLocked(st.id, http2.ErrCodeCancel)
		}
	}
	return true
}

// processFrame handles one frame (mu held).
func (c *h2conn) processFrame(f http2.Frame) error {
	if !c.sawSettings {
		if _, ok := f.(*http2.SettingsFrame); !ok {
			return http2.ConnectionError(http2.ErrCodeProtocol)
		}
		c.sawSettings = true
	}
	if c.closeAfter {
		return nil // GOAWAY with an error sent: ignore the rest
	}
	if c.goAway && f.Header().StreamID > c.goAwayID {
		// Streams the client opened after our GOAWAY are ignored (RFC
		// 9113 6.8); their DATA still counts against the window.
		if d, ok := f.(*http2.DataFrame); ok {
			if int64(d.Length) > c.connRecvWin {
				return http2.ConnectionError(http2.ErrCodeFlowControl)
			}
			c.connRecvWin -= int64(d.Length)
			c.connRecvOwed += int(d.Length)
		}
		return nil
	}
	switch f := f.(type) {
	case *h2headers:
		return c.processHeaders(f)
	case *http2.DataFrame:
		return c.processData(f)
	case *http2.SettingsFrame:
		return c.processSettings(f)
	case *http2.WindowUpdateFrame:
		return c.processWindowUpdate(f)
	case *http2.PingFrame:
		if f.IsAck() {
			return nil
		}
		if err := c.countControl(); err != nil {
			return err
		}
		return c.fw.WritePing(true, f.Data)
	case *http2.RSTStreamFrame:
		if c.idleStream(f.StreamID) {
			return http2.ConnectionError(http2.ErrCodeProtocol)
		}
		c.resets++
		if err := c.checkResets(); err != nil {
			return err
		}
		c.rememberReset(f.StreamID | peerResetBit)
		if st := c.streams[f.StreamID]; st != nil && !st.reset {
			st.reset, st.peerReset = true, true
			c.releaseLocked(st)
		}
		return nil
	case *http2.PriorityFrame:
		if f.StreamDep == f.StreamID {
			return http2.StreamError{StreamID: f.StreamID, Code: http2.ErrCodeProtocol}
		}
		return c.countControl()
	case *http2.GoAwayFrame:
		if !c.goAway {
			c.goAway = true
			c.goAwayID = c.maxStreamID
			_ = c.fw.WriteGoAway(c.maxStreamID, http2.ErrCodeNo, nil)
		}
		if len(c.streams) == 0 {
			c.closeAfter = true
		}
		return nil
	case *http2.PushPromiseFrame:
		return http2.ConnectionError(http2.ErrCodeProtocol)
	default: // unknown and extension frames are ignored
		return c.countControl()
	}
}

func (c *h2conn) countControl() error {
	c.control++
	if c.control > h2ControlSlack+h2ControlPerStream*c.opened {
		return http2.ConnectionError(http2.ErrCodeEnhanceYourCalm)
	}
	return nil
}

func (c *h2conn) checkResets() error {
	if c.resets > h2ResetSlack && c.resets*4 > c.opened {
		return http2.ConnectionError(http2.ErrCodeEnhanceYourCalm)
	}
	return nil
}

// idleStream: a client stream ID not opened yet.
func (c *h2conn) idleStream(id uint32) bool {
	return id%2 == 0 || id > c.maxStreamID
}

func (c *h2conn) processSettings(f *http2.SettingsFrame) error {
	if f.IsAck() {
		c.unackedSet--
		if c.unackedSet < 0 {
			return http2.ConnectionError(http2.ErrCodeProtocol)
		}
		return nil
	}
	if err := c.countControl(); err != nil {
		return err
	}
	if f.NumSettings() > 100 {
		return http2.ConnectionError(http2.ErrCodeProtocol)
	}
	err := f.ForeachSetting(func(s http2.Setting) error {
		if err := s.Valid(); err != nil {
			return err
		}
		switch s.ID {
		case http2.SettingHeaderTableSize:
			c.enc.SetMaxDynamicTableSizeLimit(s.Val)
			c.lastOKValid = false // the next block starts with a size update
		case http2.SettingInitialWindowSize:
			delta := int64(s.Val) - c.peerInitWin
			for _, st := range c.streams {
				if st.sendWin+delta > 1<<31-1 {
					return http2.ConnectionError(http2.ErrCodeFlowControl)
				}
			}
			for _, st := range c.streams {
				st.sendWin += delta
			}
			c.peerInitWin = int64(s.Val)
		case http2.SettingMaxFrameSize:
			c.peerMaxFrame = int(s.Val)
		}
		return nil
	})
	if err != nil {
		return err
	}
	if err := c.fw.WriteSettingsAck(); err != nil {
		return err
	}
	c.resumeBlockedLocked()
	return nil
}

func (c *h2conn) processWindowUpdate(f *http2.WindowUpdateFrame) error {
	if err := c.countControl(); err != nil {
		return err
	}
	if f.StreamID == 0 {
		if c.connSendWin+int64(f.Increment) > 1<<31-1 {
			return http2.ConnectionError(http2.ErrCodeFlowControl)
		}
		c.connSendWin += int64(f.Increment)
		c.resumeBlockedLocked()
		return nil
	}
	if c.idleStream(f.StreamID) {
		return http2.ConnectionError(http2.ErrCodeProtocol)
	}
	st := c.streams[f.StreamID]
	if st == nil || st.reset {
		return nil
	}
	if st.sendWin+int64(f.Increment) > 1<<31-1 {
		return http2.StreamError{StreamID: f.StreamID, Code: http2.ErrCodeFlowControl}
	}
	st.sendWin += int64(f.Increment)
	if st.blocked {
		c.resumeBlockedLocked()
	}
	return nil
}

// returnConnWindowLocked sends a connection WINDOW_UPDATE for consumed
// bytes once they reach the threshold (or any, at the end of a batch
// with the window half used).
func (c *h2conn) returnConnWindowLocked(batchEnd bool) {
	if c.connRecvOwed == 0 {
		return
	}
	if c.connRecvOwed >= h2WindowThreshold || batchEnd && c.connRecvWin < h2ConnWindow/2 {
		_ = c.fw.WriteWindowUpdate(0, uint32(c.connRecvOwed))
		c.connRecvWin += int64(c.connRecvOwed)
		c.connRecvOwed = 0
	}
}

func (c *h2conn) processData(f *http2.DataFrame) error {
	id := f.StreamID
	n := int(f.Length)
	if c.idleStream(id) {
		return http2.ConnectionError(http2.ErrCodeProtocol)
	}
	if int64(n) > c.connRecvWin {
		return http2.ConnectionError(http2.ErrCodeFlowControl)
	}
	c.connRecvWin -= int64(n)
	if n == 0 && !f.StreamEnded() {
		if err := c.countControl(); err != nil {
			return err
		}
	}
	st := c.streams[id]
	if st == nil || st.reset || st.remoteDone {
		c.connRecvOwed += n
		switch {
		case st != nil && st.peerReset:
			// Held until its answer is computed, closed for the client.
			return c.fw.WriteRSTStream(id, http2.ErrCodeStreamClosed)
		case st != nil && st.reset:
			return nil // we reset it: DATA in flight
		case st == nil:
			if ours, _ := c.recentlyReset(id); ours {
				return nil
			}
		}
		return http2.StreamError{StreamID: id, Code: http2.ErrCodeStreamClosed}
	}
	if int64(n) > st.recvWin {
		c.connRecvOwed += n
		return http2.StreamError{StreamID: id, Code: http2.ErrCodeFlowControl}
	}
	st.recvWin -= int64(n)
	data := f.Data()
	st.recvd += int64(len(data))
	if st.declLen >= 0 && st.recvd > st.declLen {
		c.connRecvOwed += n
		return http2.StreamError{StreamID: id, Code: http2.ErrCodeProtocol}
	}
	if !st.collecting {
		// A body we do not read (GET, or answered already): the
		// connection window comes back, the stream's does not (a
		// client sending on stalls, and the stream times out).
		c.connRecvOwed += n
	} else {
		c.connRecvOwed += n - len(data) // padding
		st.connHeld += len(data)
		st.recvOwed += n - len(data)
		if len(*st.body)+len(data) > maxMessage {
			c.collectDone(st)
			code, reason := checkBody(nil, errTooLarge)
			c.failStream(st, code, reason)
			c.stopBody(st)
			return nil
		}
		*st.body = append(*st.body, data...)
		st.recvOwed += len(data)
	}
	if f.StreamEnded() {
		return c.requestEnded(st)
	}
	if st.recvOwed >= h2WindowThreshold {
		_ = c.fw.WriteWindowUpdate(id, uint32(st.recvOwed))
		st.recvWin += int64(st.recvOwed)
		st.recvOwed = 0
	}
	c.returnConnWindowLocked(false)
	return nil
}

// collectDone ends reading a body: its bytes return to the connection
// window.
func (c *h2conn) collectDone(st *h2stream) {
	st.collecting = false
	c.connRecvOwed += st.connHeld
	st.connHeld = 0
}

// requestEnded handles END_STREAM: a body read is answered, any other
// stream (answered already, or a GET) is released.
func (c *h2conn) requestEnded(st *h2stream) error {
	c.endRemote(st)
	if st.declLen >= 0 && st.recvd != st.declLen {
		return http2.StreamError{StreamID: st.id, Code: http2.ErrCodeProtocol}
	}
	if !st.collecting {
		c.releaseLocked(st)
		return nil
	}
	c.collectDone(st)
	c.requestDone(st)
	return nil
}

// stopBody asks the client to stop sending a request body answered
// already (RST_STREAM NO_ERROR, RFC 9113 8.1).
func (c *h2conn) stopBody(st *h2stream) {
	if c.streams[st.id] == st && st.sentEnd && !st.remoteDone && !st.reset {
		c.streamErrorLocked(st.id, http2.ErrCodeNo)
	}
}

// requestDone answers a complete POST request.
func (c *h2conn) requestDone(st *h2stream) {
	if code, reason := checkBody(*st.body, nil); code != 0 {
		c.failStream(st, code, reason)
		return
	}
	c.dispatch(st)
}

// recentlyReset: we reset stream id lately (ours), or the client did.
func (c *h2conn) recentlyReset(id uint32) (ours, peer bool) {
	for _, r := range c.recent {
		if r == id {
			ours = true
		} else if r == id|peerResetBit {
			peer = true
		}
	}
	return ours, peer
}

const peerResetBit = 1 << 31 // in h2conn.recent: reset by the client

func (c *h2conn) rememberReset(id uint32) {
	c.recent[c.recentN%h2RecentResets] = id
	c.recentN++
}

// streamErrorLocked resets a stream (RST_STREAM code).
func (c *h2conn) streamErrorLocked(id uint32, code http2.ErrCode) {
	st := c.streams[id]
	if st != nil && st.reset {
		return
	}
	_ = c.fw.WriteRSTStream(id, code)
	c.rememberReset(id)
	if st != nil {
		st.reset = true
		c.releaseLocked(st)
	}
}

// releaseLocked removes a finished or reset stream unless its responder
// still runs (the slot stays taken until then: rapid reset). A stream
// answered before its request ended stays until the request ends (its
// body is discarded and checked against content-length), the client
// resets it or it times out (h2BodyTimeout).
func (c *h2conn) releaseLocked(st *h2stream) {
	if st.running || !st.reset && (!st.sentEnd || !st.remoteDone) {
		return
	}
	if c.streams[st.id] != st {
		return
	}
	delete(c.streams, st.id)
	c.freeStream(st)
	if len(c.streams) == 0 {
		c.idleSince = time.Now()
		if c.goAway {
			c.closeAfter = true
		}
	}
}

// endRemote records the end of the request (END_STREAM).
func (c *h2conn) endRemote(st *h2stream) {
	if !st.remoteDone {
		st.remoteDone = true
		c.bodyDeadlines--
	}
}

func (c *h2conn) freeStream(st *h2stream) {
	if !st.remoteDone {
		c.bodyDeadlines--
	}
	c.connRecvOwed += st.connHeld
	if st.blocked {
		for i, b := range c.blocked {
			if b == st {
				c.blocked = append(c.blocked[:i], c.blocked[i+1:]...)
				break
			}
		}
		c.unblockLocked(st)
	}
	if st.body != nil {
		putBuf(st.body)
	}
	if st.out != nil {
		putBuf(st.out)
	}
	*st = h2stream{}
	h2streamPool.Put(st)
}

func (c *h2conn) processHeaders(f *h2headers) error {
	id := f.StreamID
	if id%2 != 1 {
		return http2.ConnectionError(http2.ErrCodeProtocol)
	}
	if st := c.streams[id]; st != nil {
		// Trailers: must end the stream, no pseudo-headers.
		if st.peerReset {
			return c.fw.WriteRSTStream(id, http2.ErrCodeStreamClosed)
		}
		if st.reset {
			return nil
		}
		if st.remoteDone {
			return http2.StreamError{StreamID: id, Code: http2.ErrCodeStreamClosed}
		}
		if !f.StreamEnded() || len(f.PseudoFields()) > 0 {
			return http2.StreamError{StreamID: id, Code: http2.ErrCodeProtocol}
		}
		return c.requestEnded(st)
	}
	if id <= c.maxStreamID {
		if ours, peer := c.recentlyReset(id); ours || peer {
			return http2.ConnectionError(http2.ErrCodeStreamClosed)
		}
		return http2.ConnectionError(http2.ErrCodeProtocol)
	}
	if f.HasPriority() && f.Priority.StreamDep == id {
		c.maxStreamID = id
		return http2.StreamError{StreamID: id, Code: http2.ErrCodeProtocol}
	}
	if c.goAway {
		return nil // after GOAWAY: not processed (RFC 9113 6.8)
	}
	c.maxStreamID = id
	c.opened++
	if len(c.streams) >= h2MaxStreams {
		c.resets++
		if err := c.checkResets(); err != nil {
			return err
		}
		return http2.StreamError{StreamID: id, Code: http2.ErrCodeRefusedStream}
	}
	method := f.PseudoValue("method")
	path := f.PseudoValue("path")
	if method == "" || f.PseudoValue("status") != "" || f.PseudoValue("protocol") != "" ||
		method != http.MethodConnect && (f.PseudoValue("scheme") == "" || path == "" || path[0] != '/') {
		return http2.StreamError{StreamID: id, Code: http2.ErrCodeProtocol}
	}
	st := h2streamPool.Get().(*h2stream)
	st.id = id
	st.declLen = -1
	st.start = time.Now()
	st.recvWin = h2StreamWindow
	st.sendWin = c.peerInitWin
	st.remoteDone = f.StreamEnded()
	if !st.remoteDone {
		c.bodyDeadlines++
	}
	c.streams[id] = st
	if f.Truncated {
		// Each oversized block costs its full HPACK decode; a client that
		// keeps sending them is cut off (x/net closes connections for
		// its attack classes too).
		c.headerRejects++
		if c.headerRejects > h2MaxHeaderRejects {
			c.d.h.s.m.reject(c.d.h.name, "header_abuse")
			return http2.ConnectionError(http2.ErrCodeEnhanceYourCalm)
		}
		c.respondError(st, http.StatusRequestHeaderFieldsTooLarge, "")
		return nil
	}
	var ctype string
	nctype := 0
	for _, hf := range f.RegularFields() {
		switch hf.Name {
		case "connection", "proxy-connection", "keep-alive", "transfer-encoding", "upgrade":
			return http2.StreamError{StreamID: id, Code: http2.ErrCodeProtocol}
		case "te":
			if hf.Value != "trailers" {
				return http2.StreamError{StreamID: id, Code: http2.ErrCodeProtocol}
			}
		case "content-type":
			ctype = hf.Value
			nctype++
		case "content-length":
			n, err := strconv.ParseUint(hf.Value, 10, 63)
			if err != nil || st.declLen >= 0 && int64(n) != st.declLen {
				return http2.StreamError{StreamID: id, Code: http2.ErrCodeProtocol}
			}
			st.declLen = int64(n)
		}
	}
	if st.remoteDone && st.declLen > 0 {
		return http2.StreamError{StreamID: id, Code: http2.ErrCodeProtocol}
	}
	// The request: the rules of every DoH server (dohHandler.decideHead);
	// what is checked above is HTTP/2 framing.
	rawPath, query, _ := strings.Cut(path, "?")
	if method == http.MethodConnect {
		rawPath = ""
	}
	if strings.IndexByte(rawPath, '%') >= 0 {
		p, err := url.PathUnescape(rawPath)
		if err != nil {
			return http2.StreamError{StreamID: id, Code: http2.ErrCodeProtocol}
		}
		rawPath = p
	}
	st.head = method == http.MethodHead
	d := c.d.h.decideHead(dohRequest{method: method, path: rawPath, rawQuery: query,
		ctype: ctype, nctype: nctype, contentLength: st.declLen}, nil)
	st.clientID = d.clientID
	st.body = d.buf
	if d.code != 0 {
		c.failStream(st, d.code, d.reason)
		if d.code == http.StatusRequestEntityTooLarge {
			c.stopBody(st) // a body it will not read: ask the client to stop
		}
		return nil
	}
	if d.msg != nil { // GET
		c.dispatch(st)
		return nil
	}
	st.body = getBuf()
	if st.remoteDone {
		c.requestDone(st)
		return nil
	}
	st.collecting = true
	c.bodyAwaited = true // see the end of a read batch in run
	return nil
}

// failStream answers with an error status (dohHandler.fail).
func (c *h2conn) failStream(st *h2stream, code int, reason string) {
	c.d.h.s.m.reject(c.d.h.name, reason)
	c.respondError(st, code, reason)
}

var errorBodies sync.Map // status -> []byte

func errorBody(code int) []byte {
	if b, ok := errorBodies.Load(code); ok {
		return b.([]byte)
	}
	b := []byte(http.StatusText(code) + "\n")
	errorBodies.Store(code, b)
	return b
}

// respondError writes an http.Error-like response (mu held).
func (c *h2conn) respondError(st *h2stream, code int, _ string) {
	if st.collecting {
		c.collectDone(st)
	}
	body := errorBody(code)
	c.hbuf.Reset()
	c.field(":status", statusString(code))
	c.field("content-type", "text/plain; charset=utf-8")
	c.field("x-content-type-options", "nosniff")
	c.field("cache-control", "no-store")
	if code == http.StatusMethodNotAllowed {
		c.field("allow", "GET, POST")
	}
	c.field("content-length", lengthString(len(body)))
	c.field("date", httpDate())
	if st.head {
		body = nil
	}
	c.sendLocked(st, body, nil)
}

func (c *h2conn) field(name, value string) {
	c.lastOKValid = false
	_ = c.enc.WriteField(hpack.HeaderField{Name: name, Value: value})
}

// sendLocked writes the header block in c.hbuf and then body (owned by
// out, if not nil) as far as the flow-control windows allow.
func (c *h2conn) sendLocked(st *h2stream, body []byte, out *[]byte) {
	st.responded = true
	blk := c.hbuf.Bytes()
	first := true
	for first || len(blk) > 0 {
		n := min(len(blk), c.peerMaxFrame)
		if first {
			_ = c.fw.WriteHeaders(http2.HeadersFrameParam{StreamID: st.id, BlockFragment: blk[:n],
				EndStream: len(body) == 0, EndHeaders: n == len(blk)})
		} else {
			_ = c.fw.WriteContinuation(st.id, n == len(blk), blk[:n])
		}
		blk = blk[n:]
		first = false
	}
	if len(body) == 0 {
		st.sentEnd = true
		c.cutLocked()
		if out != nil {
			putBuf(out)
		}
		c.releaseLocked(st)
		return
	}
	st.pending, st.out = body, out // out nil: a shared body, never modified
	if c.sendDataLocked(st) {
		c.releaseLocked(st)
	} else {
		c.blockLocked(st)
	}
}

// blockLocked parks st's unsent answer until the peer grants window. The
// rest moves out of the pooled buffer into one of its own size, and what
// is held counts against the per-connection and per-server bounds (the
// buffers, not the answer bytes).
func (c *h2conn) blockLocked(st *h2stream) {
	if st.out != nil {
		p := make([]byte, len(st.pending))
		copy(p, st.pending)
		putBuf(st.out)
		st.out, st.pending = nil, p
		st.blockedCap = cap(p)
	}
	st.blocked = true
	st.blockedSince = time.Now()
	c.blocked = append(c.blocked, st)
	c.blockedLen += st.blockedCap
	total := c.d.s.h2Blocked.Add(int64(st.blockedCap))
	if c.blockedLen > h2MaxBlocked || total > h2MaxBlockedTotal {
		c.d.h.s.m.reject(c.d.h.name, "flow_control")
		c.connErrorLocked(http2.ErrCodeEnhanceYourCalm)
		return
	}
	if len(c.blocked) == 1 {
		if c.stallTimer == nil {
			c.stallTimer = time.AfterFunc(h2StallTimeout, c.checkStall)
		} else {
			c.stallTimer.Reset(h2StallTimeout)
		}
	}
}

// unblockLocked gives back what a blocked answer held (sent or dropped).
func (c *h2conn) unblockLocked(st *h2stream) {
	st.blocked = false
	c.blockedLen -= st.blockedCap
	c.d.s.h2Blocked.Add(-int64(st.blockedCap))
	st.blockedCap = 0
}

// checkStall runs h2StallTimeout after an answer started waiting for
// window: if the oldest still waits that long, the connection gets
// GOAWAY ENHANCE_YOUR_CALM and closes (the reader wakes when it is
// written), else it checks again when the now oldest is due.
func (c *h2conn) checkStall() {
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.closed || c.failed || len(c.blocked) == 0 {
		return
	}
	if wait := h2StallTimeout - time.Since(c.blocked[0].blockedSince); wait > 0 {
		c.stallTimer.Reset(wait)
		return
	}
	if c.closeAfter {
		return
	}
	c.d.h.s.m.reject(c.d.h.name, "stalled")
	c.connErrorLocked(http2.ErrCodeEnhanceYourCalm)
	c.flushLocked()
	if !c.failed {
		// flushLocked wakes the reader when the GOAWAY is written; if a
		// writer was at work, it will; this makes sure.
		_ = c.conn.SetReadDeadline(time.Now())
	}
}

// sendDataLocked writes DATA frames of st.pending within the windows;
// true when all is sent (END_STREAM).
func (c *h2conn) sendDataLocked(st *h2stream) bool {
	for len(st.pending) > 0 {
		n := int64(len(st.pending))
		n = min(n, st.sendWin, c.connSendWin, int64(c.peerMaxFrame))
		if n <= 0 {
			return false
		}
		end := n == int64(len(st.pending))
		_ = c.fw.WriteData(st.id, end, st.pending[:n])
		st.pending = st.pending[n:]
		st.sendWin -= n
		c.connSendWin -= n
	}
	st.sentEnd = true
	c.cutLocked()
	if st.out != nil {
		putBuf(st.out)
		st.out = nil
	}
	st.pending = nil
	return true
}

// resumeBlockedLocked sends what the windows now allow.
func (c *h2conn) resumeBlockedLocked() {
	if len(c.blocked) == 0 || c.connSendWin <= 0 {
		return
	}
	keep := c.blocked[:0]
	var done []*h2stream
	for _, st := range c.blocked {
		if c.sendDataLocked(st) {
			c.unblockLocked(st)
			done = append(done, st)
		} else {
			keep = append(keep, st)
		}
	}
	clear(c.blocked[len(keep):])
	c.blocked = keep
	for _, st := range done {
		c.releaseLocked(st)
	}
}

// dispatch answers st. With a handler that can answer without waiting
// (dataplane.Server.ServeWireNow) the reader answers it here, under c.mu,
// and the answer leaves with the others of this read batch; a query that
// waits for an upstream is finished by the data plane's workers
// (AnswerWire). Other handlers run on the server's responders.
func (c *h2conn) dispatch(st *h2stream) {
	st.running = true
	st.c = c
	c.running++
	c.wg.Add(1)
	h := c.d.h
	if nh := h.s.now; nh != nil {
		op := getBuf()
		out, ok, done := nh.ServeWireNow(*st.body, c.client, h.transport, st.clientID, (*op)[:0], st)
		if !done {
			putBuf(op)
			return
		}
		*op = out
		c.completeLocked(st, op, ok)
		c.wg.Done()
		return
	}
	h.s.responders.do(st)
}

// run implements job.
func (st *h2stream) run() { st.c.answer(st) }

// AnswerWire implements dataplane.WireCallback: the answer of a query that
// waited for an upstream.
func (st *h2stream) AnswerWire(resp []byte, ok bool) {
	c := st.c
	defer c.wg.Done()
	op := getBuf()
	*op = append((*op)[:0], resp...)
	c.mu.Lock()
	c.completeLocked(st, op, ok)
	c.flushSoonLocked()
	c.mu.Unlock()
}

// answer runs st on a responder (handlers without ServeWireNow).
func (c *h2conn) answer(st *h2stream) {
	defer c.wg.Done()
	h := c.d.h
	op := getBuf()
	out, ok := h.s.h.ServeWireID(*st.body, c.client, h.transport, st.clientID, (*op)[:0])
	*op = out
	c.mu.Lock()
	c.completeLocked(st, op, ok)
	c.flushSoonLocked()
	c.mu.Unlock()
}

// flushSoonLocked writes what is queued; answers computed at the same time
// leave together: it yields once when others are still being answered.
func (c *h2conn) flushSoonLocked() {
	if c.running > 0 && !c.writing {
		c.mu.Unlock()
		runtime.Gosched()
		c.mu.Lock()
	}
	c.flushLocked()
}

// completeLocked queues the response of st (op owns the DNS answer; ok
// false: the message was refused as malformed).
func (c *h2conn) completeLocked(st *h2stream, op *[]byte, ok bool) {
	h := c.d.h
	out := *op
	st.running = false
	c.running--
	switch {
	case st.reset || c.closed || c.failed:
		putBuf(op)
		c.releaseLocked(st)
	case !ok:
		putBuf(op)
		c.failStream(st, http.StatusBadRequest, "bad_request")
	default:
		k := okHeaders{cacheControl: "no-store", length: len(out), date: httpDate()}
		if ttl, ok := cacheTTL(out); ok {
			k.cacheControl = maxAgeValue(ttl)[0]
		}
		if h.altSvc != nil {
			k.altSvc = h.altSvc()
		}
		c.hbuf.Reset()
		if c.lastOKValid && k == c.lastOK {
			c.hbuf.Write(c.lastOKBlock)
		} else {
			c.field(":status", "200")
			c.field("content-type", contentType)
			c.field("cache-control", k.cacheControl)
			c.field("content-length", lengthString(k.length))
			if k.altSvc != "" {
				c.field("alt-svc", k.altSvc)
			}
			c.field("date", k.date)
			// A block of indexed fields only left the encoder's table
			// as it was: the same fields encode to the same bytes
			// until another block is encoded (field clears the flag).
			c.lastOK, c.lastOKBlock = k, append(c.lastOKBlock[:0], c.hbuf.Bytes()...)
			c.lastOKValid = indexedOnly(c.lastOKBlock)
		}
		c.sendLocked(st, out, op)
	}
}

// okHeaders are the values of a 200 response's header fields that vary.
type okHeaders struct {
	cacheControl string
	length       int
	altSvc       string
	date         string
}

// indexedOnly reports whether an HPACK block holds only indexed header
// field representations (RFC 7541 6.1), which leave the dynamic table
// unchanged.
func indexedOnly(b []byte) bool {
	for len(b) > 0 {
		if b[0]&0x80 == 0 {
			return false
		}
		if b[0]&0x7f != 0x7f {
			b = b[1:]
			continue
		}
		i := 1 // a multi-byte index: continuation bytes, then the last
		for i < len(b) && b[i]&0x80 != 0 {
			i++
		}
		if i == len(b) {
			return false
		}
		b = b[i+1:]
	}
	return true
}

func statusString(code int) string {
	switch code {
	case 200:
		return "200"
	case 400:
		return "400"
	case 404:
		return "404"
	}
	return strconv.Itoa(code)
}

// lengthString returns the decimal length, cached for recent lengths.
var lengthCache [256]atomic.Pointer[lengthEntry]

type lengthEntry struct {
	n int
	s string
}

func lengthString(n int) string {
	slot := &lengthCache[n&255]
	if e := slot.Load(); e != nil && e.n == n {
		return e.s
	}
	e := &lengthEntry{n: n, s: strconv.Itoa(n)}
	slot.Store(e)
	return e.s
}

// httpDate is the Date header value, formatted once a second.
var dateCache atomic.Pointer[dateEntry]

type dateEntry struct {
	sec int64
	s   string
}

func httpDate() string {
	now := time.Now()
	if e := dateCache.Load(); e != nil && e.sec == now.Unix() {
		return e.s
	}
	e := &dateEntry{sec: now.Unix(), s: now.UTC().Format(http.TimeFormat)}
	dateCache.Store(e)
	return e.s
}

// connCount is the number of connections served (tests).
func (d *doh2Server) connCount() int {
	d.mu.Lock()
	defer d.mu.Unlock()
	return len(d.conns)
}
