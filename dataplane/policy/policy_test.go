package policy

import (
	"context"
	"net/netip"
	"strings"
	"testing"
	"time"

	"github.com/miekg/dns"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/svcdns/svc/api/v1alpha1"
	"github.com/svcdns/svc/dataplane"
	"github.com/svcdns/svc/dataplane/catalogue"
	"github.com/svcdns/svc/dataplane/safesearch"
)

func wireName(t testing.TB, name string) []byte {
	t.Helper()
	b := make([]byte, 256)
	n, err := dns.PackDomainName(dns.Fqdn(strings.ToLower(name)), b, 0, nil, false)
	if err != nil {
		t.Fatal(err)
	}
	return b[:n]
}

func group(name string, addrs, ids, names []string) v1alpha1.ClientGroup {
	return v1alpha1.ClientGroup{ObjectMeta: metav1.ObjectMeta{Namespace: "default", Name: name},
		Spec: v1alpha1.ClientGroupSpec{Addresses: addrs, ClientIDs: ids, Names: names}}
}

func pol(name string, prio int32, f func(*v1alpha1.PolicySpec)) v1alpha1.Policy {
	p := v1alpha1.Policy{ObjectMeta: metav1.ObjectMeta{Namespace: "default", Name: name}}
	p.Spec.Priority = prio
	if f != nil {
		f(&p.Spec)
	}
	return p
}

func list(t testing.TB, name, mode, response string, rules ...string) List {
	t.Helper()
	bl := &v1alpha1.BlockList{ObjectMeta: metav1.ObjectMeta{Namespace: "default", Name: name}}
	bl.Spec.Mode, bl.Spec.Response = mode, response
	if response == "customIP" {
		bl.Spec.CustomIP = &v1alpha1.CustomIP{V4: "192.0.2.99"}
	}
	src := v1alpha1.BlockListSource{Name: "main", Inline: rules}
	cs, err := ListCompiler{}.CompileSource(context.Background(), src, strings.NewReader(strings.Join(rules, "\n")))
	if err != nil {
		t.Fatal(err)
	}
	return List{Object: bl, Compiled: ListCompiler{}.NewList(bl, []CompiledSource{cs})}
}

func build(t testing.TB, in Input, now *time.Time) *Table {
	t.Helper()
	cat, err := catalogue.Builtin(context.Background(), 6)
	if err != nil {
		t.Fatal(err)
	}
	in.Catalogue, in.SafeSearch = cat, safesearch.New()
	in.Now = func() time.Time { return *now }
	tab, _ := Compile(context.Background(), in)
	return tab
}

