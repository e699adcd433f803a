package querylog

import (
	"encoding/binary"
	"hash/maphash"
)

// nameIndex finds an hour's count of a domain; the hour's map of counts
// stays what the top lists and the hour's flush read. A slot holds the
// name's hash and its first 16 bytes beside the count's pointer, so a
// name of up to 16 bytes is settled by the slot's cache line and the
// count's. Unlike a Go map, the index lets the block encoder start the
// lookups of a group of rows before it needs any of them (lookupHour):
// their cache misses overlap instead of following one another.
type nameIndex struct {
	seed  maphash.Seed
	slots []nameSlot // a power of two, at most 3/4 used
	n     int
}

type nameSlot struct {
	h   uint64    // the name's hash with the low bit set; 0: empty
	pre [2]uint64 // the name's first 16 bytes, zero-padded
	c   *hourCount
}

func newNameIndex(hint int) nameIndex {
	n := 64
	for n*3/4 < hint {
		n *= 2
	}
	return nameIndex{seed: maphash.MakeSeed(), slots: make([]nameSlot, n)}
}

func namePrefix(s string) [2]uint64 {
	var b [16]byte
	copy(b[:], s)
	return [2]uint64{binary.LittleEndian.Uint64(b[:8]), binary.LittleEndian.Uint64(b[8:])}
}

// hash is the index's hash of s (never 0).
func (x *nameIndex) hash(s string) uint64 { return maphash.String(x.seed, s) | 1 }

// get returns the count of s, nil when the index has none.
func (x *nameIndex) get(s string) *hourCount { return x.getHashed(x.hash(s), s) }

// getHashed is get with s's hash.
func (x *nameIndex) getHashed(h uint64, s string) *hourCount {
	pre := namePrefix(s)
	mask := len(x.slots) - 1
	for i := int(h) & mask; ; i = (i + 1) & mask {
		sl := &x.slots[i]
		switch {
		case sl.h == 0:
			return nil
		case sl.h == h && sl.pre == pre && len(sl.c.key) == len(s) && (len(s) <= 16 || sl.c.key[16:] == s[16:]):
			return sl.c
		}
	}
}

// putHashed adds c under c.key, whose hash is h and which get does not
// find yet.
func (x *nameIndex) putHashed(h uint64, c *hourCount) {
	if (x.n+1)*4 > len(x.slots)*3 {
		x.grow()
	}
	x.insert(h, namePrefix(c.key), c)
	x.n++
}

func (x *nameIndex) insert(h uint64, pre [2]uint64, c *hourCount) {
	mask := len(x.slots) - 1
	i := int(h) & mask
	for x.slots[i].h != 0 {
		i = (i + 1) & mask
	}
	x.slots[i] = nameSlot{h: h, pre: pre, c: c}
}

func (x *nameIndex) grow() {
	old := x.slots
	x.slots = make([]nameSlot, max(2*len(old), 64))
	for _, sl := range old {
		if sl.h != 0 {
			x.insert(sl.h, sl.pre, sl.c)
		}
	}
}
