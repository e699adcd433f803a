package querylog

import (
	"encoding/binary"
	"errors"
	"fmt"
	"slices"
	"time"
	"unsafe"
)

// A block holds the rows of one batch (contiguous ids first..last) in one
// blob, so a batch costs SQLite one row insert and one bound blob instead
// of a row and 17 bound values per query (the per-row insert and bind were
// three quarters of the writer's CPU).
//
// Encoding (varints as in encoding/binary, fixed-width integers little
// endian):
//
//	byte    version (blockVersion)
//	uvarint n, the number of rows
//	ts:       varint base (unix microseconds), byte width, then per row
//	          the ts minus base in width bytes (width 0: all equal base)
//	duration: the same, in microseconds
//	per text column (domain, client, then the names kinds in kind order):
//	  uvarint m, the number of distinct values in the block, then
//	    domain and client (text only, thousands of values per block):
//	      when m > 0: byte width, m end offsets of that width, then the
//	      values' bytes one after the other (value j is bytes
//	      end[j-1]..end[j]), so a read takes one value without parsing
//	      the others;
//	    the names kinds (a few values each): each value:
//	      0: "", odd x: the names dictionary id x>>1,
//	      2: the row's own domain (sameDomain),
//	      even x >= 4: (x>>1)-1 bytes of text follow;
//	  when m > 1: byte width, then per row the index of its value in width
//	  bytes (m <= 1: every row has the single value, or "" when m is 0).
//
// Columns that do not change within a batch (node, transport, mostly rcode
// and qtype) cost a few bytes per block; a domain seen many times in a
// batch is stored once. The per-row parts have a fixed width so a read
// takes one row of a block without decoding the others: decoding a block
// parses only its value lists.
//
// sameDomain (value 2, which no earlier encoder wrote: it wrote "" as 0)
// is the rule of a block by a hosts or plain-domain line, which is the
// blocked name itself: such rows share one value instead of a value, a
// dictionary entry and a map lookup per blocked name (BenchmarkLogPipeline
// /block). A binary from before reads it as "" (an empty rule), not as a
// corrupt block.
//
// Version 2 added the client_id kind. Blocks are written once and kept
// for the raw retention, so version 1 blocks (one text column fewer, no
// client IDs) are still read: a query log survives the upgrade.
const blockVersion = 2

// blockVersion1 is the layout before client_id.
const blockVersion1 = 1

// Text columns of a block: domain, client, then the dictionary kinds.
const (
	colDomain = 0
	colClient = 1
	colKinds  = 2
	nCols     = colKinds + nKinds
	// nColsV1 are the columns of a version 1 block: the kinds before
	// kClientID.
	nColsV1 = colKinds + kClientID
)

var errBlockCorrupt = errors.New("querylog: corrupt block")

// blockEncoder turns a batch into a block; it is reused from batch to
// batch (the writer goroutine's), so it keeps at most one batch.
type blockEncoder struct {
	cols [nCols]colEncoder
	buf  []byte
	// hour, when set, is the current hour's domain counts (the writer's,
	// under its hourMu): a row's domain is then looked up once, for the
	// block's dictionary and the hour's top list, instead of once in a
	// map per batch and once in the hour's (the two lookups were a tenth
	// of the query log's CPU). hc[i] is row i's count, found by
	// lookupHour (nil: the writer looks it up), gen tells this batch's
	// dictionary indexes in the counts from an earlier batch's.
	hour *hourCounts
	cap  int // domains the hour takes at most (Options.DomainCap)
	hc   []*hourCount
	gen  uint32
	sink uint64 // keeps lookupHour's early reads from being optimized away
}

// lookupGroup is how many rows' lookups lookupHour starts before it
// finishes the first.
const lookupGroup = 8