func TestDecide(t *testing.T) {
	now := time.Date(2025, 6, 2, 12, 0, 0, 0, time.UTC) // a Monday
	kidsAddr := netip.MustParseAddr("10.0.0.5")
	in := Input{
		Groups: []v1alpha1.ClientGroup{group("kids", []string{"10.0.0.0/24"}, []string{"tablet"}, []string{"kid-laptop"})},
		// lists the policies name, as the upgrade leaves them (global: false)
		Lists: []List{
			notGlobal(list(t, "ads", "", "", "||ads.example^", "||youtube-ads.example^")),
			notGlobal(list(t, "custom", "", "customIP", "||custom.example^")),
			notGlobal(list(t, "ok", "allow", "", "||www.youtube.com^", "||fine.example^")),
			notGlobal(list(t, "nx", "", "nxdomain", "||nx.example^")),
		},
		Policies: []v1alpha1.Policy{
			pol("base", 0, func(s *v1alpha1.PolicySpec) {
				s.BlockListRefs = []string{"ads", "default/custom", "nx"}
			}),
			pol("kids", 10, func(s *v1alpha1.PolicySpec) {
				s.ClientGroupRefs = []string{"kids"}
				s.BlockListRefs = []string{"ads"}
				s.AllowListRefs = []string{"ok"}
				s.BlockedServices = []string{"tiktok", "fortnite", "nosuchservice"}
				s.BlockedCategories = []string{"video", "nosuchcategory"}
				s.AllowedServices = []string{"vimeo", "tiktok"}
				s.BlockMode = "nxdomain"
				s.BlockTTL = "1m"
				s.SafeSearch = true
				s.SafeSearchMode = "moderate"
				f := false
				s.QueryLog = &f
				s.UpstreamGroup = "family"
				s.Rewrites = []v1alpha1.Rewrite{{Name: "printer.lan", Targets: []string{"192.168.1.20"}},
					{Name: "*.corp.lan", CNAME: "gw.corp.example"}}
			}),
		},
		Settings: Settings{DefaultResponse: "zeroIP", BlockTTL: 5 * time.Minute, CustomIPv4: netip.MustParseAddr("192.0.2.1")},
	}
	tab := build(t, in, &now)
	kids := tab.Groups().Identify(kidsAddr, "")
	adult := tab.Groups().Identify(netip.MustParseAddr("10.0.1.5"), "")
	if len(kids.Groups) != 1 || kids.Groups[0] != "default/kids" || len(adult.Groups) != 0 {
		t.Fatalf("groups: kids %v adult %v", kids.Groups, adult.Groups)
	}
	cases := []struct {
		name    string
		client  dataplane.ClientInfo
		qname   string
		qtype   uint16
		verdict dataplane.Verdict
		mode    dataplane.BlockMode
		list    string
		rule    string
		ttl     time.Duration
		ipv4    string
	}{
		{"adult ads blocked zeroIP default", adult, "x.ads.example", dns.TypeA, dataplane.VerdictBlock, dataplane.BlockZeroIP, "default/ads", "||ads.example^", 5 * time.Minute, ""},
		{"adult list customIP", adult, "custom.example", dns.TypeA, dataplane.VerdictBlock, dataplane.BlockCustomIP, "default/custom", "||custom.example^", 5 * time.Minute, "192.0.2.99"},
		{"adult list nxdomain", adult, "nx.example", dns.TypeA, dataplane.VerdictBlock, dataplane.BlockNXDomain, "default/nx", "||nx.example^", 5 * time.Minute, ""},
		{"adult youtube passes", adult, "www.youtube.com", dns.TypeA, dataplane.VerdictPass, 0, "", "", 0, ""},
		{"kids policy mode wins", kids, "ads.example", dns.TypeA, dataplane.VerdictBlock, dataplane.BlockNXDomain, "default/ads", "||ads.example^", time.Minute, ""},
		{"kids blocked service", kids, "tiktok.com", dns.TypeA, dataplane.VerdictBlock, dataplane.BlockNXDomain, "service:tiktok", "||tiktok.com^", time.Minute, ""},
		{"kids required service", kids, "store.epicgames.com", dns.TypeA, dataplane.VerdictBlock, dataplane.BlockNXDomain, "service:epicgames", "||epicgames.com^", time.Minute, ""},
		{"kids category", kids, "netflix.com", dns.TypeA, dataplane.VerdictBlock, dataplane.BlockNXDomain, "service:netflix", "||netflix.com^", time.Minute, ""},
		{"kids allowed service exception", kids, "player.vimeo.com", dns.TypeA, dataplane.VerdictPass, 0, "", "", 0, ""},
		{"allow list beats services", kids, "fine.example", dns.TypeA, dataplane.VerdictAllow, 0, "default/ok", "", 0, ""},
		{"safe search still applies to an allowed name", kids, "www.youtube.com", dns.TypeA, dataplane.VerdictRewrite, 0, ListSafeSearch, "", 0, ""},
		{"a blocked service wins over safe search", kids, "m.youtube.com", dns.TypeA, dataplane.VerdictBlock, dataplane.BlockNXDomain, "service:youtube", "||youtube.com^", time.Minute, ""},
		{"safe search for what is not blocked", kids, "www.google.com", dns.TypeA, dataplane.VerdictRewrite, 0, ListSafeSearch, "", 0, ""},
		{"category blocks name the allow list lacks", kids, "youtube.com", dns.TypeA, dataplane.VerdictBlock, dataplane.BlockNXDomain, "service:youtube", "||youtube.com^", time.Minute, ""},
		{"rewrite A", kids, "printer.lan", dns.TypeA, dataplane.VerdictRewrite, 0, ListRewrite, "printer.lan", 0, ""},
		{"rewrite other type NODATA", kids, "printer.lan", dns.TypeAAAA, dataplane.VerdictRewrite, 0, ListRewrite, "printer.lan", 0, ""},
		{"wildcard rewrite", kids, "a.b.corp.lan", dns.TypeA, dataplane.VerdictRewrite, 0, ListRewrite, "*.corp.lan", 0, ""},
		{"wildcard not apex", kids, "corp.lan", dns.TypeA, dataplane.VerdictPass, 0, "", "", 0, ""},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			d := tab.Decide(wireName(t, tc.qname), tc.qtype, tc.client)
			if d.Verdict != tc.verdict || d.List != tc.list || d.RuleText() != tc.rule {
				t.Fatalf("decision %+v; want verdict %d list %q rule %q", d, tc.verdict, tc.list, tc.rule)
			}
			if tc.verdict == dataplane.VerdictBlock && (d.Mode != tc.mode || d.TTL != tc.ttl) {
				t.Fatalf("mode %d ttl %s; want %d %s", d.Mode, d.TTL, tc.mode, tc.ttl)
			}
			if tc.ipv4 != "" && d.IPv4.String() != tc.ipv4 {
				t.Fatalf("ipv4 %s want %s", d.IPv4, tc.ipv4)
			}
			isKids := len(tc.client.Groups) > 0
			if isKids && (d.Policy != "default/kids" || !d.NoLog || d.UpstreamGroup != "family") {
				t.Fatalf("kids decision %+v", d)
			}
			if !isKids && (d.Policy != "default/base" || d.NoLog) {
				t.Fatalf("adult decision %+v", d)
			}
		})
	}
	d := tab.Decide(wireName(t, "www.youtube.com"), dns.TypeA, kids)
	if c := d.Answer[0].(*dns.CNAME); c.Target != "restrictmoderate.youtube.com." {
		t.Fatalf("safe search target %s", c.Target)
	}
	d = tab.Decide(wireName(t, "a.b.corp.lan"), dns.TypeA, kids)
	if d.Answer[0].Header().Name != "a.b.corp.lan." || d.Answer[0].(*dns.CNAME).Target != "gw.corp.example." {
		t.Fatalf("wildcard answer %v", d.Answer)
	}
	var reasons []string
	for _, p := range tab.Problems() {
		reasons = append(reasons, p.Reason)
	}
	if got := strings.Join(reasons, ","); got != "UnknownService,UnknownCategory" {
		t.Fatalf("problems %s", got)
	}
}

