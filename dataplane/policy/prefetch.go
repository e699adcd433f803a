package policy

import (
	"unsafe"

	"github.com/svcdns/svc/dataplane/blocklist"
	"github.com/svcdns/svc/dataplane/prefetch"
)

// Prefetching a batch of queries' lookups (dataplane.Prefetcher, two
// stages): the data plane calls Prefetch two queries ahead of deciding on
// a query, then PrefetchRecord one query ahead, so the cache misses of a
// large list overlap with other work instead of stalling Decide (issue
// #27 item 2).

// prefetchMinBytes: a list smaller than this stays in the CPU's caches
// under load, and prefetching it would only cost time.
const prefetchMinBytes = 1 << 20

// maxPrefetchLists bounds the work per query: a table with more large lists
// than this prefetches the first ones (in policy order) only.
const maxPrefetchLists = 8

// prefetchLists is the distinct large lists of the policies, in order.
func prefetchLists(policies []*compiled) []*blocklist.List {
	var out []*blocklist.List
	seen := map[*blocklist.List]bool{}
	for _, p := range policies {
		if p == nil || p.refused {
			continue
		}
		for _, refs := range [][]listRef{p.allow, p.block} {
			for _, r := range refs {
				l := r.list
				if l == nil || seen[l] || l.Spec().Disabled || l.SizeBytes() < prefetchMinBytes {
					continue
				}
				seen[l] = true
				if len(out) < maxPrefetchLists {
					out = append(out, l)
				}
			}
		}
	}
	return out
}

// Prefetch starts loading what deciding on qname (wire form, as Decide
// takes it) first reads in the table's large lists, and returns the
// name's hash for PrefetchRecord; 0 when there is nothing to prefetch.
func (t *Table) Prefetch(qname []byte) uint64 {
	if len(t.prefetch) == 0 {
		return 0
	}
	var buf [256]byte
	h := blocklist.Hash(presentation(&buf, qname))
	for _, l := range t.prefetch {
		l.Prefetch(h)
	}
	return h
}

// PrefetchRecord starts loading the list records of the name Prefetch
// returned h for (0: nothing).
func (t *Table) PrefetchRecord(h uint64) {
	if h == 0 {
		return
	}
	for _, l := range t.prefetch {
		l.PrefetchRecord(h)
	}
}

// PrefetchStages is 3 when the table has a list large enough to prefetch
// (the verdict table's set; the verdict's record, or the filter and slot;
// the record), else 0.
func (t *Table) PrefetchStages() int {
	if len(t.prefetch) == 0 {
		return 0
	}
	return 3
}

// Stage 0 starts loading the name's set in every list's verdict table
// (blocklist.List.Cached) and keeps the name's cache key in st.K and its
// hash in st.N.
func (t *Table) PrefetchStart(qname []byte, _ uint16, st *prefetch.State) {
	st.N, st.K, st.P = 0, 0, nil
	if len(t.prefetch) == 0 {
		return
	}
	var buf [256]byte
	name := presentation(&buf, qname)
	if len(name) == 0 {
		return
	}
	k := blocklist.CacheKey(name)
	for _, l := range t.prefetch {
		l.PrefetchCache(k)
	}
	st.N, st.K = blocklist.Hash(name), k
	if plainName(qname) {
		st.P = unsafe.Pointer(&plainMark)
	}
}

// plainMark in a State's P says that the query's name is plainName: a
// block by a rule that is the name itself takes the rule's text from the
// name (DecideInto), so its record is not loaded.
var plainMark byte

// PrefetchStage runs stage 1 (a list with its verdict cached loads the
// verdict's rule record, the others the filter and first slot, as
// Prefetch) and stage 2 (PrefetchRecord in the lists without a cached
// verdict).
func (t *Table) PrefetchStage(stage int, st *prefetch.State) {
	if st.N == 0 {
		return
	}
	for _, l := range t.prefetch {
		switch {
		case stage == 1 && !l.PrefetchVerdict(st.K, st.P == unsafe.Pointer(&plainMark)):
			l.Prefetch(st.N)
		case stage == 2 && !l.Cached(st.K):
			l.PrefetchRecord(st.N)
		}
	}
}
