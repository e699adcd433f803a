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
// lean HTTP/2 server (doh2.go), the others by the HTTP/1.1 one (doh1.go).
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
	var wrapped net.Listener = &proxyproto.Listener{Listener: ln, Policy: s.cfg.ProxyProtocol, TLS: true,
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
	var std *stdDoH
	var h2 *doh2Server
	if s.cfg.DoHServer == DoHServerStdlib {
		if std, err = s.newStdDoH(h, tc); err != nil {
			return fmt.Errorf("doh %s: %w", l.Address, err)
		}
		s.stdDoH = append(s.stdDoH, std)
		go func() {
			<-s.ctx.Done()
			_ = std.srv.Close()
		}()
	} else {
		h2 = newDoH2Server(s, h, s.idle())
		s.doh2 = append(s.doh2, h2)
		go func() { // not in s.wg: Shutdown waits for the connections first
			<-s.ctx.Done() // Shutdown ended or timed out, or Start failed
			h2.closeAll()
		}()
	}
	s.wg.Add(1)
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
				if std != nil {
					s.serveStd(raw, tc, std, done)
					return
				}
				s.serveDoHConn(raw, tc, h, h2, done)
			}()
		}
	}()
	return nil
}

// serveDoHConn does the TLS handshake and serves the connection by its
// ALPN protocol; done is called when the connection has ended (an
// HTTP/1.1 connection may outlive this call: see h1conn.park).
func (s *Server) serveDoHConn(raw net.Conn, tc *tls.Config, h *dohHandler, h2 *doh2Server, done func()) {
	conn := tls.Server(&batchConn{Conn: raw}, tc)
	hctx, cancel := context.WithTimeout(s.ctx, handshakeTimeout)
	err := conn.HandshakeContext(hctx)
	cancel()
	if err != nil || !insideHeader(conn, raw) {
		_ = raw.Close()
		done()
		return
	}
	if conn.ConnectionState().NegotiatedProtocol == "h2" {
		h2.serve(conn, raw)
		done()
		return
	}
	s.serveDoH1(conn, raw, h, done)
}

func (h *dohHandler) fail(w http.ResponseWriter, code int, reason string) {
	h.s.m.reject(h.name, reason)
	w.Header().Set("Cache-Control", "no-store")
	http.Error(w, http.StatusText(code), code)
}

// ServeHTTP answers GET ?dns= and POST application/dns-message on the path
// and on path/<clientid> (DoH3; HTTP/1.1 and HTTP/2 have their own
// servers, doh1.go and doh2.go, with the same decisions).
func (h *dohHandler) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	bp := getBuf()
	defer putBuf(bp)
	clientID, msg, code, reason := h.decode(r.Method, r.URL.Path, r.URL.RawQuery, r.Header["Content-Type"], r.ContentLength,
		func() ([]byte, error) { return readBounded((*bp)[:0], r.Body, maxMessage) }, bp)
	if code != 0 {
		if r.ContentLength > 0 && r.ContentLength <= maxMessage {
			// Read a declared body (bounded) before answering, as the
			// lean servers do: over HTTP/2 a body that breaks its
			// content-length then resets the stream (PROTOCOL_ERROR,
			// RFC 9113 8.1.1) instead of racing the error answer.
			_, _ = io.CopyN(io.Discard, r.Body, maxMessage+1)
		}
		if code == http.StatusMethodNotAllowed {
			w.Header().Set("Allow", "GET, POST")
		}
		h.fail(w, code, reason)
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

// dohRequest is a request as the three DoH servers hand it to the request
// rules: path unescaped, the Content-Type values (only the first kept:
// nctype says how many there were), the declared length (-1 unknown).
type dohRequest struct {
	method, path, rawQuery string
	ctype                  string
	nctype                 int
	contentLength          int64
}

// dohDecision is what the request rules decide from a request's head.
type dohDecision struct {
	clientID string
	// msg is a GET's decoded message, in buf; nil for a POST, whose body
	// is the message (read within maxMessage, then checkBody).
	msg []byte
	buf *[]byte // the buffer msg was decoded into, from the pool when decideHead got none
	// code != 0: answer with this status; reason is the rejection reason
	// (metrics).
	code   int
	reason string
}

// decideHead is the one place that decides, from method, path, query and
// headers, what a DoH request is (HTTP/1.1, HTTP/2 and HTTP/3 alike): its
// client ID and message, or the error status. bp is the buffer a GET
// message is decoded into; nil takes one from the pool (returned in
// dohDecision.buf).
func (h *dohHandler) decideHead(r dohRequest, bp *[]byte) dohDecision {
	clientID, ok := h.clientID(r.path)
	if !ok {
		return dohDecision{code: http.StatusNotFound, reason: "path"}
	}
	switch r.method {
	case http.MethodGet:
		p := dnsParam(r.rawQuery)
		if p == "" {
			return dohDecision{code: http.StatusBadRequest, reason: "bad_request"}
		}
		if len(p) > maxGETParam {
			return dohDecision{code: http.StatusRequestEntityTooLarge, reason: "too_large"}
		}
		if bp == nil {
			bp = getBuf()
		}
		n := base64.RawURLEncoding.DecodedLen(len(p))
		if cap(*bp) < n {
			*bp = make([]byte, 0, n)
		}
		m, err := base64.RawURLEncoding.AppendDecode((*bp)[:0], []byte(p))
		*bp = m
		d := dohDecision{clientID: clientID, msg: m, buf: bp}
		if err != nil {
			d.code, d.reason = http.StatusBadRequest, "bad_request"
		} else {
			d.code, d.reason = checkBody(m, nil)
		}
		return d
	case http.MethodPost:
		if r.nctype != 1 || r.ctype != contentType && !isDNSMessageType(r.ctype) {
			return dohDecision{code: http.StatusUnsupportedMediaType, reason: "content_type"}
		}
		if r.contentLength > maxMessage {
			return dohDecision{code: http.StatusRequestEntityTooLarge, reason: "too_large"}
		}
		return dohDecision{clientID: clientID}
	default:
		return dohDecision{code: http.StatusMethodNotAllowed, reason: "method"}
	}
}

// checkBody decides on a message as read (a POST body, a decoded GET
// parameter): err is the error reading it (errTooLarge past maxMessage).
func checkBody(msg []byte, err error) (code int, reason string) {
	switch {
	case errors.Is(err, errTooLarge):
		return http.StatusRequestEntityTooLarge, "too_large"
	case err != nil, len(msg) < 12:
		return http.StatusBadRequest, "bad_request"
	}
	return 0, ""
}

// decode applies decideHead and, for a POST, reads the body and applies
// checkBody (HTTP/1.1 and HTTP/3, which read bodies in line). body reads
// a POST body of at most maxMessage bytes (errTooLarge beyond); bp is
// the buffer a GET message is decoded into.
func (h *dohHandler) decode(method, path, rawQuery string, ctype []string, contentLength int64,
	body func() ([]byte, error), bp *[]byte) (clientID string, msg []byte, code int, reason string) {
	r := dohRequest{method: method, path: path, rawQuery: rawQuery, nctype: len(ctype), contentLength: contentLength}
	if len(ctype) > 0 {
		r.ctype = ctype[0]
	}
	d := h.decideHead(r, bp)
	if d.code != 0 {
		return "", nil, d.code, d.reason
	}
	if d.msg != nil {
		return d.clientID, d.msg, 0, ""
	}
	m, err := body()
	if code, reason := checkBody(m, err); code != 0 {
		return "", nil, code, reason
	}
	return d.clientID, m, 0, ""
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