func TestAllowOnly(t *testing.T) {
	now := time.Now()
	tab := build(t, Input{
		Lists:    []List{list(t, "ok", "allow", "", "||school.example^")},
		Policies: []v1alpha1.Policy{pol("strict", 0, func(s *v1alpha1.PolicySpec) { s.AllowListRefs = []string{"ok"}; s.AllowOnly = true })},
	}, &now)
	if d := tab.Decide(wireName(t, "www.school.example"), dns.TypeA, dataplane.ClientInfo{}); d.Verdict != dataplane.VerdictAllow {
		t.Fatalf("allowed name: %+v", d)
	}
	d := tab.Decide(wireName(t, "other.example"), dns.TypeA, dataplane.ClientInfo{})
	if d.Verdict != dataplane.VerdictBlock || d.List != "" || EDECode(d) != dns.ExtendedErrorCodeFiltered ||
		EDEText(d) != "policy default/strict reason allowOnly" || d.ExtraText() != EDEText(d) || d.EDECode != dns.ExtendedErrorCodeFiltered {
		t.Fatalf("allowOnly: %+v %q", d, EDEText(d))
	}
}

func TestSchedule(t *testing.T) {
	now := time.Date(2025, 6, 2, 12, 0, 0, 0, time.UTC) // Monday
	tab := build(t, Input{
		Lists: []List{notGlobal(list(t, "games", "", "", "||games.example^"))},
		Policies: []v1alpha1.Policy{pol("night", 5, func(s *v1alpha1.PolicySpec) {
			s.BlockListRefs = []string{"games"}
			s.Schedule = &v1alpha1.Schedule{Start: "21:00", End: "07:00", TZ: "Europe/Berlin", Weekdays: []v1alpha1.Weekday{"mon", "tue"}}
		}), pol("always", 1, nil)},
	}, &now)
	cases := []struct {
		at     string // UTC
		active bool
	}{
		{"2025-06-02T12:00:00Z", false}, // Mon 14:00 Berlin
		{"2025-06-02T19:00:00Z", true},  // Mon 21:00 Berlin: start is inclusive
		{"2025-06-02T18:59:00Z", false}, // Mon 20:59
		{"2025-06-03T04:59:00Z", true},  // Tue 06:59, window of Monday
		{"2025-06-03T05:00:00Z", false}, // Tue 07:00: end is exclusive
		{"2025-06-04T04:00:00Z", true},  // Wed 06:00, window started Tuesday
		{"2025-06-04T20:00:00Z", false}, // Wed 22:00: not a listed day
		{"2025-06-05T04:00:00Z", false}, // Thu 06:00, window would have started Wednesday
	}
	for _, tc := range cases {
		now, _ = time.Parse(time.RFC3339, tc.at)
		d := tab.Decide(wireName(t, "games.example"), dns.TypeA, dataplane.ClientInfo{})
		if got := d.Verdict == dataplane.VerdictBlock; got != tc.active {
			t.Errorf("%s: blocked=%v, want %v (%+v)", tc.at, got, tc.active, d)
		}
		wantPolicy := "default/always"
		if tc.active {
			wantPolicy = "default/night"
		}
		if d.Policy != wantPolicy {
			t.Errorf("%s: policy %s, want %s", tc.at, d.Policy, wantPolicy)
		}
		st, _ := tab.State("default/always")
		if shadowed := len(st.ShadowedBy) > 0; shadowed != tc.active || st.Effective == tc.active {
			t.Errorf("%s: state of always %+v", tc.at, st)
		}
	}
}

