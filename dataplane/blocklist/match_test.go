package blocklist

import (
	"context"
	"strings"
	"testing"
)

func compile(t testing.TB, spec SourceSpec, body string) *Source {
	t.Helper()
	s, err := CompileSource(context.Background(), spec, strings.NewReader(body))
	if err != nil {
		t.Fatal(err)
	}
	return s
}

func ptr[T any](v T) *T { return &v }

func TestMatchSemantics(t *testing.T) {
	type check struct {
		name      string
		matched   bool
		exception bool
		rule      string // expected RuleText ("" to skip)
	}
	tests := []struct {
		desc   string
		spec   SourceSpec
		body   string
		checks []check
	}{
		{
			desc: "||d^ blocks d and every subdomain",
			spec: SourceSpec{Name: "a", Format: FormatAdblock},
			body: "||ads.example^\n",
			checks: []check{
				{"ads.example", true, false, "||ads.example^"},
				{"x.y.ads.example", true, false, "||ads.example^"},
				{"ADS.Example.", true, false, "||ads.example^"},
				{"notads.example", false, false, ""},
				{"ads.example.com", false, false, ""},
				{"example", false, false, ""},
			},
		},
		{
			desc: "|d^ blocks d only",
			spec: SourceSpec{Name: "a", Format: FormatAdblock},
			body: "|exact.example^\n",
			checks: []check{
				{"exact.example", true, false, "|exact.example^"},
				{"sub.exact.example", false, false, ""},
			},
		},
		{
			desc: "*.d blocks subdomains but not d",
			spec: SourceSpec{Name: "a", Format: FormatAdblock},
			body: "*.wild.example\n",
			checks: []check{
				{"wild.example", false, false, ""},
				{"a.wild.example", true, false, "*.wild.example"},
				{"a.b.wild.example", true, false, "*.wild.example"},
			},
		},
		{
			desc: "hosts and plain lines block the exact name only",
			spec: SourceSpec{Name: "h"},
			body: "0.0.0.0 host.example\nplain.example\n",
			checks: []check{
				{"host.example", true, false, "host.example"},
				{"sub.host.example", false, false, ""},
				{"plain.example.", true, false, "plain.example"},
				{"sub.plain.example", false, false, ""},
			},
		},
		{
			desc: "subdomains extends hosts and plain lines but not adblock rules",
			spec: SourceSpec{Name: "h", Subdomains: true},
			body: "0.0.0.0 host.example\nplain.example\n|exact.example^\n*.wild.example\n",
			checks: []check{
				{"sub.host.example", true, false, "host.example"},
				{"sub.plain.example", true, false, "plain.example"},
				{"sub.exact.example", false, false, ""},
				{"wild.example", false, false, ""},
			},
		},
		{
			desc: "@@ exceptions beat block rules and hosts lines",
			spec: SourceSpec{Name: "a"},
			body: "||example.org^\n0.0.0.0 keep.example.org\n@@||keep.example.org^\n@@|only.example.org^\n",
			checks: []check{
				{"ads.example.org", true, false, "||example.org^"},
				{"keep.example.org", false, true, "@@||keep.example.org^"},
				{"x.keep.example.org", false, true, "@@||keep.example.org^"},
				{"only.example.org", false, true, "@@|only.example.org^"},
				{"x.only.example.org", true, false, "||example.org^"},
			},
		},
		{
			desc: "regex is matched unanchored against the whole name",
			spec: SourceSpec{Name: "r", Format: FormatAdblock},
			body: "/^ad[0-9]+\\./\n/track/\n@@/^ad1\\.safe\\./\n",
			checks: []check{
				{"ad12.example", true, false, "/^ad[0-9]+\\./"},
				{"xad12.example", false, false, ""},
				{"my-tracker.example.com", true, false, "/track/"},
				{"MY-TRACKER.example.com.", true, false, "/track/"},
				{"ad1.safe.example", false, true, "@@/^ad1\\.safe\\./"},
			},
		},
		{
			desc: "regex format lines with and without slashes",
			spec: SourceSpec{Name: "r", Format: FormatRegex},
			body: "^ads\\.\n/metrics/\n",
			checks: []check{
				{"ads.example", true, false, "^ads\\."},
				{"x.metrics.example", true, false, "metrics"},
				{"x.ads.example", false, false, ""},
			},
		},
		{
			desc: "a Unicode rule does not match the punycode form",
			spec: SourceSpec{Name: "u", Format: FormatAdblock},
			body: "||bücher.example^\n",
			checks: []check{
				{"bücher.example", true, false, "||bücher.example^"},
				{"xn--bcher-kva.example", false, false, ""},
			},
		},
		{
			desc: "modifiers are unsupported and not applied",
			spec: SourceSpec{Name: "m", Format: FormatAdblock},
			body: "||important.example^$important\n",
			checks: []check{
				{"important.example", false, false, ""},
			},
		},
		{
			desc: "exclude switches a rule off",
			spec: SourceSpec{Name: "x", Exclude: []string{"||ads.example^", "Host.Example", "nothing.example"}},
			body: "||ads.example^\n0.0.0.0 host.example\n||other.example^\n",
			checks: []check{
				{"ads.example", false, false, ""},
				{"host.example", false, false, ""},
				{"other.example", true, false, "||other.example^"},
			},
		},
		{
			desc: "structured entries compile as adblock rules",
			spec: SourceSpec{Name: "e", Subdomains: true, Entries: []Entry{
				{Value: "exact.example"},
				{Value: "*.wild.example", Type: EntryWildcard},
				{Value: "^re[0-9]\\.", Type: EntryRegex},
				{Value: "off.example", Enabled: ptr(false)},
			}},
			checks: []check{
				{"exact.example", true, false, "|exact.example^"},
				{"sub.exact.example", false, false, ""},
				{"a.wild.example", true, false, "*.wild.example"},
				{"wild.example", false, false, ""},
				{"re1.example", true, false, "/^re[0-9]\\./"},
				{"off.example", false, false, ""},
			},
		},
	}
	for _, tc := range tests {
		t.Run(tc.desc, func(t *testing.T) {
			l := NewList(ListSpec{Name: "ns/list"}, []*Source{compile(t, tc.spec, tc.body)})
			for _, c := range tc.checks {
				m := l.Match(c.name)
				if m.Matched != c.matched || m.Exception != c.exception {
					t.Errorf("Match(%q) = matched %v exception %v, want %v %v", c.name, m.Matched, m.Exception, c.matched, c.exception)
					continue
				}
				if got := l.RuleText(m); c.rule != "" && got != c.rule {
					t.Errorf("RuleText(Match(%q)) = %q, want %q", c.name, got, c.rule)
				}
				if (m.Matched || m.Exception) && l.SourceName(m) != tc.spec.Name {
					t.Errorf("SourceName = %q, want %q", l.SourceName(m), tc.spec.Name)
				}
			}
		})
	}
}

