package dataplane

import (
	"bytes"
	"net/netip"
	"testing"
	"time"

	"github.com/miekg/dns"
)

// nameBlocker blocks the names of its map with their decision; it stands
// in for dataplane/policy (which imports this package) so that the test
// is about how a block answer is encoded.
type nameBlocker map[string]Decision

func (b nameBlocker) DecideInto(qname []byte, _ uint16, _ ClientInfo, d *Decision) {
	*d = Decision{}
	if bd, ok := b[string(qname)]; ok {
		*d = bd
		d.Verdict = VerdictBlock
	}
}

func wireName(t testing.TB, name string) string {
	b, err := packName(name)
	if err != nil {
		t.Fatal(err)
	}
	return string(b)
}

// testBlocker blocks zero.ads., nx.ads., refused.ads., custom.ads.
// (192.0.2.66 / 2001:db8::66, TTL 60 s), policy.ads. (EDE 17 with a text)
// rule.ads. (EDE text joined from a prefix and the rule, as
// dataplane/policy gives it) and adblock.ads. (the same with an adblock
// rule, given as its name and the constant text around it).
func testBlocker(t testing.TB) nameBlocker {
	return nameBlocker{
		wireName(t, "zero.ads."):    {Mode: BlockZeroIP, List: "ads"},
		wireName(t, "nx.ads."):      {Mode: BlockNXDomain, List: "ads"},
		wireName(t, "refused.ads."): {Mode: BlockRefused, List: "ads"},
		wireName(t, "custom.ads."): {Mode: BlockCustomIP, TTL: time.Minute,
			IPv4: netip.MustParseAddr("192.0.2.66"), IPv6: netip.MustParseAddr("2001:db8::66")},
		wireName(t, "policy.ads."): {Mode: BlockNXDomain, EDECode: dns.ExtendedErrorCodeFiltered, EDEText: "policy kids"},
		wireName(t, "rule.ads."): {Mode: BlockZeroIP, List: "default/ads", Rule: "rule.ads",
			EDEText: "policy (global) list default/ads", EDERule: true},
		wireName(t, "adblock.ads."): {Mode: BlockNXDomain, List: "default/ads", RulePre: "||", Rule: "adblock.ads", RulePost: "^",
			EDEText: "policy (global) list default/ads", EDERule: true},
	}
}

// blockServers are a fast-path and a slow-path server blocking the names
// of testBlocker, with the cache of goldenServers.
func blockServers(t testing.TB) (fast, slow *Server) {
	bl := testBlocker(t)
	fast, slow = goldenServers(t)
	for _, s := range []*Server{fast, slow} {
		s.Swap(NewSnapshot(SnapshotInput{Authority: testTable(t), Blocker: bl, BlockingEnabled: true}))
	}
	return fast, slow
}

var blockCases = []goldenCase{
	{name: "block-zero-a", qname: "zero.ads.", qtype: dns.TypeA},
	{name: "block-zero-aaaa-edns", qname: "zero.ads.", qtype: dns.TypeAAAA, edns: 1232},
	{name: "block-zero-mx-nodata", qname: "zero.ads.", qtype: dns.TypeMX, edns: 1232},
	{name: "block-zero-a-mixed-case-do", qname: "ZeRo.ADS.", qtype: dns.TypeA, edns: 4096, do: true},
	{name: "block-nx", qname: "nx.ads.", qtype: dns.TypeA, edns: 1232},
	{name: "block-nx-no-edns", qname: "nx.ads.", qtype: dns.TypeA},
	{name: "block-refused", qname: "refused.ads.", qtype: dns.TypeA, edns: 1232},
	{name: "block-custom-a", qname: "custom.ads.", qtype: dns.TypeA, edns: 1232},
	{name: "block-custom-aaaa", qname: "custom.ads.", qtype: dns.TypeAAAA},
	{name: "block-policy-ede-text", qname: "policy.ads.", qtype: dns.TypeA, edns: 1232},
	{name: "block-rule-ede-text", qname: "rule.ads.", qtype: dns.TypeA, edns: 1232},
	{name: "block-rule-no-edns", qname: "rule.ads.", qtype: dns.TypeA},
	{name: "block-adblock-rule-ede-text", qname: "adblock.ads.", qtype: dns.TypeA, edns: 1232},
	{name: "block-cookie", qname: "zero.ads.", qtype: dns.TypeA, edns: 1232, opts: []dns.EDNS0{cookie()}},
	{name: "block-ecs-trusted", qname: "zero.ads.", qtype: dns.TypeA, edns: 1232, opts: []dns.EDNS0{ecs("127.0.0.2/32")}},
	{name: "block-padding-dot", qname: "custom.ads.", qtype: dns.TypeAAAA, edns: 1232, opts: []dns.EDNS0{cookie(), padding()}, tr: TransportDoT},
}

