package api

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"fmt"
	"io"
	"log/slog"
	"net"
	"net/http"
	"net/netip"
	"runtime/debug"
	"strings"
	"sync"
	"time"

	"github.com/svcdns/svc/internal/auth"
)

// Body limits. Objects are capped at 1.5 MiB by every store; a request body
// may carry a little more (formatting, whitespace). Several objects sent to
// /apply and zone files get a larger cap; small JSON bodies a small one.
const (
	maxObjectBody = 1536*1024 + 256*1024
	maxBulkBody   = 16 << 20
	maxSmallBody  = 64 << 10
)

// reqState travels through one request in its context.
type reqState struct {
	id       string
	clientIP string
	secure   bool

	principal *auth.Principal
	session   *auth.Session
	// crossOriginBad: an unsafe browser request came from another origin.
	crossOriginBad bool
	// csrfFailed: a cookie session was dropped for a CSRF failure.
	csrfFailed bool
	peerAdmin  bool

	// body is the request body under the server's limit, for handlers
	// that stream it (POST /apply); bodyLen is its Content-Length (-1: unknown).
	body    io.Reader
	bodyLen int64

	decision string
	targets  []auditTarget
	status   int
	// answered is the error body the request was answered with, if any; the
	// access log line carries its cause.
	answered *Error
}

type auditTarget struct{ action, kind, namespace, name, result string }

type stateKey struct{}

func state(ctx context.Context) *reqState {
	if st, ok := ctx.Value(stateKey{}).(*reqState); ok {
		return st
	}
	return &reqState{}
}

// middleware wraps h in the spec's order: recover, request id, real client
// address, security headers, access log, cross-origin protection, rate limit
// on auth routes, authentication; routes come last (behind the wait for
// writes to be served, consistency.go).
func (s *Server) middleware(h http.Handler) http.Handler {
	h = s.consistency(h)
	h = s.authenticate(h)
	h = s.authRateLimit(h)
	h = s.crossOrigin(h)
	h = s.accessLog(h)
	h = securityHeaders(h)
	h = s.realClient(h)
	h = requestID(h)
	h = s.recoverer(h)
	return h
}

type statusWriter struct {
	http.ResponseWriter
	code  int
	bytes int
}

func (w *statusWriter) WriteHeader(c int) {
	if w.code == 0 {
		w.code = c
	}
	w.ResponseWriter.WriteHeader(c)
}

func (w *statusWriter) Write(b []byte) (int, error) {
	if w.code == 0 {
		w.code = http.StatusOK
	}
	n, err := w.ResponseWriter.Write(b)
	w.bytes += n
	return n, err
}

func (w *statusWriter) Unwrap() http.ResponseWriter { return w.ResponseWriter }

func (w *statusWriter) Flush() {
	if f, ok := w.ResponseWriter.(http.Flusher); ok {
		f.Flush()
	}
}

func (s *Server) recoverer(h http.Handler) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		ctx := context.WithValue(r.Context(), startKey{}, time.Now())
		st := &reqState{}
		ctx = context.WithValue(ctx, stateKey{}, st)
		sw := &statusWriter{ResponseWriter: w}
		defer func() {
			if v := recover(); v != nil {
				if v == http.ErrAbortHandler {
					panic(v)
				}
				s.log.Error("panic serving request", "request_id", st.id, "panic", fmt.Sprint(v), "stack", string(debug.Stack()))
				if sw.code == 0 {
					writeError(sw, r.WithContext(ctx), errInternal())
				}
			}
		}()
		// The largest body any route accepts; routes cap lower themselves.
		// The limit goes on a copy of the request: net/http decides whether
		// the connection may carry another request by looking at the
		// *http.Request it passed in (was its body closed with bytes left
		// unread, as huma does past a route's MaxBodyBytes?). Replacing the
		// Body on that request hides this, and the unread rest of an
		// oversize body would be parsed as the next request's headers. The
		// reader gets the server's own ResponseWriter so that hitting the
		// limit also marks the connection to close.
		r = r.WithContext(ctx)
		r.Body = http.MaxBytesReader(w, r.Body, maxBulkBody)
		st.body, st.bodyLen = r.Body, r.ContentLength
		if dotSegment(r.URL.Path) {
			// http.ServeMux would answer a 307 HTML redirect to the
			// cleaned path; the API answers its own error body.
			writeError(sw, r, errInvalid("path: %q has a '.' or '..' segment; use the path without them", r.URL.Path))
			return
		}
		h.ServeHTTP(sw, r)
	})
}

