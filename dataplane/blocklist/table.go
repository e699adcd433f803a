package blocklist

import (
	"slices"
	"unsafe"

	"github.com/svcdns/svc/dataplane/hugepage"
)

// Rule flags stored next to each name in a table. One name can carry several
// flags (for example a block rule and an exception from the same source).
const (
	flagExact     uint8 = 1 << iota // the name itself
	flagSubtree                     // the name and every subdomain (||d^)
	flagWild                        // subdomains only (*.d)
	flagExExact                     // exception: the name itself (@@|d^)
	flagExSubtree                   // exception: name and subdomains (@@||d^)
	flagExWild                      // exception: subdomains only (@@*.d)
	flagPlain                       // written as a hosts or plain-domain line (RuleText)

	blockSelf  = flagExact | flagSubtree
	blockBelow = flagSubtree | flagWild
	exSelf     = flagExExact | flagExSubtree
	exBelow    = flagExSubtree | flagExWild
)

// maxName is the longest name we store or look up (presentation form, no
// trailing dot).
const maxName = 253

// table is an immutable set of lower-cased names with rule flags.
//
// Layout chosen for the memory target (about 40 bytes per domain): all
// records live in one []byte as [len][flags][name...]; an open-addressing
// hash table of uint64 slots holds fingerprint<<32 | offset+1. Probing
// compares fingerprints inside the slot array, so a miss rarely touches the
// record bytes.
//
// filter is a one-hash Bloom filter of 8 to 16 bits per name (1 to 2 bytes
// per domain): most probed suffixes of a query ("com", "example.com") are
// on no list, and one bit test answers those without walking a probe
// sequence (about six slots for a miss at load 0.7).
type table struct {
	data   [][]byte // chunks of at most chunkSize bytes; see recAt
	slots  []uint64
	filter []uint64
	fmask  uint64 // bit count of filter - 1
	n      int    // distinct names
	huge   int    // bytes of the arrays backed by huge pages (hugePages)
}

// Records live in chunks of at most chunkSize bytes, and a record offset is
// chunk<<chunkBits | position. Growing one contiguous buffer by append held
// the old and the new array at once, and trimming it copied it again: about
// 2.25 times the records at the peak of a build. Chunks are filled once.
// (8 MiB chunks that huge pages could back made a swap's peak heap 1.88 of
// the steady heap instead of 1.41, for a few percent more on a lookup: the
// records stay on small pages.)
const (
	chunkBits = 16
	chunkSize = 1 << chunkBits
)

// rec returns the chunk holding the record at off and its position.
func (t *table) rec(off uint32) ([]byte, int) {
	return t.data[off>>chunkBits], int(off & (chunkSize - 1))
}

// filterBit is the filter bit of hash h: bits the slot index (low 32) and
// fingerprint (high 32) use as well, but taken from the middle, and h is
// already mixed.
func (t *table) filterBit(h uint64) uint64 { return (h >> 16) & t.fmask }

// initArrays allocates the filter and the slots for n names as one array,
// filter first: both are read at random, one line per probe, and one array
// is what hugepage.Advise can back with 2 MiB pages once it is written.
func (t *table) initArrays(n int) {
	bits := uint64(64)
	for bits < 8*uint64(n) {
		bits <<= 1
	}
	fw := int(bits / 64)
	mem := make([]uint64, fw+slotCount(n))
	t.filter = mem[:fw:fw]
	t.slots = mem[fw:]
	t.fmask = bits - 1
}

// hugePages asks for huge pages under the filter and slots (see package
// hugepage: a million names read at random miss the TLB on 4 KiB pages)
// and returns the bytes the kernel backs with them.
func (t *table) hugePages() int {
	return hugepage.Advise(unsafe.Pointer(unsafe.SliceData(t.filter)), 8*(len(t.filter)+len(t.slots)))
}

// hashing: FNV-1a over the name read right to left, so the hash of every
// suffix that starts at a label boundary falls out of a single pass over the
// query name. The final value goes through a 64-bit mixer.
const (
	fnvOffset = 14695981039346656037
	fnvPrime  = 1099511628211
)

func mix(h uint64) uint64 {
	h ^= h >> 33
	h *= 0xff51afd7ed558ccd
	h ^= h >> 33
	h *= 0xc4ceb9fe1a85ec53
	h ^= h >> 33
	return h
}

func lower(b byte) byte { return lowerTab[b] }

// lowerTab maps ASCII upper case to lower case and every other byte to
// itself: one load, no branch, no bounds check (indexed by a byte).
var lowerTab = func() (t [256]byte) {
	for i := range t {
		t[i] = byte(i)
		if i >= 'A' && i <= 'Z' {
			t[i] = byte(i) + ('a' - 'A')
		}
	}
	return t
}()

// hashName hashes a whole name (any case) the same way suffixHashes does.
func hashName(name string) uint64 {
	h := uint64(fnvOffset)
	for i := len(name) - 1; i >= 0; i-- {
		h = (h ^ uint64(lower(name[i]))) * fnvPrime
	}
	return mix(h)
}

func slotIndex(h uint64, n int) int {
	// Multiply-shift range reduction: no power-of-two table size needed.
	return int(((h & 0xffffffff) * uint64(n)) >> 32)
}

func fingerprint(h uint64) uint64 { return h >> 32 }

// mayHave is lookup's filter test: false when name (hash h) is surely absent.
func (t *table) mayHave(h uint64) bool {
	if len(t.filter) == 0 {
		return false
	}
	b := t.filterBit(h)
	return t.filter[b>>6]&(1<<(b&63)) != 0
}

