package transport

import (
	"bytes"
	"encoding/binary"
	"errors"
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
		b = append(b, bytes.Repeat([]byte{byte(i + 1)}, n)...)
	}
	return b
}

// recordLen is the length of the complete record at the start of b.
func recordLen(b []byte) (int, bool) {
	if len(b) < 5 {
		return 0, false
	}
	l := 5 + int(binary.BigEndian.Uint16(b[3:]))
	return l, len(b) >= l
}

// bodies are the bodies of the complete records of b, concatenated.
func bodies(b []byte) []byte {
	var out []byte
	for {
		l, ok := recordLen(b)
		if !ok {
			return out
		}
		out = append(out, b[5:l]...)
		b = b[l:]
	}
}

// sizes yields sizes from s (each byte + 1), cycling; def if s is empty.
type sizes struct {
	s   []byte
	i   int
	def int
}

func (z *sizes) next() int {
	if len(z.s) == 0 {
		return z.def
	}
	v := int(z.s[z.i%len(z.s)]) + 1
	z.i++
	return v
}

// fakeTLS reads records from a batchConn as crypto/tls does: one
// record's data per Read, the connection read (in chunks of any size)
// only when no complete record is held, empty records skipped.
type fakeTLS struct {
	b          *batchConn
	raw, plain []byte
	chunks     *sizes
}

func (f *fakeTLS) Read(p []byte) (int, error) {
	for len(f.plain) == 0 {
		if l, ok := recordLen(f.raw); ok {
			f.plain = append([]byte(nil), f.raw[5:l]...)
			f.raw = f.raw[l:]
			continue
		}
		chunk := make([]byte, f.chunks.next())
		n, err := f.b.Read(chunk)
		if err != nil {
			return 0, err
		}
		f.raw = append(f.raw, chunk[:n]...)
	}
	n := copy(p, f.plain)
	f.plain = f.plain[n:]
	return n, nil
}

// holds reports whether a Read would return data without new input.
func (f *fakeTLS) holds() bool {
	_, ok := recordLen(f.raw)
	return ok || len(f.plain) > 0
}

// feedAll feeds stream to a fed batchConn in chunks (sizes from cuts) and
// reads it back as the DoT reader does (reads of sizes from reads, until a
// timeout or drained); every record's data must come back in order, and
// drained must never be true while a complete record is still held.
func feedAll(t *testing.T, stream, cuts, reads, tlsChunks []byte) {
	t.Helper()
	b := &batchConn{fed: true}
	f := &fakeTLS{b: b, chunks: &sizes{s: tlsChunks, def: 512}}
	cz, rz := &sizes{s: cuts, def: 7}, &sizes{s: reads, def: 11}
	var got []byte
	for off := 0; off < len(stream); {
		n := min(cz.next(), len(stream)-off)
		b.in = stream[off : off+n]
		off += n
		for {
			p := make([]byte, rz.next())
			k, err := f.Read(p)
			b.took(k, len(p))
			got = append(got, p[:k]...)
			if err != nil {
				if !errors.Is(err, os.ErrDeadlineExceeded) || k != 0 || len(b.in) != 0 {
					t.Fatalf("Read: %d, %v with %d fed", k, err, len(b.in))
				}
				b.sync()
				break
			}
			if b.drained() {
				if f.holds() {
					t.Fatalf("drained after %d bytes of data while a record is held", len(got))
				}
				break
			}
		}
	}
	if want := bodies(stream); !bytes.Equal(got, want) {
		t.Fatalf("read back %d bytes of data, want %d (same order)", len(got), len(want))
	}
}

func TestBatchConnRecordCounts(t *testing.T) {
	for _, tc := range []struct {
		name                   string
		stream                 []byte
		cuts, reads, tlsChunks []byte
	}{
		{"one record, one feed", records(40), []byte{254}, []byte{254}, nil},
		{"burst in one feed", records(30, 31, 32, 0, 33), []byte{254}, []byte{254}, nil},
		{"burst, crypto/tls reads it all at once", records(30, 31, 32, 33), []byte{254}, []byte{254}, []byte{254}},
		{"header split across feeds", records(20, 20), []byte{2, 1, 40}, []byte{254}, nil},
		{"small reads: a record returned in pieces", records(50, 3), []byte{254}, []byte{0, 2, 4}, nil},
		{"a read exactly the record's size", records(9, 9), []byte{254}, []byte{8}, nil},
		{"byte by byte", records(9, 0, 9), []byte{0}, []byte{0}, []byte{0}},
		{"empty records", records(0, 0, 1), []byte{254}, []byte{254}, nil},
		{"large record", records(3000, 10), []byte{200, 254}, []byte{100, 254}, []byte{254, 3}},
	} {
		t.Run(tc.name, func(t *testing.T) { feedAll(t, tc.stream, tc.cuts, tc.reads, tc.tlsChunks) })
	}
}

// FuzzBatchConnRecords: whatever arrives from the network, however it is
// split and however crypto/tls and the reader read it, every record's data
// comes back in order and drained is never true while crypto/tls still
// holds a record the reader has not had.
func FuzzBatchConnRecords(f *testing.F) {
	f.Add(records(40, 0, 17), []byte{3, 9}, []byte{4, 200}, []byte{254})
	f.Add([]byte{23, 3, 3, 0xff, 0xff, 1, 2, 3}, []byte{0}, []byte{1}, []byte{0})
	f.Fuzz(func(t *testing.T, stream, cuts, reads, tlsChunks []byte) {
		if len(stream) > 1<<16 {
			return
		}
		feedAll(t, stream, cuts, reads, tlsChunks)
	})
}
