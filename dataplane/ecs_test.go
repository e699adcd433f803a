package dataplane

import (
	"context"
	"net/netip"
	"slices"
	"sync"
	"testing"
	"time"

	"github.com/miekg/dns"

	"github.com/svcdns/svc/dataplane/ratelimit"
)

// addrIdentifier puts clients in groups by exact address.
type addrIdentifier map[netip.Addr][]string

func (a addrIdentifier) Identify(addr netip.Addr, _ string) ClientInfo {
	return ClientInfo{Name: addr.String(), Groups: a[addr]}
}

// recLogger keeps every query record.
type recLogger struct {
	mu   sync.Mutex
	recs []QueryRecord
}

func (l *recLogger) Log(r QueryRecord) {
	l.mu.Lock()
	l.recs = append(l.recs, r)
	l.mu.Unlock()
}

func (l *recLogger) last(t *testing.T) QueryRecord {
	t.Helper()
	l.mu.Lock()
	defer l.mu.Unlock()
	if len(l.recs) == 0 {
		t.Fatal("nothing logged")
	}
	return l.recs[len(l.recs)-1]
}

// ecsQuery is a query for name carrying opts (ECS and others).
func ecsQuery(name string, opts ...dns.EDNS0) *dns.Msg {
	m := query(name, dns.TypeA)
	m.SetEdns0(1232, false)
	m.IsEdns0().Option = opts
	return m
}

// echoedECS is the ECS option of an answer, nil for none.
func echoedECS(m *dns.Msg) *dns.EDNS0_SUBNET {
	if o := m.IsEdns0(); o != nil {
		for _, x := range o.Option {
			if s, ok := x.(*dns.EDNS0_SUBNET); ok {
				return s
			}
		}
	}
	return nil
}

// TestECSClientIdentity: over UDP and TCP, on the fast path and the full
// parser, a listeners.ecsClientFrom peer's /32 or /128 ECS option is the
// client that identify, the query log and the answer's scope see; a
// shorter prefix, an untrusted peer and a server without the setting
// leave the peer as the client.
func TestECSClientIdentity(t *testing.T) {
	ids := addrIdentifier{netip.MustParseAddr("10.9.8.7"): {"kids"}, netip.MustParseAddr("2001:db8::7"): {"kids6"}}
	log := &recLogger{}
	mk := func(trusted ...string) *Server {
		cfg := testConfig()
		for _, p := range trusted {
			cfg.ECSClientFrom = append(cfg.ECSClientFrom, netip.MustParsePrefix(p))
		}
		s, err := New(cfg, Options{QueryLogger: log})
		if err != nil {
			t.Fatal(err)
		}
		s.Swap(NewSnapshot(SnapshotInput{Authority: testTable(t), Identifier: ids}))
		startAndStop(t, s)
		return s
	}
	trusting := mk("127.0.0.0/8")
	other := mk("192.0.2.0/24")
	plain := mk()
	nsid := &dns.EDNS0_NSID{Code: dns.EDNS0NSID} // sends the query to the full parser
	for _, tc := range []struct {
		name       string
		s          *Server
		opts       []dns.EDNS0
		client     string // the logged client address
		groups     []string
		scope      uint8
		wantEchoed bool
	}{
		{"trusted /32", trusting, []dns.EDNS0{ecs("10.9.8.7/32")}, "10.9.8.7", []string{"kids"}, 32, true},
		{"trusted /32 full parser", trusting, []dns.EDNS0{nsid, ecs("10.9.8.7/32")}, "10.9.8.7", []string{"kids"}, 32, true},
		{"trusted /128", trusting, []dns.EDNS0{ecs("2001:db8::7/128")}, "2001:db8::7", []string{"kids6"}, 128, true},
		{"trusted /24 is not a client", trusting, []dns.EDNS0{ecs("10.9.8.0/24")}, "127.0.0.1", nil, 0, true},
		{"untrusted peer", other, []dns.EDNS0{ecs("10.9.8.7/32")}, "127.0.0.1", nil, 0, true},
		{"setting off", plain, []dns.EDNS0{ecs("10.9.8.7/32")}, "127.0.0.1", nil, 0, true},
		{"trusted without ECS", trusting, nil, "127.0.0.1", nil, 0, false},
	} {
		for _, proto := range []string{"udp", "tcp"} {
			t.Run(tc.name+"/"+proto, func(t *testing.T) {
				r := exchange(t, tc.s, proto, ecsQuery("www.example.com.", tc.opts...))
				if r.Rcode != dns.RcodeSuccess || len(r.Answer) != 2 {
					t.Fatalf("answer %v", r)
				}
				e := echoedECS(r)
				if (e != nil) != tc.wantEchoed {
					t.Fatalf("ECS echoed %v, want %v: %v", e, tc.wantEchoed, r)
				}
				if e != nil && e.SourceScope != tc.scope {
					t.Errorf("scope %d, want %d", e.SourceScope, tc.scope)
				}
				rec := log.last(t)
				if rec.Client.Addr().String() != tc.client || !slices.Equal(rec.Groups, tc.groups) {
					t.Errorf("logged client %v groups %v, want %s %v", rec.Client, rec.Groups, tc.client, tc.groups)
				}
			})
		}
	}
}

