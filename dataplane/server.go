// Package dataplane answers DNS queries: it runs every query through the
// fixed nine-stage pipeline against one immutable Snapshot, serves Do53 over
// UDP and TCP, and offers the same pipeline to other transports and the API.
package dataplane

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"net"
	"net/netip"
	"sync"
	"sync/atomic"
	"time"

	"github.com/miekg/dns"
	"github.com/prometheus/client_golang/prometheus"

	"github.com/svcdns/svc/dataplane/cache"
	"github.com/svcdns/svc/dataplane/proxyproto"
	"github.com/svcdns/svc/dataplane/ratelimit"
	"github.com/svcdns/svc/dataplane/wire"
)

// ListenerConfig is one listeners.dns item.
type ListenerConfig struct {
	Address   string   // host:port; port 0 picks one (tests)
	Protocols []string // "udp", "tcp"; empty means both
}

// Config holds the node-level data plane settings.
type Config struct {
	Node      string
	Listeners []ListenerConfig
	// Sockets is listeners.sockets: UDP sockets per address with
	// SO_REUSEPORT; 0 means one per CPU.
	Sockets int
	// MaxUDPSize caps EDNS answers over UDP (default 1232).
	MaxUDPSize int
	// TCPIdleTimeout closes idle TCP connections (default 10s, RFC 7766 6.2.3).
	TCPIdleTimeout time.Duration
	// DoTIdleTimeout is the DoT listeners' idle timeout (default 30s, the
	// transports' own default), told with TCPIdleTimeout to clients that
	// ask with edns-tcp-keepalive (RFC 7828).
	DoTIdleTimeout time.Duration
	// TCPMaxConns bounds concurrent TCP connections (default 1000).
	TCPMaxConns int
	// TCPMaxInflight bounds pipelined queries per connection (default 32).
	TCPMaxInflight int
	// MaxWorkers bounds the UDP queries waiting for an upstream at once
	// (default 10000); beyond it new ones are dropped and counted in
	// service_dns_shed_total. TCP queries use the same workers while there
	// is room and a goroutine of their own when there is not.
	MaxWorkers int
	// MaxPendingBytes bounds the memory those queries hold (default 64
	// MiB, each charged its buffers plus an estimate of its worker and
	// upstream state); past half of either bound one client prefix (/24,
	// /56) is admitted only while it holds less than half of what is
	// still free. See docs/dataplane.md.
	MaxPendingBytes int64
	// UpstreamTimeout bounds one forwarded query (default 5s).
	UpstreamTimeout time.Duration
	Cache           cache.Config
	// DisableFastPath sends every query through miekg/dns (tests, debugging).
	DisableFastPath bool
	// DisableUDPBatch reads and writes one datagram per syscall instead of
	// batches with recvmmsg/sendmmsg (benchmarks, debugging).
	DisableUDPBatch bool
	// SyncMisses sends every UDP cache miss to a worker that waits for the
	// upstream, instead of the async lane where the upstream socket's
	// reader finishes it (benchmarks, debugging; docs/dataplane.md).
	SyncMisses bool
	// ProxyProtocol is listeners.proxyProtocolFrom and its secret: peers
	// that put a PROXY v2 header before each UDP datagram and TCP
	// connection. Nil: nobody.
	ProxyProtocol *proxyproto.Policy
	// ECSClientFrom is listeners.ecsClientFrom: forwarders (cluster DNS)
	// whose EDNS Client Subnet option, when it names one address (/32,
	// /128), is the client for identify, the query log and rate limiting.
	ECSClientFrom []netip.Prefix
}

