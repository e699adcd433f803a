package policy

import (
	"github.com/svcdns/svc/dataplane/blocklist"
	"github.com/svcdns/svc/dataplane/prefetch"
	"github.com/svcdns/svc/dataplane/wire"
)

// Prefetching a batch of queries' lookups (dataplane.Prefetcher, three
// stages run a query apart: PrefetchStart, then PrefetchStage 1 and 2), so
// the cache misses of a large list overlap with other work instead of
// stalling Decide (issue #27 item 2).

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
	*st = prefetch.State{}
	if len(t.prefetch) == 0 {
		return
	}
	var buf [256]byte
	name, plain := wire.Dotted(&buf, qname)
	if len(name) == 0 {
		return
	}
	k := blocklist.CacheKey(name)
	for _, l := range t.prefetch {
		l.PrefetchCache(k)
	}
	// Flag: a block by a rule that is the name itself takes the rule's
	// text from the name (DecideInto), so its record is not loaded.
	st.N, st.K, st.Flag = blocklist.Hash(name), k, plain
}

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
		case stage == 1 && !l.PrefetchVerdict(st.K, st.Flag):
			l.Prefetch(st.N)
		case stage == 2 && !l.Cached(st.K):
			l.PrefetchRecord(st.N)
		}
	}
}
