package dataplane

import (
	"encoding/hex"
	"flag"
	"net/netip"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/miekg/dns"

	"github.com/svcdns/svc/dataplane/wire"
)

var update = flag.Bool("update", false, "rewrite golden files")

type goldenCase struct {
	name  string
	qname string
	qtype uint16
	edns  uint16 // 0: no OPT
	do    bool
	cd    bool
	opts  []dns.EDNS0 // EDNS options (edns > 0)
	tr    Transport   // TransportUDP unless set
	peer  string      // the client's address; goldenClient unless set
}

// goldenClient is the golden servers' listeners.ecsClientFrom forwarder.
const goldenClient = "192.0.2.9:5353"

func (c goldenCase) client() netip.AddrPort {
	if c.peer != "" {
		return netip.MustParseAddrPort(c.peer)
	}
	return netip.MustParseAddrPort(goldenClient)
}

var goldenCases = []goldenCase{
	{name: "auth-a", qname: "www.example.com.", qtype: dns.TypeA},
	{name: "auth-a-mixed-case", qname: "wWw.EXAMPLE.com.", qtype: dns.TypeA},
	{name: "auth-aaaa-edns", qname: "www.example.com.", qtype: dns.TypeAAAA, edns: 1232},
	{name: "auth-a-edns-do", qname: "www.example.com.", qtype: dns.TypeA, edns: 4096, do: true},
	{name: "auth-mx-additional", qname: "mail.example.com.", qtype: dns.TypeMX, edns: 1232},
	{name: "auth-cname", qname: "alias.example.com.", qtype: dns.TypeA},
	{name: "auth-nodata", qname: "www.example.com.", qtype: dns.TypeTXT},
	{name: "auth-nxdomain", qname: "missing.example.com.", qtype: dns.TypeA, edns: 512},
	{name: "auth-truncated", qname: "big.example.com.", qtype: dns.TypeTXT},
	{name: "auth-truncated-edns", qname: "huge.example.com.", qtype: dns.TypeTXT, edns: 4096},
	{name: "cache-a", qname: "cached.example.net.", qtype: dns.TypeA},
	{name: "cache-a-case-edns", qname: "CACHED.example.net.", qtype: dns.TypeA, edns: 1232},
	{name: "cache-nxdomain", qname: "nx.example.net.", qtype: dns.TypeA, edns: 1232},
	{name: "cache-cd", qname: "cached.example.net.", qtype: dns.TypeA, cd: true},
	{name: "health", qname: "health.service.internal.", qtype: dns.TypeTXT},
	{name: "refused-no-upstream", qname: "other.example.org.", qtype: dns.TypeA},
	// Client cookies and padding stay on the fast path; a padded query over
	// an encrypted transport gets a padded answer, over UDP not.
	{name: "auth-a-cookie", qname: "www.example.com.", qtype: dns.TypeA, edns: 1232, opts: []dns.EDNS0{cookie()}},
	{name: "cache-a-cookie-padding-dot", qname: "cached.example.net.", qtype: dns.TypeA, edns: 1232, opts: []dns.EDNS0{cookie(), padding()}, tr: TransportDoT},
	{name: "auth-mx-padding-doh", qname: "mail.example.com.", qtype: dns.TypeMX, edns: 1232, opts: []dns.EDNS0{padding()}, tr: TransportDoH},
	{name: "auth-a-padding-udp", qname: "www.example.com.", qtype: dns.TypeA, edns: 1232, opts: []dns.EDNS0{padding()}},
	{name: "auth-a-nsid", qname: "www.example.com.", qtype: dns.TypeA, edns: 1232, opts: []dns.EDNS0{&dns.EDNS0_NSID{Code: dns.EDNS0NSID}}},
	// edns-tcp-keepalive (RFC 7828): answered with the idle timeout over
	// TCP and DoT (before padding), ignored elsewhere; a TIMEOUT from a
	// client is a FORMERR over TCP and ignored over UDP.
	{name: "auth-a-keepalive-tcp", qname: "www.example.com.", qtype: dns.TypeA, edns: 1232, opts: []dns.EDNS0{keepalive(0)}, tr: TransportTCP},
	{name: "cache-a-keepalive-padding-dot", qname: "cached.example.net.", qtype: dns.TypeA, edns: 1232, opts: []dns.EDNS0{keepalive(0), padding()}, tr: TransportDoT},
	{name: "auth-a-keepalive-udp", qname: "www.example.com.", qtype: dns.TypeA, edns: 1232, opts: []dns.EDNS0{keepalive(0)}},
	{name: "auth-a-keepalive-doh", qname: "www.example.com.", qtype: dns.TypeA, edns: 1232, opts: []dns.EDNS0{keepalive(0)}, tr: TransportDoH},
	{name: "auth-a-keepalive-timeout-tcp", qname: "www.example.com.", qtype: dns.TypeA, edns: 1232, opts: []dns.EDNS0{keepalive(50)}, tr: TransportTCP},
	{name: "auth-a-keepalive-timeout-udp", qname: "www.example.com.", qtype: dns.TypeA, edns: 1232, opts: []dns.EDNS0{keepalive(50)}},
	// EDNS Client Subnet (RFC 7871) stays on the fast path and is echoed:
	// scope = source prefix when a trusted forwarder's option named the
	// client, 0 when it was not used (short prefix, untrusted peer);
	// malformed is FORMERR.
	{name: "auth-a-ecs-trusted", qname: "www.example.com.", qtype: dns.TypeA, edns: 1232, opts: []dns.EDNS0{ecs("127.0.0.2/32")}},
	{name: "cache-a-ecs6-trusted", qname: "cached.example.net.", qtype: dns.TypeA, edns: 1232, opts: []dns.EDNS0{ecs("2001:db8::7/128")}},
	{name: "auth-a-ecs-short-trusted", qname: "www.example.com.", qtype: dns.TypeA, edns: 1232, opts: []dns.EDNS0{ecs("10.1.2.0/24")}},
	{name: "auth-a-ecs-untrusted", qname: "www.example.com.", qtype: dns.TypeA, edns: 1232, opts: []dns.EDNS0{ecs("127.0.0.2/32")}, peer: "198.51.100.1:5353"},
	{name: "auth-a-ecs-malformed", qname: "www.example.com.", qtype: dns.TypeA, edns: 1232, opts: []dns.EDNS0{&dns.EDNS0_LOCAL{Code: dns.EDNS0SUBNET, Data: []byte{0, 1, 24, 0, 10, 1, 2, 3}}}},
	{name: "auth-a-ecs-cookie-padding-dot", qname: "www.example.com.", qtype: dns.TypeA, edns: 1232, opts: []dns.EDNS0{cookie(), ecs("127.0.0.2/32"), padding()}, tr: TransportDoT},
	{name: "auth-a-ecs-nsid", qname: "www.example.com.", qtype: dns.TypeA, edns: 1232, opts: []dns.EDNS0{&dns.EDNS0_NSID{Code: dns.EDNS0NSID}, ecs("127.0.0.2/32")}},
}

