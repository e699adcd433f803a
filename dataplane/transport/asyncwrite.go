package transport

import (
	"net"
	"sync"
	"time"
)

// asyncWriteMax bounds the bytes queued on one connection; writers block
// beyond it until the flusher catches up.
const asyncWriteMax = 256 << 10

// asyncWriteTimeout bounds one flush: a peer that does not read for this
// long fails the connection's writes.
const asyncWriteTimeout = 10 * time.Second

// asyncListener wraps accepted connections in asyncConn.
type asyncListener struct{ net.Listener }

func (l asyncListener) Accept() (net.Conn, error) {
	c, err := l.Listener.Accept()
	if err != nil {
		return nil, err
	}
	ac := &asyncConn{Conn: c}
	ac.cond.L = &ac.mu
	return ac, nil
}

// asyncConn queues writes and sends them from a flusher goroutine that
// exists only while there is something to send: what several goroutines
// (HTTP/2 frames of many streams, TLS records) write meanwhile leaves in
// one system call. An idle connection holds no buffer and no goroutine.
// Write deadlines set by the caller are replaced by asyncWriteTimeout per
// flush (a Write returns before its bytes are sent); an error is reported
// by the Writes after it.
type asyncConn struct {
	net.Conn
	mu       sync.Mutex
	cond     sync.Cond // a flush round ended
	buf      *[]byte   // queued bytes; nil when empty
	flushing bool
	err      error
}

func (c *asyncConn) Write(b []byte) (int, error) {
	c.mu.Lock()
	for c.err == nil && c.buf != nil && len(*c.buf) >= asyncWriteMax {
		c.cond.Wait()
	}
	if c.err != nil {
		err := c.err
		c.mu.Unlock()
		return 0, err
	}
	if c.buf == nil {
		c.buf = getBuf()
	}
	*c.buf = append(*c.buf, b...)
	if !c.flushing {
		c.flushing = true
		go c.flush()
	}
	c.mu.Unlock()
	return len(b), nil
}

func (c *asyncConn) flush() {
	c.mu.Lock()
	for c.buf != nil && c.err == nil {
		b := c.buf
		c.buf = nil
		c.mu.Unlock()
		_ = c.Conn.SetWriteDeadline(time.Now().Add(asyncWriteTimeout))
		_, err := c.Conn.Write(*b)
		putBuf(b)
		c.mu.Lock()
		if err != nil {
			c.err = err
		}
		c.cond.Broadcast()
	}
	if c.buf != nil {
		putBuf(c.buf)
		c.buf = nil
	}
	c.flushing = false
	c.cond.Broadcast()
	c.mu.Unlock()
}

// SetWriteDeadline is ignored: see asyncConn.
func (c *asyncConn) SetWriteDeadline(time.Time) error { return nil }

// SetDeadline sets the read deadline only: see asyncConn.
func (c *asyncConn) SetDeadline(t time.Time) error { return c.Conn.SetReadDeadline(t) }

// Close sends what is queued (bounded by asyncWriteTimeout), then closes.
func (c *asyncConn) Close() error {
	c.mu.Lock()
	for c.flushing {
		c.cond.Wait()
	}
	c.mu.Unlock()
	return c.Conn.Close()
}
