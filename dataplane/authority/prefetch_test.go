package authority

import (
	"bytes"
	"fmt"
	"hash/maphash"
	"strings"
	"sync"
	"testing"

	"github.com/miekg/dns"

	"github.com/svcdns/svc/dataplane/prefetch"
)

// prefetched runs every stage of the prefetch of qname and returns the node
// the stages ended on (nil: none).
func prefetched(tab *Table, qname []byte, qtype uint16) *node {
	var st prefetch.State
	tab.PrefetchStart(qname, qtype, &st)
	for stage := 1; stage < tab.PrefetchStages(); stage++ {
		tab.PrefetchStage(stage, &st)
	}
	return (*node)(st.P)
}

var bigTable = sync.OnceValues(func() (*Table, []Problem) {
	zones, sets := bigZone(5000)
	small := zoneObj("small.test")
	zones = append(zones, small)
	sets = append(sets, recordSet("default", "small", "small.test", ep("www", "A", "192.0.2.1")))
	return Compile(zones, sets, fixtureNow)
})

// The prefetch must load what LookupWire then reads: the node of the name
// asked, found from the name as the datagram holds it (any case).
func TestPrefetchEndsOnTheNodeLookupReads(t *testing.T) {
	tab, problems := bigTable()
	if len(problems) > 0 {
		t.Fatal(problems[0])
	}
	if n := tab.PrefetchStages(); n != 4 {
		t.Fatalf("PrefetchStages = %d for a 5,000-name zone, want 4", n)
	}
	nt := &tab.zones["\x07example\x03com\x00"].nodes
	found, asked := 0, 0
	for i := 0; i < 5000; i += 3 {
		name := fmt.Sprintf("host%d.example.com.", i)
		if i%2 == 0 {
			name = strings.ToUpper(name)
		}
		q := wireName(t, name)
		raw := make([]byte, 256)
		n, _ := dns.PackDomainName(name, raw, 0, nil, false)
		raw = raw[:n] // the datagram's case
		asked++
		nd := prefetched(tab, raw, dns.TypeA)
		if nd != nil && nd.wire == string(q) {
			found++
			continue
		}
		// A miss is allowed only where stage 1 cannot see the name: its
		// slot lies prefetchProbe or more slots past home (nil), or a slot
		// before it in the probe carries its tag (that slot's node).
		dist, first := probeOf(nt, q)
		switch {
		case nd == nil && dist < prefetchProbe && first == nil:
			t.Errorf("%s: no prefetch, though its slot is %d past home", name, dist)
		case nd != nil && nd != first:
			t.Errorf("%s: the prefetch ended on node %q, not the first slot with the name's tag", name, nd.wire)
		}
	}
	// Most names are seen: a probe at load 3/4 is rarely longer than 8
	// slots (the share of misses depends on the process's hash seed).
	if found < asked*85/100 {
		t.Errorf("the prefetch found %d of %d names", found, asked)
	}

	for _, c := range []struct {
		desc string
		name []byte
	}{
		{"a name in no zone", wireName(t, "www.example.org.")},
		{"a name in a small zone", wireName(t, "www.small.test.")},
		{"the root", []byte{0}},
		{"nothing", nil},
		{"not a wire name", []byte{0xff, 'x'}},
		{"longer than a name", bytes.Repeat([]byte{1, 'a'}, 200)},
	} {
		var st prefetch.State
		tab.PrefetchStart(c.name, dns.TypeA, &st)
		if st.P != nil {
			t.Errorf("%s: PrefetchStart set a state (%x)", c.desc, st.N)
		}
		for stage := 1; stage < 4; stage++ {
			tab.PrefetchStage(stage, &st)
		}
	}

	q := wireName(t, "host42.example.com.")
	if a := testing.AllocsPerRun(100, func() { prefetched(tab, q, dns.TypeA) }); a != 0 {
		t.Errorf("a prefetch allocated %v times", a)
	}
	if n := tab.WithSync(func(string, string) bool { return true }).PrefetchStages(); n != 4 {
		t.Errorf("WithSync's table has %d prefetch stages", n)
	}
	small, _ := fixtureTable()
	if n := small.PrefetchStages(); n != 0 {
		t.Errorf("a table of small zones has %d prefetch stages", n)
	}
}

// FuzzPrefetch: the prefetch reads question names from anyone's datagrams.
// It never reads out of bounds, and when LookupWire answers a name from its
// node, the prefetch ended on that node or on none.
func FuzzPrefetch(f *testing.F) {
	for _, n := range []string{"host1.example.com.", "HOST4999.Example.COM.", "nothere.example.com.", "www.small.test.", "."} {
		buf := make([]byte, 256)
		l, _ := dns.PackDomainName(n, buf, 0, nil, false)
		f.Add(buf[:l], uint16(dns.TypeA))
	}
	f.Add([]byte{0xc0, 12}, uint16(dns.TypeAAAA))
	f.Fuzz(func(t *testing.T, name []byte, qtype uint16) {
		tab, problems := bigTable()
		if len(problems) > 0 {
			t.Fatal(problems[0])
		}
		nd := prefetched(tab, name, qtype)
		lower := bytes.Clone(name)
		lowerWire(lower)
		var offs [maxLabels]uint8
		n := labelOffsets(lower, &offs)
		if n == 0 || qtype == dns.TypeAXFR || qtype == dns.TypeIXFR {
			return
		}
		lower = lower[:int(offs[n-1])+1]
		z := tab.zones["\x07example\x03com\x00"]
		want := z.nodes.get(lower)
		if nd != nil && want != nil && nd != want && !sameTag(tab, nd.wire, lower) {
			t.Errorf("%q: the prefetch ended on %q, LookupWire reads %q", name, nd.wire, want.wire)
		}
	})
}

// sameTag reports whether two names' slots in the big zone carry one tag:
// the prefetch's stage 1 cannot tell them apart without reading the node.
func sameTag(tab *Table, a string, b []byte) bool {
	nt := &tab.zones["\x07example\x03com\x00"].nodes
	return tagOf(maphash.String(nt.seed, a)) == tagOf(maphash.Bytes(nt.seed, b))
}

// probeOf returns how many slots past its home the node of name q lies in
// nt, and the node of the first slot before it within prefetchProbe slots
// of home that carries q's tag (nil if none).
func probeOf(nt *nodeTable, q []byte) (dist int, first *node) {
	home, tag := nt.home(q)
	mask := uint64(len(nt.slots) - 1)
	for i := home; ; i = (i + 1) & mask {
		nd := nt.slots[i]
		if nd == nil || nd.wire == string(q) {
			return dist, first
		}
		if first == nil && dist < prefetchProbe && nt.tags[i] == tag {
			first = nd
		}
		dist++
	}
}
