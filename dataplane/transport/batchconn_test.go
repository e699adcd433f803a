package transport

import (
	"bytes"
	"encoding/binary"
	"os"
	"testing"
)

// records builds TLS-like records (5-byte header, 16-bit length) with
// the given body lengths.
func records(lens ...int) []byte {
	var b []byte
	for i, n := range lens {
		b = append(b, 23, 3, 3)
		b = binary.BigEndian.AppendUint16(b, uint16(n))
		b = append(b, bytes.Repeat([]byte{byte(i)}, n)...)
	}
	return b
}

// boundaries are the offsets where the records of b end.
func boundaries(b []byte) map[int]bool {
	ends := map[int]bool{}
	for off := 0; off+5 <= len(b); {
		off += 5 + int(binary.BigEndian.Uint16(b[off+3:]))
		ends[off] = true
	}
	return ends
}

// feedAll feeds stream to a fed batchConn in chunks (sizes from cuts) and
// reads it back with reads of sizes from reads; it checks that every byte
// comes back in order, that no Read crosses the end of a record, and that
// drained is true exactly when the feed is used up on a record boundary.
func feedAll(t *testing.T, stream, cuts, reads []byte) {
	t.Helper()
	b := &batchConn{fed: true}
	ends := boundaries(stream)
	var got []byte
	off, ci, ri := 0, 0, 0
	next := func(s []byte, i *int, def int) int {
		if len(s) == 0 {
			return def
		}
		v := int(s[*i%len(s)]) + 1
		*i++
		return v
	}
	for off < len(stream) {
		n := min(next(cuts, &ci, 7), len(stream)-off)
		b.in = stream[off : off+n]
		off += n
		for {
			p := make([]byte, next(reads, &ri, 11))
			k, err := b.Read(p)
			if err != nil {
				if err != os.ErrDeadlineExceeded || k != 0 || len(b.in) != 0 {
					t.Fatalf("Read: %d, %v with %d fed", k, err, len(b.in))
				}
				break
			}
			if k == 0 {
				t.Fatal("Read returned nothing and no error")
			}
			start := len(got)
			got = append(got, p[:k]...)
			for e := range ends {
				if e > start && e < len(got) {
					t.Fatalf("a Read of [%d,%d) crosses the record end at %d", start, len(got), e)
				}
			}
		}
		if atEnd := ends[len(got)] || len(got) == 0; b.drained() != atEnd {
			t.Fatalf("drained %v after %d bytes (record boundary: %v)", b.drained(), len(got), atEnd)
		}
	}
	if !bytes.Equal(got, stream) {
		t.Fatalf("read back %d bytes, want %d (same order)", len(got), len(stream))
	}
}

func TestBatchConnRecordReads(t *testing.T) {
	for _, tc := range []struct {
		name        string
		stream      []byte
		cuts, reads []byte
	}{
		{"one record, one feed", records(40), []byte{254}, []byte{254}},
		{"burst in one feed", records(30, 31, 32, 0, 33), []byte{254}, []byte{254}},
		{"header split across feeds", records(20, 20), []byte{2, 1, 40}, []byte{254}},
		{"small reads", records(50, 3), []byte{254}, []byte{0, 2, 4}},
		{"byte by byte", records(9, 0, 9), []byte{0}, []byte{0}},
		{"empty record", records(0, 0, 1), []byte{254}, []byte{254}},
		{"large record", records(3000, 10), []byte{200, 254}, []byte{100, 254}},
	} {
		t.Run(tc.name, func(t *testing.T) { feedAll(t, tc.stream, tc.cuts, tc.reads) })
	}
}

// FuzzBatchConnRecords: whatever arrives from the network, and however
// it is split, a fed batchConn returns it whole and in order, never past
// the end of a record, and reports drained only on a record boundary.
func FuzzBatchConnRecords(f *testing.F) {
	f.Add(records(40, 0, 17), []byte{3, 9}, []byte{4, 200})
	f.Add([]byte{23, 3, 3, 0xff, 0xff, 1, 2, 3}, []byte{0}, []byte{1})
	f.Fuzz(func(t *testing.T, stream, cuts, reads []byte) {
		if len(stream) > 1<<16 {
			return
		}
		feedAll(t, stream, cuts, reads)
	})
}
