package upstream

import (
	"context"
	"crypto/tls"
	"encoding/binary"
	"errors"
	"fmt"
	"io"
	"sync"
	"time"

	"github.com/quic-go/quic-go"
)

// DoQ error codes (RFC 9250 section 4.3).
const (
	doqNoError          = 0x0
	doqRequestCancelled = 0x3
)

// doqTransport sends each query on its own stream of one shared QUIC
// connection, redialling when that connection has died.
type doqTransport struct {
	a    Address
	d    *dialer
	tls  *tls.Config
	qcfg *quic.Config

	mu     sync.Mutex
	conn   *quic.Conn
	closed bool
}

func newDoQTransport(a Address, d *dialer, base *tls.Config) *doqTransport {
	cfg := base.Clone()
	cfg.ServerName = a.Host
	cfg.NextProtos = []string{"doq"}
	cfg.MinVersion = tls.VersionTLS13 // QUIC requires TLS 1.3
	return &doqTransport{
		a:   a,
		d:   d,
		tls: cfg,
		qcfg: &quic.Config{
			HandshakeIdleTimeout: 5 * time.Second,
			MaxIdleTimeout:       30 * time.Second,
		},
	}
}

// conn returns the live connection or dials one. Dialling under the lock
// makes concurrent queries share one new connection instead of racing.
func (t *doqTransport) getConn(ctx context.Context) (*quic.Conn, bool, error) {
	t.mu.Lock()
	defer t.mu.Unlock()
	if t.closed {
		return nil, false, errClosed
	}
	if t.conn != nil && t.conn.Context().Err() == nil {
		return t.conn, true, nil
	}
	aps, err := t.d.addrs(ctx, t.a)
	if err != nil {
		return nil, false, err
	}
	var last error
	for _, ap := range aps {
		c, err := quic.DialAddr(ctx, ap.String(), t.tls, t.qcfg)
		if err == nil {
			t.conn = c
			return c, false, nil
		}
		last = err
		if ctx.Err() != nil {
			break
		}
	}
	return nil, false, ioErr(ctx, "doq dial "+t.a.HostPort(), last)
}

func (t *doqTransport) drop(c *quic.Conn) {
	t.mu.Lock()
	if t.conn == c {
		t.conn = nil
	}
	t.mu.Unlock()
	_ = c.CloseWithError(doqNoError, "")
}

func (t *doqTransport) exchange(ctx context.Context, q []byte, ans *msgBuf) ([]byte, error) {
	for range 2 {
		c, reused, err := t.getConn(ctx)
		if err != nil {
			return nil, err
		}
		resp, err := doqRoundTrip(ctx, c, q, ans)
		if err == nil {
			return resp, nil
		}
		dead := c.Context().Err() != nil
		if !dead && ctx.Err() == nil {
			return nil, err // the stream failed, the connection lives on
		}
		// A timed-out stream may mean a connection the server forgot (it
		// restarted): dial anew next time rather than wait for the idle
		// timeout. A cancelled race is no sign of that.
		if dead || errors.Is(ctx.Err(), context.DeadlineExceeded) {
			t.drop(c)
		}
		if !reused || ctx.Err() != nil {
			return nil, err
		}
	}
	return nil, fmt.Errorf("doq %s: no usable connection", t.a.HostPort())
}

func doqRoundTrip(ctx context.Context, c *quic.Conn, q []byte, ans *msgBuf) ([]byte, error) {
	if len(q) > maxMsgSize {
		return nil, fmt.Errorf("query of %d bytes too large", len(q))
	}
	s, err := c.OpenStreamSync(ctx)
	if err != nil {
		return nil, ioErr(ctx, "doq open stream", err)
	}
	stop := watch(ctx, s)
	defer stop()
	buf := ans.take(2 + len(q))
	binary.BigEndian.PutUint16(buf, uint16(len(q)))
	copy(buf[2:], q)
	if _, err := s.Write(buf[:2+len(q)]); err != nil {
		s.CancelRead(doqRequestCancelled)
		s.CancelWrite(doqRequestCancelled)
		return nil, ioErr(ctx, "doq write", err)
	}
	// The client signals the end of its query with FIN (RFC 9250 4.2).
	if err := s.Close(); err != nil {
		s.CancelRead(doqRequestCancelled)
		return nil, ioErr(ctx, "doq close", err)
	}
	if _, err := io.ReadFull(s, buf[:2]); err != nil {
		s.CancelRead(doqRequestCancelled)
		return nil, ioErr(ctx, "doq read", err)
	}
	n := int(binary.BigEndian.Uint16(buf))
	if n < 12 {
		s.CancelRead(doqRequestCancelled)
		return nil, fmt.Errorf("doq read: %w: length %d", errMalformed, n)
	}
	buf = ans.take(n)
	if _, err := io.ReadFull(s, buf[:n]); err != nil {
		s.CancelRead(doqRequestCancelled)
		return nil, ioErr(ctx, "doq read", err)
	}
	return buf[:n], nil
}

func (t *doqTransport) close() error {
	t.mu.Lock()
	defer t.mu.Unlock()
	t.closed = true
	if t.conn != nil {
		_ = t.conn.CloseWithError(doqNoError, "")
		t.conn = nil
	}
	return nil
}