// dotSegment reports a "." or ".." path segment (also when escaped as %2e).
func dotSegment(p string) bool {
	for _, seg := range strings.Split(p, "/") {
		if seg == "." || seg == ".." {
			return true
		}
	}
	return false
}

func validRequestID(v string) bool {
	if v == "" || len(v) > 128 {
		return false
	}
	for _, c := range v {
		if !(c >= 'a' && c <= 'z' || c >= 'A' && c <= 'Z' || c >= '0' && c <= '9' || c == '-' || c == '_' || c == '.') {
			return false
		}
	}
	return true
}

func requestID(h http.Handler) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		st := state(r.Context())
		st.id = r.Header.Get("X-Request-ID")
		if !validRequestID(st.id) {
			b := make([]byte, 12)
			_, _ = rand.Read(b)
			st.id = hex.EncodeToString(b)
		}
		w.Header().Set("X-Request-ID", st.id)
		h.ServeHTTP(w, r)
	})
}

// realClient takes X-Forwarded-For and X-Forwarded-Proto only from trusted
// proxies; the client is the right-most address that is not a trusted proxy.
func (s *Server) realClient(h http.Handler) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		st := state(r.Context())
		st.secure = r.TLS != nil
		host, _, err := net.SplitHostPort(r.RemoteAddr)
		if err != nil {
			host = r.RemoteAddr
		}
		st.clientIP = host
		if addr, err := netip.ParseAddr(host); err == nil && s.trusted(addr) {
			if xff := r.Header.Values("X-Forwarded-For"); len(xff) > 0 {
				hops := strings.Split(strings.Join(xff, ","), ",")
				for i := len(hops) - 1; i >= 0; i-- {
					a, err := netip.ParseAddr(strings.TrimSpace(hops[i]))
					if err != nil {
						break
					}
					st.clientIP = a.Unmap().String()
					if !s.trusted(a) {
						break
					}
				}
			}
			switch strings.ToLower(r.Header.Get("X-Forwarded-Proto")) {
			case "https":
				st.secure = true
			case "http":
				st.secure = false
			}
		}
		h.ServeHTTP(w, r)
	})
}

func (s *Server) trusted(a netip.Addr) bool {
	a = a.Unmap()
	for _, p := range s.opts.TrustedProxies {
		if p.Contains(a) {
			return true
		}
	}
	return false
}

func securityHeaders(h http.Handler) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		hd := w.Header()
		hd.Set("X-Content-Type-Options", "nosniff")
		hd.Set("X-Frame-Options", "DENY")
		hd.Set("Referrer-Policy", "no-referrer")
		hd.Set("Cache-Control", "no-store")
		hd.Set("Cross-Origin-Opener-Policy", "same-origin")
		// Every answer is data and needs nothing; the reference page sets
		// its own policy (docsCSP).
		hd.Set("Content-Security-Policy", "default-src 'none'; frame-ancestors 'none'")
		if state(r.Context()).secure {
			hd.Set("Strict-Transport-Security", "max-age=31536000")
		}
		h.ServeHTTP(w, r)
	})
}

