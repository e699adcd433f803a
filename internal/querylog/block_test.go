package querylog

import (
	"encoding/hex"
	"errors"
	"reflect"
	"testing"
	"time"
)

// A block decodes to the rows it was encoded from, with dictionary ids and
// text values, empty columns, constant columns and time going backwards.
func TestBlockRoundTrip(t *testing.T) {
	nm := newNames()
	base := time.Date(2026, 5, 1, 10, 0, 0, 0, time.UTC)
	rows := normalizeRows(layoutRows(500, base), 41)
	rows[7].Time = rows[7].Time.Add(-time.Hour) // out of order
	rows[9].Duration = -time.Millisecond
	for i := range rows {
		if i%3 == 0 {
			rows[i].ClientID = []string{"kids", "laptop-7"}[i%2]
		}
		if i%4 == 1 && rows[i].Domain != "" {
			rows[i].Rule = rows[i].Domain // a hosts or plain-domain line: sameDomain
		}
	}
	rows[5].Domain, rows[5].Rule = "", "" // hidden domains: not sameDomain
	var enc blockEncoder
	var pb postingBuilder
	pb.reset()
	data, tsMin, tsMax := enc.encode(nm, &pb, rows)
	if tsMin != rows[7].Time.UnixMicro() || tsMax != rows[len(rows)-1].Time.UnixMicro() {
		t.Fatalf("ts range %d..%d", tsMin, tsMax)
	}
	b, err := decodeBlock(41, data, nm)
	if err != nil {
		t.Fatal(err)
	}
	if b.first != 41 || b.last != 540 {
		t.Fatalf("ids %d..%d", b.first, b.last)
	}
	got := make([]Row, len(rows))
	for i := range got {
		b.row(41+int64(i), &got[i])
	}
	if !reflect.DeepEqual(got, rows) {
		t.Fatalf("decoded rows differ:\n got %+v\nwant %+v", got[:2], rows[:2])
	}
	if len(pb.keys) == 0 {
		t.Fatal("no postings")
	}
	if c := &b.cols[colKinds+kRule]; c.same == 0 {
		t.Fatal("rules equal to their domain were not stored as sameDomain")
	}
	for _, cut := range []int{0, 1, 2, len(data) / 2, len(data) - 1} {
		if _, err := decodeBlock(41, data[:cut], nm); !errors.Is(err, errBlockCorrupt) {
			t.Fatalf("truncated to %d bytes: %v", cut, err)
		}
	}
}

// FuzzDecodeBlock: a corrupt block is an error, never a panic, and the
// decoder allocates in proportion to the blob, not to the counts it claims.
func FuzzDecodeBlock(f *testing.F) {
	nm := newNames()
	var enc blockEncoder
	var pb postingBuilder
	for _, n := range []int{1, 3, 50} {
		pb.reset()
		data, _, _ := enc.encode(nm, &pb, normalizeRows(layoutRows(n, time.Unix(1e9, 0)), 1))
		f.Add(append([]byte(nil), data...))
	}
	rows := normalizeRows(layoutRows(20, time.Unix(1e9, 0)), 1)
	for i := range rows {
		rows[i].Rule = rows[i].Domain // sameDomain
	}
	pb.reset()
	data, _, _ := enc.encode(nm, &pb, rows)
	f.Add(append([]byte(nil), data...))
	f.Add([]byte{blockVersion, 0xff, 0xff, 0xff, 0xff, 0x0f})
	if v1, err := hex.DecodeString(blockV1Fixture); err == nil {
		f.Add(v1)
	}
	f.Fuzz(func(t *testing.T, data []byte) {
		b, err := decodeBlock(1, data, nm)
		if err != nil {
			if !errors.Is(err, errBlockCorrupt) {
				t.Fatalf("error not marked corrupt: %v", err)
			}
			return
		}
		if n := b.last - b.first + 1; n <= 0 || n > int64(len(data)) {
			t.Fatalf("%d rows from %d bytes", n, len(data))
		}
		var r Row
		for id := b.first; id <= b.last; id++ {
			b.row(id, &r)
		}
	})
}
