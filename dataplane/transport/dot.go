package transport

import (
	"context"
	"crypto/tls"
	"encoding/binary"
	"errors"
	"fmt"
	"net"
	"net/netip"
	"os"
	"runtime"
	"sync"
	"syscall"
	"time"

	"github.com/svcdns/svc/dataplane"
	"github.com/svcdns/svc/dataplane/proxyproto"
	"github.com/svcdns/svc/dataplane/transport/tlscert"
)

func (s *Server) startDoT(ctx context.Context, l Listener) error {
	tc, certs, err := s.tlsConfig(s.reloadCtx, l, []string{"dot"})
	if err != nil {
		return err
	}
	var lc net.ListenConfig
	ln, err := lc.Listen(ctx, "tcp", l.Address)
	if err != nil {
		return fmt.Errorf("dot listen %s: %w", l.Address, err)
	}
	s.tcp = append(s.tcp, ln)
	s.addrs[kindDoT] = append(s.addrs[kindDoT], addrPortOf(ln.Addr()))
	pln := &proxyproto.Listener{Listener: ln, Policy: s.cfg.ProxyProtocol, TLS: true, OnReject: func(netip.AddrPort, error) { s.m.reject("dot", "proxy") }}
	s.wg.Add(1)
	go s.acceptDoT(pln, tc, certs)
	return nil
}

func (s *Server) acceptDoT(ln net.Listener, tc *tls.Config, certs *tlscert.Reloader) {
	defer s.wg.Done()
	slots := make(chan struct{}, s.cfg.MaxConns)
	for {
		conn, err := ln.Accept()
		if err != nil {
			if errors.Is(err, net.ErrClosed) {
				return
			}
			time.Sleep(5 * time.Millisecond) // EMFILE and friends: back off
			continue
		}
		select {
		case slots <- struct{}{}:
		default:
			s.m.reject("dot", "max_conns")
			_ = conn.Close()
			continue
		}
		s.mu.Lock()
		if s.closed {
			s.mu.Unlock()
			_ = conn.Close()
			<-slots
			continue
		}
		s.tcpConns[conn] = struct{}{}
		s.wg.Add(1)
		s.mu.Unlock()
		go func() {
			defer func() { <-slots }()
			s.serveDoT(conn, tc, certs)
		}()
	}
}

// serveDoT reads length-framed queries (RFC 7858 3.3) and answers each on
// its own goroutine, out of order. Answers are written by whichever query
// goroutine finds the connection free; answers finishing meanwhile are
// queued and go out together in one TLS record and one write.
//
// An idle connection costs no read buffer (taken from a pool per burst and
// given back when the socket has nothing more) and a small stack: after
// dotBusyWait without data the goroutine leaves crypto/tls and parks on
// the socket's readability (see waitReadable), so the garbage collector
// can shrink its stack.
func (s *Server) serveDoT(raw net.Conn, tc *tls.Config, certs *tlscert.Reloader) {
	s.m.dotConns.Inc()
	batch := &batchConn{Conn: raw}
	conn := tls.Server(batch, tc)
	c := &dotConn{s: s, raw: raw, conn: conn, batch: batch}
	hctx, cancel := context.WithTimeout(s.ctx, handshakeTimeout)
	err := conn.HandshakeContext(hctx)
	cancel()
	if err != nil {
		s.m.reject("dot", "handshake")
		c.finish()
		return
	}
	if !insideHeader(conn, raw) {
		c.finish()
		return
	}
	c.client = addrPortOf(conn.RemoteAddr()) // the PROXY header's client, if any
	c.clientID = s.clientIDFromSNI(conn.ConnectionState().ServerName, certs)
	c.idle = s.idle()
	c.max = s.cfg.MaxInflight
	if c.max <= 0 {
		c.max = 32
	}
	c.rc = rawConnOf(raw)
	if c.rc == nil { // not a socket: the DoT listener only accepts TCP
		c.finish()
		return
	}
	c.idleSince = time.Now()
	c.run()
}

// run reads until the connection ends or goes quiet; a quiet connection
// waits for data on a new goroutine, which starts with the smallest stack
// (this one, grown by the handshake and crypto, ends).
func (c *dotConn) run() {
	if c.readLoop() {
		go c.park()
		return
	}
	c.finish()
}

func (c *dotConn) park() {
	if err := waitReadable(c.rc); err != nil || c.s.draining.Load() {
		c.finish()
		return
	}
	c.run()
}