func TestExceptionsSpanSourcesOfOneList(t *testing.T) {
	block := compile(t, SourceSpec{Name: "block"}, "0.0.0.0 ads.example\n||track.example^\n")
	except := compile(t, SourceSpec{Name: "except"}, "@@|ads.example^\n")
	l := NewList(ListSpec{Name: "l"}, []*Source{block, except})
	if m := l.Match("ads.example"); m.Matched || !m.Exception || l.SourceName(m) != "except" {
		t.Errorf("ads.example: %+v from %q, want exception from source except", m, l.SourceName(m))
	}
	if m := l.Match("a.track.example"); !m.Matched || l.SourceName(m) != "block" {
		t.Errorf("a.track.example: %+v, want blocked by source block", m)
	}
	// An exception in another list does not help: lists are separate.
	other := NewList(ListSpec{Name: "other"}, []*Source{except})
	d := Decide("ads.example", []*List{other, NewList(ListSpec{Name: "b"}, []*Source{block})}, false)
	if d.Verdict != VerdictBlocked || d.List != 1 {
		t.Errorf("Decide = %+v, want blocked by list 1", d)
	}
}

func TestDecideAllowListsAndAllowOnly(t *testing.T) {
	block := NewList(ListSpec{Name: "b"}, []*Source{compile(t, SourceSpec{Name: "s"}, "||example.com^\n")})
	allow := NewList(ListSpec{Name: "a", Mode: ModeAllow}, []*Source{compile(t, SourceSpec{Name: "s"}, "||ok.example.com^\n")})
	lists := []*List{block, allow}
	tests := []struct {
		name      string
		allowOnly bool
		want      Verdict
	}{
		{"ads.example.com", false, VerdictBlocked},
		{"x.ok.example.com", false, VerdictAllowed},
		{"other.net", false, VerdictNone},
		{"other.net", true, VerdictNotOnList},
		{"x.ok.example.com", true, VerdictAllowed},
		{"ads.example.com", true, VerdictNotOnList},
	}
	for _, tc := range tests {
		if d := Decide(tc.name, lists, tc.allowOnly); d.Verdict != tc.want {
			t.Errorf("Decide(%q, allowOnly=%v) = %v, want %v", tc.name, tc.allowOnly, d.Verdict, tc.want)
		}
	}
}

