package dataplane

import (
	"os"
	"strconv"
	"strings"
	"testing"

	"golang.org/x/sys/unix"
)

// The UDP listener sockets get a 4 MiB receive buffer: the kernel's default
// overflowed in bursts. Without CAP_NET_ADMIN the buffer can only reach
// net.core.rmem_max.
func TestUDPReadBufferGrown(t *testing.T) {
	s := startServer(t, Config{Listeners: []ListenerConfig{{Address: "127.0.0.1:0"}}, Sockets: 2}, nil)
	conns := udpSockets(t, s)
	if len(conns) != 2 {
		t.Fatalf("%d UDP sockets", len(conns))
	}
	want := udpReadBuffer
	if os.Geteuid() != 0 {
		b, err := os.ReadFile("/proc/sys/net/core/rmem_max")
		if err != nil {
			t.Skip(err)
		}
		if max, _ := strconv.Atoi(strings.TrimSpace(string(b))); 2*max < want {
			want = 2 * max
		}
	}
	for _, c := range conns {
		rc := c.rc
		var n int
		var gerr error
		if err := rc.Control(func(fd uintptr) { n, gerr = unix.GetsockoptInt(int(fd), unix.SOL_SOCKET, unix.SO_RCVBUF) }); err != nil || gerr != nil {
			t.Fatal(err, gerr)
		}
		if n < want {
			t.Errorf("SO_RCVBUF %d, want at least %d", n, want)
		}
	}
}