// ecs is an EDNS Client Subnet option for prefix, as miekg/dns (and so
// CoreDNS's rewrite plugin) builds it.
func ecs(prefix string) dns.EDNS0 {
	p := netip.MustParsePrefix(prefix)
	family := uint16(1)
	if p.Addr().Is6() {
		family = 2
	}
	return &dns.EDNS0_SUBNET{Code: dns.EDNS0SUBNET, Family: family, SourceNetmask: uint8(p.Bits()), Address: p.Addr().AsSlice()}
}

func keepalive(timeout uint16) dns.EDNS0 {
	return &dns.EDNS0_TCP_KEEPALIVE{Code: dns.EDNS0TCPKEEPALIVE, Timeout: timeout}
}

func cookie() dns.EDNS0 { return &dns.EDNS0_COOKIE{Code: dns.EDNS0COOKIE, Cookie: "0102030405060708"} }
func padding() dns.EDNS0 {
	return &dns.EDNS0_PADDING{Padding: make([]byte, 20)}
}

func (c goldenCase) packet(t testing.TB) []byte {
	m := query(c.qname, c.qtype)
	m.Id = 0x1234
	m.CheckingDisabled = c.cd
	if c.edns > 0 {
		m.SetEdns0(c.edns, c.do)
		o := m.IsEdns0()
		o.Option = append(o.Option, c.opts...)
	}
	return pack(t, m)
}

