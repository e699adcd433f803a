package querylog

import (
	"encoding/hex"
	"errors"
	"fmt"
	"math/rand/v2"
	"reflect"
	"strings"
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

// Rows in runs that share their strings (as the converter hands them over)
// are encoded as runs; they decode to the rows, including runs broken by
// one column, equal text at another address, and rules that are their
// row's domain.
func TestBlockRunsRoundTrip(t *testing.T) {
	nm := newNames()
	rng := rand.New(rand.NewPCG(27, 1))
	pool := func(prefix string, n int) []string {
		out := []string{""}
		for i := range n {
			out = append(out, fmt.Sprintf("%s%d", prefix, i))
		}
		return out
	}
	kindVals := make([][]string, nKinds)
	for k := range nKinds {
		kindVals[k] = pool(kindCols[k], 3)
	}
	base := time.Date(2026, 5, 1, 10, 0, 0, 0, time.UTC)
	rows := make([]Row, 3000)
	for i := range rows {
		r := &rows[i]
		r.Time, r.Duration = base.Add(time.Duration(i)*time.Millisecond), time.Duration(i%7)*time.Microsecond
		r.Domain = fmt.Sprintf("d%d.example", rng.IntN(400))
		r.Client = []string{"192.0.2.1", "192.0.2.2"}[i/100%2]
		if i > 0 && rng.IntN(10) > 0 {
			// The same strings as the row before, but for the domain.
			prev := rows[i-1]
			for k := range nKinds {
				*rowField(r, k) = *rowField(&prev, k)
			}
			if prev.Rule != "" && prev.Rule == prev.Domain {
				r.Rule = r.Domain
			}
			switch rng.IntN(8) {
			case 0: // one column changes
				k := rng.IntN(nKinds)
				*rowField(r, k) = kindVals[k][rng.IntN(len(kindVals[k]))]
			case 1: // equal text at another address
				k := rng.IntN(nKinds)
				*rowField(r, k) = strings.Clone(*rowField(r, k))
			case 2: // the rule becomes the row's own domain, or stops being it
				if r.Rule == r.Domain {
					r.Rule = kindVals[kRule][1]
				} else {
					r.Rule = r.Domain
				}
			}
			continue
		}
		for k := range nKinds {
			*rowField(r, k) = kindVals[k][rng.IntN(len(kindVals[k]))]
		}
	}
	rows = normalizeRows(rows, 1)
	var enc blockEncoder
	var pb postingBuilder
	pb.reset()
	data, _, _ := enc.encode(nm, &pb, rows)
	runs := 0
	for k := range nKinds {
		runs += len(enc.cols[colKinds+k].runs)
	}
	if runs >= nKinds*len(rows)/2 {
		t.Errorf("%d kind runs for %d rows: runs of shared strings were not kept as runs", runs, len(rows))
	}
	b, err := decodeBlock(1, data, nm)
	if err != nil {
		t.Fatal(err)
	}
	for i := range rows {
		var got Row
		b.row(int64(i+1), &got)
		if !reflect.DeepEqual(got, rows[i]) {
			t.Fatalf("row %d:\n got %+v\nwant %+v", i, got, rows[i])
		}
	}
}

// sameKinds compares every kind column: two rows that differ in one kind
// alone are not the same.
func TestSameKindsComparesEveryKind(t *testing.T) {
	for k := range nKinds {
		a := Row{Domain: "a.example"}
		for j := range nKinds {
			*rowField(&a, j) = "v"
		}
		b := a
		if !sameKinds(&a, &b) {
			t.Fatalf("%s: a row and its copy differ", kindCols[k])
		}
		*rowField(&b, k) = "w"
		if sameKinds(&a, &b) {
			t.Errorf("%s differs but the rows were the same", kindCols[k])
		}
	}
	a := Row{Domain: "a.example", Rule: "a.example"}
	b := Row{Domain: "b.example", Rule: "b.example"}
	if !sameKinds(&a, &b) {
		t.Error("two rules that are their rows' domains differ")
	}
	b.Rule = "a.example"
	if sameKinds(&a, &b) {
		t.Error("a rule that is its domain and one that is not are the same")
	}
}
