package querylog

import (
	"encoding/binary"
	"fmt"
	"math/rand/v2"
	"reflect"
	"testing"
)

// addRow's postings (group tables per bucket, the status run) are the
// postings of one map lookup per key, for a batch that crosses a bucket
// boundary, with runs of clients and statuses and empty values, at the
// default group bits and the compact baseline's.
func TestPostingsAddRowMatchesMap(t *testing.T) {
	for _, bits := range []int{0, 10} {
		rng := rand.New(rand.NewPCG(27, uint64(bits)))
		first := int64(1)<<bucketBits - 700
		var got, want postingBuilder
		got.bits, want.bits = bits, bits
		got.reset()
		want.reset()
		statuses := []any{nil, int64(3), int64(5), "blocked"}
		type idTag struct {
			id  int64
			tag uint16
		}
		ids := map[int64][]idTag{} // per posting key, what it must list
		for i := range 2000 {
			id := first + int64(i)
			domain := ""
			if rng.IntN(20) > 0 {
				domain = fmt.Sprintf("d%d.example", rng.IntN(300))
			}
			client := []string{"", "192.0.2.1", "192.0.2.2", "2001:db8::1"}[i/50%4]
			status := statuses[i/30%4]
			// Half the rows come with the domain's hash, as the block
			// encoder passes it for names the hour counts.
			var nh int64
			if i%2 == 0 {
				nh = nameHash(domain)
			}
			got.addRow(id, domain, nh, client, status)
			b := bucketOf(id)
			if domain != "" {
				g, tag := want.group(domain)
				want.add(postKey(b, postDomain, g), id, tag, true)
				ids[postKey(b, postDomain, g)] = append(ids[postKey(b, postDomain, g)], idTag{id, tag})
			}
			if client != "" {
				g, tag := want.group(client)
				want.add(postKey(b, postClient, g), id, tag, true)
				ids[postKey(b, postClient, g)] = append(ids[postKey(b, postClient, g)], idTag{id, tag})
			}
			if status != nil {
				want.add(postKey(b, postStatus, statusPostValue(status)), id, 0, false)
				ids[postKey(b, postStatus, statusPostValue(status))] = append(ids[postKey(b, postStatus, statusPostValue(status))], idTag{id, 0})
			}
		}
		g, w := postingsOf(&got), postingsOf(&want)
		if !reflect.DeepEqual(g, w) {
			t.Fatalf("bits %d: %d postings, want %d", bits, len(g), len(w))
		}
		if len(g) != len(ids) {
			t.Fatalf("bits %d: %d postings, want %d keys", bits, len(g), len(ids))
		}
		// Each blob decodes (first id's tag, then delta and tag per id) to
		// the ids and tags added to its key, in order.
		for _, e := range g {
			want := ids[e.key]
			tagged := tagged(int(e.key >> 32 & 3))
			blob := []byte(e.ids)
			var dec []idTag
			id := e.first
			for {
				var tag uint16
				if tagged {
					tag, blob = binary.LittleEndian.Uint16(blob), blob[2:]
				}
				dec = append(dec, idTag{id, tag})
				if len(blob) == 0 {
					break
				}
				d, n := binary.Uvarint(blob)
				if n <= 0 {
					t.Fatalf("key %x: bad delta", e.key)
				}
				id, blob = id+int64(d), blob[n:]
			}
			if !reflect.DeepEqual(dec, want) {
				t.Fatalf("key %x: decoded %v, want %v", e.key, dec, want)
			}
		}
	}
}

type encodedPosting struct {
	key, first int64
	ids        string
}

func postingsOf(p *postingBuilder) []encodedPosting {
	p.sortKeys()
	var out []encodedPosting
	for i := range p.keys {
		key, first, blob := p.encode(i)
		out = append(out, encodedPosting{key, first, string(blob)})
	}
	return out
}