// TestECSMalformedIsFormErr: RFC 7871 7.2.1, on both paths, from any peer.
func TestECSMalformedIsFormErr(t *testing.T) {
	s := startServer(t, testConfig(), NewSnapshot(SnapshotInput{Authority: testTable(t)}))
	bad := &dns.EDNS0_LOCAL{Code: dns.EDNS0SUBNET, Data: []byte{0, 1, 32, 0, 10, 9, 8}} // 3 octets for a /32
	for _, opts := range [][]dns.EDNS0{{bad}, {&dns.EDNS0_NSID{Code: dns.EDNS0NSID}, bad}, {ecs("10.9.8.7/32"), ecs("10.9.8.6/32")}} {
		r := exchange(t, s, "udp", ecsQuery("www.example.com.", opts...))
		if r.Rcode != dns.RcodeFormatError || echoedECS(r) != nil {
			t.Errorf("%v: got %v", opts, r)
		}
	}
}

// TestECSRateLimitsTheClient: behind a trusted forwarder, the UDP rate
// limit counts each client its ECS option names, not the forwarder: one
// client over its limit does not silence the others.
func TestECSRateLimitsTheClient(t *testing.T) {
	cfg := testConfig()
	cfg.ECSClientFrom = []netip.Prefix{netip.MustParsePrefix("127.0.0.1/32")}
	s := startServer(t, cfg, NewSnapshot(SnapshotInput{Authority: testTable(t)}))
	lim, err := ratelimit.New(ratelimit.Config{Enabled: true, IPv4: map[int]int{24: 0, 32: 600}, Slip: 100, LimitLoopback: true}, nil)
	if err != nil {
		t.Fatal(err)
	}
	s.SetRateLimiter(lim)
	limited := func(client string, n int) int {
		count := 0
		for range n {
			r := exchange(t, s, "udp", ecsQuery("www.example.com.", ecs(client)))
			if r.Truncated && len(r.Answer) == 0 {
				count++
			}
		}
		return count
	}
	// 600 a minute: a burst of 10, then one each 100 ms.
	if n := limited("10.0.0.1/32", 40); n < 10 {
		t.Fatalf("10.0.0.1: %d of 40 queries limited at 600 a minute", n)
	}
	if n := limited("10.0.0.2/32", 3); n != 0 {
		t.Fatalf("10.0.0.2 limited %d times for 10.0.0.1's queries: the forwarder is limited, not the client", n)
	}
}

// TestUpstreamRequestECS: the client's ECS option reaches the forwarder
// (which applies upstreams.ecs.mode) from the fast path as from the full
// parser.
func TestUpstreamRequestECS(t *testing.T) {
	fwd := &recordingForwarder{}
	s := startServer(t, testConfig(), NewSnapshot(SnapshotInput{Authority: testTable(t), Forwarder: fwd}))
	for i, tc := range []struct {
		opts []dns.EDNS0
		want []uint16
	}{
		{[]dns.EDNS0{cookie(), ecs("10.9.8.7/32")}, []uint16{dns.EDNS0SUBNET}},
		{[]dns.EDNS0{&dns.EDNS0_NSID{Code: dns.EDNS0NSID}, ecs("10.9.8.7/32")}, []uint16{dns.EDNS0NSID, dns.EDNS0SUBNET}},
	} {
		r := exchange(t, s, "udp", ecsQuery("miss"+string(rune('a'+i))+".example.org.", tc.opts...))
		if len(r.Answer) != 1 {
			t.Fatalf("case %d: %v", i, r)
		}
		fwd.mu.Lock()
		got := fwd.opts
		fwd.mu.Unlock()
		if !slices.Equal(got, tc.want) {
			t.Errorf("case %d: upstream saw options %v, want %v", i, got, tc.want)
		}
	}
}

// startAndStop starts s on loopback and shuts it down when the test ends.
func startAndStop(t *testing.T, s *Server) {
	t.Helper()
	if err := s.Start(context.Background()); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
		defer cancel()
		if err := s.Shutdown(ctx); err != nil {
			t.Errorf("shutdown: %v", err)
		}
	})
}
