package dataplane

import (
	"context"
	"errors"
	"log/slog"
	"net"
	"net/netip"
	"strings"
	"sync/atomic"
	"syscall"
	"testing"
	"time"

	"github.com/miekg/dns"

	"github.com/svcdns/svc/api/v1alpha1"
	"github.com/svcdns/svc/dataplane/authority"
	"github.com/svcdns/svc/dataplane/cache"
	"github.com/svcdns/svc/dataplane/upstream"
)

var compileTime = time.Date(2026, 1, 2, 3, 4, 5, 0, time.UTC)

func ep(name, typ string, targets ...string) v1alpha1.Endpoint {
	return v1alpha1.Endpoint{DNSName: name, RecordType: typ, Targets: targets}
}

// testTable compiles example.com. with the given extra endpoints.
func testTable(t testing.TB, extra ...v1alpha1.Endpoint) *authority.Table {
	t.Helper()
	z := v1alpha1.DNSZone{}
	z.Name = "example-com"
	z.Spec.ZoneName = "example.com"
	fwd := v1alpha1.DNSZone{}
	fwd.Name = "corp"
	fwd.Spec.ZoneName = "corp.test"
	fwd.Spec.Type = "forward"
	fwd.Spec.Forward = &v1alpha1.ForwardZone{UpstreamGroup: "corp"}
	rs := v1alpha1.DNSRecordSet{}
	rs.Namespace, rs.Name = "default", "web"
	rs.Spec.ZoneRef.Name = "example-com"
	long := strings.Repeat("x", 250)
	rs.Spec.Endpoints = append([]v1alpha1.Endpoint{
		ep("www", "A", "192.0.2.1", "192.0.2.2"),
		ep("www", "AAAA", "2001:db8::1"),
		ep("alias", "CNAME", "www.example.com."),
		ep("mail", "MX", "10 www.example.com."),
		ep("big", "TXT", long[:240]+"1", long[:240]+"2", long[:240]+"3"),
		ep("huge", "TXT", long+"1", long+"2", long+"3", long+"4", long+"5", long+"6"),
	}, extra...)
	tab, problems := authority.Compile([]v1alpha1.DNSZone{z, fwd}, []v1alpha1.DNSRecordSet{rs}, compileTime)
	if len(problems) > 0 {
		t.Fatalf("compile problems: %v", problems)
	}
	return tab
}

// upstreamServer is a real miekg/dns server on loopback playing an upstream.
type upstreamServer struct {
	addr    string
	queries atomic.Int64
	srv     *dns.Server
}

func startUpstream(t testing.TB) *upstreamServer {
	t.Helper()
	pc, err := net.ListenPacket("udp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	u := &upstreamServer{addr: pc.LocalAddr().String()}
	started := make(chan struct{})
	u.srv = &dns.Server{PacketConn: pc, NotifyStartedFunc: func() { close(started) }, Handler: dns.HandlerFunc(func(w dns.ResponseWriter, r *dns.Msg) {
		u.queries.Add(1)
		m := new(dns.Msg)
		m.SetReply(r)
		m.RecursionAvailable = true
		name := strings.ToLower(r.Question[0].Name)
		switch {
		case strings.HasPrefix(name, "slow."):
			time.Sleep(300 * time.Millisecond)
			fallthrough
		case strings.HasSuffix(name, "example.net.") || strings.HasSuffix(name, "corp.test."):
			if r.Question[0].Qtype == dns.TypeA {
				rr, _ := dns.NewRR(r.Question[0].Name + " 300 IN A 198.51.100.1")
				m.Answer = append(m.Answer, rr)
			}
		case strings.HasPrefix(name, "nx."):
			m.Rcode = dns.RcodeNameError
			soa, _ := dns.NewRR("example.org. 3600 IN SOA ns. host. 1 2 3 4 60")
			m.Ns = append(m.Ns, soa)
		default:
			m.Rcode = dns.RcodeServerFailure
		}
		_ = w.WriteMsg(m)
	})}
	go func() { _ = u.srv.ActivateAndServe() }()
	select {
	case <-started:
	case <-time.After(5 * time.Second):
		t.Fatal("upstream did not start")
	}
	t.Cleanup(func() { _ = u.srv.Shutdown() })
	return u
}

// testForwarder forwards to the loopback upstream; down makes it fail.
type testForwarder struct {
	addr   string
	down   atomic.Bool
	groups chan string
}

func (f *testForwarder) Forward(ctx context.Context, group string, req *dns.Msg, client netip.Addr) (*dns.Msg, string, error) {
	if f.groups != nil {
		select {
		case f.groups <- group:
		default:
		}
	}
	if f.down.Load() {
		return nil, "", errors.New("upstream down")
	}
	c := &dns.Client{Net: "udp", Timeout: 2 * time.Second}
	resp, _, err := c.ExchangeContext(ctx, req, f.addr)
	return resp, f.addr, err
}

type suffixRouter struct{ suffix, group string }

func (r suffixRouter) Route(qname string) (string, bool) {
	if strings.HasSuffix(qname, r.suffix) {
		return r.group, true
	}
	return "", false
}

// fakeClock is a settable clock for the cache.
type fakeClock struct{ ns atomic.Int64 }

func newFakeClock() *fakeClock {
	c := &fakeClock{}
	c.ns.Store(compileTime.UnixNano())
	return c
}
func (c *fakeClock) Now() time.Time          { return time.Unix(0, c.ns.Load()) }
func (c *fakeClock) Advance(d time.Duration) { c.ns.Add(int64(d)) }

func testConfig() Config {
	cc := cache.DefaultConfig()
	cc.MaxEntries = 1000
	return Config{
		Node:      "node-a",
		Listeners: []ListenerConfig{{Address: "127.0.0.1:0"}},
		Sockets:   2,
		Cache:     cc,
	}
}

// startServer starts a server on loopback and stops it when the test ends.
func startServer(t testing.TB, cfg Config, snap *Snapshot) *Server {
	t.Helper()
	return startServerWith(t, cfg, Options{}, snap)
}

// startServerWith is startServer with opts (a query logger, ...).
func startServerWith(t testing.TB, cfg Config, opts Options, snap *Snapshot) *Server {
	t.Helper()
	return startServerIn(t, cfg, opts, snap, func(start func()) { start() })
}

// startServerIn is startServerWith with the listeners opened by in, which
// runs start where the sockets must be made (a network namespace's
// thread); the server's goroutines run anywhere.
func startServerIn(t testing.TB, cfg Config, opts Options, snap *Snapshot, in func(start func())) *Server {
	t.Helper()
	s, err := New(cfg, opts)
	if err != nil {
		t.Fatal(err)
	}
	if snap != nil {
		s.Swap(snap)
	}
	in(func() { err = s.Start(context.Background()) })
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
		defer cancel()
		if err := s.Shutdown(ctx); err != nil {
			t.Errorf("shutdown: %v", err)
		}
	})
	return s
}