func mustRR(t testing.TB, s string) dns.RR {
	rr, err := dns.NewRR(s)
	if err != nil {
		t.Fatal(err)
	}
	return rr
}

// goldenServers returns a fast-path and a slow-path server over the same
// snapshot, cache contents and clock.
func goldenServers(t testing.TB) (fast, slow *Server) {
	clock := newFakeClock()
	snap := NewSnapshot(SnapshotInput{Authority: testTable(t)})
	mk := func(disable bool) *Server {
		cfg := testConfig()
		cfg.Cache.Now = clock.Now
		cfg.DisableFastPath = disable
		cfg.ECSClientFrom = []netip.Prefix{netip.MustParsePrefix(goldenClient[:strings.IndexByte(goldenClient, ':')] + "/32")}
		s, err := New(cfg, Options{})
		if err != nil {
			t.Fatal(err)
		}
		s.Swap(snap)
		c := s.cache.Load()
		pos := &dns.Msg{Answer: []dns.RR{mustRR(t, "cached.example.net. 300 IN CNAME a.cached.example.net."), mustRR(t, "a.cached.example.net. 120 IN A 198.51.100.7")}}
		neg := &dns.Msg{MsgHdr: dns.MsgHdr{Rcode: dns.RcodeNameError}, Ns: []dns.RR{mustRR(t, "example.net. 600 IN SOA ns.example.net. h.example.net. 1 2 3 4 90")}}
		for _, flags := range []uint8{0, 2} {
			name, _ := packName("cached.example.net.")
			if err := c.Put(name, dns.TypeA, dns.ClassINET, cacheFlags(flags), pos, clock.Now()); err != nil {
				t.Fatal(err)
			}
		}
		name, _ := packName("nx.example.net.")
		if err := c.Put(name, dns.TypeA, dns.ClassINET, 0, neg, clock.Now()); err != nil {
			t.Fatal(err)
		}
		return s
	}
	fast, slow = mk(false), mk(true)
	clock.Advance(7_500_000_000) // 7.5s in the cache: TTLs drop by 7
	return fast, slow
}

func TestGoldenFastSlowIdentical(t *testing.T) {
	fast, slow := goldenServers(t)
	for _, tc := range goldenCases {
		t.Run(tc.name, func(t *testing.T) {
			pkt := tc.packet(t)
			a, ok1 := fast.ServeWire(pkt, tc.client(), tc.tr, nil)
			b, ok2 := slow.ServeWire(pkt, tc.client(), tc.tr, nil)
			if !ok1 || !ok2 {
				t.Fatalf("dropped: fast %v slow %v", ok1, ok2)
			}
			if string(a) != string(b) {
				ma, mb := new(dns.Msg), new(dns.Msg)
				_ = ma.Unpack(a)
				_ = mb.Unpack(b)
				t.Fatalf("fast and slow differ\nfast %x\n%v\nslow %x\n%v", a, ma, b, mb)
			}
			if padded := len(tc.opts) > 0 && tc.opts[len(tc.opts)-1].Option() == dns.EDNS0PADDING && tc.tr.Encrypted(); padded != (len(a)%wire.PadBlock == 0) {
				t.Errorf("answer of %d bytes; padded to %d wanted: %v", len(a), wire.PadBlock, padded)
			}
			path := filepath.Join("testdata", "golden", tc.name+".hex")
			if *update {
				if err := os.MkdirAll(filepath.Dir(path), 0o755); err != nil {
					t.Fatal(err)
				}
				if err := os.WriteFile(path, []byte(hex.EncodeToString(a)+"\n"), 0o644); err != nil {
					t.Fatal(err)
				}
				return
			}
			want, err := os.ReadFile(path)
			if err != nil {
				t.Fatalf("%v (run with -update)", err)
			}
			if got := hex.EncodeToString(a); got != strings.TrimSpace(string(want)) {
				m := new(dns.Msg)
				_ = m.Unpack(a)
				t.Fatalf("answer differs from %s:\n got %s\nwant %s\n%v", path, got, want, m)
			}
		})
	}
}

