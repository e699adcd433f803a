package policy

import (
	"context"
	"net/netip"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/miekg/dns"

	"github.com/svcdns/svc/api/v1alpha1"
	"github.com/svcdns/svc/dataplane"
)

func notGlobal(l List) List {
	f := false
	l.Object.Spec.Global = &f
	return l
}

func nsList(ns string, l List) List {
	l.Object.Namespace = ns
	return l
}

func nsPol(ns string, p v1alpha1.Policy) v1alpha1.Policy {
	p.Namespace = ns
	return p
}

// globalCase is one scenario of TestGlobalListsDecision: lists and
// policies compiled together, and what each query must decide.
type globalCase struct {
	name     string
	lists    []List
	policies []v1alpha1.Policy
	tenancy  *Tenancy
	at       time.Time
	wants    []want
	problems []string // "policy reason"
}

// want is one query of a scenario: from which client address, and what
// the decision must be ("pass", or "block <list>" / "allow <list>", by
// policy).
type want struct {
	from, qname string
	verdict     string
	policy      string
}

func verdictText(d dataplane.Decision) string {
	switch d.Verdict {
	case dataplane.VerdictBlock:
		return "block " + d.List
	case dataplane.VerdictAllow:
		return "allow " + d.List
	case dataplane.VerdictRewrite:
		return "rewrite " + d.List
	}
	return "pass"
}

