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

func inNS(ns string, o interface{ SetNamespace(string) }) { o.SetNamespace(ns) }

func reasonsOf(probs []Problem, name string) []string {
	var out []string
	for _, p := range probs {
		if p.Name == name {
			out = append(out, p.Reason)
		}
	}
	slices.Sort(out)
	return out
}

// TestTenancy: the takeover of issue 17 (a tenant's policy with empty
// clientGroupRefs at priority 1000 rewrote bank.example.com for every
// client and switched off another team's blocking) is refused, and so is a
// policy selecting another namespace's group; the platform namespace keeps
// its global policies.
func TestTenancy(t *testing.T) {
	now := time.Date(2025, 6, 2, 12, 0, 0, 0, time.UTC)
	kids := group("kids", []string{"10.0.0.0/24"}, nil, nil)
	inNS("team", &kids)
	mine := group("mine", []string{"10.9.0.0/24"}, nil, nil)
	inNS("intruder", &mine)
	ads := list(t, "ads", "", "", "||ads.example^")
	inNS("platform", ads.Object)
	teamList := list(t, "team-ads", "", "nxdomain", "||team-ads.example^")
	inNS("team", teamList.Object)

	takeover := pol("takeover", 1000, func(s *v1alpha1.PolicySpec) {
		s.Rewrites = []v1alpha1.Rewrite{{Name: "bank.example.com", Targets: []string{"203.0.113.66"}}}
		s.AllowListRefs = []string{"platform/ads", "team/team-ads"} // would take them out of (global)
	})
	inNS("intruder", &takeover)
	steal := pol("steal", 900, func(s *v1alpha1.PolicySpec) {
		s.ClientGroupRefs = []string{"team/kids"}
		s.Rewrites = []v1alpha1.Rewrite{{Name: "bank.example.com", Targets: []string{"203.0.113.67"}}}
	})
	inNS("intruder", &steal)
	own := pol("own", 800, func(s *v1alpha1.PolicySpec) {
		s.ClientGroupRefs = []string{"mine"}
		s.BlockListRefs = []string{"platform/ads"} // may use it; does not switch it off for others
	})
	inNS("intruder", &own)
	platform := pol("base", 1, func(s *v1alpha1.PolicySpec) {
		s.Rewrites = []v1alpha1.Rewrite{{Name: "intranet.example.com", Targets: []string{"192.0.2.80"}}}
	})
	inNS("platform", &platform)

	in := Input{
		Groups:   []v1alpha1.ClientGroup{kids, mine},
		Lists:    []List{ads, teamList},
		Policies: []v1alpha1.Policy{takeover, steal, own, platform},
		Tenancy:  &Tenancy{GlobalNamespaces: []string{"platform"}},
	}
	tab := build(t, in, &now)
	_, probs := Compile(context.Background(), in)
	if got := reasonsOf(probs, "intruder/takeover"); !slices.Equal(got, []string{ReasonGlobalPolicyNotAllowed}) {
		t.Errorf("takeover problems %v (%v)", got, probs)
	}
	if got := reasonsOf(probs, "intruder/steal"); !slices.Equal(got, []string{ReasonForeignClientGroup}) {
		t.Errorf("steal problems %v", got)
	}
	if got := reasonsOf(probs, "intruder/own"); len(got) != 0 {
		t.Errorf("own problems %v", got)
	}
	for _, p := range probs {
		if p.Reason == ReasonGlobalPolicyNotAllowed && !strings.Contains(p.Msg, "blocking.globalPolicyNamespaces") {
			t.Errorf("refusal does not name the setting: %s", p.Msg)
		}
	}

	someone := tab.Groups().Identify(netip.MustParseAddr("192.0.2.9"), "")
	kid := tab.Groups().Identify(netip.MustParseAddr("10.0.0.5"), "")
	intruder := tab.Groups().Identify(netip.MustParseAddr("10.9.0.5"), "")
	for _, c := range []dataplane.ClientInfo{someone, kid} {
		d := tab.Decide(wireName(t, "bank.example.com"), dns.TypeA, c)
		if d.Verdict == dataplane.VerdictRewrite && d.Policy != "platform/base" {
			t.Fatalf("client %v: bank.example.com rewritten by %s", c.Groups, d.Policy)
		}
		if d := tab.Decide(wireName(t, "intranet.example.com"), dns.TypeA, c); d.Verdict != dataplane.VerdictRewrite || d.Policy != "platform/base" {
			t.Fatalf("client %v: platform's global policy not applied: %+v", c.Groups, d)
		}
	}
	// with the platform policy removed the clients fall to (global): a
	// tenant's reference must not have taken a list out of it
	in.Policies = in.Policies[:3]
	tab = build(t, in, &now)
	if d := tab.Decide(wireName(t, "ads.example"), dns.TypeA, someone); d.Verdict != dataplane.VerdictBlock || d.Policy != GlobalPolicy {
		t.Fatalf("a tenant's reference switched platform/ads off for everyone: %+v", d)
	}
	if d := tab.Decide(wireName(t, "team-ads.example"), dns.TypeA, someone); d.Verdict != dataplane.VerdictBlock {
		t.Fatalf("a tenant's reference switched team/team-ads off for everyone: %+v", d)
	}
	if d := tab.Decide(wireName(t, "ads.example"), dns.TypeA, intruder); d.Verdict != dataplane.VerdictBlock || d.Policy != "intruder/own" {
		t.Fatalf("a tenant's own policy with a shared list: %+v", d)
	}
	st, ok := tab.State("intruder/takeover")
	if !ok || st.Active || st.Effective || len(st.Problems) != 1 || !strings.HasPrefix(st.Problems[0], ReasonGlobalPolicyNotAllowed) {
		t.Fatalf("state of a refused policy: %+v", st)
	}

	// "*" restores the unconfined behaviour
	in.Tenancy = &Tenancy{GlobalNamespaces: []string{AllNamespaces}}
	tab = build(t, in, &now)
	if d := tab.Decide(wireName(t, "bank.example.com"), dns.TypeA, someone); d.Policy != "intruder/takeover" {
		t.Fatalf("with *: %+v", d)
	}
}

// TestCheck: the status check reports dangling references with the data
// plane's compile, but not lists that exist and are still loading.
func TestCheck(t *testing.T) {
	loaded := list(t, "ads", "", "", "||ads.example^")
	loading := List{Object: &v1alpha1.BlockList{}}
	loading.Object.Namespace, loading.Object.Name = "default", "loading"
	p := pol("p", 1, func(s *v1alpha1.PolicySpec) {
		s.ClientGroupRefs = []string{"kids", "gone"}
		s.BlockListRefs = []string{"ads", "loading", "missing", "other/list"}
		s.BlockedServices = []string{"no-such-service"}
	})
	in := Input{Groups: []v1alpha1.ClientGroup{group("kids", nil, nil, nil)}, Lists: []List{loaded, loading},
		Tenancy: &Tenancy{GlobalNamespaces: []string{"platform"}}}
	probs := Check(context.Background(), Input{Groups: in.Groups, Lists: in.Lists, Tenancy: in.Tenancy}, &p)
	var got []string
	for _, pr := range probs {
		got = append(got, pr.Reason+" "+pr.Msg)
	}
	slices.Sort(got)
	want := []string{
		"CatalogueUnavailable no catalogue loaded",
		"UnknownClientGroup client group default/gone does not exist",
		"UnknownList block list default/missing does not exist",
		"UnknownList block list other/list does not exist",
	}
	if !slices.Equal(got, want) {
		t.Fatalf("Check:\n got %q\nwant %q", got, want)
	}
}
