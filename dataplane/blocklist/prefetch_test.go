package blocklist

import (
	"fmt"
	"strings"
	"testing"
)

// The prefetch is only useful if it loads what Match then reads: the hash
// of the whole name, and the record Match compares first. These tests pin
// that, since a wrong prefetch would still give right answers, just slowly.

func TestHashIsMatchsWholeNameHash(t *testing.T) {
	for _, name := range []string{"a", "example.com", "ADS.Example.NET", "x.y.z.w", strings.Repeat("a", 63) + ".b"} {
		want := hashName(strings.ToLower(name))
		if got := Hash([]byte(name)); got != want {
			t.Errorf("Hash(%q) = %x, the hash Match probes %q with is %x", name, got, strings.ToLower(name), want)
		}
	}
}

func TestPrefetchRecordIsTheOneLookupFinds(t *testing.T) {
	var a, b strings.Builder
	const n = 20000
	for i := range n {
		fmt.Fprintf(&a, "p%d.ads%d.test\n", i, i%31)
		if i%3 == 0 {
			fmt.Fprintf(&b, "0.0.0.0 p%d.ads%d.test\n", i, i%31) // half on both sources
		}
	}
	l := NewList(ListSpec{Name: "l"}, []*Source{
		compile(t, SourceSpec{Name: "a", Format: FormatDomains}, a.String()),
		compile(t, SourceSpec{Name: "b", Format: FormatHosts}, b.String()),
	})
	found, within := 0, 0
	for i := range n {
		name := fmt.Sprintf("P%d.ads%d.test", i, i%31)
		h := Hash([]byte(name))
		for si, s := range l.sources {
			flags, off := s.tab.lookup(name, h)
			c, p, ok := s.tab.firstCandidate(h)
			if flags == 0 {
				if si == 0 {
					t.Fatalf("%s: not found in source a", name)
				}
				continue
			}
			found++
			if !ok {
				continue // a probe longer than prefetchProbe
			}
			within++
			wc, wp := s.tab.rec(off)
			if &c[p] != &wc[wp] {
				t.Fatalf("%s in source %d: prefetch would load record at %p, lookup reads %p", name, si, &c[p], &wc[wp])
			}
		}
		// Every source and list call is safe for the name.
		l.Prefetch(h)
		l.PrefetchRecord(h)
	}
	if within < found*95/100 {
		t.Errorf("the prefetch covers %d of %d hits; want at least 95%%", within, found)
	}
	// Names not on the list: no candidate is one of their own (there is
	// none), and most are stopped by the filter or an empty slot.
	stopped := 0
	for i := range n {
		h := Hash(fmt.Appendf(nil, "q%d.other.test", i))
		if _, _, ok := l.sources[0].tab.firstCandidate(h); !ok {
			stopped++
		}
	}
	if stopped < n*9/10 {
		t.Errorf("%d of %d misses would prefetch a record; want under 10%%", n-stopped, n)
	}
}

func TestPrefetchOnEmptyAndDisabledLists(t *testing.T) {
	h := Hash([]byte("example.com"))
	var nilList *List
	nilList.Prefetch(h)
	nilList.PrefetchRecord(h)
	off := NewList(ListSpec{Name: "off", Disabled: true}, []*Source{compile(t, SourceSpec{Name: "a"}, "example.com\n")})
	off.Prefetch(h)
	off.PrefetchRecord(h)
	empty := NewList(ListSpec{Name: "empty"}, []*Source{compile(t, SourceSpec{Name: "a"}, "# nothing\n")})
	empty.Prefetch(h)
	empty.PrefetchRecord(h)
	var t0 *table
	if _, _, ok := t0.firstCandidate(h); ok {
		t.Error("a nil table has a candidate")
	}
}