func TestDisabledListAndSource(t *testing.T) {
	s := compile(t, SourceSpec{Name: "s"}, "||example.com^\n")
	if m := NewList(ListSpec{Name: "l", Disabled: true}, []*Source{s}).Match("example.com"); m.Matched {
		t.Error("disabled list matched")
	}
	off := compile(t, SourceSpec{Name: "s", Enabled: ptr(false)}, "||example.com^\n")
	if off.Status().Enabled || NewList(ListSpec{Name: "l"}, []*Source{off}).Match("example.com").Matched {
		t.Error("disabled source compiled")
	}
	if !EnabledByAnnotations(nil) || EnabledByAnnotations(map[string]string{AnnotationEnabled: "False"}) {
		t.Error("EnabledByAnnotations")
	}
}

func TestStatusCounts(t *testing.T) {
	ex := []string{"||a.example^", "zzz.example"}
	for i := 0; i < 60; i++ {
		ex = append(ex, "stale"+strings.Repeat("x", i%3)+string(rune('a'+i%26))+".example"+string(rune('a'+i/26)))
	}
	s := compile(t, SourceSpec{Name: "s", Exclude: ex},
		"||a.example^\n||b.example^\n||b.example^\n0.0.0.0 c.example d..example\n1.2.3.4 e.example\n||f.example^$important\n")
	st := s.Status()
	if st.Entries != 3 || st.Excluded != 1 || st.Invalid != 1 || st.Unsupported != 2 || st.RuleCount != 2 {
		t.Errorf("status = %+v", st)
	}
	if len(st.StaleExcludes) != 50 || st.StaleExcludes[0] != "stalea.examplea" {
		t.Errorf("staleExcludes = %d values starting %q", len(st.StaleExcludes), st.StaleExcludes[0])
	}
	l := NewList(ListSpec{Name: "l"}, []*Source{s, s})
	if ls := l.Status(); ls.Entries != 6 || ls.RuleCount != 4 {
		t.Errorf("list status = %+v", ls)
	}
}

func TestReplaceSharesOtherSources(t *testing.T) {
	a := compile(t, SourceSpec{Name: "a"}, "||a.example^\n")
	b := compile(t, SourceSpec{Name: "b"}, "||b.example^\n")
	l1 := NewList(ListSpec{Name: "l"}, []*Source{a, b})
	l2 := l1.Replace(compile(t, SourceSpec{Name: "b"}, "||b2.example^\n"))
	if !l1.Match("b.example").Matched || l1.Match("b2.example").Matched {
		t.Error("old list changed by Replace")
	}
	if l2.Match("b.example").Matched || !l2.Match("b2.example").Matched || !l2.Match("a.example").Matched {
		t.Error("new list wrong")
	}
	if l2.Source("a") != a {
		t.Error("source a not shared")
	}
}

func TestMatchDoesNotAllocate(t *testing.T) {
	l := NewList(ListSpec{Name: "l"}, []*Source{compile(t, SourceSpec{Name: "s"}, "||ads.example.com^\n@@|ok.ads.example.com^\n/tracker/\n")})
	for _, name := range []string{"a.b.c.example.com", "x.ads.example.com.", "OK.ads.example.com", "tracker.net"} {
		if n := testing.AllocsPerRun(100, func() { l.Match(name) }); n != 0 {
			t.Errorf("Match(%q) allocates %v", name, n)
		}
	}
}
