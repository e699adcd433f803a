package transport

import (
	"context"
	"crypto/tls"
	"encoding/base64"
	"errors"
	"fmt"
	"io"
	"mime"
	"net"
	"net/http"
	"net/netip"
	"net/url"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/svcdns/svc/dataplane"
	"github.com/svcdns/svc/dataplane/proxyproto"
)

// dohHandler is RFC 8484 on one path; DoH and DoH3 share it.
type dohHandler struct {
	s         *Server
	path      string
	transport dataplane.Transport
	name      string
	altSvc    func() string // "" when no DoH3 listener
}

const contentType = "application/dns-message"

// maxGETParam bounds the dns= parameter: base64url of a 65535-byte message.
var maxGETParam = base64.RawURLEncoding.EncodedLen(maxMessage)

func (s *Server) newDoHHandler(l Listener, t dataplane.Transport, name string) *dohHandler {
	p := l.Path
	if p == "" {
		p = DefaultPath
	}
	h := &dohHandler{s: s, path: strings.TrimSuffix(p, "/"), transport: t, name: name}
	if t == dataplane.TransportDoH {
		h.altSvc = func() string { return s.altSvc }
	}
	return h
}

// startDoH serves one DoH listener. Connections are accepted and their
// TLS handshake done here; those that negotiate "h2" are served by the
// lean HTTP/2 server (doh2.go), the others (HTTP/1.1) are handed to a
// net/http server through a channel listener.
func (s *Server) startDoH(ctx context.Context, l Listener) error {
	tc, _, err := s.tlsConfig(s.reloadCtx, l, []string{"h2", "http/1.1"})
	if err != nil {
		return err
	}
	var lc net.ListenConfig
	ln, err := lc.Listen(ctx, "tcp", l.Address)
	if err != nil {
		return fmt.Errorf("doh listen %s: %w", l.Address, err)
	}
	s.tcp = append(s.tcp, ln)
	s.addrs[kindDoH] = append(s.addrs[kindDoH], addrPortOf(ln.Addr()))
	conns := s.m.conns.WithLabelValues("doh")
	var wrapped net.Listener = &proxyproto.Listener{Listener: ln, Policy: s.cfg.ProxyProtocol,
		OnReject: func(netip.AddrPort, error) { s.m.reject("doh", "proxy") }}
	// MaxConns: a slot is taken before Accept and given back when the
	// connection ends (not netutil.LimitListener: its wrapper would hide
	// the TCP socket that quickAck needs).
	slots := make(chan struct{}, s.cfg.MaxConns)
	done := func() {
		conns.Dec()
		<-slots
	}
	h := s.newDoHHandler(l, dataplane.TransportDoH, "doh")
	h1 := newChanListener(ln.Addr())
	h2 := newDoH2Server(s, h, s.idle(kindDoH))
	srv := &http.Server{
		Handler:           h,
		ReadHeaderTimeout: handshakeTimeout,
		ReadTimeout:       handshakeTimeout + 5*time.Second,
		WriteTimeout:      handshakeTimeout + 5*time.Second,
		IdleTimeout:       s.idle(kindDoH),
		MaxHeaderBytes:    16 << 10,
		ErrorLog:          nil,
		ConnState: func(_ net.Conn, st http.ConnState) {
			// Counted from accept (startDoH): only the end here.
			switch st {
			case http.StateClosed, http.StateHijacked:
				done()
			}
		},
	}
	srv.RegisterOnShutdown(h2.shutdown)
	s.https = append(s.https, srv)
	s.wg.Add(2)
	go func() {
		defer s.wg.Done()
		if err := srv.Serve(h1); err != nil && !errors.Is(err, http.ErrServerClosed) {
			s.log.Error("doh listener stopped", "address", l.Address, "err", err)
		}
	}()
	go func() { // not in s.wg: Shutdown waits for the connections first
		<-s.ctx.Done() // Shutdown ended or timed out, or Start failed
		h2.closeAll()
		_ = h1.Close()
	}()
	go func() {
		defer s.wg.Done()
		for {
			select {
			case slots <- struct{}{}:
			case <-s.ctx.Done():
				return
			}
			raw, err := wrapped.Accept()
			if err != nil {
				<-slots
				if errors.Is(err, net.ErrClosed) {
					return
				}
				time.Sleep(5 * time.Millisecond) // EMFILE and friends: back off
				continue
			}
			conns.Inc()
			s.wg.Add(1)
			go func() {
				defer s.wg.Done()
				s.serveDoHConn(raw, tc, h1, h2, done)
			}()
		}
	}()
	return nil
}

