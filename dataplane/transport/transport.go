// Package transport serves the data plane over the encrypted transports:
// DNS over TLS (RFC 7858), DNS over HTTPS on HTTP/1.1 and HTTP/2 (RFC 8484),
// DNS over QUIC (RFC 9250) and DNS over HTTP/3. Transports only turn bytes
// into a query and the answer back into bytes: every query goes through
// Handler.ServeWireID, the one pipeline.
package transport

import (
	"context"
	"crypto/tls"
	"errors"
	"fmt"
	"log/slog"
	"net"
	"net/netip"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/quic-go/quic-go"
	"github.com/quic-go/quic-go/http3"

	"github.com/svcdns/svc/dataplane"
	"github.com/svcdns/svc/dataplane/proxyproto"
	"github.com/svcdns/svc/dataplane/transport/tlscert"
)

// Handler runs one wire-format query through the pipeline and appends the
// answer to out; ok=false means send nothing. *dataplane.Server is one.
type Handler interface {
	ServeWireID(in []byte, client netip.AddrPort, t dataplane.Transport, clientID string, out []byte) (resp []byte, ok bool)
}

// nowHandler is a Handler that answers at once when it can and finishes a
// query that waits for an upstream on its own goroutines
// (dataplane.Server); DoT and DoH (HTTP/2) answer on the connection's
// reader with it.
type nowHandler interface {
	ServeWireNow(in []byte, client netip.AddrPort, t dataplane.Transport, clientID string, out []byte, cb dataplane.WireCallback) (resp []byte, ok, done bool)
}

// DefaultPath is the DoH and DoH3 path when none is configured.
const DefaultPath = "/dns-query"

// Listener is one listeners.dot/.doh/.doq/.doh3 item.
type Listener struct {
	Address  string // host:port; port 0 picks one (tests)
	CertFile string
	KeyFile  string
	Path     string // DoH and DoH3 only; "" means /dns-query
}

// Config holds the encrypted listeners and their limits.
type Config struct {
	DoT, DoH, DoQ, DoH3 []Listener
	// ClientIDDomain: a TLS server name "<id>.<ClientIDDomain>" (DoT, DoQ)
	// gives the client ID <id>. Empty: only DoH paths carry client IDs.
	ClientIDDomain string
	// ProxyProtocol applies to DoT and DoH (TCP) listeners; nil: nobody.
	ProxyProtocol *proxyproto.Policy
	// IdleTimeout closes idle connections (default 30s, as BIND and
	// Unbound have for TCP: long enough that stub resolvers and browsers
	// keep one connection between lookups, and that a client holding many
	// idle connections, as the benchmarks do, keeps them).
	IdleTimeout time.Duration
	// MaxConns bounds connections per TCP listener (default 1000).
	MaxConns int
	// MaxQUICConns bounds the connections of each DoQ and DoH3 listener
	// (default MaxConns).
	MaxQUICConns int
	// MaxInflight bounds pipelined queries per DoT connection and open
	// streams per QUIC connection (default 32 and 100).
	MaxInflight int
	// CertReloadInterval is how often certificate files are checked for
	// changes (default 10s).
	CertReloadInterval time.Duration
	// DoHServer serves DoH (HTTP/1.1 and HTTP/2) with the lean servers
	// (DoHServerLean, "" too) or net/http with x/net/http2
	// (DoHServerStdlib: the escape hatch for a flaw in the lean ones).
	DoHServer string
}

// Options are the collaborators.
type Options struct {
	Logger     *slog.Logger
	Registerer prometheus.Registerer // nil: metrics kept, not registered
}

const (
	handshakeTimeout = 5 * time.Second
	maxMessage       = 65535
)

// Server runs the configured encrypted listeners.
type Server struct {
	h   Handler
	cfg Config
	log *slog.Logger
	m   *metrics

	ctx    context.Context
	cancel context.CancelFunc
	wg     sync.WaitGroup
	// reload ends the certificate watchers.
	reloadCtx    context.Context
	reloadCancel context.CancelFunc

	mu        sync.Mutex
	started   bool
	closed    bool
	draining  atomic.Bool         // Shutdown began: DoT readers stop
	addrs     [4][]netip.AddrPort // dot, doh, doq, doh3
	tcp       []net.Listener
	h3        []*http3.Server
	quic      []*quic.Listener
	tcpConns  map[net.Conn]struct{} // DoT and DoH/1.1: Shutdown wakes their readers
	doh2      []*doh2Server
	stdDoH    []*stdDoH // DoHServerStdlib
	quicConns map[*quic.Conn]struct{}
	altSvc    string
	// altSvcValue is altSvc as a header value, shared by every answer.
	altSvcValue []string
	// now is h when it can answer at once (dataplane.Server), found once
	// here rather than per query; nil: queries go to the responders.
	now nowHandler
	// responders answer DoT and DoH (HTTP/2) queries of other handlers;
	// they stop with ctx.
	responders *responders

	// h2Blocked is the buffer bytes of HTTP/2 answers waiting for
	// flow-control window, every connection (bounded by h2MaxBlockedTotal).
	h2Blocked atomic.Int64
}

