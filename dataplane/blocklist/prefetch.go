package blocklist

import (
	"unsafe"

	"github.com/svcdns/svc/dataplane/prefetch"
)

// A blocked name costs three dependent cache misses in a large table: the
// filter word, the slot, the record (issue #27 item 2: in the 1M-name
// block workload they were a tenth of the server's busy time, and all of
// the gap to a cache hit). A server that holds a batch of queries can hide
// them: Prefetch for every query of the batch starts the first two loads,
// PrefetchRecord for the next query starts the third, and Match then finds
// the lines in the cache. Both only read, and a name that is not on the
// list costs a filter word and a slot line that Match would have read
// anyway (the slot only if the filter lets it through).

// Hash is the hash Match probes the whole name with: name is in
// presentation form without the trailing dot, any case.
func Hash(name []byte) uint64 {
	return hashName(unsafe.String(unsafe.SliceData(name), len(name)))
}

// Prefetch starts loading, in every source of the list, the filter word and
// the first slot that Match reads for the name whose Hash is h.
func (l *List) Prefetch(h uint64) {
	if l == nil || l.spec.Disabled {
		return
	}
	for _, s := range l.sources {
		if t := s.tab; t != nil && len(t.slots) > 0 {
			prefetch.Line(unsafe.Pointer(&t.filter[t.filterBit(h)>>6]))
			prefetch.Line(unsafe.Pointer(&t.slots[slotIndex(h, len(t.slots))]))
		}
	}
}

// PrefetchRecord starts loading the record of the name whose Hash is h, in
// every source whose filter lets h through, once Prefetch's lines are in:
// it reads the filter word and the probe's first slots (plain loads, which
// wait if the lines have not arrived) and prefetches the record of the
// first slot with h's fingerprint.
func (l *List) PrefetchRecord(h uint64) {
	if l == nil || l.spec.Disabled {
		return
	}
	for _, s := range l.sources {
		if c, p, ok := s.tab.firstCandidate(h); ok {
			prefetch.Line(unsafe.Pointer(&c[p]))
		}
	}
}

// prefetchProbe is how many slots PrefetchRecord reads: a probe longer than
// that is rare at load 0.7 (eight slots are one or two cache lines), and Match
// walks it whole anyway.
const prefetchProbe = 8

// firstCandidate returns the chunk and position of the first record whose
// slot carries h's fingerprint within prefetchProbe slots of h's home
// slot: the record lookup compares first. ok is false when the filter
// rejects h or no such slot is near.
func (t *table) firstCandidate(h uint64) (c []byte, p int, ok bool) {
	if t == nil || !t.mayHave(h) {
		return nil, 0, false
	}
	fp := fingerprint(h)
	i := uint(slotIndex(h, len(t.slots)))
	for range prefetchProbe {
		if i >= uint(len(t.slots)) {
			i = 0
		}
		v := t.slots[i]
		if v == 0 {
			return nil, 0, false
		}
		if v>>32 == fp {
			c, p := t.rec(uint32(v) - 1)
			return c, p, true
		}
		i++
	}
	return nil, 0, false
}
