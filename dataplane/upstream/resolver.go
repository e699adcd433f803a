// Package upstream forwards queries to groups of upstream DNS servers over
// UDP, TCP, DNS over TLS, DNS over HTTPS and DNS over QUIC, with
// conditional forwarding, EDNS Client Subnet handling and per-upstream
// metrics.
package upstream

import (
	"context"
	"crypto/tls"
	"errors"
	"fmt"
	"log/slog"
	"net/netip"
	"sort"

	"github.com/miekg/dns"
	"github.com/prometheus/client_golang/prometheus"
)

// Resolver forwards queries to upstream groups. It is immutable after New
// and safe for concurrent use; reconfigure by building a new one and
// closing the old one once queries have moved over.
type Resolver struct {
	cfg    Config
	log    *slog.Logger
	groups map[string]*group
	router router
	boot   *bootstrap
	bufs   *bufPool
	trs    []transport
	fl     *flights
}

// New builds a Resolver. It dials nothing: connections are made on first
// use, so building one on every settings change is cheap. reg may be nil;
// collectors already registered on reg by an earlier New are reused.
func New(cfg Config, logger *slog.Logger, reg prometheus.Registerer) (*Resolver, error) {
	cfg, err := cfg.withDefaults()
	if err != nil {
		return nil, err
	}
	if logger == nil {
		logger = slog.New(slog.DiscardHandler)
	}
	tlsBase, err := cfg.tlsConfig()
	if err != nil {
		return nil, err
	}
	m, err := newMetrics(reg)
	if err != nil {
		return nil, err
	}
	bufs := newBufPool()
	boot, err := newBootstrap(cfg.Bootstrap, bufs)
	if err != nil {
		return nil, err
	}
	r := &Resolver{
		cfg:    cfg,
		log:    logger,
		groups: make(map[string]*group, len(cfg.Groups)),
		router: router{suffixes: cfg.Conditional},
		boot:   boot,
		bufs:   bufs,
		fl:     newFlights(),
	}
	d := &dialer{boot: boot}
	// One transport per distinct address, shared by the groups naming it,
	// so they share pooled connections.
	shared := make(map[Address]transport)
	names := make([]string, 0, len(cfg.Groups))
	for name := range cfg.Groups {
		names = append(names, name)
	}
	sort.Strings(names)
	for _, name := range names {
		gc := cfg.Groups[name]
		g := &group{name: name, strategy: gc.Strategy, timeout: gc.Timeout, bufs: bufs,
			coalesced: m.coalesced.WithLabelValues(name)}
		seen := make(map[Address]bool, len(gc.Servers))
		for _, s := range gc.Servers {
			a, err := ParseAddress(s)
			if err != nil {
				_ = r.Close()
				return nil, fmt.Errorf("upstream group %q: %w", name, err)
			}
			if seen[a] {
				_ = r.Close()
				return nil, fmt.Errorf("upstream group %q lists %s twice", name, a)
			}
			seen[a] = true
			t, ok := shared[a]
			if !ok {
				t = newTransport(a, d, tlsBase, m)
				shared[a] = t
				r.trs = append(r.trs, t)
			}
			g.ups = append(g.ups, &upstream{
				name:   s,
				t:      t,
				zeroID: a.Scheme == SchemeHTTPS || a.Scheme == SchemeQUIC,
				m:      m.forUpstream(name, s),
			})
		}
		r.groups[name] = g
	}
	logger.Debug("upstream resolver built", "groups", len(r.groups), "conditional", len(cfg.Conditional), "ecs", cfg.ECS.Mode)
	return r, nil
}

func newTransport(a Address, d *dialer, tlsBase *tls.Config, m *metrics) transport {
	switch a.Scheme {
	case SchemeTCP:
		return newStreamTransport(tcpDial(d, a))
	case SchemeTLS:
		return newStreamTransport(tlsDial(d, a, tlsBase))
	case SchemeHTTPS:
		return newDoHTransport(a, d, tlsBase)
	case SchemeQUIC:
		return newDoQTransport(a, d, tlsBase)
	default:
		return &udpTransport{addr: a, d: d, tcp: newStreamTransport(tcpDial(d, a)), pool: newUDPPool(a, d, m)}
	}
}

// Route returns the conditional forwarding group for qname: the group of
// the longest matching suffix (case-insensitive, on label boundaries).
// conditional is false when no rule matches; answers of conditional
// groups must not be cached.
func (r *Resolver) Route(qname string) (group string, conditional bool) {
	return r.router.route(qname)
}