// lookupHour sets e.hc to each row's domain count in e.hour, adding the
// names it lacks below e.cap: nil for an empty domain, a row of a later
// hour and a new name past the cap. The rows go in groups: first each
// row's hash and a read of its slot, which the CPU overlaps, then the
// lookups, whose slots are now cached, and likewise the counts they find.
func (e *blockEncoder) lookupHour(rows []Row) {
	h := e.hour
	x := &h.dom
	e.hc = slices.Grow(e.hc[:0], len(rows))[:len(rows)]
	var hs [lookupGroup]uint64
	var sink uint64
	for base := 0; base < len(rows); base += lookupGroup {
		group := rows[base:min(base+lookupGroup, len(rows))]
		hc := e.hc[base : base+len(group)]
		mask := len(x.slots) - 1
		for j := range group {
			r := &group[j]
			hs[j] = 0
			if sec := r.Time.Unix(); r.Domain == "" || sec-sec%3600 > h.hour {
				continue
			}
			hs[j] = x.hash(r.Domain)
			sink += x.slots[int(hs[j])&mask].h
		}
		for j := range group {
			hc[j] = nil
			if hs[j] != 0 {
				if hc[j] = x.getHashed(hs[j], group[j].Domain); hc[j] != nil {
					sink += uint64(hc[j].gen)
				}
			}
		}
		added := false
		for j := range group {
			if hs[j] == 0 || hc[j] != nil {
				continue
			}
			// Only a name the group itself added can be found now.
			if added {
				if hc[j] = x.getHashed(hs[j], group[j].Domain); hc[j] != nil {
					continue
				}
			}
			if len(h.counts[0]) < e.cap {
				hc[j], added = h.newDomain(group[j].Domain, hs[j]), true
			}
		}
	}
	e.sink = sink
}

// colEncoder collects one text column: the block's distinct values and
// per row the index of its value, as runs of rows with one value. Most
// columns hold one value for a whole batch (node, transport, policy,
// zone): a run per change, not an index per row, is what they cost.
type colEncoder struct {
	idx    map[string]uint32
	vals   []string
	stored []any // kinds only: per value nil, a names id (int64), the text or sameDomainValue
	runs   []colRun
	last   string // the previous row's value and its index: runs skip the map
	lastI  uint32
	has    bool
	same   int32 // index of the sameDomain value, -1 when none yet
}

// colRun is n consecutive rows whose value is index i.
type colRun struct{ i, n uint32 }

// push appends a row with value index i.
func (c *colEncoder) push(i uint32) {
	if n := len(c.runs); n > 0 && c.runs[n-1].i == i {
		c.runs[n-1].n++
		return
	}
	c.runs = append(c.runs, colRun{i, 1})
}

// sameDomainValue marks the sameDomain value in colEncoder.stored.
type sameDomainValue struct{}

func (c *colEncoder) reset() {
	if c.idx == nil {
		c.idx = map[string]uint32{}
	}
	clear(c.idx)
	c.vals, c.stored, c.runs = c.vals[:0], c.stored[:0], c.runs[:0]
	c.last, c.lastI, c.has = "", 0, false
	c.same = -1
}

// addSameDomain appends a row whose value is its own domain (sameDomain).
func (c *colEncoder) addSameDomain() {
	if c.same < 0 {
		c.same = int32(len(c.vals))
		c.vals = append(c.vals, "")
		c.stored = append(c.stored, sameDomainValue{})
	}
	c.push(uint32(c.same))
}

// add appends a row's value; kind >= 0 encodes new values through nm.
func (c *colEncoder) add(s string, nm *names, kind int) uint32 {
	if c.has && s == c.last {
		c.push(c.lastI)
		return c.lastI
	}
	i, ok := c.idx[s]
	if !ok {
		i = uint32(len(c.vals))
		c.idx[s] = i
		c.vals = append(c.vals, s)
		if kind >= 0 {
			// Only the kinds keep a stored form: boxing each of the
			// thousands of domain and client values was an allocation per
			// distinct value.
			var st any
			if s != "" {
				st = nm.encode(kind, s)
			}
			c.stored = append(c.stored, st)
		}
	}
	c.last, c.lastI, c.has = s, i, true
	c.push(i)
	return i
}

