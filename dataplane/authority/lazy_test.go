package authority

import (
	"fmt"
	"runtime"
	"testing"

	"github.com/miekg/dns"
)

// Answering a name from its pre-encoded wire must not build the dns.RR
// objects of its compact set: they are kept once built, and building them
// for every name asked grew a zone's heap by 128 bytes per answered name
// (two thirds again of what a compact record costs) on the fast path,
// which never reads them.
func TestLookupWireLeavesCompactSetsCompact(t *testing.T) {
	const n = 20_000
	zones, sets := bigZone(n)
	tab, problems := Compile(zones, sets, fixtureNow)
	if len(problems) > 0 {
		t.Fatal(problems[0])
	}
	names := make([][]byte, n)
	for i := range names {
		names[i] = wireName(t, fmt.Sprintf("host%d.example.com.", i))
	}
	var before, after runtime.MemStats
	runtime.GC()
	runtime.ReadMemStats(&before)
	var a Answer
	allocs := testing.AllocsPerRun(1, func() {
		for _, q := range names {
			if tab.LookupWire(q, dns.TypeA, Client{}, &a); a.Kind != Answered || a.Wire == nil || a.Answer != nil || a.Counts != [3]uint16{1, 0, 0} {
				t.Fatalf("LookupWire(%s) = %v wire %d bytes, %d records built, counts %v", q, a.Kind, len(a.Wire), len(a.Answer), a.Counts)
			}
		}
	})
	runtime.GC()
	runtime.ReadMemStats(&after)
	if allocs != 0 {
		t.Errorf("answering %d names from their wire allocated %v times", n, allocs)
	}
	if grew := int64(after.HeapAlloc) - int64(before.HeapAlloc); grew > n*8 {
		t.Errorf("the heap grew by %d bytes (%d per name) answering from the wire", grew, grew/n)
	}

	// Filled, the sections are Lookup's, and Lookup's stay as they were.
	for _, i := range []int{0, 1, n / 2, n - 1} {
		q := names[i]
		var lazy Answer
		tab.LookupWire(q, dns.TypeA, Client{}, &lazy)
		lazy.Fill()
		full := tab.Lookup(q, dns.TypeA, Client{})
		if fmt.Sprint(lazy) != fmt.Sprint(full) || len(full.Answer) != 1 || full.Answer[0].Header().Name != fmt.Sprintf("host%d.example.com.", i) {
			t.Errorf("host%d: filled %v, Lookup %v", i, lazy, full)
		}
	}
}
