package transport

import (
	"net"
	"sync"
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
type batchConn struct {
	net.Conn
	mu  sync.Mutex
	on  bool
	buf []byte
}

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