// finish waits for the queries in flight and closes the connection.
func (c *dotConn) finish() {
	c.pending.Wait()
	s := c.s
	s.m.dotConns.Dec()
	s.mu.Lock()
	delete(s.tcpConns, c.raw)
	s.mu.Unlock()
	_ = c.raw.Close()
	s.wg.Done()
}

// dotBusyWait is how long a reader waits inside crypto/tls before it
// parks on the socket instead.
const dotBusyWait = time.Second

type dotConn struct {
	s         *Server
	raw       net.Conn
	conn      *tls.Conn
	batch     *batchConn      // under conn (always): counts the records that arrive
	rc        syscall.RawConn // the socket (the feeder reads it)
	idleSince time.Time
	rdl       time.Time // the read deadline set (reader only)
	// The reader's buffer: unparsed bytes are (*rb)[start:end]; rb is nil
	// while parked, &big for a frame larger than a pool buffer.
	rb         *[]byte
	big        []byte
	start, end int
	wdl        time.Time // the write deadline set (the writer only)
	client     netip.AddrPort
	clientID   string
	idle       time.Duration
	max        int

	pending sync.WaitGroup
	sem     chan struct{} // in-flight queries; made on the first query

	mu      sync.Mutex
	writing bool    // a goroutine is writing; others queue in queued
	queued  *[]byte // answers waiting for the writer
	failed  bool    // a write failed: drop further answers
}

// readLoop reads and dispatches queries; true means the connection had
// no data for dotBusyWait: the caller parks it (read deadline already set).
func (c *dotConn) readLoop() (park bool) {
	f := feeder{rc: c.rc, b: c.batch}
	defer func() {
		c.batch.release()
		if c.rb != nil && c.rb != &c.big {
			putBuf(c.rb)
		}
		c.rb, c.big = nil, nil
	}()
	// From now on the feeder reads the socket; first, what crypto/tls
	// read along with the handshake.
	c.batch.fed = true
	if !c.onData() {
		return false
	}
	for {
		err := f.run(c.onData)
		var ne net.Error
		if err == nil || !errors.As(err, &ne) || !ne.Timeout() || c.s.draining.Load() || time.Since(c.idleSince) >= c.idle {
			return false
		}
		if c.end > 0 {
			c.armRead(time.Now())
			continue // a partial frame: keep the buffer and read again
		}
		c.rdl = c.idleSince.Add(c.idle)
		_ = c.conn.SetReadDeadline(c.rdl)
		return !c.s.draining.Load()
	}
}

// onData decrypts and answers what the feeder read; the answers of one
// read leave together (one TLS record, one write). False ends the
// connection.
func (c *dotConn) onData() bool {
	active := false // bytes that complete no TLS record are not activity
	for {
		if c.rb == nil {
			c.rb = getBuf()
			*c.rb = (*c.rb)[:cap(*c.rb)]
			c.start, c.end = 0, 0
		}
		p := (*c.rb)[c.end:cap(*c.rb)]
		n, err := c.conn.Read(p)
		c.batch.took(n, len(p))
		if n > 0 {
			active = true
			c.end += n
			c.frames()
		}
		if err != nil {
			if !errors.Is(err, os.ErrDeadlineExceeded) {
				c.flushQueued()
				return false // EOF, reset or a TLS error
			}
			c.batch.sync()
			break // all that was read is decrypted
		}
		if c.batch.drained() {
			break
		}
	}
	c.flushQueued()
	now := time.Now()
	if active {
		c.idleSince = now
	}
	c.armRead(now)
	return !c.s.draining.Load()
}

// frames dispatches every complete frame in the read buffer and makes
// room for the rest of a partial one.
func (c *dotConn) frames() {
	for c.end-c.start >= 2 {
		b := (*c.rb)[c.start:c.end]
		n := int(binary.BigEndian.Uint16(b))
		if len(b) < 2+n {
			break
		}
		c.dispatch(b[2 : 2+n])
		c.start += 2 + n
	}
	if c.start == c.end {
		c.start, c.end = 0, 0
		return
	}
	if c.start > 0 {
		c.end = copy(*c.rb, (*c.rb)[c.start:c.end])
		c.start = 0
	}
	if c.end >= 2 {
		if need := 2 + int(binary.BigEndian.Uint16(*c.rb)); need > cap(*c.rb) {
			c.big = make([]byte, need) // rare: larger than a pool buffer
			copy(c.big, (*c.rb)[:c.end])
			putBuf(c.rb)
			c.rb = &c.big
		}
	}
}