// TestKeepaliveAnswers checks what the keepalive golden cases hold: the
// idle timeout in 100 ms units over TCP (10s) and DoT (30s), nothing over
// UDP and DoH, FORMERR for a client's TIMEOUT over TCP only.
func TestKeepaliveAnswers(t *testing.T) {
	fast, _ := goldenServers(t)
	client := netip.MustParseAddrPort("192.0.2.9:5353")
	want := map[string]struct {
		rcode   int
		timeout int // -1: no option
	}{
		"auth-a-keepalive-tcp":          {dns.RcodeSuccess, 100},
		"cache-a-keepalive-padding-dot": {dns.RcodeSuccess, 300},
		"auth-a-keepalive-udp":          {dns.RcodeSuccess, -1},
		"auth-a-keepalive-doh":          {dns.RcodeSuccess, -1},
		"auth-a-keepalive-timeout-tcp":  {dns.RcodeFormatError, -1},
		"auth-a-keepalive-timeout-udp":  {dns.RcodeSuccess, -1},
	}
	for _, tc := range goldenCases {
		w, ok := want[tc.name]
		if !ok {
			continue
		}
		t.Run(tc.name, func(t *testing.T) {
			out, _ := fast.ServeWire(tc.packet(t), client, tc.tr, nil)
			m := new(dns.Msg)
			if err := m.Unpack(out); err != nil {
				t.Fatal(err)
			}
			got := -1
			if opt := m.IsEdns0(); opt != nil {
				for _, o := range opt.Option {
					if k, ok := o.(*dns.EDNS0_TCP_KEEPALIVE); ok {
						got = int(k.Timeout)
					}
				}
			}
			if m.Rcode != w.rcode || got != w.timeout {
				t.Fatalf("rcode %s, keepalive %d; want %s, %d\n%v", dns.RcodeToString[m.Rcode], got, dns.RcodeToString[w.rcode], w.timeout, m)
			}
		})
	}
}

// TestECSAnswers checks what the ECS golden cases hold: the option echoed
// with the query's family, prefix and address, scope = source prefix for
// a trusted forwarder's full-length option and 0 otherwise; FORMERR
// without an option for a malformed one.
func TestECSAnswers(t *testing.T) {
	fast, _ := goldenServers(t)
	want := map[string]struct {
		rcode  int
		subnet string // "" for no option
		scope  uint8
	}{
		"auth-a-ecs-trusted":            {dns.RcodeSuccess, "127.0.0.2/32", 32},
		"cache-a-ecs6-trusted":          {dns.RcodeSuccess, "2001:db8::7/128", 128},
		"auth-a-ecs-short-trusted":      {dns.RcodeSuccess, "10.1.2.0/24", 0},
		"auth-a-ecs-untrusted":          {dns.RcodeSuccess, "127.0.0.2/32", 0},
		"auth-a-ecs-malformed":          {dns.RcodeFormatError, "", 0},
		"auth-a-ecs-cookie-padding-dot": {dns.RcodeSuccess, "127.0.0.2/32", 32},
		"auth-a-ecs-nsid":               {dns.RcodeSuccess, "127.0.0.2/32", 32},
	}
	seen := 0
	for _, tc := range goldenCases {
		w, ok := want[tc.name]
		if !ok {
			continue
		}
		seen++
		t.Run(tc.name, func(t *testing.T) {
			out, _ := fast.ServeWire(tc.packet(t), tc.client(), tc.tr, nil)
			m := new(dns.Msg)
			if err := m.Unpack(out); err != nil {
				t.Fatal(err)
			}
			got, scope := "", uint8(0)
			if e := echoedECS(m); e != nil {
				a, _ := netip.AddrFromSlice(e.Address)
				got, scope = netip.PrefixFrom(a.Unmap(), int(e.SourceNetmask)).String(), e.SourceScope
			}
			if m.Rcode != w.rcode || got != w.subnet || scope != w.scope {
				t.Fatalf("rcode %s, ECS %q scope %d; want %s, %q scope %d\n%v", dns.RcodeToString[m.Rcode], got, scope, dns.RcodeToString[w.rcode], w.subnet, w.scope, m)
			}
		})
	}
	if seen != len(want) {
		t.Fatalf("%d of %d cases found", seen, len(want))
	}
}
