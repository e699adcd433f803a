package policy

import (
	"fmt"
	"net/netip"
	"testing"
	"time"

	"github.com/miekg/dns"

	"github.com/svcdns/svc/api/v1alpha1"
	"github.com/svcdns/svc/dataplane"
)

// The data plane keeps its decision in the query and has DecideInto write
// it: whatever the Decision held before (an earlier query's, in a reused
// buffer), the result is Decide's, but for a rule that is the name asked,
// whose text DecideInto leaves to the caller to take from the name
// (RuleIsName) where Decide writes it in Rule.
func TestDecideIntoIsDecide(t *testing.T) {
	now := time.Now()
	tab := build(t, Input{
		Lists: []List{list(t, "ads", "", "", "||ads.example^"), list(t, "ok", "allow", "", "||ok.example^")},
		Policies: []v1alpha1.Policy{pol("p", 0, func(s *v1alpha1.PolicySpec) {
			s.BlockListRefs, s.AllowListRefs = []string{"ads"}, []string{"ok"}
			s.SafeSearch = true
		})},
	}, &now)
	stale := dataplane.Decision{Verdict: dataplane.VerdictBlock, Mode: dataplane.BlockCustomIP, TTL: time.Hour,
		IPv4: netip.MustParseAddr("192.0.2.1"), Answer: []dns.RR{&dns.A{}}, List: "stale", Rule: "stale", RulePre: "||",
		RulePost: "^", Policy: "stale", UpstreamGroup: "stale", NoLog: true, EDECode: 17, EDEText: "stale", EDERule: true, ChaseCNAME: true}
	for _, n := range []string{"ads.example", "www.ads.example", "ok.example", "www.example.com", "www.google.com"} {
		q := wireName(t, n)
		want := tab.Decide(q, dns.TypeA, dataplane.ClientInfo{})
		got := stale
		tab.DecideInto(q, dns.TypeA, dataplane.ClientInfo{}, &got)
		if n == "ads.example" != got.RuleIsName || got.RuleIsName && got.Rule != "" {
			t.Errorf("%s: RuleIsName %v, Rule %q", n, got.RuleIsName, got.Rule)
		}
		if got.RuleIsName {
			got.Rule, got.RuleIsName = n, false
		}
		if fmt.Sprintf("%+v", got) != fmt.Sprintf("%+v", want) {
			t.Errorf("%s: DecideInto over an old decision gave\n%+v\nDecide gives\n%+v", n, got, want)
		}
	}
}
