package querylog

import (
	"cmp"
	"context"
	"database/sql"
	"database/sql/driver"
	"encoding/binary"
	"fmt"
	"slices"
	"strconv"
	"strings"
	"sync/atomic"
)

// Postings replace secondary indexes on queries. A B-tree index costs one
// random insert per row and index (about 3 us each in this pure-Go SQLite,
// as much as the row itself); a posting row instead lists the ids of one
// batch that share a domain group, a client group or a status, so a batch
// writes at most about 64 + 64 + 12 posting rows whatever its size.
//
// postings(k, first, ids): k = bucket<<34 | dim<<32 | value, where bucket
// is id >> bucketBits and dim is postDomain, postClient or postStatus. For
// domains and clients the value is the name's group (the top groupBits
// bits of the low 32 bits of nameHash) and every id carries a 16-bit tag
// (the hash's low 16 bits), so a read skips most other names of the group
// without fetching their rows; for statuses the value is the stored
// status. first is the batch's first id with that key; ids holds the tag
// of the first id, then per further id its uvarint delta and tag (no tags
// for statuses). Reads walk the buckets newest first and check the rows
// they fetch against the filter (a hash collision costs a lookup, never a
// wrong row).
const (
	postDomain = 0
	postClient = 1
	postStatus = 2
)

// groupBits: 64 groups per dimension and bucket. With rows in blocks the
// posting rows were most of a batch's SQLite work (the compact layout used
// 1024 groups: up to about 2000 posting rows per batch); with 64 a read of
// a rare name decodes 1/64 of the ids of each bucket (about 250 entries,
// the tags skip the others without fetching rows).
const groupBits = 6

// postKey is the postings key of a value in the bucket of id.
func postKey(bucket int64, dim int, v uint32) int64 {
	return bucket<<34 | int64(dim)<<32 | int64(v)
}

// nameGroup returns the posting value and tag of a domain or client.
func nameGroup(s string) (group uint32, tag uint16) { return nameGroupBits(s, groupBits) }

func nameGroupBits(s string, bits int) (group uint32, tag uint16) { return groupOf(nameHash(s), bits) }

// groupOf is nameGroupBits of a name whose nameHash is nh.
func groupOf(nh int64, bits int) (group uint32, tag uint16) {
	h := uint32(nh)
	return h >> (32 - bits), uint16(h)
}

func tagged(dim int) bool { return dim != postStatus }

// statusPostValue is the posting value of a stored status.
func statusPostValue(stored any) uint32 {
	switch x := stored.(type) {
	case int64:
		return uint32(x)
	case string:
		return uint32(nameHash(x))
	}
	return 0
}

// postingBuilder collects one batch's postings; reused between batches.
type postingBuilder struct {
	bits  int // group bits; 0: groupBits (the compact baseline sets 10)
	idx   map[int64]int32
	keys  []postHead
	bufs  [][]byte // per posting (by index in keys) its encoded ids; reused
	order []int32  // indexes of keys in key order (sortKeys)
	// direct[dim][g] is 1 + the index in keys of group g's posting of
	// dim (postDomain, postClient) in bucket cur, 0 for none yet: a map
	// lookup per row and dimension was a sixth of the postings' cost.
	// Statuses, a few per batch and in runs, keep the map.
	direct [2][]int32
	cur    int64
	// The previous row's client and its group: a run of one client's
	// queries hashes its address once.
	lastClient string
	lastG      uint32
	lastT      uint16
	// The previous row's status key and its posting.
	lastStatus  int64
	lastStatusI int32

	// pub, when set, makes the builder the writer's deferred one: it
	// keeps the postings of a bucket until the bucket is complete and
	// writes each of its keys once (writeClosed), publishing what it has
	// not written for readers after every batch. Written per batch, a
	// posting row of each key went into the middle of its bucket's range
	// of the table, next to the previous batch's: a batch dirtied about as
	// many pages as the bucket had, and the postings were a fifth of the
	// query log's CPU per row (BenchmarkLogPipeline: 426 vs 343 ns per row
	// without them, 345 deferred).
	pub *atomic.Pointer[pendingPostings]
	// ignoreDup: keep a posting row already in the table
	// (recoverPostings).
	ignoreDup bool
	// wroteBelow is set by writeClosed: the postings of the buckets below
	// it were written by the transaction in progress and leave the
	// builder when it commits (committed); 0 for none.
	wroteBelow int64
}

