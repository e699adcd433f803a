package authority

import (
	"hash/maphash"
	"math/bits"
)

// nodeTable maps lower-cased wire names to nodes: open addressing with
// linear probing over one slice of pointers (the key is the node's own wire
// name), so a million-name zone costs about 17 bytes per name instead of a
// Go map's 30 to 55.
//
// Beside each slot, tags holds 8 bits of its name's hash (0: empty). A
// probe reads the node (and its name) only when the tag matches: in a zone
// larger than the CPU's caches each of those reads is a cache miss, and
// the probes past other names cost two each.
type nodeTable struct {
	seed  maphash.Seed
	slots []*node // length is a power of two, at most 3/4 full
	tags  []uint8 // per slot: tagOf its name's hash, 0 when empty
	n     int
}

// tagOf is a slot's tag for hash h: its top byte, never 0.
func tagOf(h uint64) uint8 { return uint8(h>>56) | 1 }

func newNodeTable(hint int) nodeTable {
	size := 8
	if need := hint + hint/3 + 1; need > size {
		size = 1 << bits.Len(uint(need-1))
	}
	return nodeTable{seed: maphash.MakeSeed(), slots: make([]*node, size), tags: make([]uint8, size)}
}

// get returns the node named name, nil if none.
func (t *nodeTable) get(name []byte) *node {
	if len(t.slots) == 0 {
		return nil
	}
	mask := uint64(len(t.slots) - 1)
	h := maphash.Bytes(t.seed, name)
	tag := tagOf(h)
	for i := h & mask; ; i = (i + 1) & mask {
		switch t.tags[i] {
		case 0:
			return nil
		case tag:
			if nd := t.slots[i]; nd.wire == string(name) {
				return nd
			}
		}
	}
}

// home returns the slot where get's probe for name starts and the tag its
// slot carries (the prefetch's first stage). The table must have slots.
// get computes the same inline: a call there cost the exact lookup time.
func (t *nodeTable) home(name []byte) (slot uint64, tag uint8) {
	h := maphash.Bytes(t.seed, name)
	return h & uint64(len(t.slots)-1), tagOf(h)
}

func (t *nodeTable) getString(name string) *node { return t.get(bytesOf(name)) }

// put adds a node whose name is not in the table yet.
func (t *nodeTable) put(nd *node) {
	if (t.n+1)*4 > len(t.slots)*3 {
		t.grow()
	}
	t.insert(nd)
	t.n++
}

func (t *nodeTable) insert(nd *node) {
	mask := uint64(len(t.slots) - 1)
	h := maphash.String(t.seed, nd.wire)
	i := h & mask
	for t.tags[i] != 0 {
		i = (i + 1) & mask
	}
	t.slots[i], t.tags[i] = nd, tagOf(h)
}

func (t *nodeTable) grow() {
	old := t.slots
	if len(old) == 0 {
		*t = newNodeTable(0)
		return
	}
	t.slots, t.tags = make([]*node, 2*len(old)), make([]uint8, 2*len(old))
	for _, nd := range old {
		if nd != nil {
			t.insert(nd)
		}
	}
}

func (t *nodeTable) len() int { return t.n }

// each calls f for every node, in no particular order.
func (t *nodeTable) each(f func(*node)) {
	for _, nd := range t.slots {
		if nd != nil {
			f(nd)
		}
	}
}
