package api

import (
	"bufio"
	"bytes"
	"context"
	"crypto/rand"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"log/slog"
	"net"
	"net/http"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"time"

	"github.com/svcdns/svc/internal/auth"
	"github.com/svcdns/svc/internal/auth/audit"
)

// The admin socket serves /admin/v1 (and the whole API) on a Unix socket to
// local processes admitted by their peer credentials. Two wire protocols
// share the socket; the first byte of a connection picks one: '{' starts the
// ndjson protocol (one JSON request line, one JSON answer line), anything
// else is HTTP/1.1.

const (
	adminPrefix = "/admin/v1"
	// maxAdminConns bounds concurrent connections on the socket.
	maxAdminConns = 64
	// maxNDJSONLine bounds one ndjson request line (the body limit plus the
	// envelope).
	maxNDJSONLine = maxSmallBody + 4096
	// ndjsonIdle closes an ndjson connection that sends nothing for this long.
	ndjsonIdle = 60 * time.Second
	// breakGlassLifetime is the default lifetime of break-glass tokens.
	breakGlassLifetime = 24 * time.Hour
	// maxExpiresInLen bounds expiresIn strings.
	maxExpiresInLen = 32
)

// peerCred is what SO_PEERCRED tells about the connecting process.
type peerCred struct {
	PID      int32
	UID, GID int
	Known    bool
}

// admitPeer decides whether a peer may use the admin socket: uid 0, the
// server's own uid, or membership (primary or supplementary) of group when
// group >= 0. groups looks up supplementary groups by pid; nil skips them.
func admitPeer(c peerCred, selfUID, group int, groups func(int32) []int) bool {
	if !c.Known {
		return false
	}
	if c.UID == 0 || c.UID == selfUID {
		return true
	}
	if group < 0 {
		return false
	}
	if c.GID == group {
		return true
	}
	if groups != nil {
		for _, g := range groups(c.PID) {
			if g == group {
				return true
			}
		}
	}
	return false
}

type adminPeerKey struct{}

type adminPeer struct {
	cred     peerCred
	admitted bool
}

func adminPeerOf(ctx context.Context) adminPeer {
	p, _ := ctx.Value(adminPeerKey{}).(adminPeer)
	return p
}

// ListenAdminSocket creates the admin socket at opts.AdminSocketPath: the
// parent directory is created 0750 when missing, a stale socket is removed,
// and a path that exists but is not a socket (or a socket another server
// still answers on) is refused. The socket is mode 0660 and, with
// AdminSocketGroup >= 0, owned by that group.
func (s *Server) ListenAdminSocket() (net.Listener, error) {
	path := s.opts.AdminSocketPath
	if path == "" {
		return nil, errors.New("admin socket: no path configured")
	}
	dir := filepath.Dir(path)
	if _, err := os.Stat(dir); errors.Is(err, fs.ErrNotExist) {
		if err := os.MkdirAll(dir, 0o750); err != nil {
			return nil, fmt.Errorf("admin socket directory: %w", err)
		}
	} else if err != nil {
		return nil, fmt.Errorf("admin socket directory: %w", err)
	}
	if fi, err := os.Lstat(path); err == nil {
		if fi.Mode().Type() != fs.ModeSocket {
			return nil, fmt.Errorf("admin socket: %s exists and is not a socket; refusing to replace it", path)
		}
		if c, err := net.DialTimeout("unix", path, time.Second); err == nil {
			c.Close()
			return nil, fmt.Errorf("admin socket: %s is in use by another process", path)
		}
		if err := os.Remove(path); err != nil {
			return nil, fmt.Errorf("admin socket: removing stale socket: %w", err)
		}
	} else if !errors.Is(err, fs.ErrNotExist) {
		return nil, fmt.Errorf("admin socket: %w", err)
	}
	ln, err := net.Listen("unix", path)
	if err != nil {
		return nil, fmt.Errorf("admin socket: %w", err)
	}
	// Peers are checked by credentials anyway; the mode keeps others from
	// connecting at all.
	if err := os.Chmod(path, 0o660); err != nil {
		ln.Close()
		return nil, fmt.Errorf("admin socket mode: %w", err)
	}
	if g := s.opts.AdminSocketGroup; g >= 0 {
		if err := os.Chown(path, -1, g); err != nil {
			ln.Close()
			return nil, fmt.Errorf("admin socket group %d: %w", g, err)
		}
	}
	return ln, nil
}