// TestBlockFastPath (issue #27 item 2): a blocked answer is made on the
// fast path, byte for byte the answer the slow path (dns.Msg, miekg/dns
// packing) makes, with 0 allocations, for every block mode, EDNS or not,
// EDE, ECS, cookies and padding.
func TestBlockFastPath(t *testing.T) {
	fast, slow := blockServers(t)
	for _, tc := range blockCases {
		pkt := tc.packet(t)
		client := netip.MustParseAddrPort("192.0.2.9:5353")
		if tc.peer != "" {
			client = tc.client()
		}
		tr := tc.tr
		f, ok1 := fast.ServeWire(pkt, client, tr, nil)
		g, ok2 := slow.ServeWire(pkt, client, tr, nil)
		if !ok1 || !ok2 {
			t.Fatalf("%s: no answer (fast %v, slow %v)", tc.name, ok1, ok2)
		}
		if !bytes.Equal(f, g) {
			fm, sm := new(dns.Msg), new(dns.Msg)
			_ = fm.Unpack(f)
			_ = sm.Unpack(g)
			t.Errorf("%s: fast and slow answers differ\nfast:\n%v\nslow:\n%v\nfast % x\nslow % x", tc.name, fm, sm, f, g)
			continue
		}
		m := new(dns.Msg)
		if err := m.Unpack(f); err != nil {
			t.Fatalf("%s: %v", tc.name, err)
		}
		if want, ok := map[string]string{
			"block-rule-ede-text":         "policy (global) list default/ads rule rule.ads",
			"block-adblock-rule-ede-text": "policy (global) list default/ads rule ||adblock.ads^",
		}[tc.name]; ok {
			if ede := findEDE(m); ede == nil || ede.ExtraText != want {
				t.Errorf("%s: EDE %v, want %q", tc.name, ede, want)
			}
		}
		if tc.qname == "custom.ads." && tc.qtype == dns.TypeA {
			if len(m.Answer) != 1 || m.Answer[0].(*dns.A).A.String() != "192.0.2.66" || m.Answer[0].Header().Ttl != 60 {
				t.Errorf("%s: answer %v, want 192.0.2.66 with TTL 60", tc.name, m.Answer)
			}
		}
		if raceEnabled {
			continue
		}
		out := make([]byte, 0, 4096)
		if a := testing.AllocsPerRun(200, func() { out, _ = fast.ServeWire(pkt, client, tr, out[:0]) }); a != 0 {
			t.Errorf("%s: %v allocations per blocked answer, want 0", tc.name, a)
		}
	}
}

// BenchmarkServeWireBlocked is a blocked answer (0.0.0.0) beside
// BenchmarkServeWireCacheHit: the block path at cache-hit cost.
func BenchmarkServeWireBlocked(b *testing.B) {
	fast, _ := blockServers(b)
	pkt := blockCases[0].packet(b)
	client := netip.MustParseAddrPort("192.0.2.9:5353")
	out := make([]byte, 0, 4096)
	b.ReportAllocs()
	for b.Loop() {
		out, _ = fast.ServeWire(pkt, client, TransportUDP, out[:0])
	}
}
