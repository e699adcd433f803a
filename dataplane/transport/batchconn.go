package transport

import (
	"encoding/binary"
	"io"
	"net"
	"os"
	"sync"
	"syscall"
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
// Reads go through its own buffer, and it counts the TLS records it hands
// to crypto/tls (recs) against those a reader saw returned whole (taken,
// see took): when the two agree and nothing read is left, crypto/tls holds
// no record the reader has not had (drained), so the reader need not ask
// again just to be told so. Records a reader never sees (handshake
// messages, alerts, empty records) keep the counts apart, which costs one
// Read that times out (then sync), never a record left behind.
//
// After the handshake the readers (DoT and h2 DoH) feed it (see feeder):
// they read the socket themselves and Read hands crypto/tls only what was
// fed. An empty feed is a timeout, which crypto/tls treats as temporary:
// it keeps a partial record and returns what it has. So a reader decrypts
// a whole burst of queries that arrived together and answers it in one
// write, though crypto/tls returns one record per Read.
type batchConn struct {
	net.Conn
	mu  sync.Mutex
	on  bool
	buf []byte

	// The read side; only the connection's reader touches these.
	fed   bool    // the reader feeds in; Read never reads the socket
	stage *[]byte // holds in; nil when empty
	in    []byte  // read from the socket, not yet handed to crypto/tls
	inErr error   // the socket's end (EOF, reset), after in is consumed
	recs  uint64  // complete records handed to crypto/tls
	taken uint64  // records a reader saw returned whole (took)
	hdr   [5]byte // a record header, possibly split across reads
	hn    int     // bytes of hdr counted
	left  int     // bytes of the current record's body still to come
}

// Read hands crypto/tls what was read from the socket.
func (b *batchConn) Read(p []byte) (int, error) {
	if len(b.in) == 0 {
		if b.inErr != nil {
			return 0, b.inErr
		}
		if b.fed {
			return 0, os.ErrDeadlineExceeded
		}
		buf := b.buffer()
		n, err := b.Conn.Read(buf)
		if n == 0 {
			b.release()
			return 0, err
		}
		b.in = buf[:n]
	}
	n := copy(p, b.in)
	b.count(b.in[:n])
	b.in = b.in[n:]
	if len(b.in) == 0 {
		b.release() // an idle connection holds no read buffer
	}
	return n, nil
}

// count counts the records that p completes.
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

// took tells what a Read of the TLS connection returned: n bytes into a
// buffer of size. Less than it asked for means one record's data,
// returned whole (crypto/tls returns from one record per Read).
func (b *batchConn) took(n, size int) {
	if n > 0 && n < size && b.taken < b.recs {
		b.taken++
	}
}

// sync records that a Read of the TLS connection found nothing: every
// complete record handed over has been had.
func (b *batchConn) sync() { b.taken = b.recs }

// drained reports that crypto/tls holds no complete record the reader
// has not had and nothing read from the socket is waiting.
func (b *batchConn) drained() bool {
	return len(b.in) == 0 && b.taken == b.recs
}

func (b *batchConn) buffer() []byte {
	if b.stage == nil {
		b.stage = getBuf()
	}
	return (*b.stage)[:cap(*b.stage)]
}

func (b *batchConn) release() {
	if b.stage != nil {
		putBuf(b.stage)
		b.stage, b.in = nil, nil
	}
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

// feeder drives a connection's reads after the handshake. It reads the
// socket itself, inside one RawConn.Read for as long as the connection is
// busy, and feeds what it read to crypto/tls through the batchConn.
//
// Go's own Read, after every answer, reads again only to find the socket
// empty (EAGAIN) and then parks: with one query in flight per connection
// that is a wasted syscall per query. A read that returned less than it
// asked for left the socket empty, so the feeder goes straight to waiting
// for readability. Waiting inside the same RawConn.Read keeps readiness
// that arrives in between (the runtime forgets it only when a Read
// begins), so no wake-up is lost; a spurious one costs one EAGAIN.
//
// onData, called after each read, must take everything fed: read the TLS
// connection until it times out or the batchConn is drained. The reader
// must not Close the socket from inside onData (Close would wait for this
// Read to return): see abortConn.
type feeder struct {
	rc syscall.RawConn // the socket
	b  *batchConn
}

// run reads until onData returns false or the socket ends; the caller has
// put b in fed mode (and had crypto/tls return what it read before). It
// returns the wait's error (a read deadline, a closed socket) or nil when
// onData or the socket ended it.
func (f *feeder) run(onData func() bool) error {
	b := f.b
	return f.rc.Read(func(fd uintptr) bool {
		for {
			buf := b.buffer()
			n, err := syscall.Read(int(fd), buf)
			switch {
			case err == syscall.EINTR:
				continue
			case err == syscall.EAGAIN:
				b.release()
				return false
			case err != nil:
				b.inErr, n = err, 0
			case n == 0:
				b.inErr = io.EOF
			}
			b.in = buf[:n]
			if !onData() || b.inErr != nil {
				return true
			}
			if n < len(buf) {
				b.release()  // a waiting connection holds no buffer
				return false // the socket is empty: wait for more
			}
		}
	})
}