// ServeAdminSocket listens on the admin socket and serves it until ctx
// ends. With an empty AdminSocketPath (auth.adminSocket.path "") it returns
// nil at once.
func (s *Server) ServeAdminSocket(ctx context.Context) error {
	if s.opts.AdminSocketPath == "" {
		return nil
	}
	ln, err := s.ListenAdminSocket()
	if err != nil {
		return err
	}
	return s.ServeAdminListener(ctx, ln)
}

// ServeAdminListener serves the admin protocols on ln (a Unix listener)
// until ctx ends, then closes it.
func (s *Server) ServeAdminListener(ctx context.Context, ln net.Listener) error {
	handler := s.adminHandler()
	httpLn := &chanListener{addr: ln.Addr(), conns: make(chan net.Conn), done: make(chan struct{})}
	srv := &http.Server{
		Handler:           handler,
		ReadHeaderTimeout: 10 * time.Second,
		ReadTimeout:       60 * time.Second,
		WriteTimeout:      120 * time.Second,
		IdleTimeout:       60 * time.Second,
		MaxHeaderBytes:    64 << 10,
		ErrorLog:          slog.NewLogLogger(s.log.Handler(), slog.LevelDebug),
		BaseContext:       func(net.Listener) context.Context { return context.WithoutCancel(ctx) },
		ConnContext: func(ctx context.Context, c net.Conn) context.Context {
			if pc, ok := c.(*peekedConn); ok {
				return s.withPeer(ctx, pc.cred)
			}
			return ctx
		},
	}
	httpErr := make(chan error, 1)
	go func() { httpErr <- srv.Serve(httpLn) }()

	var (
		mu     sync.Mutex
		active = map[net.Conn]struct{}{}
		wg     sync.WaitGroup
	)
	sem := make(chan struct{}, maxAdminConns)
	stop := make(chan struct{})
	go func() {
		select {
		case <-ctx.Done():
		case <-stop:
		}
		ln.Close()
		httpLn.Close()
		mu.Lock()
		for c := range active {
			c.Close()
		}
		mu.Unlock()
	}()
	defer close(stop)

	var acceptErr error
	for {
		c, err := ln.Accept()
		if err != nil {
			if ctx.Err() == nil {
				acceptErr = fmt.Errorf("admin socket: %w", err)
			}
			break
		}
		select {
		case sem <- struct{}{}:
		default:
			c.Close() // over the connection limit
			continue
		}
		mu.Lock()
		active[c] = struct{}{}
		mu.Unlock()
		wg.Add(1)
		go func() {
			defer wg.Done()
			handedOff := s.adminConn(ctx, c, httpLn, handler)
			mu.Lock()
			delete(active, c)
			mu.Unlock()
			if !handedOff {
				c.Close()
			}
			<-sem
		}()
	}
	httpLn.Close()
	shut, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	_ = srv.Shutdown(shut)
	<-httpErr
	mu.Lock()
	for c := range active {
		c.Close()
	}
	mu.Unlock()
	wg.Wait()
	return acceptErr
}

func (s *Server) withPeer(ctx context.Context, cred peerCred) context.Context {
	p := adminPeer{cred: cred, admitted: admitPeer(cred, s.adminSelfUID, s.opts.AdminSocketGroup, s.adminGroups)}
	ctx = context.WithValue(ctx, adminPeerKey{}, p)
	if p.admitted {
		// The REST API mounted on the socket treats the peer as the
		// built-in administrator (authenticator chain step 4).
		ctx = context.WithValue(ctx, peerKey{}, true)
	}
	return ctx
}