func (c *Config) setDefaults() {
	if c.MaxUDPSize <= 0 {
		c.MaxUDPSize = 1232
	}
	c.MaxUDPSize = max(c.MaxUDPSize, minUDPSize)
	if c.TCPIdleTimeout <= 0 {
		c.TCPIdleTimeout = 10 * time.Second
	}
	if c.DoTIdleTimeout <= 0 {
		c.DoTIdleTimeout = 30 * time.Second
	}
	if c.TCPMaxConns <= 0 {
		c.TCPMaxConns = 1000
	}
	if c.TCPMaxInflight <= 0 {
		c.TCPMaxInflight = 32
	}
	if c.MaxWorkers <= 0 {
		c.MaxWorkers = defaultMaxWorkers
	}
	if c.MaxPendingBytes <= 0 {
		c.MaxPendingBytes = defaultMaxPendingBytes
	}
	if c.UpstreamTimeout <= 0 {
		c.UpstreamTimeout = 5 * time.Second
	}
}

// Options are the collaborators of a Server.
type Options struct {
	Logger      *slog.Logger
	Registerer  prometheus.Registerer // nil: metrics are kept but not registered
	QueryLogger QueryLogger           // nil: no query log
}

// Server is the data plane of one node.
type Server struct {
	cfg         Config
	log         *slog.Logger
	logger      QueryLogger
	inPlace     InPlaceLogger // logger, when it takes records in place
	logOn       func() bool   // nil: the logger is always on (see logging)
	metrics     *metrics
	stages      []stage
	upIdx       int // the upstream stage's index, where an async miss resumes
	snap        atomic.Pointer[Snapshot]
	cache       atomic.Pointer[cache.Cache]
	lameduck    atomic.Bool
	blockingOff atomic.Bool

	ctx    context.Context
	cancel context.CancelFunc

	mu            sync.Mutex
	udp           []*net.UDPConn
	rawUDP        []*rawUDP // sockets outside the poller (rawudp_linux.go)
	rawOnce       sync.Once
	tcp           []net.Listener
	conns         map[net.Conn]struct{}
	wg            sync.WaitGroup
	started       bool
	closed        bool
	tcpSlots      chan struct{}
	workers       *workers
	limiter       atomic.Pointer[ratelimit.Limiter]
	proxyRejected atomic.Uint64
	ecsShort      atomic.Uint64
	panicLog      rateGate
	upHealth      upstreamHealth // groups failing recently (serve stale at once)
	transfers     atomic.Pointer[Transfers]
}