// encode returns the block of rows (ids first..first+len(rows)-1; the
// slice is reused by the next call), adding each row's postings to pb.
// New names are staged in nm (they must be written with the block).
func (e *blockEncoder) encode(nm *names, pb *postingBuilder, rows []Row) (data []byte, tsMin, tsMax int64) {
	for i := range e.cols {
		e.cols[i].reset()
	}
	st := &e.cols[colKinds+kStatus]
	// repeat counts the rows since the last that differed from its
	// predecessor in a kind column: they extend each kind column's last
	// run at once instead of visiting the 13 columns per row.
	repeat := uint32(0)
	if e.hour != nil {
		e.lookupHour(rows)
	} else {
		e.hc = e.hc[:0]
	}
	if e.gen++; e.gen == 0 {
		e.gen = 1 // 0 is a new count's: never this batch's
	}
	for i := range rows {
		r := &rows[i]
		e.addDomain(i, r, nm)
		e.cols[colClient].add(r.Client, nm, -1)
		if i > 0 && sameKinds(&rows[i-1], r) {
			repeat++
		} else {
			e.extendKinds(repeat)
			repeat = 0
			for k := range nKinds {
				v := *rowField(r, k)
				if k == kRule && v != "" && v == r.Domain {
					e.cols[colKinds+k].addSameDomain()
					continue
				}
				e.cols[colKinds+k].add(v, nm, k)
			}
		}
		var nh int64
		if e.hour != nil && e.hc[i] != nil {
			nh = e.hc[i].nh
		}
		pb.addRow(r.ID, r.Domain, nh, r.Client, st.stored[st.runs[len(st.runs)-1].i])
	}
	e.extendKinds(repeat)
	b := append(e.buf[:0], blockVersion)
	b = binary.AppendUvarint(b, uint64(len(rows)))
	var durMin, durMax int64
	for i := range rows {
		ts, dur := rows[i].Time.UnixMicro(), rows[i].Duration.Microseconds()
		if i == 0 {
			tsMin, tsMax, durMin, durMax = ts, ts, dur, dur
		}
		tsMin, tsMax = min(tsMin, ts), max(tsMax, ts)
		durMin, durMax = min(durMin, dur), max(durMax, dur)
	}
	b = binary.AppendVarint(b, tsMin)
	w := widthOf(uint64(tsMax - tsMin))
	b = append(b, byte(w))
	for i := range rows {
		b = appendFixed(b, uint64(rows[i].Time.UnixMicro()-tsMin), w)
	}
	b = binary.AppendVarint(b, durMin)
	w = widthOf(uint64(durMax - durMin))
	b = append(b, byte(w))
	for i := range rows {
		b = appendFixed(b, uint64(rows[i].Duration.Microseconds()-durMin), w)
	}
	for i := range e.cols {
		c := &e.cols[i]
		b = binary.AppendUvarint(b, uint64(len(c.vals)))
		if i < colKinds {
			b = appendTexts(b, c.vals)
		}
		for _, v := range c.stored {
			if i < colKinds {
				break
			}
			switch x := v.(type) {
			case nil:
				b = append(b, 0)
			case int64:
				b = binary.AppendUvarint(b, uint64(x)<<1|1)
			case sameDomainValue:
				b = append(b, 2)
			case string:
				b = binary.AppendUvarint(b, uint64(len(x)+1)<<1)
				b = append(b, x...)
			}
		}
		if len(c.vals) > 1 {
			w := widthOf(uint64(len(c.vals) - 1))
			b = append(b, byte(w))
			for _, r := range c.runs {
				b = appendFixedRun(b, uint64(r.i), w, int(r.n))
			}
		}
	}
	e.buf = b
	return b, tsMin, tsMax
}