func TestIdentify(t *testing.T) {
	g, probs := CompileGroups([]v1alpha1.ClientGroup{
		group("lan", []string{"192.168.0.0/16", "2001:db8::/32"}, nil, nil),
		group("printer", []string{"192.168.1.20"}, nil, []string{"Printer.lan."}),
		group("phones", nil, []string{"alice-phone"}, nil),
		group("bad", []string{"300.1.1.1"}, nil, nil),
	})
	if len(probs) != 1 || probs[0].Reason != "InvalidAddress" {
		t.Fatalf("problems %v", probs)
	}
	cases := []struct {
		addr, id, name string
		want           string
	}{
		{"192.168.1.20", "", "", "default/lan,default/printer"},
		{"::ffff:192.168.1.20", "", "", "default/lan,default/printer"},
		{"192.168.9.9", "", "", "default/lan"},
		{"10.0.0.1", "", "printer.lan", "default/printer"},
		{"10.0.0.1", "alice-phone", "", "default/phones"},
		{"2001:db8::1", "ALICE-PHONE", "", "default/lan,default/phones"},
		{"10.0.0.1", "", "", ""},
	}
	for _, tc := range cases {
		ci := g.IdentifyClient(netip.MustParseAddr(tc.addr), tc.id, tc.name)
		if got := strings.Join(ci.Groups, ","); got != tc.want {
			t.Errorf("%s %q %q: %s, want %s", tc.addr, tc.id, tc.name, got, tc.want)
		}
	}
	a := g.Identify(netip.MustParseAddr("192.168.1.20"), "")
	if n := testing.AllocsPerRun(200, func() { g.Identify(netip.MustParseAddr("192.168.1.20"), "") }); n != 0 {
		t.Fatalf("Identify allocates %v", n)
	}
	if b := g.Identify(netip.MustParseAddr("192.168.1.20"), ""); &a.Groups[0] != &b.Groups[0] {
		t.Fatal("group slices are not shared")
	}
}

func TestDecideAllocs(t *testing.T) {
	now := time.Now()
	tab := build(t, Input{
		Lists: []List{list(t, "ads", "", "", "||ads.example^"), list(t, "ok", "allow", "", "||ok.example^"),
			list(t, "hosts", "", "nxdomain", "0.0.0.0 tracker.example", "plain.example")},
		Policies: []v1alpha1.Policy{pol("p", 0, func(s *v1alpha1.PolicySpec) {
			s.BlockListRefs, s.AllowListRefs = []string{"ads", "hosts"}, []string{"ok"}
			s.BlockedCategories = []string{"social", "video"}
			s.SafeSearch = true
		})},
	}, &now)
	// Blocks allocate nothing either (issue #27 item 2): the rule is the
	// stored name (with adblock syntax's constant text around it) and the
	// EDE text is the policy's, joined with the rule only when an answer
	// carries it.
	for _, c := range []struct{ name, list, rule string }{
		{"tracker.example", "default/hosts", "tracker.example"},
		{"plain.example", "default/hosts", "plain.example"},
		{"ads.example", "default/ads", "||ads.example^"},
		{"www.ads.example", "default/ads", "||ads.example^"},
	} {
		n := c.name
		q := wireName(t, n)
		d := tab.Decide(q, dns.TypeA, dataplane.ClientInfo{})
		if d.Verdict != dataplane.VerdictBlock || d.RuleText() != c.rule || d.ExtraText() != "policy default/p list "+c.list+" rule "+c.rule {
			t.Fatalf("Decide(%s) = %+v, text %q", n, d, d.ExtraText())
		}
		// The data plane's DecideInto; Decide writes a rule that is the
		// name asked into Rule, allocating.
		var into dataplane.Decision
		if a := testing.AllocsPerRun(200, func() { tab.DecideInto(q, dns.TypeA, dataplane.ClientInfo{}, &into) }); a != 0 {
			t.Errorf("blocking %s allocates %v", n, a)
		}
	}
	for _, n := range []string{"www.example.com", "a.b.c.d.ok.example", "www.google.de"} {
		q := wireName(t, n)
		if a := testing.AllocsPerRun(200, func() { tab.Decide(q, dns.TypeA, dataplane.ClientInfo{}) }); a != 0 {
			t.Errorf("Decide(%s) allocates %v", n, a)
		}
	}
}

