package authority

import (
	"unsafe"

	"github.com/svcdns/svc/dataplane/prefetch"
)

// Prefetching an exact answer (dataplane.Prefetcher). In a zone larger
// than the CPU's caches an exact answer costs up to four dependent cache
// misses: the slot of the name's hash, the node it points to, the node's
// name and record sets, the set's pre-encoded answer. Under dnsperf's auth
// workload (10,000 names) they were about a tenth of the server's busy
// time (nodeTable.get, the name comparison, the copy of the answer). Each
// stage below issues the loads that the lines of the stage before make
// known; LookupWire then reads them from the cache. All only read.

// prefetchMinNodes: a zone with fewer names stays in the CPU's caches under
// load (a node, its name, its set and its answer are about 200 bytes), and
// prefetching it would only cost time.
const prefetchMinNodes = 4096

// prefetchProbe bounds the slots stage 1 walks from a name's home slot (a
// probe at load 3/4 is short; LookupWire walks a longer one anyway).
const prefetchProbe = 8

// indexPrefetch fills bigApexLens: the apex lengths of the zones worth
// prefetching.
func (t *Table) indexPrefetch() {
	t.bigApexLens = lenSet{}
	for w, z := range t.zones {
		if z.typ == primary && z.nodes.len() >= prefetchMinNodes {
			t.bigApexLens.add(len(w))
		}
	}
}

// PrefetchStages is 4 when some zone is large enough to prefetch, else 0.
func (t *Table) PrefetchStages() int {
	if t.bigApexLens == (lenSet{}) {
		return 0
	}
	return 4
}

// PrefetchStart (stage 0) finds qname's zone among the large ones, hashes
// the name and starts loading its home slot. st.P is the zone's node table
// and st.N the slot, the hash's tag and qtype; P is nil when qname is in no
// large zone.
func (t *Table) PrefetchStart(qname []byte, qtype uint16, st *prefetch.State) {
	*st = prefetch.State{}
	if len(qname) == 0 || len(qname) > 255 {
		return
	}
	var buf [256]byte
	name := buf[:len(qname)]
	copy(name, qname)
	lowerWire(name)
	var offs [maxLabels]uint8
	n := labelOffsets(name, &offs)
	if n == 0 {
		return
	}
	name = name[:int(offs[n-1])+1]
	var z *zone // as LookupWire finds it, among the large zones' apexes
	for i := 0; i < n && z == nil; i++ {
		if t.bigApexLens.has(len(name) - int(offs[i])) {
			z = t.zones[string(name[offs[i]:])]
		}
	}
	if z == nil || z.typ != primary || len(z.nodes.slots) == 0 {
		return
	}
	nt := &z.nodes
	slot, tag := nt.home(name)
	prefetch.Line(unsafe.Pointer(&nt.tags[slot]))
	prefetch.Line(unsafe.Pointer(&nt.slots[slot]))
	st.P, st.N = unsafe.Pointer(nt), slot|uint64(tag)<<40|uint64(qtype)<<48
}

// PrefetchStage runs stages 1 to 3 of st's query:
//   - 1: the first slot near home with the name's tag; starts loading its
//     node, and st.P becomes the node (nil when the name is absent);
//   - 2: starts loading the node's name and its record sets;
//   - 3: starts loading the pre-encoded answer of the set of qtype.
func (t *Table) PrefetchStage(stage int, st *prefetch.State) {
	if st.P == nil {
		return
	}
	switch stage {
	case 1:
		nt := (*nodeTable)(st.P)
		st.P = nil
		mask := uint64(len(nt.slots) - 1)
		tag := uint8(st.N >> 40)
		for i, k := st.N&(1<<40-1), 0; k < prefetchProbe; i, k = (i+1)&mask, k+1 {
			switch nt.tags[i] {
			case 0:
				return
			case tag:
				nd := nt.slots[i]
				prefetch.Line(unsafe.Pointer(nd))
				prefetch.Line(unsafe.Add(unsafe.Pointer(nd), unsafe.Sizeof(*nd)-1))
				st.P = unsafe.Pointer(nd)
				return
			}
		}
	case 2:
		nd := (*node)(st.P)
		prefetch.Line(unsafe.Pointer(unsafe.StringData(nd.wire)))
		if len(nd.sets) > 0 {
			prefetch.Line(unsafe.Pointer(&nd.sets[0]))
		}
	case 3:
		nd := (*node)(st.P)
		if s := nd.set(uint16(st.N >> 48)); s != nil && len(s.wire) > 0 {
			prefetch.Line(unsafe.Pointer(&s.wire[0]))
		}
	}
}