// TestGlobalListsDecision is the decision table of issue 18, item 1: which
// lists a client gets. The kids group is 10.0.0.2/31; 192.0.2.1 is in no
// group.
func TestGlobalListsDecision(t *testing.T) {
	noon := time.Date(2025, 6, 2, 12, 0, 0, 0, time.UTC) // Monday
	ads := func() List { return list(t, "ads", "", "", "||ads.example^") }
	uiAllow := func() List { return list(t, "ui-allow", "allow", "", "||x.ads.example^", "||tiktok.com^") }
	uiDeny := func() List { return list(t, "ui-deny", "", "", "||deny.example^") }
	private := func() List { return notGlobal(list(t, "private", "", "", "||private.example^")) }
	kidsGroup := group("kids", []string{"10.0.0.2/31"}, nil, nil)
	kids := func(f func(*v1alpha1.PolicySpec)) v1alpha1.Policy {
		return pol("kids", 10, func(s *v1alpha1.PolicySpec) {
			s.ClientGroupRefs = []string{"kids"}
			s.BlockedServices = []string{"tiktok"}
			if f != nil {
				f(s)
			}
		})
	}
	catchAll := func(f func(*v1alpha1.PolicySpec)) v1alpha1.Policy { return pol("everyone", 0, f) }
	const kid, other = "10.0.0.3", "192.0.2.1"
	f := false

	cases := []globalCase{
		{name: "no policy: global lists for everyone", lists: []List{ads()},
			wants: []want{{kid, "ads.example", "block default/ads", GlobalPolicy}, {other, "ads.example", "block default/ads", GlobalPolicy}}},
		{name: "catch-all policy gets the global lists", lists: []List{ads()}, policies: []v1alpha1.Policy{catchAll(nil)},
			wants: []want{{other, "ads.example", "block default/ads", "default/everyone"}}},
		{name: "group policy: kids get ad blocking and the service, others ad blocking only", lists: []List{ads()},
			policies: []v1alpha1.Policy{kids(nil)},
			wants: []want{
				{kid, "ads.example", "block default/ads", "default/kids"},
				{kid, "tiktok.com", "block service:tiktok", "default/kids"},
				{other, "ads.example", "block default/ads", GlobalPolicy},
				{other, "tiktok.com", "pass", GlobalPolicy},
			}},
		{name: "naming the global list in the kids policy keeps it for others", lists: []List{ads()},
			policies: []v1alpha1.Policy{kids(func(s *v1alpha1.PolicySpec) { s.BlockListRefs = []string{"ads"} })},
			wants:    []want{{kid, "ads.example", "block default/ads", "default/kids"}, {other, "ads.example", "block default/ads", GlobalPolicy}}},
		{name: "global false: only the policies that name it", lists: []List{ads(), private()},
			policies: []v1alpha1.Policy{kids(func(s *v1alpha1.PolicySpec) { s.BlockListRefs = []string{"private"} }), catchAll(nil)},
			wants: []want{
				{kid, "private.example", "block default/private", "default/kids"},
				{other, "private.example", "pass", "default/everyone"},
				{other, "ads.example", "block default/ads", "default/everyone"},
			}},
		{name: "global false with no policy: applies to no one", lists: []List{private()},
			wants: []want{{other, "private.example", "pass", ""}}},
		{name: "globalLists false: the kids get only their own lists", lists: []List{ads(), uiDeny()},
			policies: []v1alpha1.Policy{kids(func(s *v1alpha1.PolicySpec) { s.GlobalLists = &f })},
			wants: []want{
				{kid, "ads.example", "pass", "default/kids"},
				{kid, "deny.example", "pass", "default/kids"},
				{kid, "tiktok.com", "block service:tiktok", "default/kids"},
				{other, "ads.example", "block default/ads", GlobalPolicy},
			}},
		{name: "excludeListRefs: one global list off for the kids", lists: []List{ads(), uiDeny(), private()},
			policies: []v1alpha1.Policy{kids(func(s *v1alpha1.PolicySpec) { s.ExcludeListRefs = []string{"ads", "private", "missing"} })},
			wants: []want{
				{kid, "ads.example", "pass", "default/kids"},
				{kid, "deny.example", "block default/ui-deny", "default/kids"},
				{other, "ads.example", "block default/ads", GlobalPolicy},
			},
			problems: []string{"default/kids NotGlobalList", "default/kids NotGlobalList"}},
		{name: "ui-allow with a catch-all policy allows for everyone, over lists and services", lists: []List{ads(), uiAllow(), uiDeny()},
			policies: []v1alpha1.Policy{catchAll(nil), kids(nil)},
			wants: []want{
				{other, "x.ads.example", "allow default/ui-allow", "default/everyone"},
				{other, "y.ads.example", "block default/ads", "default/everyone"},
				{other, "deny.example", "block default/ui-deny", "default/everyone"},
				{kid, "x.ads.example", "allow default/ui-allow", "default/kids"},
				{kid, "tiktok.com", "allow default/ui-allow", "default/kids"},
			}},
		{name: "an inactive scheduled policy falls through to the next, global lists included", lists: []List{ads(), uiDeny()},
			policies: []v1alpha1.Policy{
				kids(func(s *v1alpha1.PolicySpec) {
					s.GlobalLists = &f
					s.Schedule = &v1alpha1.Schedule{Start: "20:00", End: "07:00"}
				}),
				catchAll(func(s *v1alpha1.PolicySpec) { s.ExcludeListRefs = []string{"ui-deny"} }),
			},
			wants: []want{
				{kid, "ads.example", "block default/ads", "default/everyone"},
				{kid, "deny.example", "pass", "default/everyone"},
				{kid, "tiktok.com", "pass", "default/everyone"},
			}},
		{name: "the scheduled policy while active", lists: []List{ads()}, at: noon.Add(9 * time.Hour),
			policies: []v1alpha1.Policy{
				kids(func(s *v1alpha1.PolicySpec) {
					s.GlobalLists = &f
					s.Schedule = &v1alpha1.Schedule{Start: "20:00", End: "07:00"}
				}),
				catchAll(nil),
			},
			wants: []want{{kid, "ads.example", "pass", "default/kids"}, {kid, "tiktok.com", "block service:tiktok", "default/kids"}}},
	}
	// tenancy: platform is trusted, team and other are tenants
	teamGroup := group("kids", []string{"10.0.0.2/31"}, nil, nil)
	teamGroup.Namespace = "team"
	team := func(name string, f func(*v1alpha1.PolicySpec)) v1alpha1.Policy {
		return nsPol("team", pol(name, 10, func(s *v1alpha1.PolicySpec) {
			s.ClientGroupRefs = []string{"kids"}
			if f != nil {
				f(s)
			}
		}))
	}
	ten := &Tenancy{GlobalNamespaces: []string{"platform"}}
	cases = append(cases,
		globalCase{name: "tenancy: a tenant cannot opt out of the platform's global list, but of its own", tenancy: ten,
			lists: []List{nsList("platform", ads()), nsList("team", list(t, "team-ads", "", "", "||team-ads.example^"))},
			policies: []v1alpha1.Policy{team("kids", func(s *v1alpha1.PolicySpec) {
				s.ExcludeListRefs = []string{"platform/ads", "team-ads"}
			})},
			wants: []want{
				{kid, "ads.example", "block platform/ads", "team/kids"},
				{kid, "team-ads.example", "pass", "team/kids"},
				{other, "team-ads.example", "block team/team-ads", GlobalPolicy},
			},
			problems: []string{"team/kids OptOutNotAllowed"}},
		globalCase{name: "tenancy: a tenant's global list does not reach the platform's or another team's policies", tenancy: ten,
			lists: []List{nsList("team", list(t, "team-ads", "", "", "||team-ads.example^"))},
			policies: []v1alpha1.Policy{
				nsPol("platform", pol("base", 0, nil)),
				nsPol("other", pol("o", 5, func(s *v1alpha1.PolicySpec) { s.ClientGroupRefs = []string{"kids"} })),
			},
			wants: []want{{other, "team-ads.example", "pass", "platform/base"}},
			// other/o names a group of its own namespace that does not exist
			problems: []string{"other/o UnknownClientGroup"}},
		globalCase{name: "tenancy: the platform may opt out of a tenant's list; a tenant's reference does not switch it off", tenancy: ten,
			lists: []List{nsList("team", list(t, "team-ads", "", "", "||team-ads.example^")), nsList("platform", ads())},
			policies: []v1alpha1.Policy{
				nsPol("platform", pol("base", 0, func(s *v1alpha1.PolicySpec) { s.ExcludeListRefs = []string{"team/team-ads"} })),
				nsPol("intruder", pol("own", 5, func(s *v1alpha1.PolicySpec) {
					s.BlockListRefs = []string{"platform/ads"}
					s.ClientGroupRefs = []string{"mine"}
				})),
			},
			wants: []want{
				{other, "team-ads.example", "pass", "platform/base"},
				{other, "ads.example", "block platform/ads", "platform/base"},
			},
			problems: []string{"intruder/own UnknownClientGroup"}},
	)
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			now := noon
			if !tc.at.IsZero() {
				now = tc.at
			}
			groups := []v1alpha1.ClientGroup{kidsGroup, teamGroup}
			in := Input{Groups: groups, Lists: tc.lists, Policies: tc.policies, Tenancy: tc.tenancy}
			tab := build(t, in, &now)
			for _, w := range tc.wants {
				c := tab.Groups().Identify(netip.MustParseAddr(w.from), "")
				d := tab.Decide(wireName(t, w.qname), dns.TypeA, c)
				if got := verdictText(d); got != w.verdict || d.Policy != w.policy {
					t.Errorf("%s asks %s: %s by %q, want %s by %q", w.from, w.qname, got, d.Policy, w.verdict, w.policy)
				}
			}
			var got []string
			for _, p := range tab.Problems() {
				if p.Kind == "Policy" && p.Reason != "UnknownService" {
					got = append(got, p.Name+" "+p.Reason)
				}
			}
			slices.Sort(got)
			want := append([]string(nil), tc.problems...)
			slices.Sort(want)
			if !slices.Equal(got, want) {
				t.Errorf("problems %q, want %q (%v)", got, want, tab.Problems())
			}
		})
	}
}