// adminConn reads the peer credentials and the first byte of c, then serves
// ndjson itself or hands c to the HTTP server (reporting true: the HTTP
// server owns c then; for accounting it is still released when handed
// over, since the HTTP server enforces its own timeouts).
func (s *Server) adminConn(ctx context.Context, c net.Conn, httpLn *chanListener, h http.Handler) bool {
	cred, err := peerCredentials(c)
	if err != nil {
		s.log.Warn("admin socket: reading peer credentials", "error", err)
	}
	_ = c.SetReadDeadline(time.Now().Add(10 * time.Second))
	br := bufio.NewReaderSize(c, 4096)
	first, err := br.Peek(1)
	if err != nil {
		return false
	}
	_ = c.SetReadDeadline(time.Time{})
	if first[0] == '{' {
		s.serveNDJSON(s.withPeer(context.WithoutCancel(ctx), cred), c, br, h)
		return false
	}
	select {
	case httpLn.conns <- &peekedConn{Conn: c, r: br, cred: cred}:
		return true
	case <-httpLn.done:
		return false
	}
}

// peekedConn is a connection whose first bytes were read into r.
type peekedConn struct {
	net.Conn
	r    *bufio.Reader
	cred peerCred
}

func (p *peekedConn) Read(b []byte) (int, error) { return p.r.Read(b) }

// chanListener hands sniffed connections to an http.Server.
type chanListener struct {
	addr  net.Addr
	conns chan net.Conn
	once  sync.Once
	done  chan struct{}
}

