package transport

import (
	"errors"
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
// After the handshake the readers (DoT and h2 DoH) feed it (see feeder):
// they read the socket themselves and Read hands crypto/tls only what it
// was fed. An empty feed is a timeout, which crypto/tls treats as
// temporary: it keeps a partial record and returns what it has. So a
// reader decrypts a whole burst of queries that arrived together and
// answers it in one write, though crypto/tls returns one record per Read.
type batchConn struct {
	net.Conn
	mu  sync.Mutex
	on  bool
	buf []byte

	// Fed mode; only the connection's reader touches these.
	fed   bool
	in    []byte
	inErr error // the socket's end (EOF, reset), after in is consumed
}

// Read returns what was fed, or reads the socket before the reader feeds.
func (b *batchConn) Read(p []byte) (int, error) {
	if !b.fed {
		return b.Conn.Read(p)
	}
	if len(b.in) == 0 {
		if b.inErr != nil {
			return 0, b.inErr
		}
		return 0, os.ErrDeadlineExceeded
	}
	n := copy(p, b.in)
	b.in = b.in[n:]
	return n, nil
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
type feeder struct {
	rc    syscall.RawConn // the socket; nil: blocking reads of b.Conn
	b     *batchConn
	stage *[]byte // ciphertext being fed; nil while waiting
}

// run reads until onData returns false or the socket ends, calling onData
// after each read with the bytes fed (onData must consume them: read the
// TLS connection until it times out). It returns the wait's error (a read
// deadline, a closed socket) or nil when onData or the socket ended it.
func (f *feeder) run(onData func() bool) error {
	f.b.fed = true
	if f.rc == nil {
		for {
			buf := f.buf()
			n, err := f.b.Conn.Read(buf)
			if n == 0 && err != nil {
				var ne net.Error
				if errors.As(err, &ne) && ne.Timeout() {
					return err
				}
				f.b.inErr = err
			}
			f.b.in = buf[:n]
			if !onData() || f.b.inErr != nil {
				return nil
			}
		}
	}
	return f.rc.Read(func(fd uintptr) bool {
		for {
			buf := f.buf()
			n, err := syscall.Read(int(fd), buf)
			switch {
			case err == syscall.EINTR:
				continue
			case err == syscall.EAGAIN:
				f.release()
				return false
			case err != nil:
				f.b.inErr, n = err, 0
			case n == 0:
				f.b.inErr = io.EOF
			}
			f.b.in = buf[:n]
			if !onData() || f.b.inErr != nil {
				return true
			}
			if n < len(buf) {
				f.release()  // a waiting connection holds no buffer
				return false // the socket is empty: wait for more
			}
		}
	})
}

func (f *feeder) buf() []byte {
	if f.stage == nil {
		f.stage = getBuf()
	}
	return (*f.stage)[:cap(*f.stage)]
}

// release gives the read buffer back (a parked connection holds none).
func (f *feeder) release() {
	if f.stage != nil {
		putBuf(f.stage)
		f.stage = nil
	}
}