// pendingPostings is a copy of the postings the writer has not written
// yet (its open buckets'), published after each batch and before the
// batch commits: readers load it before they query the table, so an id
// they can see is in one or the other (postingIDs). The blobs share the
// builder's buffers up to their length at publication: the builder only
// appends past it and never reuses a buffer it has published.
type pendingPostings struct {
	heads []postHead
	blobs [][]byte
}

// add appends the ids with lo <= id < hi that the pending postings list
// for src in buckets b-n+1..b.
func (pp *pendingPostings) add(out []int64, src postSource, b, n, lo, hi int64) []int64 {
	if pp == nil {
		return out
	}
	for i := range pp.heads {
		h := &pp.heads[i]
		bk := h.key >> 34
		if bk > b || bk <= b-n || int(h.key>>32&3) != src.dim || !slices.Contains(src.vals, uint32(h.key)) {
			continue
		}
		out = decodeIDs(out, h.first, pp.blobs[i], lo, hi, h.tagged, src.tag)
	}
	return out
}

// throughSQL records the last id whose postings are in the table.
const throughSQL = "INSERT OR REPLACE INTO meta (k, v) VALUES ('postings_through', ?)"

// publish hands readers a copy of the builder's postings.
func (p *postingBuilder) publish() {
	if p.pub == nil {
		return
	}
	pp := &pendingPostings{heads: slices.Clone(p.keys), blobs: make([][]byte, len(p.keys))}
	for i := range p.keys {
		b := p.bufs[i]
		pp.blobs[i] = b[:len(b):len(b)]
	}
	p.pub.Store(pp)
}

// writeClosed writes the postings of the buckets below open, which are
// complete (the ids of the batch just encoded reach open or beyond), and
// records the ids below open's first as covered. They stay in the builder
// until the transaction commits (committed) or rolls back (rolledBack).
func (p *postingBuilder) writeClosed(d *dconn, open int64) error {
	n := 0
	for i := range p.keys {
		if p.keys[i].key>>34 < open {
			n++
		}
	}
	if n == 0 {
		return nil
	}
	if err := p.writeFirst(d, n, open<<bucketBits-1); err != nil {
		return err
	}
	p.wroteBelow = open
	return nil
}

// writeAll writes every posting the builder holds and records the ids
// through last as covered (the writer's close).
func (p *postingBuilder) writeAll(d *dconn, last int64) error {
	return p.writeFirst(d, len(p.keys), last)
}

// writeFirst writes the first n postings in key order (a key's bucket is
// its top bits: the oldest buckets' come first) and records the ids
// through through as covered.
func (p *postingBuilder) writeFirst(d *dconn, n int, through int64) error {
	p.sortKeys()
	if err := p.writeOrdered(d, n); err != nil {
		return err
	}
	if err := d.exec(throughSQL, through); err != nil {
		return fmt.Errorf("record postings: %w", err)
	}
	return nil
}

// committed drops the postings the committed transaction wrote and
// publishes the rest.
func (p *postingBuilder) committed() {
	below := p.wroteBelow
	if below == 0 {
		return
	}
	p.wroteBelow = 0
	j := 0
	for i := range p.keys {
		if p.keys[i].key>>34 >= below {
			p.keys[j], p.bufs[j] = p.keys[i], p.bufs[i]
			j++
		}
	}
	// The written postings' buffers may be read from an earlier
	// publication: they are let go, never reused.
	clear(p.bufs[j:])
	p.keys, p.bufs = p.keys[:j], p.bufs[:j]
	for d := range p.direct {
		clear(p.direct[d])
	}
	clear(p.idx)
	p.lastStatusI = -1
	for i := range p.keys {
		k := p.keys[i].key
		switch dim := int(k >> 32 & 3); {
		case dim == postStatus:
			p.idx[k] = int32(i)
		case k>>34 == p.cur && p.direct[dim] != nil:
			p.direct[dim][uint32(k)] = int32(i) + 1
		}
	}
	p.publish()
}