// addDomain adds row i's domain to the domain column, through its hour
// count when lookupHour found one.
func (e *blockEncoder) addDomain(i int, r *Row, nm *names) {
	c := &e.cols[colDomain]
	if e.hour == nil || e.hc[i] == nil {
		c.add(r.Domain, nm, -1)
		return
	}
	hc := e.hc[i]
	// A name the hour counts takes its index from its count; a row of it
	// that took the map (a row of the next hour) stores it once more,
	// which only costs the block a few bytes.
	if hc.gen != e.gen {
		hc.gen, hc.idx = e.gen, uint32(len(c.vals))
		c.vals = append(c.vals, r.Domain)
	}
	c.push(hc.idx)
}

// extendKinds adds n rows to each kind column's last run: rows whose kind
// values equal the row before theirs.
func (e *blockEncoder) extendKinds(n uint32) {
	if n == 0 {
		return
	}
	for k := range nKinds {
		c := &e.cols[colKinds+k]
		c.runs[len(c.runs)-1].n += n
	}
}

// sameKinds reports whether b's kind values are a's: the same strings (the
// converter hands a run of rows the same strings, so comparing where they
// point settles most rows; equal text elsewhere only costs the slow path),
// and a rule that is the row's own domain in both or neither.
func sameKinds(a, b *Row) bool {
	if !sameStr(a.Status, b.Status) || !sameStr(a.QType, b.QType) || !sameStr(a.Rcode, b.Rcode) ||
		!sameStr(a.Node, b.Node) || !sameStr(a.ClientName, b.ClientName) || !sameStr(a.Reason, b.Reason) ||
		!sameStr(a.List, b.List) || !sameStr(a.Policy, b.Policy) || !sameStr(a.Upstream, b.Upstream) ||
		!sameStr(a.Zone, b.Zone) || !sameStr(a.Transport, b.Transport) || !sameStr(a.ClientID, b.ClientID) {
		return false
	}
	aSame := a.Rule != "" && a.Rule == a.Domain
	bSame := b.Rule != "" && b.Rule == b.Domain
	if aSame || bSame {
		return aSame && bSame
	}
	return sameStr(a.Rule, b.Rule)
}

// sameStr reports whether a and b are the same bytes in memory (both empty
// counts).
func sameStr(a, b string) bool {
	return len(a) == len(b) && (len(a) == 0 || unsafe.StringData(a) == unsafe.StringData(b))
}

// appendTexts appends a text column's values with their end offsets.
func appendTexts(b []byte, vals []string) []byte {
	if len(vals) == 0 {
		return b
	}
	total := 0
	for _, v := range vals {
		total += len(v)
	}
	w := widthOf(uint64(total))
	b = append(b, byte(w))
	end := 0
	for _, v := range vals {
		end += len(v)
		b = appendFixed(b, uint64(end), w)
	}
	for _, v := range vals {
		b = append(b, v...)
	}
	return b
}

// widthOf is the bytes a fixed-width field needs for values up to v.
func widthOf(v uint64) int {
	switch {
	case v == 0:
		return 0
	case v <= 0xff:
		return 1
	case v <= 0xffff:
		return 2
	case v <= 0xffffffff:
		return 4
	}
	return 8
}

// appendFixedRun appends n copies of v in w bytes each.
func appendFixedRun(b []byte, v uint64, w, n int) []byte {
	if n == 1 {
		return appendFixed(b, v, w)
	}
	start := len(b)
	b = appendFixed(b, v, w)
	b = slices.Grow(b, (n-1)*w)
	for range n - 1 {
		b = append(b, b[start:start+w]...)
	}
	return b
}

func appendFixed(b []byte, v uint64, w int) []byte {
	switch w {
	case 1:
		return append(b, byte(v))
	case 2:
		return binary.LittleEndian.AppendUint16(b, uint16(v))
	case 4:
		return binary.LittleEndian.AppendUint32(b, uint32(v))
	case 8:
		return binary.LittleEndian.AppendUint64(b, v)
	}
	return b
}