func TestGlobalListsAndDecisionExtras(t *testing.T) {
	now := time.Date(2025, 6, 2, 12, 0, 0, 0, time.UTC)
	in := Input{
		Groups: []v1alpha1.ClientGroup{group("kids", []string{"10.0.0.0/24"}, []string{"tablet"}, nil)},
		Lists: []List{
			list(t, "ads", "", "", "||ads.example^"),
			list(t, "malware", "", "nxdomain", "||malware.example^"),
			list(t, "fine", "allow", "", "||ok.malware.example^"),
		},
		Policies: []v1alpha1.Policy{pol("kids", 0, func(s *v1alpha1.PolicySpec) {
			s.ClientGroupRefs, s.BlockListRefs, s.SafeSearch = []string{"kids"}, []string{"ads"}, true
			s.Rewrites = []v1alpha1.Rewrite{{Name: "alias.lan", CNAME: "target.example"}, {Name: "host.lan", Targets: []string{"192.0.2.1"}}}
		})},
	}
	tab := build(t, in, &now)
	kids := tab.Groups().Identify(netip.Addr{}, "TABLET")
	other := tab.Groups().Identify(netip.MustParseAddr("192.0.2.9"), "")
	if len(kids.Groups) != 1 || kids.Groups[0] != "default/kids" || len(other.Groups) != 0 {
		t.Fatalf("identify: %+v %+v", kids, other)
	}
	// unreferenced lists apply to clients no policy matches, as (global)
	d := tab.Decide(wireName(t, "x.malware.example"), dns.TypeA, other)
	if d.Verdict != dataplane.VerdictBlock || d.Policy != GlobalPolicy || d.List != "default/malware" || d.Mode != dataplane.BlockNXDomain ||
		d.EDECode != dns.ExtendedErrorCodeBlocked || d.ExtraText() != "policy (global) list default/malware rule ||malware.example^" {
		t.Fatalf("global block: %+v", d)
	}
	if d := tab.Decide(wireName(t, "ok.malware.example"), dns.TypeA, other); d.Verdict != dataplane.VerdictAllow || d.List != "default/fine" {
		t.Fatalf("global allow: %+v", d)
	}
	if d := tab.Decide(wireName(t, "ads.example"), dns.TypeA, other); d.Verdict != dataplane.VerdictBlock || d.Policy != GlobalPolicy {
		t.Fatalf("a global list the kids policy names no longer applies to others: %+v", d)
	}
	// a matched client gets the global lists through its policy
	if d := tab.Decide(wireName(t, "malware.example"), dns.TypeA, kids); d.Verdict != dataplane.VerdictBlock || d.Policy != "default/kids" || d.List != "default/malware" {
		t.Fatalf("kids and global list: %+v", d)
	}
	if d := tab.Decide(wireName(t, "ads.example"), dns.TypeA, kids); d.ExtraText() != "policy default/kids list default/ads rule ||ads.example^" {
		t.Fatalf("kids block: %+v", d)
	}
	// CNAME answers ask to be chased; address rewrites do not
	if d := tab.Decide(wireName(t, "www.google.com"), dns.TypeA, kids); !d.ChaseCNAME || d.List != ListSafeSearch {
		t.Fatalf("safe search: %+v", d)
	}
	if d := tab.Decide(wireName(t, "alias.lan"), dns.TypeA, kids); !d.ChaseCNAME || d.Verdict != dataplane.VerdictRewrite {
		t.Fatalf("cname rewrite: %+v", d)
	}
	if d := tab.Decide(wireName(t, "host.lan"), dns.TypeA, kids); d.ChaseCNAME {
		t.Fatalf("address rewrite: %+v", d)
	}
	// no global block list: no global policy
	in.Lists = []List{notGlobal(in.Lists[0])}
	if d := build(t, in, &now).Decide(wireName(t, "ads.example"), dns.TypeA, other); d.Verdict != dataplane.VerdictPass || d.Policy != "" {
		t.Fatalf("no global lists: %+v", d)
	}
}