// TestAudienceAndState: to whom each list applies, the policy state's
// effective lists with why, the apply notes and the problem messages.
func TestAudienceAndState(t *testing.T) {
	now := time.Date(2025, 6, 2, 12, 0, 0, 0, time.UTC)
	f := false
	in := Input{
		Groups: []v1alpha1.ClientGroup{group("kids", []string{"10.0.0.2/31"}, nil, nil)},
		Lists: []List{
			list(t, "ads", "", "", "||ads.example^"),
			list(t, "ui-allow", "allow", "", "||x.example^"),
			notGlobal(list(t, "private", "", "", "||private.example^")),
			notGlobal(list(t, "unused", "", "", "||unused.example^")),
			nsList("team", list(t, "team-ads", "", "", "||team-ads.example^")),
		},
		Policies: []v1alpha1.Policy{
			pol("kids", 10, func(s *v1alpha1.PolicySpec) {
				s.ClientGroupRefs = []string{"kids"}
				s.BlockListRefs = []string{"private", "ads", "gone"}
				s.ExcludeListRefs = []string{"ui-allow", "unused"}
			}),
			pol("strict", 5, func(s *v1alpha1.PolicySpec) { s.ClientGroupRefs = []string{"kids"}; s.GlobalLists = &f }),
			pol("everyone", 0, nil),
		},
		Tenancy: &Tenancy{GlobalNamespaces: []string{"default"}},
	}
	aud := Audience(in)
	texts := map[string]string{}
	for k, a := range aud {
		texts[k] = a.AppliesTo
	}
	wantTexts := map[string]string{
		"default/ads":      "everyone except policies strict",
		"default/ui-allow": "everyone except policies kids, strict",
		"default/private":  "policies kids",
		"default/unused":   "no one: no policy names it (spec.global: false)",
		"team/team-ads":    "clients no policy matches and policies of namespace team",
	}
	for k, w := range wantTexts {
		if texts[k] != w {
			t.Errorf("%s applies to %q, want %q", k, texts[k], w)
		}
	}
	if a := aud["default/ads"]; !slices.Equal(a.Named, []string{"default/kids"}) || !slices.Equal(a.Policies, []string{"default/everyone", "default/kids"}) {
		t.Errorf("ads audience %+v", a)
	}

	tab := build(t, in, &now)
	st, ok := tab.State("default/kids")
	if !ok {
		t.Fatal("no state")
	}
	var got []string
	for _, u := range st.Lists {
		got = append(got, strings.TrimSpace(u.List+" "+u.Role+" "+u.Why+" "+map[bool]string{true: "applied", false: "not-applied"}[u.Applied]+" "+u.Note))
	}
	wantUses := []string{
		"default/private block own applied",
		"default/ads block own applied",
		"default/gone block own not-applied the list does not exist",
		"default/ui-allow allow optedOut not-applied excludeListRefs",
	}
	if !slices.Equal(got, wantUses) {
		t.Errorf("kids state lists:\n got %q\nwant %q", got, wantUses)
	}
	st, _ = tab.State("default/strict")
	if len(st.Lists) != 2 || st.Lists[0].Why != WhyOptedOut || st.Lists[0].Note != "globalLists: false" {
		t.Errorf("strict state lists %+v", st.Lists)
	}
	for _, p := range tab.Problems() {
		if p.Reason == ReasonNotGlobalList && !strings.Contains(p.Msg, "default/unused, which is not global (spec.global: false)") {
			t.Errorf("not-global message does not name the list and the fix: %s", p.Msg)
		}
	}

	for _, c := range []struct{ kind, name, want string }{
		{"BlockList", "ui-allow", "blocklist/ui-allow applies to everyone except policies kids, strict"},
		{"BlockList", "private", "blocklist/private applies to policies kids"},
		{"Policy", "kids", "policy/kids gets lists private (own), ads (own); opted out of ui-allow"},
		{"Policy", "everyone", "policy/everyone gets lists ads (global), ui-allow (global)"},
		{"Policy", "strict", "policy/strict gets no lists; opted out of ads, ui-allow"},
	} {
		if got, ok := Note(in, c.kind, "default", c.name); !ok || got != c.want {
			t.Errorf("Note(%s %s) = %q, want %q", c.kind, c.name, got, c.want)
		}
	}
	if _, ok := Note(in, "BlockList", "default", "nope"); ok {
		t.Error("note for a missing list")
	}
	// Check reports the excludeListRefs problems of one policy, as Compile does
	probs := Check(context.Background(), Input{Groups: in.Groups, Lists: in.Lists, Tenancy: in.Tenancy}, &in.Policies[0])
	var reasons []string
	for _, p := range probs {
		reasons = append(reasons, p.Reason)
	}
	slices.Sort(reasons)
	if !slices.Equal(reasons, []string{ReasonNotGlobalList, ReasonUnknownList}) {
		t.Errorf("Check reasons %v", reasons)
	}
}

