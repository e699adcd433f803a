package querylog

import (
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
		for i := range 2000 {
			id := first + int64(i)
			domain := ""
			if rng.IntN(20) > 0 {
				domain = fmt.Sprintf("d%d.example", rng.IntN(300))
			}
			client := []string{"", "192.0.2.1", "192.0.2.2", "2001:db8::1"}[i/50%4]
			status := statuses[i/30%4]
			got.addRow(id, domain, client, status)
			b := bucketOf(id)
			if domain != "" {
				g, tag := want.group(domain)
				want.add(postKey(b, postDomain, g), id, tag, true)
			}
			if client != "" {
				g, tag := want.group(client)
				want.add(postKey(b, postClient, g), id, tag, true)
			}
			if status != nil {
				want.add(postKey(b, postStatus, statusPostValue(status)), id, 0, false)
			}
		}
		if g, w := postingsOf(&got), postingsOf(&want); !reflect.DeepEqual(g, w) {
			t.Fatalf("bits %d: %d postings, want %d", bits, len(g), len(w))
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
		key, first, blob := p.encode(i, nil)
		out = append(out, encodedPosting{key, first, string(blob)})
	}
	return out
}