func (s *Server) accessLog(h http.Handler) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		sw, _ := w.(*statusWriter)
		h.ServeHTTP(w, r)
		st := state(r.Context())
		code := 0
		if sw != nil {
			code = sw.code
		}
		who := ""
		if st.principal != nil {
			who = st.principal.Name
		}
		// Only the path is logged: query strings may carry tokens.
		level, errAttrs := answerAttrs(st, code)
		s.log.Log(r.Context(), level, "api request", append([]any{"request_id", st.id, "method", r.Method, "path", r.URL.Path,
			"status", code, "client", st.clientIP, "principal", who, "took_ms", tookMS(r.Context())}, errAttrs...)...)
	})
}

// answerAttrs gives the level and error attributes of a request's log line:
// ERROR with the cause when the server is at fault (every 5xx, and refusals
// of the service's own credentials), else INFO with the error key if any.
func answerAttrs(st *reqState, code int) (slog.Level, []any) {
	e := st.answered
	switch {
	case e != nil && (e.serverFault || serverFaultStatus(code)):
		return slog.LevelError, []any{"error_key", e.Detail.Key, "error", causeText(e)}
	case e != nil:
		return slog.LevelInfo, []any{"error_key", e.Detail.Key}
	case serverFaultStatus(code):
		return slog.LevelError, []any{"error", "answered without an error body"}
	}
	return slog.LevelInfo, nil
}

// causeText is what the log says about an error answer: the wrapped cause
// (store and apiserver errors name objects and permissions, never secret
// values), else the message; capped so one line stays readable.
func causeText(e *Error) string {
	text := e.Detail.Message
	if e.cause != nil {
		text = e.cause.Error()
	}
	if len(text) > 4000 {
		text = text[:4000] + "..."
	}
	return text
}

// noteAnswer remembers the error body a request is answered with.
func noteAnswer(ctx context.Context, e *Error) {
	if st, ok := ctx.Value(stateKey{}).(*reqState); ok {
		st.answered = e
	}
}

func unsafeMethod(m string) bool {
	return m != http.MethodGet && m != http.MethodHead && m != http.MethodOptions
}

// crossOrigin marks unsafe browser requests from another origin (checked
// with Sec-Fetch-Site and Origin); authentication drops cookie sessions of
// such requests and login refuses them. Bearer requests are exempt.
func (s *Server) crossOrigin(h http.Handler) http.Handler {
	cop := http.NewCrossOriginProtection()
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if unsafeMethod(r.Method) && cop.Check(r) != nil {
			state(r.Context()).crossOriginBad = true
		}
		h.ServeHTTP(w, r)
	})
}

// authRateLimit limits the login and password routes per client address
// (30 a minute) on top of the login lockouts.
func (s *Server) authRateLimit(h http.Handler) http.Handler {
	base := s.BasePath()
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		p := strings.TrimPrefix(r.URL.Path, base)
		if r.Method == http.MethodPost && (p == "/auth/login" || p == "/auth/password") {
			if wait := s.limiter.take(state(r.Context()).clientIP); wait > 0 {
				writeError(w, r, errRateLimited(wait))
				return
			}
		}
		h.ServeHTTP(w, r)
	})
}

// rateLimiter is a fixed-window counter per key, bounded in size.
type rateLimiter struct {
	clock  func() time.Time
	limit  int
	window time.Duration

	mu      sync.Mutex
	windows map[string]*window
}

type window struct {
	start time.Time
	n     int
}

func newRateLimiter(clock func() time.Time, limit int, per time.Duration) *rateLimiter {
	return &rateLimiter{clock: clock, limit: limit, window: per, windows: map[string]*window{}}
}

// take counts one request and returns how long to wait when over the limit.
func (l *rateLimiter) take(key string) time.Duration {
	l.mu.Lock()
	defer l.mu.Unlock()
	now := l.clock()
	w := l.windows[key]
	if w == nil || now.Sub(w.start) >= l.window {
		if len(l.windows) > 50000 {
			for k, old := range l.windows {
				if now.Sub(old.start) >= l.window {
					delete(l.windows, k)
				}
			}
		}
		w = &window{start: now}
		l.windows[key] = w
	}
	w.n++
	if w.n > l.limit {
		return w.start.Add(l.window).Sub(now)
	}
	return 0
}