// Forward sends req to the named upstream group (empty = the group chosen by
// conditional forwarding for the name, else "default") and returns the answer
// and the address of the upstream that gave it.
//
// req is not modified. The answer carries req's ID and has been checked to
// answer req's question. When every server fails, the last failed answer
// (SERVFAIL or REFUSED) is returned with a nil error if there was one.
func (r *Resolver) Forward(ctx context.Context, group string, req *dns.Msg, client netip.Addr) (resp *dns.Msg, upstream string, err error) {
	resp, _, upstream, err = r.forward(ctx, group, req, client, nil)
	return resp, upstream, err
}

// ForwardRaw is Forward that also returns the answer's bytes as the
// upstream sent them, appended to raw[:0], for a caller that can use
// them as they are (the cache keeps an answer's sections without packing
// them again). rawOut is nil when they are not at hand (a coalesced or
// raced answer, a failure); resp is then all there is. The bytes are the
// upstream's: its ID and EDNS (the ECS mode's changes apply to resp
// only).
//
// resp is nil, with a nil error, when the answer is a NOERROR or NXDOMAIN
// whose bytes passed wire.ScanAnswer: the caller reads the header from
// rawOut and unpacks it (without error) only if it needs the records.
func (r *Resolver) ForwardRaw(ctx context.Context, group string, req *dns.Msg, client netip.Addr, raw []byte) (resp *dns.Msg, rawOut []byte, upstream string, err error) {
	return r.forward(ctx, group, req, client, &raw)
}

func (r *Resolver) forward(ctx context.Context, group string, req *dns.Msg, client netip.Addr, raw *[]byte) (resp *dns.Msg, rawOut []byte, upstream string, err error) {
	if req == nil || len(req.Question) != 1 {
		return nil, nil, "", errors.New("forward: query must have exactly one question")
	}
	if group == "" {
		if g, ok := r.router.route(req.Question[0].Name); ok {
			group = g
		} else {
			group = DefaultGroup
		}
	}
	g, ok := r.groups[group]
	if !ok {
		return nil, nil, "", fmt.Errorf("forward: unknown upstream group %q", group)
	}
	p := r.prepare(req, client)
	b := r.bufs.p.Get().(*attemptBuf)
	defer r.bufs.put(b)
	wire, err := p.msg.PackBuffer(b.q[:cap(b.q)])
	if err != nil {
		return nil, nil, "", fmt.Errorf("forward: pack query: %w", err)
	}
	// The same question already on its way to this group: wait for its
	// answer (see flights).
	h := r.fl.hash(g.name, wire)
	f, leader := r.fl.join(h, g.name, wire)
	if f != nil && !leader {
		g.coalesced.Inc()
		resp, upstream, err = f.wait(ctx)
		if resp != nil {
			p.finish(resp, req.Id)
		}
		return resp, nil, upstream, err
	}
	res := g.forward(ctx, wire, req.Question[0], raw)
	var rawBuf []byte
	if raw != nil {
		rawBuf = *raw
	}
	return r.finish(res, f, h, &p, req.Id, rawBuf)
}

// finish ends a forward with res: the flight f (under h) lands for the
// questions that joined it, the answer gets the caller's ID and EDNS, and
// raw (the caller's buffer, holding a good answer's bytes when res.raw)
// is returned when it holds them.
func (r *Resolver) finish(res result, f *flight, h uint64, p *prepared, id uint16, raw []byte) (resp *dns.Msg, rawOut []byte, upstream string, err error) {
	if res.up != nil {
		upstream = res.up.name
	}
	if f != nil {
		var light []byte
		if res.light {
			light = raw
		}
		r.fl.land(h, f, res.resp, light, upstream, res.err)
	}
	if res.resp != nil {
		p.finish(res.resp, id)
	}
	if res.raw && res.err == nil {
		rawOut = raw
	}
	return res.resp, rawOut, upstream, res.err
}

// Close releases pooled connections and stops bootstrap lookups. Queries
// still running on this Resolver may fail; close it after the new one has
// taken over (for example after the longest group timeout).
func (r *Resolver) Close() error {
	var errs []error
	for _, t := range r.trs {
		errs = append(errs, t.close())
	}
	if r.boot != nil {
		errs = append(errs, r.boot.close())
	}
	return errors.Join(errs...)
}