// armRead sets the read deadline of a busy connection: dotBusyWait (or
// what is left of the idle limit) from now. It is re-armed only when due
// within half the wait (or later than the limit): each change is a runtime
// timer update.
func (c *dotConn) armRead(now time.Time) {
	wait := dotBusyWait
	if left := c.idle - now.Sub(c.idleSince); left < wait {
		wait = left
	}
	if dl := now.Add(wait); dl.Before(c.rdl) || c.rdl.Sub(now) < wait/2 {
		c.rdl = dl
		_ = c.conn.SetReadDeadline(dl)
	}
}

// dispatch answers one query on its own goroutine; msg is copied.
func (c *dotConn) dispatch(msg []byte) {
	if c.sem == nil {
		c.sem = make(chan struct{}, c.max)
	}
	if th, ok := c.s.h.(transferHandler); ok && th.HandlesTransfers() && dataplane.IsTransfer(msg) {
		c.transfer(th, msg)
		return
	}
	if nh := c.s.now; nh != nil {
		c.answerNow(nh, msg)
		return
	}
	j := dotJobs.Get().(*dotJob)
	j.c, j.bp = c, getBuf()
	*j.bp = append((*j.bp)[:0], msg...)
	c.sem <- struct{}{}
	c.pending.Add(1)
	c.s.responders.do(j)
}

// dotJob is one DoT query for a responder; pooled, so dispatch allocates
// nothing.
type dotJob struct {
	c  *dotConn
	bp *[]byte
}

var dotJobs = sync.Pool{New: func() any { return new(dotJob) }}

func (j *dotJob) run() {
	c, bp := j.c, j.bp
	j.c, j.bp = nil, nil
	dotJobs.Put(j)
	defer c.pending.Done()
	op := getBuf()
	out, ok := c.s.h.ServeWireID(*bp, c.client, dataplane.TransportDoT, c.clientID, append((*op)[:0], 0, 0))
	putBuf(bp)
	if ok && len(out)-2 <= maxMessage {
		binary.BigEndian.PutUint16(out, uint16(len(out)-2))
		c.send(out)
	}
	*op = out
	putBuf(op)
	<-c.sem
}

// answerNow answers msg on the reader when the data plane can without
// waiting; the answer joins the queue the reader writes at the end of its
// read batch (flushQueued). A query that waits for an upstream is finished
// by the data plane's workers and sent from there (AnswerWire).
func (c *dotConn) answerNow(nh nowHandler, msg []byte) {
	c.sem <- struct{}{}
	c.pending.Add(1)
	j := dotJobs.Get().(*dotJob)
	j.c = c
	op := getBuf()
	out, ok, done := nh.ServeWireNow(msg, c.client, dataplane.TransportDoT, c.clientID, append((*op)[:0], 0, 0), j)
	if !done {
		putBuf(op)
		return
	}
	j.c = nil
	dotJobs.Put(j)
	if ok && len(out)-2 <= maxMessage {
		binary.BigEndian.PutUint16(out, uint16(len(out)-2))
		c.mu.Lock()
		if !c.failed {
			if c.queued == nil {
				c.queued = getBuf()
			}
			*c.queued = append(*c.queued, out...)
		}
		c.mu.Unlock()
	}
	*op = out
	putBuf(op)
	<-c.sem
	c.pending.Done()
}

// AnswerWire implements dataplane.WireCallback for a query answerNow
// handed to the data plane's workers.
func (j *dotJob) AnswerWire(resp []byte, ok bool) {
	c := j.c
	j.c = nil
	dotJobs.Put(j)
	if ok && len(resp) <= maxMessage {
		bp := getBuf()
		*bp = binary.BigEndian.AppendUint16((*bp)[:0], uint16(len(resp)))
		*bp = append(*bp, resp...)
		c.send(*bp)
		putBuf(bp)
	}
	<-c.sem
	c.pending.Done()
}

// flushQueued writes the queued answers unless a writer is at work (it
// will write them).
func (c *dotConn) flushQueued() {
	c.send(nil)
}

// send queues out; the first goroutine to find no writer writes the queue
// in one TLS record. When other queries of the connection are still being
// answered it first yields once, so that answers computed at the same time
// (a pipelined burst) leave together; a query blocked on the network is
// not runnable and delays nothing.
func (c *dotConn) send(out []byte) {
	c.mu.Lock()
	if c.failed {
		c.mu.Unlock()
		return
	}
	if len(out) > 0 {
		if c.queued == nil {
			c.queued = getBuf()
		}
		*c.queued = append(*c.queued, out...)
	}
	if c.writing || c.queued == nil {
		c.mu.Unlock()
		return
	}
	if len(c.sem) > 1 {
		c.mu.Unlock()
		runtime.Gosched()
		c.mu.Lock()
		if c.writing || c.queued == nil {
			c.mu.Unlock()
			return
		}
	}
	c.writing = true
	var err error
	for {
		q := c.queued
		c.queued = nil
		if err != nil || q == nil {
			c.writing = false
			c.failed = err != nil
			c.mu.Unlock()
			if q != nil {
				putBuf(q)
			}
			break
		}
		c.mu.Unlock()
		err = c.write(*q)
		putBuf(q)
		c.mu.Lock()
	}
	if err != nil {
		_ = c.conn.SetReadDeadline(time.Now()) // wake the reader: the connection is done
	}
}