func (l *chanListener) Accept() (net.Conn, error) {
	select {
	case c := <-l.conns:
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

// ndjsonRequest is one request line of the ndjson protocol.
type ndjsonRequest struct {
	ID     json.RawMessage `json:"id,omitempty"`
	Op     string          `json:"op,omitempty"`
	Method string          `json:"method,omitempty"`
	Path   string          `json:"path,omitempty"`
	Body   json.RawMessage `json:"body,omitempty"`
}

// ndjsonAnswer is one answer line.
type ndjsonAnswer struct {
	ID     json.RawMessage `json:"id,omitempty"`
	Status int             `json:"status"`
	Body   json.RawMessage `json:"body"`
}

// adminOps maps the ndjson shorthand op to its route.
var adminOps = map[string]string{
	"reset-password": http.MethodPost,
	"create-token":   http.MethodPost,
	"list-users":     http.MethodGet,
}

// serveNDJSON answers request lines until EOF, an idle timeout or an
// oversized line; each line runs through the same handler as HTTP.
func (s *Server) serveNDJSON(ctx context.Context, c net.Conn, br *bufio.Reader, h http.Handler) {
	enc := func(a ndjsonAnswer) bool {
		b, err := json.Marshal(a)
		if err != nil {
			return false
		}
		_ = c.SetWriteDeadline(time.Now().Add(10 * time.Second))
		_, err = c.Write(append(b, '\n'))
		return err == nil
	}
	errAnswer := func(id json.RawMessage, e *Error) ndjsonAnswer {
		b, _ := json.Marshal(e)
		return ndjsonAnswer{ID: id, Status: e.status, Body: b}
	}
	for {
		_ = c.SetReadDeadline(time.Now().Add(ndjsonIdle))
		line, err := readLine(br, maxNDJSONLine)
		if errors.Is(err, errLineTooLong) {
			enc(errAnswer(nil, newErr(http.StatusRequestEntityTooLarge, KeyTooLarge, "request line too long", fmt.Sprintf("at most %d bytes", maxNDJSONLine))))
			return
		}
		if len(bytes.TrimSpace(line)) == 0 {
			if err != nil {
				return
			}
			continue
		}
		var req ndjsonRequest
		dec := json.NewDecoder(bytes.NewReader(line))
		dec.DisallowUnknownFields()
		if derr := dec.Decode(&req); derr != nil || dec.More() {
			msg := "request line is not one JSON object {method, path, body} or {op, body}"
			if derr != nil {
				msg += ": " + derr.Error()
			}
			if !enc(errAnswer(nil, errInvalid("%s", msg))) {
				return
			}
			if err != nil {
				return
			}
			continue
		}
		ans := s.ndjsonDispatch(ctx, req, h)
		if !enc(ans) || err != nil {
			return
		}
		if ans.Status == http.StatusForbidden && !adminPeerOf(ctx).admitted {
			return
		}
	}
}

var errLineTooLong = errors.New("line too long")

// readLine reads up to and including '\n' (or EOF), at most max bytes.
func readLine(br *bufio.Reader, max int) ([]byte, error) {
	var out []byte
	for {
		chunk, err := br.ReadSlice('\n')
		if len(out)+len(chunk) > max {
			return nil, errLineTooLong
		}
		out = append(out, chunk...)
		if errors.Is(err, bufio.ErrBufferFull) {
			continue
		}
		return out, err
	}
}

func (s *Server) ndjsonDispatch(ctx context.Context, req ndjsonRequest, h http.Handler) ndjsonAnswer {
	bad := func(format string, a ...any) ndjsonAnswer {
		e := errInvalid(format, a...)
		b, _ := json.Marshal(e)
		return ndjsonAnswer{ID: req.ID, Status: e.status, Body: b}
	}
	method, path := req.Method, req.Path
	if req.Op != "" {
		if method != "" || path != "" {
			return bad("op and method/path are exclusive")
		}
		m, ok := adminOps[req.Op]
		if !ok {
			return bad("unknown op %q (reset-password, create-token, list-users)", req.Op)
		}
		method, path = m, adminPrefix+"/"+req.Op
	}
	if method == "" {
		method = http.MethodGet
	}
	if !strings.HasPrefix(path, adminPrefix+"/") {
		e := newErr(http.StatusNotFound, KeyNotFound, "no admin route "+path, "ndjson serves "+adminPrefix+"/... only; use HTTP for the REST API")
		b, _ := json.Marshal(e)
		return ndjsonAnswer{ID: req.ID, Status: e.status, Body: b}
	}
	var body io.Reader = http.NoBody
	if len(req.Body) > 0 && !bytes.Equal(bytes.TrimSpace(req.Body), []byte("null")) {
		body = bytes.NewReader(req.Body)
	}
	hr, err := http.NewRequestWithContext(ctx, method, "http://admin"+path, body)
	if err != nil {
		return bad("bad method or path: %v", err)
	}
	hr.RemoteAddr = "@"
	rec := &bufferWriter{header: http.Header{}}
	h.ServeHTTP(rec, hr)
	if rec.code == 0 {
		rec.code = http.StatusOK
	}
	out := bytes.TrimSpace(rec.buf.Bytes())
	var compact bytes.Buffer
	if len(out) == 0 {
		compact.WriteString("null")
	} else if err := json.Compact(&compact, out); err != nil {
		b, _ := json.Marshal(string(out))
		compact.Reset()
		compact.Write(b)
	}
	return ndjsonAnswer{ID: req.ID, Status: rec.code, Body: compact.Bytes()}
}

// bufferWriter collects an answer for the ndjson protocol.
type bufferWriter struct {
	header http.Header
	code   int
	buf    bytes.Buffer
}

func (b *bufferWriter) Header() http.Header { return b.header }
func (b *bufferWriter) WriteHeader(c int) {
	if b.code == 0 {
		b.code = c
	}
}
func (b *bufferWriter) Write(p []byte) (int, error) {
	if b.code == 0 {
		b.code = http.StatusOK
	}
	return b.buf.Write(p)
}

// adminHandler serves /admin/v1 and, for admitted peers, the whole API.
func (s *Server) adminHandler() http.Handler {
	mux := http.NewServeMux()
	mux.HandleFunc("POST "+adminPrefix+"/reset-password", s.adminResetPassword)
	mux.HandleFunc("POST "+adminPrefix+"/create-token", s.adminCreateToken)
	mux.HandleFunc("GET "+adminPrefix+"/list-users", s.adminListUsers)
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		peer := adminPeerOf(r.Context())
		isAdmin := r.URL.Path == "/admin" || strings.HasPrefix(r.URL.Path, "/admin/")
		if !isAdmin {
			if !peer.admitted {
				ctx := context.WithValue(r.Context(), startKey{}, time.Now())
				writeError(w, r.WithContext(ctx), s.peerRefused(peer))
				return
			}
			s.handler.ServeHTTP(w, r)
			return
		}
		st := &reqState{clientIP: "local", decision: auth.PathLocal}
		st.id = r.Header.Get("X-Request-ID")
		if !validRequestID(st.id) {
			st.id = newRequestID()
		}
		ctx := context.WithValue(r.Context(), startKey{}, time.Now())
		ctx = context.WithValue(ctx, stateKey{}, st)
		r = r.WithContext(ctx)
		w.Header().Set("X-Request-ID", st.id)
		w.Header().Set("Cache-Control", "no-store")
		sw := &statusWriter{ResponseWriter: w}
		defer func() {
			if v := recover(); v != nil {
				if v == http.ErrAbortHandler {
					panic(v)
				}
				s.log.Error("panic serving admin socket", "request_id", st.id, "panic", fmt.Sprint(v))
				if sw.code == 0 {
					writeError(sw, r, errInternal())
				}
			}
		}()
		// r is already a copy (WithContext above), so net/http still sees its
		// own body; w lets a hit limit mark the connection to close.
		r.Body = http.MaxBytesReader(w, r.Body, maxSmallBody)
		if !peer.admitted {
			st.decision = auth.PathNone
			writeError(sw, r, s.peerRefused(peer))
		} else if h, pattern := mux.Handler(r); pattern == "" {
			rec := &statusOnly{header: http.Header{}}
			h.ServeHTTP(rec, r)
			if rec.code == http.StatusMethodNotAllowed {
				sw.Header().Set("Allow", rec.header.Get("Allow"))
				writeError(sw, r, newErr(http.StatusMethodNotAllowed, KeyInvalid, "method "+r.Method+" not allowed on "+r.URL.Path, "allowed: "+rec.header.Get("Allow")))
			} else {
				writeError(sw, r, newErr(http.StatusNotFound, KeyNotFound, "no admin route "+r.URL.Path, "routes: reset-password, create-token, list-users under "+adminPrefix))
			}
		} else {
			mux.ServeHTTP(sw, r)
		}
		level, errAttrs := answerAttrs(st, sw.code)
		s.log.Log(ctx, level, "admin socket request", append([]any{"request_id", st.id, "method", r.Method, "path", r.URL.Path,
			"status", sw.code, "peer_uid", peer.cred.UID, "peer_pid", peer.cred.PID, "admitted", peer.admitted}, errAttrs...)...)
		if unsafeMethod(r.Method) {
			s.auditAdmin(ctx, st, peer, r.Method, r.URL.Path, sw.code)
		}
	})
}