func exchange(t testing.TB, s *Server, proto string, m *dns.Msg) *dns.Msg {
	t.Helper()
	addr := s.UDPAddrs()[0].String()
	if proto == "tcp" {
		addr = s.TCPAddrs()[0].String()
	}
	c := &dns.Client{Net: proto, Timeout: 3 * time.Second, UDPSize: 65535}
	r, _, err := c.Exchange(m, addr)
	if err != nil {
		t.Fatalf("%s %s: %v", proto, m.Question[0].Name, err)
	}
	return r
}

func query(name string, qtype uint16) *dns.Msg {
	m := new(dns.Msg)
	m.SetQuestion(name, qtype)
	return m
}

func cacheFlags(f uint8) cache.Flags { return cache.Flags(f) }

// udpAllocsPerQuery queries www.example.com. A from a socket connected to
// the UDP listener at to, in rounds of 8 writes then 8 reads of prebuilt
// bytes (allocation-free on the client's side, so the process-wide count is
// the server's), and returns the heap allocations per query over 4000
// queries after 800 that warm the pools.
func udpAllocsPerQuery(t *testing.T, to netip.AddrPort) float64 {
	t.Helper()
	c, err := net.DialUDP("udp", nil, net.UDPAddrFromAddrPort(to))
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	pkt, _ := query("www.example.com.", dns.TypeA).Pack()
	buf := make([]byte, 1500)
	_ = c.SetReadDeadline(time.Now().Add(10 * time.Second))
	round := func(n int) {
		for range n / 8 {
			for range 8 {
				_, _ = c.Write(pkt)
			}
			for range 8 {
				if _, err := c.Read(buf); err != nil {
					t.Fatal(err)
				}
			}
		}
	}
	round(800) // warm the pools
	const n = 4000
	return testing.AllocsPerRun(1, func() { round(n) }) / n
}

// udpSock is one listening UDP socket of a server, of either kind (served
// through the Go poller, or a rawUDP outside it).
type udpSock struct {
	rc    syscall.RawConn
	local netip.AddrPort
	pkt   bool // answers carry their source (wildcard socket)
}

func udpSockets(t *testing.T, s *Server) []udpSock {
	t.Helper()
	s.mu.Lock()
	defer s.mu.Unlock()
	var out []udpSock
	for _, u := range s.rawUDP {
		out = append(out, udpSock{rc: u, local: u.local, pkt: u.pkt})
	}
	for _, c := range s.udp {
		rc, err := c.SyscallConn()
		if err != nil {
			t.Fatal(err)
		}
		out = append(out, udpSock{rc: rc, local: c.LocalAddr().(*net.UDPAddr).AddrPort(), pkt: wantsPktInfo(c)})
	}
	return out
}

// resolverFor is an upstream resolver whose default group (and bootstrap)
// is the one server at addr, closed when the test ends.
func resolverFor(tb testing.TB, addr string) *upstream.Resolver {
	tb.Helper()
	ucfg := upstream.DefaultConfig()
	ucfg.Groups = map[string]upstream.GroupConfig{upstream.DefaultGroup: {Servers: []string{addr}}}
	ucfg.Bootstrap = []string{addr}
	return newResolver(tb, ucfg)
}

// newResolver is an upstream resolver of ucfg, closed when the test ends.
func newResolver(tb testing.TB, ucfg upstream.Config) *upstream.Resolver {
	tb.Helper()
	res, err := upstream.New(ucfg, slog.New(slog.DiscardHandler), nil)
	if err != nil {
		tb.Fatal(err)
	}
	tb.Cleanup(func() { _ = res.Close() })
	return res
}