func (c *dotConn) write(b []byte) error {
	if now := time.Now(); c.wdl.Sub(now) < c.idle/2 {
		c.wdl = now.Add(c.idle) // re-armed at half time: see readLoop
		_ = c.conn.SetWriteDeadline(c.wdl)
	}
	_, err := c.conn.Write(b)
	return err
}

// rawConnOf returns the socket under a (PROXY-wrapped) connection.
func rawConnOf(c net.Conn) syscall.RawConn {
	if p, ok := c.(*proxyproto.Conn); ok {
		c = p.Conn
	}
	sc, ok := c.(syscall.Conn)
	if !ok {
		return nil
	}
	rc, err := sc.SyscallConn()
	if err != nil {
		return nil
	}
	return rc
}

// insideHeader reads the PROXY header of a trusted peer that sends it
// inside TLS (dnsdist does, towards DoT and DoH backends), right after the
// handshake. False: the header is missing or wrong and the connection was
// refused.
func insideHeader(conn *tls.Conn, raw net.Conn) bool {
	p, ok := raw.(*proxyproto.Conn)
	if !ok || !p.HeaderInside() {
		return true
	}
	_ = conn.SetReadDeadline(time.Now().Add(proxyproto.HeaderTimeout))
	err := p.ReadInside(conn)
	_ = conn.SetReadDeadline(time.Time{})
	return err == nil
}

// abortConn ends a connection from any goroutine, even from inside a
// RawConn.Read on it (where Close would wait for that Read to return):
// shutdown fails blocked writes and wakes the reader with EOF; the
// connection's owner closes it.
func abortConn(c net.Conn) {
	rc := rawConnOf(c)
	if rc == nil {
		_ = c.Close()
		return
	}
	if err := rc.Control(func(fd uintptr) { _ = syscall.Shutdown(int(fd), syscall.SHUT_RDWR) }); err != nil {
		_ = c.Close()
	}
}

// waitReadable parks until the socket has data (or EOF, or an error),
// without reading it: MSG_PEEK. The connection's read deadline applies.
func waitReadable(rc syscall.RawConn) error {
	var b [1]byte
	return rc.Read(func(fd uintptr) bool {
		_, _, err := syscall.Recvfrom(int(fd), b[:], syscall.MSG_PEEK|syscall.MSG_DONTWAIT)
		return err != syscall.EAGAIN && err != syscall.EINTR
	})
}

// transferHandler serves zone transfers on a stream (*dataplane.Server):
// XoT, RFC 9103.
type transferHandler interface {
	HandlesTransfers() bool
	ServeTransfer(msg []byte, client netip.AddrPort, t dataplane.Transport, write func([]byte) error) bool
}

// transferQueueMax bounds what a transfer queues while another answer of
// the connection is being written: it waits for the writer beyond it.
const transferQueueMax = 256 << 10

// transfer answers an AXFR or IXFR on a goroutine of its own; its messages
// leave through the connection's writer like any answer.
func (c *dotConn) transfer(th transferHandler, msg []byte) {
	m := append([]byte(nil), msg...)
	c.sem <- struct{}{}
	c.pending.Add(1)
	go func() {
		defer c.pending.Done()
		defer func() { <-c.sem }()
		var frame []byte
		write := func(b []byte) error {
			if len(b) > maxMessage {
				return errors.New("message too large")
			}
			frame = binary.BigEndian.AppendUint16(frame[:0], uint16(len(b)))
			frame = append(frame, b...)
			c.send(frame)
			for i := 0; ; i++ {
				c.mu.Lock()
				failed, backlog := c.failed, c.queued != nil && len(*c.queued) > transferQueueMax
				c.mu.Unlock()
				if failed {
					return errors.New("connection failed")
				}
				if !backlog || i >= 30000 { // at most 30s behind another writer
					return nil
				}
				time.Sleep(time.Millisecond)
			}
		}
		th.ServeTransfer(m, c.client, dataplane.TransportDoT, write)
	}()
}