// fixedCol is a per-row fixed-width field of a block: row i is at off +
// i*w in the blob.
type fixedCol struct {
	off, w int
}

func (f fixedCol) at(b []byte, i int) uint64 {
	p := f.off + i*f.w
	switch f.w {
	case 1:
		return uint64(b[p])
	case 2:
		return uint64(binary.LittleEndian.Uint16(b[p:]))
	case 4:
		return uint64(binary.LittleEndian.Uint32(b[p:]))
	case 8:
		return binary.LittleEndian.Uint64(b[p:])
	}
	return 0
}

// rowBlock is a decoded block: the value lists are decoded (their strings
// share one copy of the blob), the per-row fields are read in place.
type rowBlock struct {
	first, last     int64
	data            []byte
	str             string // data as a string: values are substrings of it
	tsBase, durBase int64
	ts, dur         fixedCol
	cols            [nCols]blockCol
}

// blockCol is a decoded text column: with idx.w == 0 every row has value
// 0 ("" when there is none). The names kinds' values are in vals; the
// domain and client values are read in place (ends, text).
type blockCol struct {
	vals  []string
	same  uint64 // 1 + the index of the sameDomain value (kinds), 0: none
	m     uint64
	ends  fixedCol
	text  int // offset of the values' bytes in the blob
	total uint64
	idx   fixedCol
}

func (b *rowBlock) text(c int, i int) string {
	col := &b.cols[c]
	var x uint64
	switch {
	case col.idx.w != 0:
		// Indexes are not checked at decode (that cost as much as the rest
		// of decoding): an index out of range, only in a corrupt block,
		// reads as "".
		if x = col.idx.at(b.data, i); x >= col.m {
			return ""
		}
	case col.m == 0:
		return ""
	}
	if c >= colKinds {
		if col.same != 0 && x == col.same-1 {
			return b.text(colDomain, i)
		}
		return col.vals[x]
	}
	var start uint64
	if x > 0 {
		start = col.ends.at(b.data, int(x-1))
	}
	end := col.ends.at(b.data, int(x))
	if start > end || end > col.total {
		return "" // a corrupt block
	}
	return b.str[col.text+int(start) : col.text+int(end)]
}

// contains reports whether id is one of the block's rows.
func (b *rowBlock) contains(id int64) bool { return id >= b.first && id <= b.last }

// row fills r with the row id (b.contains(id) must hold).
func (b *rowBlock) row(id int64, r *Row) {
	i := int(id - b.first)
	*r = Row{ID: id, Time: time.UnixMicro(b.tsBase + int64(b.ts.at(b.data, i))).UTC(),
		Duration: time.Duration(b.durBase+int64(b.dur.at(b.data, i))) * time.Microsecond,
		Domain:   b.text(colDomain, i), Client: b.text(colClient, i)}
	for k := range nKinds {
		*rowField(r, k) = b.text(colKinds+k, i)
	}
}

// blockReader walks a blob; any read past its end or out of range marks it
// failed, so decodeBlock checks once per section.
type blockReader struct {
	b   []byte
	s   string // the blob as one string: values are substrings of it
	off int
	err error
}

func (r *blockReader) fail(what string) {
	if r.err == nil {
		r.err = fmt.Errorf("%w: %s at byte %d", errBlockCorrupt, what, r.off)
	}
}

func (r *blockReader) uvarint(what string) uint64 {
	if r.err != nil {
		return 0
	}
	v, n := binary.Uvarint(r.b[r.off:])
	if n <= 0 {
		r.fail(what)
		return 0
	}
	r.off += n
	return v
}

// varint reads what binary.AppendVarint wrote: a zigzag-encoded uvarint.
func (r *blockReader) varint(what string) int64 {
	u := r.uvarint(what)
	return int64(u>>1) ^ -int64(u&1)
}