// rolledBack forgets what the failed transaction wrote: the postings are
// written again with the next complete bucket.
func (p *postingBuilder) rolledBack() { p.wroteBelow = 0 }

// A posting's ids are encoded as they arrive (ids arrive in increasing
// order), each appended to its posting's buffer: a batch touches the ends
// of about 140 buffers instead of walking a list per posting at the end.
type postHead struct {
	key         int64
	first, last int64 // the first and the latest id
	tagged      bool
}

func (p *postingBuilder) reset() {
	if p.idx == nil {
		p.idx = map[int64]int32{}
	}
	clear(p.idx)
	p.keys = p.keys[:0]
	p.cur, p.lastStatusI = -1, -1
}

// add appends id (and its tag) to the posting key.
func (p *postingBuilder) add(key, id int64, tag uint16, withTag bool) {
	i, ok := p.idx[key]
	if !ok {
		i = p.newKey(key, withTag)
		p.idx[key] = i
	}
	p.addTo(i, id, tag)
}

// addGroup appends id (and its tag) to the posting of group g of dim
// (postDomain or postClient) in bucket b.
func (p *postingBuilder) addGroup(b int64, dim int, g uint32, id int64, tag uint16) {
	if b != p.cur {
		for d := range p.direct {
			clear(p.direct[d])
		}
		p.cur = b
	}
	t := p.direct[dim]
	if t == nil {
		t = make([]int32, 1<<cmp.Or(p.bits, groupBits))
		p.direct[dim] = t
	}
	i := t[g] - 1
	if i < 0 {
		i = p.newKey(postKey(b, dim, g), true)
		t[g] = i + 1
	}
	p.addTo(i, id, tag)
}

// newKey starts an empty posting and returns its index in keys.
func (p *postingBuilder) newKey(key int64, withTag bool) int32 {
	i := len(p.keys)
	p.keys = append(p.keys, postHead{key: key, first: -1, tagged: withTag})
	if i == len(p.bufs) {
		p.bufs = append(p.bufs, nil)
	}
	p.bufs[i] = p.bufs[i][:0]
	if p.pub != nil && p.bufs[i] == nil {
		// A deferred posting collects a bucket's ids (a domain group's
		// are about 16384/64 ids of 3 bytes): grown from nothing by
		// append, its copies doubled the cost of adding ids.
		p.bufs[i] = make([]byte, 0, deferredBufCap)
	}
	return int32(i)
}

// deferredBufCap is the first capacity of a deferred posting's buffer.
const deferredBufCap = 1024

// addTo appends an id to posting i: the first id is the posting's first
// (only its tag is encoded), each later one its delta from the one
// before, then its tag.
func (p *postingBuilder) addTo(i int32, id int64, tag uint16) {
	h := &p.keys[i]
	b := p.bufs[i]
	if h.first < 0 {
		h.first = id
	} else {
		b = binary.AppendUvarint(b, uint64(id-h.last))
	}
	if h.tagged {
		b = binary.LittleEndian.AppendUint16(b, tag)
	}
	h.last = id
	p.bufs[i] = b
}

// sortKeys orders the postings by key (inserts in key order): encode's
// index i is the i-th smallest key. keys and bufs stay in the order the
// postings were made, so each buffer is reused by a posting of about its
// size in the next batch.
func (p *postingBuilder) sortKeys() {
	p.order = p.order[:0]
	for i := range p.keys {
		p.order = append(p.order, int32(i))
	}
	slices.SortFunc(p.order, func(a, b int32) int { return cmp.Compare(p.keys[a].key, p.keys[b].key) })
}

