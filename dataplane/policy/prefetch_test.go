package policy

import (
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/miekg/dns"

	"github.com/svcdns/svc/api/v1alpha1"
	"github.com/svcdns/svc/dataplane"
	"github.com/svcdns/svc/dataplane/blocklist"
	"github.com/svcdns/svc/dataplane/prefetch"
)

// bigRules is a domains list of n names, large enough to be prefetched
// from n = 50,000.
func bigRules(prefix string, n int) []string {
	rules := make([]string, n)
	for i := range rules {
		rules[i] = fmt.Sprintf("%s%d.ads%d.test", prefix, i, i%97)
	}
	return rules
}

func TestPrefetchTheLargeListsAnyPolicyProbes(t *testing.T) {
	now := time.Now()
	big := list(t, "big", "", "nxdomain", bigRules("b", 50_000)...)
	allow := list(t, "bigallow", "allow", "", bigRules("a", 50_000)...)
	scoped := list(t, "scoped", "", "", bigRules("s", 50_000)...)
	off := list(t, "off", "", "", bigRules("o", 50_000)...)
	off.Object.Annotations = map[string]string{v1alpha1.EnabledAnnotation: "false"}
	off.Compiled = ListCompiler{}.NewList(off.Object, []CompiledSource{{Source: off.Compiled.Source("main")}})
	small := list(t, "small", "", "", "||small.example^")
	notGlobal := false
	scoped.Object.Spec.Global = &notGlobal
	tab := build(t, Input{
		Lists: []List{big, allow, scoped, off, small},
		Policies: []v1alpha1.Policy{pol("p", 0, func(s *v1alpha1.PolicySpec) {
			s.BlockListRefs, s.AllowListRefs = []string{"scoped", "big"}, []string{"bigallow"}
		})},
	}, &now)
	var got []string
	for _, l := range tab.prefetch {
		got = append(got, l.Spec().Name)
	}
	if fmt.Sprint(got) != fmt.Sprint([]string{"default/bigallow", "default/scoped", "default/big"}) {
		t.Errorf("prefetched lists %q; want the three large enabled ones once each, allow first as Decide probes them", got)
	}

	// The hints change no answer, for names on and off the lists and for
	// names Prefetch cannot hash (not a wire name).
	for _, n := range []string{"b7.ads7.test", "B49999.ADS44.test", "a3.ads3.test", "s5.ads5.test", "www.example.com"} {
		q := wireName(t, n)
		before := tab.Decide(q, dns.TypeA, dataplane.ClientInfo{})
		h := tab.Prefetch(q)
		if want := blocklist.Hash([]byte(n)); h != want {
			t.Errorf("Prefetch(%s) = %x, want the list hash %x", n, h, want)
		}
		tab.PrefetchRecord(h)
		if after := tab.Decide(q, dns.TypeA, dataplane.ClientInfo{}); fmt.Sprint(after) != fmt.Sprint(before) {
			t.Errorf("%s: Decide %+v after the prefetch, %+v before", n, after, before)
		}
		if a := testing.AllocsPerRun(100, func() { tab.PrefetchRecord(tab.Prefetch(q)) }); a != 0 {
			t.Errorf("prefetching %s allocates %v", n, a)
		}
		// The UDP loop's stages, before Decide filled the lists' verdict
		// tables and after (Decide above did: stage 1 then finds the
		// verdict and loads its record).
		var st prefetch.State
		stages := func() {
			tab.PrefetchStart(q, dns.TypeA, &st)
			for i := 1; i < tab.PrefetchStages(); i++ {
				tab.PrefetchStage(i, &st)
			}
		}
		stages()
		if st.N != blocklist.Hash([]byte(n)) || st.K != blocklist.CacheKey([]byte(strings.ToLower(n))) {
			t.Errorf("%s: stage state %x %x", n, st.N, st.K)
		}
		if a := testing.AllocsPerRun(100, stages); a != 0 {
			t.Errorf("the prefetch stages of %s allocate %v", n, a)
		}
		if after := tab.Decide(q, dns.TypeA, dataplane.ClientInfo{}); fmt.Sprint(after) != fmt.Sprint(before) {
			t.Errorf("%s: Decide %+v after the stages, %+v before", n, after, before)
		}
	}
	if tab.PrefetchStages() != 3 {
		t.Errorf("%d prefetch stages, want 3", tab.PrefetchStages())
	}
	tab.PrefetchRecord(tab.Prefetch(nil))
	tab.PrefetchRecord(tab.Prefetch([]byte{0xff, 'x'}))

	// Small lists stay in the CPU's caches: nothing to prefetch.
	only := build(t, Input{Lists: []List{small}}, &now)
	if h := only.Prefetch(wireName(t, "small.example")); h != 0 || len(only.prefetch) != 0 {
		t.Errorf("a table of small lists prefetches %d lists (token %x)", len(only.prefetch), h)
	}
}