// serveDoHConn does the TLS handshake and serves the connection by its
// ALPN protocol.
func (s *Server) serveDoHConn(raw net.Conn, tc *tls.Config, h1 *chanListener, h2 *doh2Server, done func()) {
	conn := tls.Server(&batchConn{Conn: raw}, tc)
	hctx, cancel := context.WithTimeout(s.ctx, handshakeTimeout)
	err := conn.HandshakeContext(hctx)
	cancel()
	if err != nil {
		_ = raw.Close()
		done()
		return
	}
	if conn.ConnectionState().NegotiatedProtocol == "h2" {
		h2.serve(conn, raw)
		done()
		return
	}
	if !h1.hand(conn) {
		_ = raw.Close()
		done()
	}
}

// chanListener hands accepted connections to an http.Server.
type chanListener struct {
	addr net.Addr
	ch   chan net.Conn
	done chan struct{}
	once sync.Once
}

func newChanListener(addr net.Addr) *chanListener {
	return &chanListener{addr: addr, ch: make(chan net.Conn), done: make(chan struct{})}
}

// hand gives c to the server; false if the listener is closed.
func (l *chanListener) hand(c net.Conn) bool {
	select {
	case l.ch <- c:
		return true
	case <-l.done:
		return false
	}
}

func (l *chanListener) Accept() (net.Conn, error) {
	select {
	case c := <-l.ch:
		return c, nil
	case <-l.done:
		return nil, net.ErrClosed
	}
}

func (l *chanListener) Close() error {
	l.once.Do(func() { close(l.done) })
	return nil
}

func (l *chanListener) Addr() net.Addr { return l.addr }

func (h *dohHandler) fail(w http.ResponseWriter, code int, reason string) {
	h.s.m.reject(h.name, reason)
	w.Header().Set("Cache-Control", "no-store")
	http.Error(w, http.StatusText(code), code)
}

// ServeHTTP answers GET ?dns= and POST application/dns-message on the path
// and on path/<clientid>.
func (h *dohHandler) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	clientID, ok := h.clientID(r.URL.Path)
	if !ok {
		h.fail(w, http.StatusNotFound, "path")
		return
	}
	var msg []byte
	bp := getBuf()
	defer putBuf(bp)
	switch r.Method {
	case http.MethodGet:
		p := dnsParam(r.URL.RawQuery)
		if p == "" {
			h.fail(w, http.StatusBadRequest, "bad_request")
			return
		}
		if len(p) > maxGETParam {
			h.fail(w, http.StatusRequestEntityTooLarge, "too_large")
			return
		}
		n := base64.RawURLEncoding.DecodedLen(len(p))
		if cap(*bp) < n {
			*bp = make([]byte, n)
		}
		m, err := base64.RawURLEncoding.AppendDecode((*bp)[:0], []byte(p))
		if err != nil {
			h.fail(w, http.StatusBadRequest, "bad_request")
			return
		}
		msg = m
	case http.MethodPost:
		if ct := r.Header["Content-Type"]; len(ct) != 1 || ct[0] != contentType && !isDNSMessageType(ct[0]) {
			h.fail(w, http.StatusUnsupportedMediaType, "content_type")
			return
		}
		if r.ContentLength > maxMessage {
			h.fail(w, http.StatusRequestEntityTooLarge, "too_large")
			return
		}
		m, err := readBounded((*bp)[:0], r.Body, maxMessage)
		*bp = m
		if errors.Is(err, errTooLarge) {
			h.fail(w, http.StatusRequestEntityTooLarge, "too_large")
			return
		}
		if err != nil {
			h.fail(w, http.StatusBadRequest, "bad_request")
			return
		}
		msg = m
	default:
		w.Header().Set("Allow", "GET, POST")
		h.fail(w, http.StatusMethodNotAllowed, "method")
		return
	}
	if len(msg) < 12 {
		h.fail(w, http.StatusBadRequest, "bad_request")
		return
	}
	client, _ := netip.ParseAddrPort(r.RemoteAddr)
	client = netip.AddrPortFrom(client.Addr().Unmap(), client.Port())
	op := getBuf()
	defer putBuf(op)
	out, ok := h.s.h.ServeWireID(msg, client, h.transport, clientID, (*op)[:0])
	*op = out
	if !ok {
		// The pipeline drops only what is not a query (short, QR=1).
		h.fail(w, http.StatusBadRequest, "bad_request")
		return
	}
	// Shared, never modified value slices: no per-answer header allocations
	// beyond what net/http does itself.
	hd := w.Header()
	hd["Content-Type"] = contentTypeValue
	if r.ProtoMajor == 1 {
		// HTTP/2 and HTTP/3 add the length of a body written at once.
		hd["Content-Length"] = []string{strconv.Itoa(len(out))}
	}
	if ttl, ok := cacheTTL(out); ok {
		hd["Cache-Control"] = maxAgeValue(ttl)
	} else {
		hd["Cache-Control"] = noStoreValue
	}
	if h.altSvc != nil && r.ProtoMajor < 3 {
		if a := h.altSvc(); a != "" {
			hd["Alt-Svc"] = h.s.altSvcValue
		}
	}
	_, _ = w.Write(out)
}