const (
	kindDoT = iota
	kindDoH
	kindDoQ
	kindDoH3
)

// New checks the configuration; Start binds the listeners.
func New(h Handler, cfg Config, opts Options) (*Server, error) {
	if h == nil {
		return nil, errors.New("transport: nil handler")
	}
	if err := cfg.ProxyProtocol.Validate(); err != nil {
		return nil, fmt.Errorf("transport: %w", err)
	}
	switch cfg.DoHServer {
	case "", DoHServerLean, DoHServerStdlib:
	default:
		return nil, fmt.Errorf("transport: DoH server %q: want %s or %s", cfg.DoHServer, DoHServerLean, DoHServerStdlib)
	}
	if cfg.MaxConns <= 0 {
		cfg.MaxConns = 1000
	}
	if cfg.MaxQUICConns <= 0 {
		cfg.MaxQUICConns = cfg.MaxConns
	}
	log := opts.Logger
	if log == nil {
		log = slog.New(slog.DiscardHandler)
	}
	m, err := newMetrics(opts.Registerer)
	if err != nil {
		return nil, err
	}
	for _, l := range append(append([]Listener{}, cfg.DoH...), cfg.DoH3...) {
		if l.Path != "" && !strings.HasPrefix(l.Path, "/") {
			return nil, fmt.Errorf("transport: listener %s: path %q must start with /", l.Address, l.Path)
		}
	}
	ctx, cancel := context.WithCancel(context.Background())
	rctx, rcancel := context.WithCancel(context.Background())
	now, _ := h.(nowHandler)
	return &Server{h: h, now: now, cfg: cfg, log: log, m: m, ctx: ctx, cancel: cancel, reloadCtx: rctx, reloadCancel: rcancel,
		tcpConns: map[net.Conn]struct{}{}, quicConns: map[*quic.Conn]struct{}{}, responders: newResponders(ctx.Done())}, nil
}

func (s *Server) idle() time.Duration {
	if s.cfg.IdleTimeout > 0 {
		return s.cfg.IdleTimeout
	}
	return DefaultIdleTimeout
}

// DefaultIdleTimeout is the idle timeout of every encrypted transport.
const DefaultIdleTimeout = 30 * time.Second

// tlsConfig builds the server TLS configuration of one listener: TLS 1.2
// and 1.3, session tickets on (resumption), the certificate reloaded when
// its files change (the Reloader, which also tells client IDs in server
// names).
func (s *Server) tlsConfig(ctx context.Context, l Listener, protos []string) (*tls.Config, *tlscert.Reloader, error) {
	r, err := tlscert.New(l.CertFile, l.KeyFile, s.log)
	if err != nil {
		return nil, nil, fmt.Errorf("listener %s: %w", l.Address, err)
	}
	s.wg.Add(1)
	go func() {
		defer s.wg.Done()
		r.Run(ctx, s.cfg.CertReloadInterval)
	}()
	return &tls.Config{
		MinVersion:     tls.VersionTLS12,
		GetCertificate: r.GetCertificate,
		NextProtos:     protos,
	}, r, nil
}

// Start binds every listener; on error the ones already bound are closed.
// DoH3 listeners bind first so DoH answers can advertise them in Alt-Svc.
func (s *Server) Start(ctx context.Context) error {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.started {
		return errors.New("transport: already started")
	}
	s.started = true
	err := func() error {
		for _, l := range s.cfg.DoH3 {
			if err := s.startDoH3(ctx, l); err != nil {
				return err
			}
		}
		if len(s.addrs[kindDoH3]) > 0 {
			s.altSvc = fmt.Sprintf(`h3=":%d"; ma=86400`, s.addrs[kindDoH3][0].Port())
			s.altSvcValue = []string{s.altSvc}
		}
		for _, l := range s.cfg.DoT {
			if err := s.startDoT(ctx, l); err != nil {
				return err
			}
		}
		for _, l := range s.cfg.DoH {
			if err := s.startDoH(ctx, l); err != nil {
				return err
			}
		}
		for _, l := range s.cfg.DoQ {
			if err := s.startDoQ(ctx, l); err != nil {
				return err
			}
		}
		return nil
	}()
	if err != nil {
		s.closeLocked()
		s.cancel()
		s.reloadCancel()
	}
	return err
}