func newRequestID() string {
	b := make([]byte, 12)
	_, _ = rand.Read(b)
	return hex.EncodeToString(b)
}

func (s *Server) peerRefused(peer adminPeer) *Error {
	return newErr(http.StatusForbidden, KeyForbidden, "this process's user may not use the admin socket",
		"connect as root, as the service's user, or as a member of auth.adminSocket.group")
}

// localRootActor is the built-in administrator acting through the socket.
var localRootActor = audit.Actor{Auth: "socket", Groups: []string{}, ID: "local-root", Kind: "User", Name: "local-root"}

func (s *Server) auditAdmin(ctx context.Context, st *reqState, peer adminPeer, method, path string, status int) {
	actor := localRootActor
	if !peer.admitted {
		actor = audit.Actor{Auth: "socket", Groups: []string{}, ID: fmt.Sprintf("unix:uid=%d", peer.cred.UID), Kind: "Anonymous", Name: "unix-peer"}
	}
	targets := st.targets
	if len(targets) == 0 {
		targets = []auditTarget{{action: strings.TrimPrefix(path, adminPrefix+"/")}}
	}
	for _, t := range targets {
		_, err := s.audit.Append(context.WithoutCancel(ctx), audit.Event{
			Node: s.opts.NodeName, Actor: actor, Decision: st.decision, RequestID: st.id,
			Method: method, Path: path, Action: t.action, Kind: t.kind, Namespace: t.namespace,
			Name: t.name, Status: status, Result: t.result,
		})
		if err != nil {
			s.log.Error("writing audit event", "request_id", st.id, "error", err)
		}
	}
}
