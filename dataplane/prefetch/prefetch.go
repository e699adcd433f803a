// Package prefetch lets a server that holds a batch of queries overlap
// their cache misses: while one query is answered, the loads of the next
// ones are started (Line), in stages, each stage issuing the loads that
// the lines of the stage before make known (a hash table's slot, then the
// record it points to, then what the record points to).
//
// A large zone or block list is read at random, one to four dependent
// cache misses per query, each as long as a good part of the query's
// user-space work; with the loads of the next queries on their way, the
// lookup finds its lines in the cache.
package prefetch

import "unsafe"

// State carries one query's prefetch from a stage to the next. The stages
// of one prefetcher define what it holds; P keeps what it points to alive,
// so a caller clears a State it no longer uses.
type State struct {
	P    unsafe.Pointer
	N, K uint64
	Flag bool
}

// MaxStages bounds the stages of a prefetcher: a query's first loads are
// started at most this many queries ahead.
const MaxStages = 4