// encode returns the i-th posting in key order (after sortKeys): its key,
// first id and ids blob (empty when there is nothing after the first id
// and no tag). The blob is the posting's own buffer, valid until the next
// batch: the driver copies it when it binds.
func (p *postingBuilder) encode(i int) (key, first int64, blob []byte) {
	j := p.order[i]
	h := &p.keys[j]
	return h.key, h.first, p.bufs[j]
}

func (p *postingBuilder) group(s string) (uint32, uint16) {
	if p.bits > 0 {
		return nameGroupBits(s, p.bits)
	}
	return nameGroup(s)
}

// addRow adds a row's domain, client and status (stored value). nh is
// nameHash(domain) when the caller has it, 0 to hash it here.
func (p *postingBuilder) addRow(id int64, domain string, nh int64, client string, status any) {
	b := bucketOf(id)
	if domain != "" {
		var g uint32
		var t uint16
		if nh != 0 && p.bits == 0 {
			g, t = groupOf(nh, groupBits)
		} else {
			g, t = p.group(domain)
		}
		p.addGroup(b, postDomain, g, id, t)
	}
	if client != "" {
		if client != p.lastClient {
			p.lastClient = client
			p.lastG, p.lastT = p.group(client)
		}
		p.addGroup(b, postClient, p.lastG, id, p.lastT)
	}
	if status != nil {
		key := postKey(b, postStatus, statusPostValue(status))
		if p.lastStatusI < 0 || key != p.lastStatus {
			p.add(key, id, 0, false)
			p.lastStatus, p.lastStatusI = key, p.idx[key]
			return
		}
		p.addTo(p.lastStatusI, id, 0)
	}
}

// decodeIDs appends the ids of a posting with lo <= id < hi and, when
// withTag, the given tag.
func decodeIDs(out []int64, first int64, blob []byte, lo, hi int64, withTag bool, tag uint16) []int64 {
	id := first
	for {
		ok := id >= lo && id < hi
		if withTag {
			if len(blob) < 2 {
				return out
			}
			ok = ok && binary.LittleEndian.Uint16(blob) == tag
			blob = blob[2:]
		}
		if ok {
			out = append(out, id)
		}
		if len(blob) == 0 {
			return out
		}
		d, n := binary.Uvarint(blob)
		if n <= 0 {
			return out
		}
		blob = blob[n:]
		id += int64(d)
	}
}

const postingsSQL = "INSERT INTO postings (k, first, ids) VALUES (?, ?, ?)"

// postingsChunk is how many postings one INSERT statement carries.
const postingsChunk = 64

// postingsChunkSQL inserts postingsChunk postings.
var postingsChunkSQL = "INSERT INTO postings (k, first, ids) VALUES " + strings.TrimSuffix(strings.Repeat("(?,?,?),", postingsChunk), ",")

// write inserts the batch's postings in key order, postingsChunk per
// statement (one statement per posting cost twice as much).
func (p *postingBuilder) write(d *dconn) error {
	p.sortKeys()
	return p.writeOrdered(d, len(p.keys))
}

// writeOrdered inserts the first total postings in key order (after
// sortKeys).
func (p *postingBuilder) writeOrdered(d *dconn, total int) error {
	for next := 0; next < total; {
		n, q := 1, postingsSQL
		if total-next >= postingsChunk {
			n, q = postingsChunk, postingsChunkSQL
		}
		if p.ignoreDup {
			q = "INSERT OR IGNORE" + strings.TrimPrefix(q, "INSERT")
		}
		st, err := d.stmt(q)
		if err != nil {
			return fmt.Errorf("insert postings: %w", err)
		}
		d.nv = d.nv[:0]
		for i := range n {
			key, first, b := p.encode(next + i)
			var blob any
			if len(b) > 0 {
				blob = b
			}
			d.nv = append(d.nv, driver.NamedValue{Ordinal: 3*i + 1, Value: key},
				driver.NamedValue{Ordinal: 3*i + 2, Value: first}, driver.NamedValue{Ordinal: 3*i + 3, Value: blob})
		}
		if err := d.execNV(st); err != nil {
			return fmt.Errorf("insert postings: %w", err)
		}
		next += n
	}
	return nil
}