// Addrs returns the bound addresses of one kind: "dot", "doh", "doq", "doh3".
func (s *Server) Addrs(kind string) []netip.AddrPort {
	i := map[string]int{"dot": kindDoT, "doh": kindDoH, "doq": kindDoQ, "doh3": kindDoH3}
	k, ok := i[kind]
	if !ok {
		return nil
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	return append([]netip.AddrPort(nil), s.addrs[k]...)
}

func (s *Server) closeLocked() {
	s.closed = true
	for _, l := range s.tcp {
		_ = l.Close()
	}
	for _, l := range s.quic {
		_ = l.Close()
	}
	for _, h := range s.h3 {
		_ = h.Close()
	}
}

// Shutdown closes the listeners, lets in-flight queries finish until ctx
// ends, then closes every connection.
func (s *Server) Shutdown(ctx context.Context) error {
	s.reloadCancel()
	s.draining.Store(true)
	s.mu.Lock()
	s.closed = true
	for _, l := range s.tcp {
		_ = l.Close()
	}
	for _, l := range s.quic {
		_ = l.Close()
	}
	for c := range s.tcpConns {
		_ = c.SetReadDeadline(time.Now()) // wake readers; answers still go out
	}
	h3, doh2, std := s.h3, s.doh2, s.stdDoH
	s.mu.Unlock()
	for _, d := range doh2 {
		d.shutdown() // GOAWAY; each connection closes when its streams are answered
	}
	var errs []error
	if err := shutdownStd(ctx, std); err != nil {
		errs = append(errs, err)
	}
	for _, h := range h3 {
		if err := h.Shutdown(ctx); err != nil {
			errs = append(errs, err)
			_ = h.Close()
		}
	}
	s.mu.Lock()
	for c := range s.quicConns {
		_ = c.CloseWithError(DoQNoError, "")
	}
	s.mu.Unlock()
	done := make(chan struct{})
	go func() {
		s.wg.Wait()
		close(done)
	}()
	select {
	case <-done:
	case <-ctx.Done():
		s.mu.Lock()
		for c := range s.tcpConns {
			_ = c.Close()
		}
		s.mu.Unlock()
		s.cancel()
		<-done
		errs = append(errs, ctx.Err())
	}
	s.cancel()
	if err := errors.Join(errs...); err != nil {
		return fmt.Errorf("transport shutdown: %w", err)
	}
	return nil
}

// clientIDFromSNI returns the client ID a TLS server name carries, if it
// is a valid one: with ClientIDDomain set, <id>.<ClientIDDomain>;
// otherwise the certificate decides (certs nil: none): <id>.<D> when it is
// for *.D and does not name the server name itself.
func (s *Server) clientIDFromSNI(sni string, certs *tlscert.Reloader) string {
	d := s.cfg.ClientIDDomain
	if d == "" {
		if certs == nil {
			return ""
		}
		if id := certs.WildcardLabel(sni); validClientID(id) {
			return id
		}
		return ""
	}
	if len(sni) <= len(d)+1 {
		return ""
	}
	sni = strings.TrimSuffix(sni, ".")
	d = strings.TrimSuffix(d, ".")
	if !strings.HasSuffix(strings.ToLower(sni), "."+strings.ToLower(d)) {
		return ""
	}
	id := sni[:len(sni)-len(d)-1]
	if !validClientID(id) {
		return ""
	}
	return strings.ToLower(id)
}

// validClientID: one DNS label of letters, digits and hyphens.
func validClientID(id string) bool {
	if len(id) == 0 || len(id) > 63 {
		return false
	}
	for i := 0; i < len(id); i++ {
		c := id[i]
		if !('a' <= c && c <= 'z' || 'A' <= c && c <= 'Z' || '0' <= c && c <= '9' || c == '-') {
			return false
		}
	}
	return true
}

func addrPortOf(a net.Addr) netip.AddrPort {
	switch a := a.(type) {
	case *net.TCPAddr:
		ap := a.AddrPort()
		return netip.AddrPortFrom(ap.Addr().Unmap(), ap.Port())
	case *net.UDPAddr:
		ap := a.AddrPort()
		return netip.AddrPortFrom(ap.Addr().Unmap(), ap.Port())
	}
	ap, _ := netip.ParseAddrPort(a.String())
	return netip.AddrPortFrom(ap.Addr().Unmap(), ap.Port())
}

// bufPool holds message buffers for reads and answers.
var bufPool = sync.Pool{New: func() any { b := make([]byte, 0, 4096); return &b }}

func getBuf() *[]byte { return bufPool.Get().(*[]byte) }

func putBuf(b *[]byte) {
	if cap(*b) > 16<<10 {
		return
	}
	*b = (*b)[:0]
	bufPool.Put(b)
}
