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
// Reads go through its own buffer and hand crypto/tls at most the rest of
// the record being read, so crypto/tls never holds a record beyond the one
// it returns: once the buffer is empty on a record boundary (drained), a
// reader knows there is nothing more to decrypt without asking again.
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
	hdr   [5]byte // a record header, possibly split across reads
	hn    int     // bytes of hdr taken
	left  int     // bytes of the current record's body not yet taken
}

// Read hands crypto/tls what was read from the socket, at most to the
// end of the current record.
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
	n := 0
	for n < len(p) && n < len(b.in) {
		if b.left == 0 {
			k := min(len(b.hdr)-b.hn, len(b.in)-n, len(p)-n)
			copy(b.hdr[b.hn:], b.in[n:n+k])
			b.hn += k
			n += k
			if b.hn < len(b.hdr) {
				break
			}
			b.hn = 0
			b.left = int(binary.BigEndian.Uint16(b.hdr[3:]))
			if b.left == 0 {
				break
			}
			continue
		}
		k := min(b.left, len(b.in)-n, len(p)-n)
		b.left -= k
		n += k
		if b.left == 0 {
			break
		}
	}
	copy(p, b.in[:n])
	b.in = b.in[n:]
	if len(b.in) == 0 {
		b.release() // an idle connection holds no read buffer
	}
	return n, nil
}

// drained reports that everything read from the socket has reached
// crypto/tls and ended on a record boundary: a Read of the TLS connection
// that did not fill its buffer returned the last record there was.
func (b *batchConn) drained() bool {
	return len(b.in) == 0 && b.left == 0 && b.hn == 0
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

// run reads until onData returns false or the socket ends. It returns the
// wait's error (a read deadline, a closed socket) or nil when onData or
// the socket ended it.
func (f *feeder) run(onData func() bool) error {
	b := f.b
	b.fed = true
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
