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
	// names the stages cannot hash (not a wire name). The UDP loop runs the
	// stages after the name's first decision filled the lists' verdict
	// tables too: stage 1 then finds the verdict, and for these names,
	// which need no escapes, loads no record (DecideInto takes the rule's
	// text from the name).
	var st prefetch.State
	stages := func(q []byte) {
		tab.PrefetchStart(q, dns.TypeA, &st)
		for i := 1; i < tab.PrefetchStages(); i++ {
			tab.PrefetchStage(i, &st)
		}
	}
	for _, n := range []string{"b7.ads7.test", "B49999.ADS44.test", "a3.ads3.test", "s5.ads5.test", "www.example.com"} {
		q := wireName(t, n)
		before := tab.Decide(q, dns.TypeA, dataplane.ClientInfo{})
		stages(q)
		if want := blocklist.Hash([]byte(n)); st.N != want {
			t.Errorf("%s: stage hash %x, want the list hash %x", n, st.N, want)
		}
		if st.K != blocklist.CacheKey([]byte(strings.ToLower(n))) || !st.Flag {
			t.Errorf("%s: stage key %x, plain %v", n, st.K, st.Flag)
		}
		if after := tab.Decide(q, dns.TypeA, dataplane.ClientInfo{}); fmt.Sprint(after) != fmt.Sprint(before) {
			t.Errorf("%s: Decide %+v after the stages, %+v before", n, after, before)
		}
		if a := testing.AllocsPerRun(100, func() { stages(q) }); a != 0 {
			t.Errorf("the prefetch stages of %s allocate %v", n, a)
		}
	}
	if tab.PrefetchStages() != 3 {
		t.Errorf("%d prefetch stages, want 3", tab.PrefetchStages())
	}
	for _, q := range [][]byte{nil, {0xff, 'x'}} {
		if stages(q); st.N != 0 {
			t.Errorf("% x: stage hash %x for a name that is not one", q, st.N)
		}
	}

	// Small lists stay in the CPU's caches: nothing to prefetch.
	only := build(t, Input{Lists: []List{small}}, &now)
	only.PrefetchStart(wireName(t, "small.example"), dns.TypeA, &st)
	if n := only.PrefetchStages(); n != 0 || st.N != 0 || len(only.prefetch) != 0 {
		t.Errorf("a table of small lists prefetches %d lists in %d stages (token %x)", len(only.prefetch), n, st.N)
	}
}
