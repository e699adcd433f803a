package transport

import (
	"encoding/binary"
	"net"
	"sync"
	"time"
)

// batchConn sits under a TLS connection so that several TLS records can
// leave in one write: between begin and end, writes collect in a buffer.
// The lean h2 DoH server writes each answer as its own TLS record (clients
// such as dnsperf read one record at a time and take at most one answer
// from it) while still paying one syscall for a burst of answers.
//
// Every write, batched or not, holds mu while it reaches the socket, so a
// record the TLS stack writes on its own (an alert, a key update) can never
// overtake records already batched: their sequence numbers stay in order.
//
// It also counts the TLS records that arrive (see held), for the readers
// (DoT and h2 DoH): crypto/tls returns one record per Read, so a burst of
// queries that arrived in one segment would otherwise be answered one
// write per query instead of one write per burst.
type batchConn struct {
	net.Conn
	mu  sync.Mutex
	on  bool
	buf []byte

	// Read side: only the connection's reader (one goroutine at a time)
	// touches these.
	recs  uint64  // complete records received from the socket
	taken uint64  // records the reader has read (or given up on)
	hdr   [5]byte // a record header split across reads
	hn    int     // bytes of hdr filled
	left  int     // bytes of the current record's body still to come
}

// Read counts the complete TLS records that pass on to crypto/tls.
func (b *batchConn) Read(p []byte) (int, error) {
	n, err := b.Conn.Read(p)
	b.count(p[:n])
	return n, err
}

func (b *batchConn) count(p []byte) {
	for len(p) > 0 {
		if b.left > 0 {
			k := min(b.left, len(p))
			b.left -= k
			p = p[k:]
			if b.left == 0 {
				b.recs++
			}
			continue
		}
		k := copy(b.hdr[b.hn:], p)
		b.hn += k
		p = p[k:]
		if b.hn == len(b.hdr) {
			b.hn = 0
			b.left = int(binary.BigEndian.Uint16(b.hdr[3:]))
			if b.left == 0 {
				b.recs++
			}
		}
	}
}

// held reports whether crypto/tls may hold complete records the reader has
// not read yet: then a read with a deadline in the past (poll) returns
// data without a syscall, and the reader answers it in the same burst.
// The count is a hint: handshake records and records larger than the
// reader's buffer skew it, which costs one poll or one early flush, never
// data.
func (b *batchConn) held() bool { return b.recs > b.taken }

// took records that a Read of the TLS connection returned data.
func (b *batchConn) took() {
	if b.taken < b.recs {
		b.taken++
	}
}

// drained records that a poll found nothing buffered.
func (b *batchConn) drained() { b.taken = b.recs }

// pollDeadline is a read deadline in the past: a Read with it returns
// what crypto/tls has buffered, or a timeout at once without a syscall.
var pollDeadline = time.Unix(1, 0)

func (b *batchConn) Write(p []byte) (int, error) {
	b.mu.Lock()
	defer b.mu.Unlock()
	if b.on {
		b.buf = append(b.buf, p...)
		return len(p), nil
	}
	return b.Conn.Write(p)
}

// begin starts collecting writes.
func (b *batchConn) begin() {
	b.mu.Lock()
	b.on = true
	b.mu.Unlock()
}

// end writes what was collected in one write and stops collecting.
func (b *batchConn) end() error {
	b.mu.Lock()
	defer b.mu.Unlock()
	b.on = false
	if len(b.buf) == 0 {
		return nil
	}
	_, err := b.Conn.Write(b.buf)
	if cap(b.buf) > 64<<10 {
		b.buf = nil // a burst's buffer is not kept by an idle connection
	} else {
		b.buf = b.buf[:0]
	}
	return err
}