// New builds a server with an empty snapshot; call Swap to give it data and
// Start to open listeners.
func New(cfg Config, opts Options) (*Server, error) {
	cfg.setDefaults()
	if err := cfg.ProxyProtocol.Validate(); err != nil {
		return nil, fmt.Errorf("dataplane: %w", err)
	}
	log := opts.Logger
	if log == nil {
		log = slog.New(slog.DiscardHandler)
	}
	m, err := newMetrics(opts.Registerer, buildPipeline())
	if err != nil {
		return nil, fmt.Errorf("dataplane metrics: %w", err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	s := &Server{
		cfg:      cfg,
		log:      log,
		logger:   opts.QueryLogger,
		metrics:  m,
		stages:   buildPipeline(),
		ctx:      ctx,
		cancel:   cancel,
		conns:    make(map[net.Conn]struct{}),
		tcpSlots: make(chan struct{}, cfg.TCPMaxConns),
		workers:  newWorkers(cfg.MaxWorkers, cfg.MaxPendingBytes),
	}
	s.upIdx = stageIndex(s.stages, "upstream")
	if sw, ok := s.logger.(loggingSwitch); ok {
		s.logOn = sw.Enabled
	}
	s.inPlace, _ = s.logger.(InPlaceLogger)
	s.snap.Store(NewSnapshot(SnapshotInput{Version: "empty"}))
	s.SetCacheConfig(cfg.Cache)
	if opts.Registerer != nil {
		if err := s.registerPending(opts.Registerer); err != nil {
			return nil, fmt.Errorf("dataplane metrics: %w", err)
		}
	}
	return s, nil
}

// registerPending exports the pending-query budget (MaxWorkers,
// MaxPendingBytes) as gauges read at scrape time, so an operator sees how
// close a flood brings the node to shedding.
func (s *Server) registerPending(reg prometheus.Registerer) error {
	gauges := []prometheus.Collector{
		prometheus.NewGaugeFunc(prometheus.GaugeOpts{Namespace: "service", Subsystem: "dns", Name: "pending_queries",
			Help: "Queries waiting for an upstream now (bounded by MaxWorkers)."},
			func() float64 { j, _ := s.Pending(); return float64(j) }),
		prometheus.NewGaugeFunc(prometheus.GaugeOpts{Namespace: "service", Subsystem: "dns", Name: "pending_bytes",
			Help: "Memory charged to the queries waiting for an upstream (bounded by MaxPendingBytes)."},
			func() float64 { _, b := s.Pending(); return float64(b) }),
		prometheus.NewGaugeFunc(prometheus.GaugeOpts{Namespace: "service", Subsystem: "dns", Name: "pending_bytes_limit",
			Help: "MaxPendingBytes: past it new cache misses are shed (service_dns_shed_total)."},
			func() float64 { return float64(s.cfg.MaxPendingBytes) }),
	}
	for _, g := range gauges {
		if err := reg.Register(g); err != nil {
			return fmt.Errorf("register: %w", err)
		}
	}
	return nil
}

// StageNames lists the pipeline stages in the order they run.
func (s *Server) StageNames() []string {
	names := make([]string, len(s.stages))
	for i, st := range s.stages {
		names[i] = st.name
	}
	return names
}

// Swap publishes a new snapshot. In-flight queries finish on the one they
// loaded; nothing waits.
func (s *Server) Swap(snap *Snapshot) {
	if snap == nil {
		return
	}
	s.snap.Store(snap)
}

// Snapshot returns the current snapshot.
func (s *Server) Snapshot() *Snapshot { return s.snap.Load() }

// SetCacheConfig replaces the cache (and drops its entries) when cache.*
// settings change.
func (s *Server) SetCacheConfig(cfg cache.Config) {
	s.cache.Store(cache.New(cfg, s.prefetch))
}

// FlushCache drops every cached answer (name "") or those of one name.
func (s *Server) FlushCache(name string) error {
	c := s.cache.Load()
	if name == "" {
		c.Flush(nil)
		return nil
	}
	b, err := packName(name)
	if err != nil {
		return err
	}
	lowerASCII(b)
	c.Flush(b)
	return nil
}

// SetLameduck makes the health name answer SERVFAIL while listeners serve on.
func (s *Server) SetLameduck(on bool) { s.lameduck.Store(on) }

// Lameduck reports the lameduck state.
func (s *Server) Lameduck() bool { return s.lameduck.Load() }

// SetBlocking is the per-node blocking toggle; a change flushes the cache so
// answers given under the old setting do not linger.
func (s *Server) SetBlocking(enabled bool) {
	if s.blockingOff.Swap(!enabled) != !enabled {
		s.cache.Load().Flush(nil)
	}
}

// Blocking reports the per-node blocking toggle.
func (s *Server) Blocking() bool { return !s.blockingOff.Load() }

// prefetch refreshes a popular cache entry before it expires.
func (s *Server) prefetch(name string, qtype, qclass uint16, flags cache.Flags) {
	s.metrics.cachePrefetch.Inc()
	fwd := s.snap.Load().in.Forwarder
	c := s.cache.Load()
	if fwd == nil || c == nil {
		return
	}
	req := new(dns.Msg)
	req.Question = []dns.Question{{Name: string(wire.AppendPresentation(nil, []byte(name))), Qtype: qtype, Qclass: qclass}}
	req.Id, req.RecursionDesired, req.CheckingDisabled = dns.Id(), true, flags&cache.FlagCD != 0
	if flags&cache.FlagDO != 0 {
		req.SetEdns0(uint16(s.cfg.MaxUDPSize), true)
	}
	ctx, cancel := context.WithTimeout(s.ctx, s.cfg.UpstreamTimeout)
	defer cancel()
	resp, _, err := fwd.Forward(ctx, "", req, netip.Addr{})
	if err != nil || resp == nil || resp.Truncated {
		return
	}
	if err := c.Put([]byte(name), qtype, qclass, flags, resp, c.Now()); err != nil {
		s.log.Debug("prefetch", "err", err)
	}
}

// SetRateLimiter installs the UDP rate limiter (ratelimit.* settings); nil
// turns limiting off. Call again with a new limiter when the settings change.
func (s *Server) SetRateLimiter(l *ratelimit.Limiter) { s.limiter.Store(l) }

// ServeWire runs one wire-format query through the pipeline synchronously
// and appends the answer to out. ok=false means send nothing. DoT, DoH, DoQ
// and DoH3 listeners call this.
func (s *Server) ServeWire(in []byte, client netip.AddrPort, transport Transport, out []byte) (resp []byte, ok bool) {
	return s.ServeWireID(in, client, transport, "", out)
}

// ServeWireID is ServeWire with the client ID the transport found (DoT SNI
// label, DoH path segment, DoQ SNI label); "" for none.
func (s *Server) ServeWireID(in []byte, client netip.AddrPort, transport Transport, clientID string, out []byte) (resp []byte, ok bool) {
	q := s.begin(client, transport)
	q.ClientID = clientID
	q.in = append(q.in[:0], in...)
	s.run(q)
	b := s.encode(q)
	if b != nil {
		out, ok = append(out, b...), true
	}
	putQuery(q)
	return out, ok
}

// WireCallback receives the answer of a query ServeWireNow could not
// answer at once. resp is only valid during the call (copy it); ok=false
// means send nothing.
type WireCallback interface {
	AnswerWire(resp []byte, ok bool)
}

// ServeWireNow is ServeWireID for transports that multiplex queries on one
// connection (DoT, DoH over HTTP/2): a query answered without waiting for an
// upstream (cache hit, authoritative, blocked, refused...) is answered on the
// caller's goroutine and done is true; a query that must wait for an upstream
// goes on to the server's workers, done is false, and cb.AnswerWire is called
// with its answer later, from another goroutine. The caller answers the fast
// majority of queries without handing them to a goroutine, and a slow
// upstream holds no connection up.
func (s *Server) ServeWireNow(in []byte, client netip.AddrPort, transport Transport, clientID string, out []byte, cb WireCallback) (resp []byte, ok, done bool) {
	q := s.begin(client, transport)
	q.ClientID = clientID
	q.in = append(q.in[:0], in...)
	q.detachable = true
	if s.run(q) {
		if b := s.encode(q); b != nil {
			out, ok = append(out, b...), true
		}
		putQuery(q)
		return out, ok, true
	}
	s.wg.Add(1)
	if !s.dispatch(job{q: q, cb: cb}) {
		// Pool full: the connection still gets its answer (its own queries
		// are bounded by the transport's concurrent-stream limit).
		go s.finishWire(q, cb)
	}
	return out, false, false
}

// finishWire runs a detached ServeWireNow query on from the upstream stage.
func (s *Server) finishWire(q *Query, cb WireCallback) {
	defer s.wg.Done()
	q.detachable = false
	s.run(q)
	b := s.encode(q)
	cb.AnswerWire(b, b != nil)
	putQuery(q)
}

func (s *Server) begin(client netip.AddrPort, transport Transport) *Query {
	q := getQuery()
	q.Client, q.Transport, q.Node = client, transport, s.cfg.Node
	q.Start = time.Now()
	q.snap = s.snap.Load()
	q.cache = s.cache.Load()
	return q
}

// QueryRequest is one query asked through the API (POST /dns/query).
type QueryRequest struct {
	Name      string
	Type      uint16 // 0 means A
	Client    netip.Addr
	Transport Transport
	DNSSEC    bool
	// ClientID is the client ID to identify the client with ("" for none).
	ClientID string
}

// QueryResult is the answer plus why it was given.
type QueryResult struct {
	Msg      *dns.Msg
	Status   Status
	Reason   Reason
	List     string
	Rule     string
	Policy   string
	Upstream string
	Latency  time.Duration
}

// Query runs one query through the pipeline, as a client of the given
// transport would see it.
func (s *Server) Query(ctx context.Context, req QueryRequest) (QueryResult, error) {
	q, err := s.syntheticQuery(req)
	if err != nil {
		return QueryResult{}, err
	}
	defer putQuery(q)
	done := make(chan struct{})
	go func() {
		defer close(done)
		s.run(q)
	}()
	select {
	case <-done:
	case <-ctx.Done():
		// The pipeline is bounded by UpstreamTimeout; wait so q is not reused early.
		<-done
		return QueryResult{}, fmt.Errorf("query %q: %w", req.Name, ctx.Err())
	}
	b := s.encode(q)
	res := QueryResult{Status: q.Status, Reason: q.Reason, List: q.List, Rule: q.RuleText(), Policy: q.Policy, Upstream: q.Upstream, Latency: q.Duration}
	if b == nil {
		return res, errors.New("query dropped")
	}
	res.Msg = new(dns.Msg)
	if err := res.Msg.Unpack(b); err != nil {
		return res, fmt.Errorf("unpack answer: %w", err)
	}
	return res, nil
}

// syntheticQuery builds the query an API request asks for (Query, Explain)
// as a client of req.Transport would send it; the caller puts it back.
func (s *Server) syntheticQuery(req QueryRequest) (*Query, error) {
	if len(req.Name) == 0 || len(req.Name) > 255 {
		return nil, fmt.Errorf("query name must be 1 to 255 characters")
	}
	if req.Type == 0 {
		req.Type = dns.TypeA
	}
	m := new(dns.Msg)
	m.SetQuestion(dns.Fqdn(req.Name), req.Type)
	m.SetEdns0(uint16(s.cfg.MaxUDPSize), req.DNSSEC)
	in, err := m.Pack()
	if err != nil {
		return nil, fmt.Errorf("query %q: %w", req.Name, err)
	}
	q := s.begin(netip.AddrPortFrom(req.Client, 0), req.Transport)
	q.ClientID = req.ClientID
	q.in = append(q.in[:0], in...)
	return q, nil
}

// Rcode names the answer's response code.
func (r QueryResult) Rcode() string { return RcodeString(r.Msg.Rcode) }

// EDE is the answer's first Extended DNS Error (RFC 8914): its code, the
// code's name and the extra text; ok false when the answer has none.
func (r QueryResult) EDE() (code int, name, text string, ok bool) {
	opt := r.Msg.IsEdns0()
	if opt == nil {
		return 0, "", "", false
	}
	for _, o := range opt.Option {
		if e, isEDE := o.(*dns.EDNS0_EDE); isEDE {
			return int(e.InfoCode), dns.ExtendedErrorCodeToString[e.InfoCode], e.ExtraText, true
		}
	}
	return 0, "", "", false
}

// Sections returns the answer, authority and additional records in
// presentation format (the OPT pseudo-record left out).
func (r QueryResult) Sections() (answer, authority, additional []string) {
	present := func(rrs []dns.RR) []string {
		out := []string{}
		for _, rr := range rrs {
			if rr.Header().Rrtype != dns.TypeOPT {
				out = append(out, rr.String())
			}
		}
		return out
	}
	return present(r.Msg.Answer), present(r.Msg.Ns), present(r.Msg.Extra)
}

// logging reports whether a query record is wanted now: there is a logger
// and it is not switched off (querylog.enabled), so no record is built for
// a logger that would drop it.
func (s *Server) logging() bool { return s.logger != nil && (s.logOn == nil || s.logOn()) }