// fixed reads a width byte and skips n values of that width.
func (r *blockReader) fixed(what string, n int) fixedCol {
	if r.err != nil {
		return fixedCol{}
	}
	if r.off >= len(r.b) {
		r.fail(what)
		return fixedCol{}
	}
	w := int(r.b[r.off])
	r.off++
	if w != 0 && w != 1 && w != 2 && w != 4 && w != 8 || n*w > r.left() {
		r.fail(what)
		return fixedCol{}
	}
	f := fixedCol{off: r.off, w: w}
	r.off += n * w
	return f
}

// left is how many bytes are unread: every count is checked against it
// before anything is allocated, so a corrupt block cannot ask for more
// memory than a few times its own size.
func (r *blockReader) left() int { return len(r.b) - r.off }

// decodeBlock decodes the block of rows first..; dictionary ids are
// resolved through nm (nil: they decode as "", for tests and fuzzing).
// The block keeps data, which must not change afterwards.
func decodeBlock(first int64, data []byte, nm *names) (*rowBlock, error) {
	if len(data) == 0 || (data[0] != blockVersion && data[0] != blockVersion1) {
		return nil, fmt.Errorf("%w: unknown version", errBlockCorrupt)
	}
	nc := nCols
	if data[0] == blockVersion1 {
		nc = nColsV1 // the columns it lacks read as "" (m == 0)
	}
	// data is the caller's and never changes after: the values share it.
	r := &blockReader{b: data, s: unsafe.String(unsafe.SliceData(data), len(data)), off: 1}
	n64 := r.uvarint("row count")
	if r.err != nil || n64 == 0 || n64 > uint64(r.left()) {
		r.fail("row count")
		return nil, r.err
	}
	n := int(n64)
	b := &rowBlock{first: first, last: first + int64(n) - 1}
	b.tsBase = r.varint("ts base")
	b.ts = r.fixed("ts", n)
	b.durBase = r.varint("duration base")
	b.dur = r.fixed("durations", n)
	if r.err != nil {
		return nil, r.err
	}
	type dictRef struct {
		col, val int
		id       int64
	}
	var ids []dictRef
	for ci := range nc {
		c := &b.cols[ci]
		m := r.uvarint("value count")
		if r.err != nil || m > uint64(r.left()) {
			r.fail("value count")
			return nil, r.err
		}
		c.m = m
		if ci < colKinds {
			if m > 0 {
				c.ends = r.fixed("text ends", int(m))
				if r.err != nil || c.ends.w == 0 && m > 1 {
					r.fail("text ends")
					return nil, r.err
				}
				c.total = c.ends.at(data, int(m-1))
				if c.total > uint64(r.left()) {
					r.fail("text length")
					return nil, r.err
				}
				c.text = r.off
				r.off += int(c.total)
			}
		} else {
			c.vals = make([]string, m)
		}
		for vi := range c.vals {
			x := r.uvarint("value")
			switch {
			case r.err != nil:
				return nil, r.err
			case x == 0:
			case x&1 == 1:
				ids = append(ids, dictRef{ci, vi, int64(x >> 1)})
			case x == 2:
				c.same = uint64(vi) + 1
			default:
				l := x>>1 - 1
				if l > uint64(r.left()) {
					r.fail("text length")
					return nil, r.err
				}
				c.vals[vi] = r.s[r.off : r.off+int(l)]
				r.off += int(l)
			}
		}
		if m <= 1 {
			continue
		}
		c.idx = r.fixed("row indexes", n)
		if r.err != nil || c.idx.w == 0 {
			r.fail("row indexes")
			return nil, r.err
		}
	}
	if r.off != len(data) {
		r.fail("trailing bytes")
		return nil, r.err
	}
	b.data, b.str = data, r.s
	if nm != nil && len(ids) > 0 {
		nm.mu.RLock()
		for _, e := range ids {
			b.cols[e.col].vals[e.val] = nm.byID[e.id]
		}
		nm.mu.RUnlock()
	}
	return b, nil
}