var (
	contentTypeValue = []string{contentType}
	noStoreValue     = []string{"no-store"}
	maxAgeCache      [256]atomic.Pointer[maxAgeEntry]
)

type maxAgeEntry struct {
	ttl uint32
	v   []string
}

// maxAgeValue returns the Cache-Control value for ttl, cached for the TTLs
// seen lately (answers mostly carry a few distinct TTLs).
func maxAgeValue(ttl uint32) []string {
	slot := &maxAgeCache[ttl&255]
	if e := slot.Load(); e != nil && e.ttl == ttl {
		return e.v
	}
	e := &maxAgeEntry{ttl: ttl, v: []string{"max-age=" + strconv.FormatUint(uint64(ttl), 10)}}
	slot.Store(e)
	return e.v
}

// isDNSMessageType is the slow check of a Content-Type with parameters.
func isDNSMessageType(v string) bool {
	mt, _, err := mime.ParseMediaType(v)
	return err == nil && mt == contentType
}

// dnsParam returns the first dns= value of a raw query string ("" if
// none); base64url needs no unescaping.
func dnsParam(q string) string {
	for q != "" {
		var kv string
		kv, q, _ = strings.Cut(q, "&")
		if v, ok := strings.CutPrefix(kv, "dns="); ok {
			if strings.IndexByte(v, '%') >= 0 {
				if u, err := url.QueryUnescape(v); err == nil {
					return u
				}
			}
			return v
		}
	}
	return ""
}

// clientID matches the path exactly ("") or path/<clientid>.
func (h *dohHandler) clientID(p string) (string, bool) {
	if p == h.path || p == h.path+"/" {
		return "", true
	}
	rest, ok := strings.CutPrefix(p, h.path+"/")
	if !ok {
		return "", false
	}
	rest = strings.TrimSuffix(rest, "/")
	if !validClientID(rest) {
		return "", false
	}
	return strings.ToLower(rest), true
}

var errTooLarge = errors.New("body too large")

// readBounded appends at most limit bytes of r to b; more is errTooLarge.
func readBounded(b []byte, r io.Reader, limit int) ([]byte, error) {
	lr := io.LimitReader(r, int64(limit)+1)
	for {
		if len(b) == cap(b) {
			b = append(b, 0)[:len(b)]
		}
		n, err := lr.Read(b[len(b):cap(b)])
		b = b[:len(b)+n]
		if len(b) > limit {
			return b, errTooLarge
		}
		if err == io.EOF {
			return b, nil
		}
		if err != nil {
			return b, fmt.Errorf("read body: %w", err)
		}
	}
}