// lookup returns the flags and record offset of name, or 0 flags when absent.
// name may contain upper-case ASCII; stored names are lower case.
func (t *table) lookup(name string, h uint64) (uint8, uint32) {
	slots := t.slots
	if len(slots) == 0 || !t.mayHave(h) {
		return 0, 0
	}
	// slotCount leaves at least one slot empty, so the probe ends.
	i := uint(slotIndex(h, len(slots)))
	fp := fingerprint(h)
	for {
		if i >= uint(len(slots)) {
			i = 0
		}
		s := slots[i]
		if s == 0 {
			return 0, 0
		}
		if s>>32 == fp {
			off := uint32(s) - 1
			if t.equal(off, name) {
				c, p := t.rec(off)
				return c[p+1], off
			}
		}
		i++
	}
}

func (t *table) equal(off uint32, name string) bool {
	c, p := t.rec(off)
	l := int(c[p])
	if l != len(name) {
		return false
	}
	rec := c[p+2 : p+2+l]
	for i := 0; i < l; i++ {
		if rec[i] != lower(name[i]) {
			return false
		}
	}
	return true
}

// nameAt returns the stored name of a record without copying it: a
// block's rule text is this name for hosts and domains lines, and copying
// it made every blocked answer allocate (issue #27 item 2). The string
// points into the record chunk, which is never written once build returns
// (the table is immutable) and which it keeps alive.
func (t *table) nameAt(off uint32) string {
	c, p := t.rec(off)
	return unsafe.String(&c[p+2], int(c[p]))
}

// sizeBytes is the retained size of the table's backing arrays.
func (t *table) sizeBytes() int {
	if t == nil {
		return 0
	}
	n := 8*cap(t.slots) + 8*cap(t.filter) + 24*cap(t.data)
	for _, c := range t.data {
		n += cap(c)
	}
	return n
}

// tableBuilder accumulates records in chunks; build() deduplicates them,
// merging flags, and returns the table.
type tableBuilder struct {
	data [][]byte
	n    int
}

// add appends a lower-case name (validated by the caller) with flags.
func (b *tableBuilder) add(name string, flags uint8) {
	if len(b.data) == 0 || len(b.data[len(b.data)-1])+2+len(name) > chunkSize {
		b.data = append(b.data, make([]byte, 0, chunkSize))
	}
	c := &b.data[len(b.data)-1]
	*c = append(*c, byte(len(name)), flags)
	*c = append(*c, name...)
	b.n++
}

func (b *tableBuilder) build() *table {
	if b.n == 0 {
		return nil
	}
	t := &table{data: b.data}
	n := b.n
	b.data, b.n = nil, 0
	t.initArrays(n)
	dups := 0
	t.each(func(off uint32) {
		if !t.insert(off, t.recName(off)) {
			dups++
		}
	})
	if dups > 0 {
		t.compact()
	}
	t.trimLast()
	t.huge = t.hugePages()
	return t
}

// each calls f with the offset of every record in order.
func (t *table) each(f func(off uint32)) {
	for ci, c := range t.data {
		for p := 0; p < len(c); p += 2 + int(c[p]) {
			f(uint32(ci)<<chunkBits | uint32(p))
		}
	}
}

// trimLast drops empty chunks at the end and the append slack of the last
// one (at most one chunk is copied).
func (t *table) trimLast() {
	for len(t.data) > 0 && len(t.data[len(t.data)-1]) == 0 {
		t.data = t.data[:len(t.data)-1]
	}
	t.data = slices.Clip(t.data)
	if k := len(t.data) - 1; k >= 0 && cap(t.data[k]) > len(t.data[k]) {
		t.data[k] = slices.Clone(t.data[k])
	}
}

func slotCount(n int) int {
	// Load factor about 0.7 keeps misses to a few contiguous slot reads.
	return n + n*3/7 + 1
}

// insert adds the record at off, or merges its flags into an existing record
// with the same name and marks the new one dead (flags 0). It reports whether
// the record was new.
func (t *table) insert(off uint32, name string) bool {
	h := hashName(name)
	b := t.filterBit(h)
	t.filter[b>>6] |= 1 << (b & 63)
	n := len(t.slots)
	i := slotIndex(h, n)
	fp := fingerprint(h)
	for {
		s := t.slots[i]
		if s == 0 {
			t.slots[i] = fp<<32 | uint64(off+1)
			t.n++
			return true
		}
		if s>>32 == fp {
			o := uint32(s) - 1
			if t.equal(o, name) {
				oc, op := t.rec(o)
				nc, np := t.rec(off)
				oc[op+1] |= nc[np+1]
				nc[np+1] = 0
				return false
			}
		}
		i++
		if i == n {
			i = 0
		}
	}
}

// compact moves the live records down over the dead (duplicate) ones in
// place (a record never moves past its own position) and reinserts them into
// the cleared slots: no second copy of the table is held.
func (t *table) compact() {
	wc, wp := 0, 0
	for ci := range t.data {
		c := t.data[ci]
		for p := 0; p < len(c); {
			l := 2 + int(c[p])
			if c[p+1] != 0 {
				if wp+l > chunkSize {
					t.data[wc] = t.data[wc][:wp]
					wc, wp = wc+1, 0
				}
				copy(t.data[wc][wp:wp+l], c[p:p+l])
				wp += l
			}
			p += l
		}
	}
	t.data[wc] = t.data[wc][:wp]
	for k := wc + 1; k < len(t.data); k++ {
		t.data[k] = nil
	}
	t.data = t.data[:wc+1]
	clear(t.slots)
	t.n = 0
	t.each(func(off uint32) { t.insert(off, t.recName(off)) })
}

// recName views a record's name without copying; used while building only.
func (t *table) recName(off uint32) string {
	c, p := t.rec(off)
	return unsafe.String(&c[p+2], int(c[p]))
}
