package transport

// The standard-library DoH server: net/http with x/net/http2, selected by
// Config.DoHServer = DoHServerStdlib (setting listeners.dohServer). It is
// the escape hatch for a flaw found in the lean servers (doh1.go,
// doh2.go): the same listener, TLS handshake, PROXY protocol, connection
// limit and request rules (dohHandler.ServeHTTP, dohHandler.decideHead),
// with net/http and x/net framing, which get CVE fixes upstream.

import (
	"context"
	"crypto/tls"
	"errors"
	"log/slog"
	"net"
	"net/http"
	"sync"

	"golang.org/x/net/http2"
)

// DoH server implementations (Config.DoHServer).
const (
	DoHServerLean   = "lean"
	DoHServerStdlib = "stdlib"
)

// stdDoH is one DoH listener's net/http server; connections whose TLS
// handshake is done are handed to it through ln.
type stdDoH struct {
	srv *http.Server
	ln  *connQueue
}

func (s *Server) newStdDoH(h *dohHandler, tc *tls.Config) (*stdDoH, error) {
	srv := &http.Server{
		Handler:           h,
		TLSConfig:         tc,
		ReadHeaderTimeout: handshakeTimeout,
		ReadTimeout:       h2BodyTimeout,
		// Per stream over HTTP/2: an answer stuck behind a closed
		// flow-control window is dropped after it (doh2: h2StallTimeout).
		WriteTimeout:   h2WriteTimeout,
		IdleTimeout:    s.idle(),
		MaxHeaderBytes: h2MaxHeaderList,
		ErrorLog:       slog.NewLogLogger(s.log.Handler(), slog.LevelDebug),
		BaseContext:    func(net.Listener) context.Context { return s.ctx },
	}
	h2s := &http2.Server{
		MaxConcurrentStreams:         h2MaxStreams,
		MaxReadFrameSize:             h2MaxFrame,
		IdleTimeout:                  s.idle(),
		MaxUploadBufferPerConnection: h2ConnWindow,
		MaxUploadBufferPerStream:     h2StreamWindow,
	}
	if err := http2.ConfigureServer(srv, h2s); err != nil {
		return nil, err
	}
	d := &stdDoH{srv: srv, ln: newConnQueue()}
	s.wg.Add(1)
	go func() {
		defer s.wg.Done()
		_ = srv.Serve(d.ln) // returns when ln is closed (Shutdown)
	}()
	return d, nil
}

// serveStd does the TLS handshake and hands the connection to net/http;
// done is called when the connection is closed.
func (s *Server) serveStd(raw net.Conn, tc *tls.Config, d *stdDoH, done func()) {
	hook := &closeHook{Conn: raw, done: done}
	conn := tls.Server(hook, tc)
	hctx, cancel := context.WithTimeout(s.ctx, handshakeTimeout)
	err := conn.HandshakeContext(hctx)
	cancel()
	if err != nil || !insideHeader(conn, raw) || !d.ln.put(conn) {
		_ = hook.Close()
	}
}

// closeHook calls done once, when the connection is closed.
type closeHook struct {
	net.Conn
	once sync.Once
	done func()
}

func (c *closeHook) Close() error {
	err := c.Conn.Close()
	c.once.Do(c.done)
	return err
}

// connQueue is a net.Listener whose connections are handed over by put.
type connQueue struct {
	ch     chan net.Conn
	closed chan struct{}
	once   sync.Once
}

func newConnQueue() *connQueue {
	return &connQueue{ch: make(chan net.Conn), closed: make(chan struct{})}
}

// put hands c to Accept; false when the listener is closed.
func (q *connQueue) put(c net.Conn) bool {
	select {
	case q.ch <- c:
		return true
	case <-q.closed:
		return false
	}
}

func (q *connQueue) Accept() (net.Conn, error) {
	select {
	case c := <-q.ch:
		return c, nil
	case <-q.closed:
		return nil, net.ErrClosed
	}
}

func (q *connQueue) Close() error {
	q.once.Do(func() { close(q.closed) })
	return nil
}

func (q *connQueue) Addr() net.Addr { return &net.TCPAddr{} }

// shutdownStd ends the net/http servers: graceful until ctx ends.
func shutdownStd(ctx context.Context, servers []*stdDoH) error {
	var errs []error
	for _, d := range servers {
		if err := d.srv.Shutdown(ctx); err != nil {
			errs = append(errs, err)
			_ = d.srv.Close()
		}
	}
	return errors.Join(errs...)
}
