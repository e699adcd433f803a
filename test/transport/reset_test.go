package transport_test

import (
	"context"
	"crypto/tls"
	"encoding/binary"
	"net"
	"syscall"
	"testing"
	"time"

	"golang.org/x/net/http2"
)

// TestClientResetWhileServerWrites: a client that sends queries without
// reading the answers, until the server's writes block, then resets the
// connection. The server's blocked write fails; the connection must end
// and the server must still shut down in time (a reader that closed its
// own socket from inside its read would wait for itself for ever).
func TestClientResetWhileServerWrites(t *testing.T) {
	for _, kind := range []string{"dot", "doh"} {
		t.Run(kind, func(t *testing.T) {
			st := newStack(t, stackOpts{})
			d := net.Dialer{Control: func(_, _ string, c syscall.RawConn) error {
				// A small receive buffer: the server's writes block soon.
				return c.Control(func(fd uintptr) { _ = syscall.SetsockoptInt(int(fd), syscall.SOL_SOCKET, syscall.SO_RCVBUF, 4096) })
			}}
			raw, err := d.Dial("tcp", st.addr(kind).String())
			if err != nil {
				t.Fatal(err)
			}
			proto := "dot"
			if kind == "doh" {
				proto = "h2"
			}
			c := tls.Client(raw, st.pki.ClientTLS(proto))
			if err := c.Handshake(); err != nil {
				t.Fatal(err)
			}
			send := queriesUntilBlocked(t, c, kind)
			_ = c.SetWriteDeadline(time.Now().Add(300 * time.Millisecond))
			n := 0
			for ; n < 200000; n++ {
				if err := send(n); err != nil {
					break // the server stopped reading: its writes block
				}
			}
			if n == 200000 {
				t.Fatal("the server never stopped reading")
			}
			_ = raw.(*net.TCPConn).SetLinger(0)
			_ = raw.Close() // RST
			time.Sleep(100 * time.Millisecond)
			ctx, cancel := context.WithTimeout(context.Background(), 3*time.Second)
			defer cancel()
			if err := st.tr.Shutdown(ctx); err != nil {
				t.Fatalf("after %d queries and a reset: shutdown: %v", n, err)
			}
		})
	}
}

// queriesUntilBlocked returns a function that sends query i on c: DoT
// frames, or h2 GET requests on a connection whose flow-control windows
// the client opened wide (so only the socket holds the server back).
func queriesUntilBlocked(t *testing.T, c *tls.Conn, kind string) func(i int) error {
	if kind == "dot" {
		return func(i int) error {
			q := query(t, uint16(i))
			_, err := c.Write(append(binary.BigEndian.AppendUint16(nil, uint16(len(q))), q...))
			return err
		}
	}
	hc := newH2Client(t, c, http2.Setting{ID: http2.SettingInitialWindowSize, Val: 1 << 30})
	if err := hc.fr.WriteWindowUpdate(0, 1<<30); err != nil {
		t.Fatal(err)
	}
	return func(i int) error { return hc.get(t, uint32(2*i+1), uint16(i)) }
}
