package upstream

import (
	"context"
	"net"
	"net/netip"
	"sync"
	"testing"
	"time"

	"github.com/miekg/dns"
)

// ecsRecorder answers and remembers the ECS option it received, echoing it
// back with a scope as RFC 7871 servers do.
type ecsRecorder struct {
	mu     sync.Mutex
	got    *dns.EDNS0_SUBNET
	hadOPT bool
}

func (e *ecsRecorder) respond(req *dns.Msg) *dns.Msg {
	m := answerA("192.0.2.30")(req)
	e.mu.Lock()
	defer e.mu.Unlock()
	e.got, e.hadOPT = nil, false
	if opt := req.IsEdns0(); opt != nil {
		e.hadOPT = true
		ropt := &dns.OPT{Hdr: dns.RR_Header{Name: ".", Rrtype: dns.TypeOPT}}
		ropt.SetUDPSize(1232)
		for _, o := range opt.Option {
			if s, ok := o.(*dns.EDNS0_SUBNET); ok {
				e.got = s
				echo := *s
				echo.SourceScope = s.SourceNetmask
				ropt.Option = append(ropt.Option, &echo)
			}
		}
		m.Extra = append(m.Extra, ropt)
	}
	return m
}

func (e *ecsRecorder) seen() (subnet string, hadOPT bool) {
	e.mu.Lock()
	defer e.mu.Unlock()
	if e.got == nil {
		return "", e.hadOPT
	}
	return netip.PrefixFrom(netip.MustParseAddr(e.got.Address.String()).Unmap(), int(e.got.SourceNetmask)).String(), e.hadOPT
}

func withECS(m *dns.Msg, subnet string) *dns.Msg {
	p := netip.MustParsePrefix(subnet)
	fam := uint16(1)
	if p.Addr().Is6() {
		fam = 2
	}
	if m.IsEdns0() == nil {
		m.SetEdns0(1232, false)
	}
	opt := m.IsEdns0()
	opt.Option = append(opt.Option, &dns.EDNS0_SUBNET{
		Code: dns.EDNS0SUBNET, Family: fam, SourceNetmask: uint8(p.Bits()), Address: net.IP(p.Addr().AsSlice()),
	})
	return m
}

func respECS(m *dns.Msg) bool {
	if opt := m.IsEdns0(); opt != nil {
		for _, o := range opt.Option {
			if o.Option() == dns.EDNS0SUBNET {
				return true
			}
		}
	}
	return false
}

func TestECSModes(t *testing.T) {
	rec := &ecsRecorder{}
	srv := startUDP(t, rec.respond)
	cases := []struct {
		name       string
		ecs        ECSConfig
		clientECS  string // subnet the client sends; "" none
		clientOPT  bool
		client     string
		wantSent   string // subnet the upstream sees; "" none
		wantOPT    bool   // upstream saw an OPT record
		wantRespOP bool   // client's answer has an OPT record
		wantRespEC bool   // client's answer has ECS
	}{
		{"strip removes client ECS", ECSConfig{Mode: ECSStrip, IPv4Prefix: 24, IPv6Prefix: 56}, "10.1.2.0/24", true, "192.0.2.77", "", true, true, false},
		{"strip without OPT", ECSConfig{Mode: ECSStrip}, "", false, "192.0.2.77", "", false, false, false},
		{"default mode strips", ECSConfig{IPv4Prefix: 24}, "10.1.2.0/24", true, "192.0.2.77", "", true, true, false},
		{"forward passes client ECS", ECSConfig{Mode: ECSForward}, "10.1.2.0/24", true, "192.0.2.77", "10.1.2.0/24", true, true, true},
		{"forward without ECS", ECSConfig{Mode: ECSForward}, "", false, "192.0.2.77", "", false, false, false},
		{"add v4 without OPT", ECSConfig{Mode: ECSAdd, IPv4Prefix: 24, IPv6Prefix: 56}, "", false, "192.0.2.77", "192.0.2.0/24", true, false, false},
		{"add v4 prefix 16", ECSConfig{Mode: ECSAdd, IPv4Prefix: 16, IPv6Prefix: 56}, "", true, "198.51.100.9", "198.51.0.0/16", true, true, false},
		{"add v4-mapped client", ECSConfig{Mode: ECSAdd, IPv4Prefix: 24, IPv6Prefix: 56}, "", false, "::ffff:192.0.2.77", "192.0.2.0/24", true, false, false},
		{"add v6", ECSConfig{Mode: ECSAdd, IPv4Prefix: 24, IPv6Prefix: 56}, "", false, "2001:db8:1:2:3::1", "2001:db8:1::/56", true, false, false},
		{"add replaces client ECS", ECSConfig{Mode: ECSAdd, IPv4Prefix: 24, IPv6Prefix: 56}, "10.9.9.0/24", true, "192.0.2.77", "192.0.2.0/24", true, true, false},
		{"add prefix 0", ECSConfig{Mode: ECSAdd, IPv4Prefix: 0, IPv6Prefix: 0}, "", false, "192.0.2.77", "0.0.0.0/0", true, false, false},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			r := newResolver(t, Config{
				Groups: map[string]GroupConfig{DefaultGroup: {Servers: []string{srv}, Strategy: Strict, Timeout: time.Second}},
				ECS:    tc.ecs,
			})
			req := query("ecs.example", dns.TypeA)
			if tc.clientOPT {
				req.SetEdns0(1232, false)
			}
			if tc.clientECS != "" {
				req = withECS(req, tc.clientECS)
			}
			before := req.Copy()
			resp, _, err := r.Forward(context.Background(), "", req, netip.MustParseAddr(tc.client))
			if err != nil {
				t.Fatal(err)
			}
			sent, hadOPT := rec.seen()
			if sent != tc.wantSent || hadOPT != tc.wantOPT {
				t.Errorf("upstream saw ECS %q (OPT %v), want %q (OPT %v)", sent, hadOPT, tc.wantSent, tc.wantOPT)
			}
			if got := resp.IsEdns0() != nil; got != tc.wantRespOP {
				t.Errorf("answer has OPT %v, want %v", got, tc.wantRespOP)
			}
			if got := respECS(resp); got != tc.wantRespEC {
				t.Errorf("answer has ECS %v, want %v", got, tc.wantRespEC)
			}
			if req.String() != before.String() {
				t.Errorf("Forward modified the client's query:\n%s\nwas\n%s", req, before)
			}
		})
	}
}