// postSource is one condition answered by postings: any of vals in dim
// (for domains and clients one group and the name's tag).
type postSource struct {
	dim  int
	vals []uint32
	tag  uint16
}

// nameSource is the postings source of a domain or client.
func nameSource(dim int, name string) postSource {
	g, t := nameGroup(name)
	return postSource{dim: dim, vals: []uint32{g}, tag: t}
}

// postingIDs returns the ids in [lo, hi) of the buckets b-n+1..b that
// postings list for src, descending, without duplicates: the table's and
// pend's, the writer's postings not yet written. pend must be loaded
// before the call: the writer publishes a batch's postings before the
// batch commits and drops written ones after their commit, so an id that
// a reader can see is in pend or in the table its statement reads.
func postingIDs(ctx context.Context, db rowStore, pend *pendingPostings, src postSource, b, n, lo, hi int64) ([]int64, error) {
	var in strings.Builder
	first := true
	for i := range n {
		for _, v := range src.vals {
			if !first {
				in.WriteByte(',')
			}
			first = false
			in.WriteString(strconv.FormatInt(postKey(b-i, src.dim, v), 10))
		}
	}
	rs, err := db.QueryContext(ctx, "SELECT first, ids FROM postings WHERE k IN ("+in.String()+") AND first < ?", hi)
	if err != nil {
		return nil, fmt.Errorf("query log postings: %w", err)
	}
	defer rs.Close()
	var out []int64
	for rs.Next() {
		var f int64
		var blob []byte
		if err := rs.Scan(&f, &blob); err != nil {
			return nil, fmt.Errorf("query log postings: %w", err)
		}
		out = decodeIDs(out, f, blob, lo, hi, tagged(src.dim), src.tag)
	}
	if err := rs.Err(); err != nil {
		return nil, fmt.Errorf("query log postings: %w", err)
	}
	out = pend.add(out, src, b, n, lo, hi)
	slices.SortFunc(out, func(a, b int64) int { return cmp.Compare(b, a) })
	return slices.Compact(out), nil
}

// intersectDesc keeps the ids of a (descending) that are in b (descending).
func intersectDesc(a, b []int64) []int64 {
	out := a[:0]
	j := 0
	for _, x := range a {
		for j < len(b) && b[j] > x {
			j++
		}
		if j < len(b) && b[j] == x {
			out = append(out, x)
		}
	}
	return out
}

// sqlExecQuerier is a *sql.DB or *sql.Tx.
type sqlExecQuerier interface {
	ExecContext(ctx context.Context, query string, args ...any) (sql.Result, error)
	QueryContext(ctx context.Context, query string, args ...any) (*sql.Rows, error)
}

// writeEach inserts the batch's postings one statement each (the
// conversions at open, which run in a database/sql transaction).
func (p *postingBuilder) writeEach(d execer) error {
	p.sortKeys()
	for i := range p.keys {
		key, first, buf := p.encode(i)
		var blob any
		if len(buf) > 0 {
			blob = buf
		}
		if err := d.exec(postingsSQL, key, first, blob); err != nil {
			return fmt.Errorf("insert postings: %w", err)
		}
	}
	return nil
}

// dropPostingsBelow deletes the postings of the buckets wholly below minID
// (after rows were deleted oldest first); postings of the bucket minID is
// in may list deleted ids, which reads skip.
func dropPostingsBelow(ctx context.Context, db sqlExecQuerier, minID int64) error {
	if _, err := db.ExecContext(ctx, "DELETE FROM postings WHERE k < ?", postKey(bucketOf(minID), 0, 0)); err != nil {
		return fmt.Errorf("delete postings: %w", err)
	}
	return nil
}
