package blocklist

import "unsafe"

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
	data   []byte
	slots  []uint64
	filter []uint64
	fmask  uint64 // bit count of filter - 1
	n      int    // distinct names
}

// filterBit is the filter bit of hash h: bits the slot index (low 32) and
// fingerprint (high 32) use as well, but taken from the middle, and h is
// already mixed.
func (t *table) filterBit(h uint64) uint64 { return (h >> 16) & t.fmask }

func (t *table) initFilter(n int) {
	bits := uint64(64)
	for bits < 8*uint64(n) {
		bits <<= 1
	}
	t.filter = make([]uint64, bits/64)
	t.fmask = bits - 1
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

// lookup returns the flags and record offset of name, or 0 flags when absent.
// name may contain upper-case ASCII; stored names are lower case.
func (t *table) lookup(name string, h uint64) (uint8, uint32) {
	slots := t.slots
	if len(slots) == 0 {
		return 0, 0
	}
	if b := t.filterBit(h); t.filter[b>>6]&(1<<(b&63)) == 0 {
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
				return t.data[off+1], off
			}
		}
		i++
	}
}

func (t *table) equal(off uint32, name string) bool {
	l := int(t.data[off])
	if l != len(name) {
		return false
	}
	rec := t.data[off+2 : int(off)+2+l]
	for i := 0; i < l; i++ {
		if rec[i] != lower(name[i]) {
			return false
		}
	}
	return true
}

// nameAt returns the stored name of a record (off the hot path).
func (t *table) nameAt(off uint32) string {
	l := int(t.data[off])
	return string(t.data[off+2 : int(off)+2+l])
}

// sizeBytes is the retained size of the table's backing arrays.
func (t *table) sizeBytes() int {
	if t == nil {
		return 0
	}
	return cap(t.data) + 8*cap(t.slots) + 8*cap(t.filter)
}

// tableBuilder accumulates records; build() deduplicates them, merging
// flags, and returns a right-sized table.
type tableBuilder struct {
	data []byte
	n    int
}

// add appends a lower-case name (validated by the caller) with flags.
func (b *tableBuilder) add(name string, flags uint8) {
	b.data = append(b.data, byte(len(name)), flags)
	b.data = append(b.data, name...)
	b.n++
}

func (b *tableBuilder) build() *table {
	if b.n == 0 {
		return nil
	}
	t := &table{data: b.data}
	t.slots = make([]uint64, slotCount(b.n))
	t.initFilter(b.n)
	dups := 0
	for off := 0; off < len(t.data); {
		l := int(t.data[off])
		if !t.insert(uint32(off), t.recName(off)) {
			dups++
		}
		off += 2 + l
	}
	if dups > 0 {
		t.compact()
	} else if cap(t.data) > len(t.data) {
		// Trim the append slack: it would otherwise be retained for the
		// table's lifetime.
		t.data = append(make([]byte, 0, len(t.data)), t.data...)
	}
	b.data = nil
	b.n = 0
	return t
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
				t.data[o+1] |= t.data[off+1]
				t.data[off+1] = 0
				return false
			}
		}
		i++
		if i == n {
			i = 0
		}
	}
}

// compact drops dead (duplicate) records into a right-sized buffer and
// rebuilds the slots.
func (t *table) compact() {
	size := 0
	for off := 0; off < len(t.data); {
		l := int(t.data[off])
		if t.data[off+1] != 0 {
			size += 2 + l
		}
		off += 2 + l
	}
	data := make([]byte, 0, size)
	for off := 0; off < len(t.data); {
		l := int(t.data[off])
		if t.data[off+1] != 0 {
			data = append(data, t.data[off:off+2+l]...)
		}
		off += 2 + l
	}
	t.data = data
	t.n = 0
	t.slots = make([]uint64, slotCount(countRecords(data)))
	for off := 0; off < len(t.data); {
		l := int(t.data[off])
		t.insert(uint32(off), t.recName(off))
		off += 2 + l
	}
}

func countRecords(data []byte) int {
	n := 0
	for off := 0; off < len(data); off += 2 + int(data[off]) {
		n++
	}
	return n
}

// recName views a record's name without copying; used while building only.
func (t *table) recName(off int) string {
	l := int(t.data[off])
	return unsafe.String(&t.data[off+2], l)
}
