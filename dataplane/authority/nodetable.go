package authority

import (
	"hash/maphash"
	"math/bits"
)

// nodeTable maps lower-cased wire names to nodes: open addressing with
// linear probing over one slice of pointers (the key is the node's own wire
// name), so a million-name zone costs about 16 bytes per name instead of a Go
// map's 30 to 55.
type nodeTable struct {
	seed  maphash.Seed
	slots []*node // length is a power of two, at most 3/4 full
	n     int
}

func newNodeTable(hint int) nodeTable {
	size := 8
	if need := hint + hint/3 + 1; need > size {
		size = 1 << bits.Len(uint(need-1))
	}
	return nodeTable{seed: maphash.MakeSeed(), slots: make([]*node, size)}
}

// get returns the node named name, nil if none.
func (t *nodeTable) get(name []byte) *node {
	if len(t.slots) == 0 {
		return nil
	}
	mask := uint64(len(t.slots) - 1)
	for i := maphash.Bytes(t.seed, name) & mask; ; i = (i + 1) & mask {
		nd := t.slots[i]
		if nd == nil || nd.wire == string(name) {
			return nd
		}
	}
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
	i := maphash.String(t.seed, nd.wire) & mask
	for t.slots[i] != nil {
		i = (i + 1) & mask
	}
	t.slots[i] = nd
}

func (t *nodeTable) grow() {
	old := t.slots
	if len(old) == 0 {
		*t = newNodeTable(0)
		return
	}
	t.slots = make([]*node, 2*len(old))
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
