package blocklist

import (
	"context"
	"fmt"
	"math/rand/v2"
	"strings"
	"sync"
	"testing"
)

// cachedCopy is l with a verdict table whatever its size, and uncached
// is l without one.
func cachedCopy(l *List) (cached, uncached *List) {
	c, u := *l, *l
	c.cache, u.cache = newMatchCache(), nil
	return &c, &u
}

func mixedList(t testing.TB) *List {
	t.Helper()
	var b strings.Builder
	for i := range 3000 {
		fmt.Fprintf(&b, "||ads%d.example^\n", i)
		if i%10 == 0 {
			fmt.Fprintf(&b, "@@||ok.ads%d.example^\n", i)
		}
	}
	b.WriteString("*.wild.example\n/^rx[0-9]+\\./\n@@/^rx7/\n")
	adb, err := CompileSource(context.Background(), SourceSpec{Name: "adb"}, strings.NewReader(b.String()))
	if err != nil {
		t.Fatal(err)
	}
	hosts, err := CompileSource(context.Background(), SourceSpec{Name: "hosts"},
		strings.NewReader("0.0.0.0 h1.example\n0.0.0.0 ads5.example\n0.0.0.0 ok.ads10.example\n"))
	if err != nil {
		t.Fatal(err)
	}
	return NewList(ListSpec{Name: "l"}, []*Source{hosts, adb})
}

// queryNames are names on and off the list, in mixed case, with and
// without the trailing dot: each is asked as given.
func queryNames(n int) []string {
	r := rand.New(rand.NewPCG(5, 6))
	out := make([]string, 0, n)
	for len(out) < n {
		var s string
		switch r.IntN(8) {
		case 0:
			s = fmt.Sprintf("ads%d.example", r.IntN(4000))
		case 1:
			s = fmt.Sprintf("x.ok.ads%d.example", r.IntN(4000))
		case 2:
			s = fmt.Sprintf("a%d.wild.example", r.IntN(100))
		case 3:
			s = fmt.Sprintf("rx%d.test", r.IntN(100))
		case 4:
			s = "h1.example"
		case 5:
			s = fmt.Sprintf("www%d.other.test", r.IntN(1_000_000))
		case 6:
			s = fmt.Sprintf("ADS%d.Example.", r.IntN(4000))
		default:
			s = "ok.ads10.example"
		}
		out = append(out, s)
	}
	return out
}

// A verdict from the table is the verdict Match computes: the same
// match, source and rule text, on the first ask (a miss that fills the
// table) and on the next ones (hits), for every kind of rule, with more
// names than the table holds.
func TestMatchCacheGivesMatchsVerdicts(t *testing.T) {
	cached, plain := cachedCopy(mixedList(t))
	names := queryNames(100_000)
	hits := 0
	for round := range 2 {
		for _, n := range names {
			want, got := plain.Match(n), cached.Match(n)
			if got != want || cached.RuleText(got) != plain.RuleText(want) {
				t.Fatalf("round %d: %q: cached %+v (%q), Match %+v (%q)", round, n, got, cached.RuleText(got), want, plain.RuleText(want))
			}
		}
	}
	for _, n := range names[len(names)-1000:] {
		if cached.cache.has(cacheKeyString(strings.TrimSuffix(n, "."))) {
			hits++
		}
	}
	if hits < 500 {
		t.Errorf("%d of the last 1,000 names asked are in the table; it keeps too little", hits)
	}
}

// Goroutines that fill and read the table at once (run with -race) get
// Match's verdicts: a torn entry is a miss, never a wrong verdict.
func TestMatchCacheConcurrent(t *testing.T) {
	cached, plain := cachedCopy(mixedList(t))
	names := queryNames(20_000)
	want := make([]Match, len(names))
	for i, n := range names {
		want[i] = plain.Match(n)
	}
	var wg sync.WaitGroup
	for g := range 4 {
		wg.Go(func() {
			r := rand.New(rand.NewPCG(uint64(g), 9))
			for range 50_000 {
				i := r.IntN(len(names))
				if got := cached.Match(names[i]); got != want[i] {
					t.Errorf("%q: %+v, want %+v", names[i], got, want[i])
					return
				}
			}
		})
	}
	wg.Wait()
}

// Only large lists get a table, and a replaced list starts with an empty
// one: a verdict of the list before is never served by the list after.
func TestMatchCacheLifetime(t *testing.T) {
	small := mixedList(t)
	if small.cache != nil {
		t.Errorf("a list of %d bytes has a verdict table", small.SizeBytes())
	}
	var b strings.Builder
	for i := range 80_000 {
		fmt.Fprintf(&b, "n%d.big.test\n", i)
	}
	b.WriteString("gone.test\n")
	src, err := CompileSource(context.Background(), SourceSpec{Name: "s"}, strings.NewReader(b.String()))
	if err != nil {
		t.Fatal(err)
	}
	big := NewList(ListSpec{Name: "big"}, []*Source{src})
	if big.cache == nil {
		t.Fatalf("a list of %d bytes (at least %d) has no verdict table", big.SizeBytes(), cacheMinBytes)
	}
	if !big.Match("gone.test").Matched || !big.Match("gone.test").Matched {
		t.Fatal("gone.test is on the list")
	}
	if !big.Cached(CacheKey([]byte("gone.test"))) {
		t.Fatal("the verdict on gone.test was not kept")
	}
	src2, err := CompileSource(context.Background(), SourceSpec{Name: "s"}, strings.NewReader(strings.Replace(b.String(), "gone.test\n", "", 1)))
	if err != nil {
		t.Fatal(err)
	}
	after := big.Replace(src2)
	if after.cache == nil || after.cache == big.cache {
		t.Fatal("the replaced list has no table of its own")
	}
	if after.Cached(CacheKey([]byte("gone.test"))) || after.Match("gone.test").Matched {
		t.Error("the replaced list still blocks gone.test")
	}
	off := NewList(ListSpec{Name: "off", Disabled: true}, []*Source{src})
	if off.cache != nil || off.Match("gone.test").Matched {
		t.Error("a disabled list keeps verdicts")
	}
	if a := testing.AllocsPerRun(100, func() { big.Match("n5.big.test") }); a != 0 {
		t.Errorf("a cached verdict allocates %v", a)
	}
}

func TestPackMatchRoundTrips(t *testing.T) {
	for _, m := range []Match{
		{Source: -1},
		{Matched: true, Source: 0, Rule: RuleID{kind: flagSubtree, off: 1<<32 - 1}},
		{Matched: true, Source: 65534, Rule: RuleID{kind: kindBlockRe, plain: true, off: 7}},
		{Exception: true, Source: 3, Rule: RuleID{kind: kindExceptRe, off: 0}},
		{Exception: true, Source: 1, Rule: RuleID{kind: flagExWild | flagExSubtree, off: 12345}},
	} {
		v, ok := packMatch(m)
		if !ok || unpackMatch(v) != m {
			t.Errorf("%+v packs to %x (%v), unpacks to %+v", m, v, ok, unpackMatch(v))
		}
	}
	if _, ok := packMatch(Match{Matched: true, Source: 65535}); ok {
		t.Error("a source index past 16 bits was packed")
	}
}
