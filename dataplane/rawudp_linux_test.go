package dataplane

import (
	"context"
	"fmt"
	"net"
	"os"
	"strings"
	"testing"
	"time"

	"github.com/miekg/dns"
)

// socketInode is the inode of the socket open as fd in this process ("" when
// fd is not an open socket).
func socketInode(fd int) string {
	l, err := os.Readlink(fmt.Sprintf("/proc/self/fd/%d", fd))
	if err != nil || !strings.HasPrefix(l, "socket:[") {
		return ""
	}
	return strings.TrimSuffix(strings.TrimPrefix(l, "socket:["), "]")
}

// epollInodes lists the inodes of every file registered in any epoll
// instance of this process (Go's poller is one), from /proc/self/fdinfo.
func epollInodes(t *testing.T) map[string]bool {
	t.Helper()
	ents, err := os.ReadDir("/proc/self/fd")
	if err != nil {
		t.Skip(err)
	}
	out := map[string]bool{}
	for _, e := range ents {
		l, err := os.Readlink("/proc/self/fd/" + e.Name())
		if err != nil || l != "anon_inode:[eventpoll]" {
			continue
		}
		b, err := os.ReadFile("/proc/self/fdinfo/" + e.Name())
		if err != nil {
			continue
		}
		for _, line := range strings.Split(string(b), "\n") {
			// tfd: N events: E data: D  pos:P ino:I sdev:S
			f := strings.Fields(line)
			for _, x := range f {
				if h, ok := strings.CutPrefix(x, "ino:"); ok && len(f) > 0 && f[0] == "tfd:" {
					var ino uint64
					if _, err := fmt.Sscanf(h, "%x", &ino); err == nil {
						out[fmt.Sprint(ino)] = true
					}
				}
			}
		}
	}
	return out
}

// The UDP listeners are served outside Go's poller (no epoll registration,
// so sending an answer wakes no poller), answer queries, and their
// descriptors are closed by Shutdown, not before.
func TestRawUDPOutsidePollerAndClosed(t *testing.T) {
	cfg := testConfig()
	cfg.Sockets = 2
	cfg.Listeners = []ListenerConfig{{Address: "127.0.0.1:0", Protocols: []string{"udp"}}}
	s, err := New(cfg, Options{})
	if err != nil {
		t.Fatal(err)
	}
	s.Swap(NewSnapshot(SnapshotInput{Authority: testTable(t)}))
	if err := s.Start(context.Background()); err != nil {
		t.Fatal(err)
	}
	s.mu.Lock()
	raws := append([]*rawUDP(nil), s.rawUDP...)
	s.mu.Unlock()
	if len(raws) != 2 || len(s.udp) != 0 {
		t.Fatalf("%d raw and %d poller sockets, want 2 raw", len(raws), len(s.udp))
	}
	// A socket the Go poller serves is found registered: the check below
	// can fail.
	pc, err := net.ListenUDP("udp", &net.UDPAddr{IP: net.IPv4(127, 0, 0, 1)})
	if err != nil {
		t.Fatal(err)
	}
	defer pc.Close()
	f, err := pc.File()
	if err != nil {
		t.Fatal(err)
	}
	pcInode := socketInode(int(f.Fd()))
	f.Close()
	inodes := make([]string, len(raws))
	polled := epollInodes(t)
	if !polled[pcInode] {
		t.Fatalf("a poller's socket (%s) is not seen in epoll: %v", pcInode, polled)
	}
	for i, u := range raws {
		if inodes[i] = socketInode(u.fd); inodes[i] == "" {
			t.Fatalf("fd %d is not a socket", u.fd)
		}
		if polled[inodes[i]] {
			t.Errorf("socket %s (fd %d) is registered in epoll", inodes[i], u.fd)
		}
	}
	m := new(dns.Msg)
	m.SetQuestion("www.example.com.", dns.TypeA)
	for range 20 { // both sockets of the reuseport group answer
		if r := exchange(t, s, "udp", m); r.Rcode != dns.RcodeSuccess || len(r.Answer) == 0 {
			t.Fatalf("answer: %v", r)
		}
	}
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	start := time.Now()
	if err := s.Shutdown(ctx); err != nil {
		t.Fatal(err)
	}
	if d := time.Since(start); d > 2*time.Second {
		t.Errorf("shutdown took %v: the blocked readers were not woken", d)
	}
	for i, u := range raws {
		if got := socketInode(u.fd); got == inodes[i] {
			t.Errorf("fd %d (socket %s) still open after Shutdown", u.fd, inodes[i])
		}
	}
}