// TestUpgradeLocalLists: the lists the old rule kept out of (global): named
// by an admitted policy, where the reference counted, and no spec.global.
func TestUpgradeLocalLists(t *testing.T) {
	tr := true
	explicit := list(t, "explicit", "", "", "||e.example^")
	explicit.Object.Spec.Global = &tr
	in := Input{
		Lists: []List{list(t, "ads", "", "", "||a.example^"), list(t, "ok", "allow", "", "||ok.example^"), explicit,
			list(t, "free", "", "", "||f.example^"), nsList("platform", list(t, "malware", "", "", "||m.example^")),
			nsList("team", list(t, "team-ads", "", "", "||t.example^")), nsList("team", list(t, "team-free", "", "", "||tf.example^"))},
		Policies: []v1alpha1.Policy{
			pol("kids", 1, func(s *v1alpha1.PolicySpec) {
				s.ClientGroupRefs = []string{"kids"}
				s.BlockListRefs = []string{"ads", "explicit", "gone"}
				s.AllowListRefs = []string{"ok"}
			}),
			// a tenant's reference to the platform's list never took it out
			nsPol("team", pol("t", 1, func(s *v1alpha1.PolicySpec) {
				s.ClientGroupRefs = []string{"kids"}
				s.BlockListRefs = []string{"platform/malware", "team-ads"}
			})),
			// refused policies counted for nothing
			nsPol("team", pol("refused", 1, func(s *v1alpha1.PolicySpec) { s.BlockListRefs = []string{"team-free"} })),
		},
		Tenancy: &Tenancy{GlobalNamespaces: []string{"default", "platform"}},
	}
	got := UpgradeLocalLists(in)
	if want := []string{"default/ads", "default/ok", "team/team-ads"}; !slices.Equal(got, want) {
		t.Fatalf("UpgradeLocalLists = %v, want %v", got, want)
	}
}
