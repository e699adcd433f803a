package dataplane

import (
	"errors"
	"net"
	"os"
	"runtime"
	"testing"
	"time"

	"github.com/miekg/dns"
	"golang.org/x/sys/unix"
)

// smallMTUNetns returns a function that runs fn on a thread inside a new
// network namespace whose loopback is up with the given MTU; sockets made
// there stay in it. The thread is never given back to the scheduler (it
// dies with its goroutine). It skips the test without the privileges
// (fails under CI, which runs as root).
func smallMTUNetns(t *testing.T, mtu int) func(fn func()) {
	t.Helper()
	work := make(chan func())
	ready := make(chan error, 1)
	go func() {
		runtime.LockOSThread() // never unlocked: the thread ends with the goroutine
		if err := unix.Unshare(unix.CLONE_NEWNET); err != nil {
			ready <- err
			return
		}
		ready <- setLoopback(mtu)
		for fn := range work {
			fn()
			work <- nil // done
		}
	}()
	if err := <-ready; err != nil {
		if errors.Is(err, unix.EPERM) && os.Getenv("CI") == "" {
			t.Skipf("no network namespace (not root?): %v", err)
		}
		t.Fatalf("network namespace: %v", err)
	}
	t.Cleanup(func() { close(work) })
	return func(fn func()) {
		work <- fn
		<-work
	}
}

// setLoopback sets lo's MTU and brings it up, in the calling thread's
// namespace.
func setLoopback(mtu int) error {
	fd, err := unix.Socket(unix.AF_INET, unix.SOCK_DGRAM|unix.SOCK_CLOEXEC, 0)
	if err != nil {
		return err
	}
	defer unix.Close(fd)
	ifr, err := unix.NewIfreq("lo")
	if err != nil {
		return err
	}
	ifr.SetUint32(uint32(mtu))
	if err := unix.IoctlIfreq(fd, unix.SIOCSIFMTU, ifr); err != nil {
		return err
	}
	ifr.SetUint16(unix.IFF_UP | unix.IFF_LOOPBACK | unix.IFF_RUNNING)
	return unix.IoctlIfreq(fd, unix.SIOCSIFFLAGS, ifr)
}

// An answer that fits the client's EDNS size but not the interface's MTU
// leaves cut to its question with TC set, so the client asks over TCP,
// instead of as fragments (RFC 9715): the listener's sockets send with
// don't-fragment and no local fragmentation (setDontFragment), and a send
// refused with EMSGSIZE is sent again cut. Without DF the answer would
// arrive whole (fragmented by the kernel); with DF and no cut it would not
// arrive at all.
func TestAnswerPastInterfaceMTULeavesTruncated(t *testing.T) {
	snap := NewSnapshot(SnapshotInput{Authority: testTable(t)})
	for _, tc := range []struct {
		name    string
		mtu     int    // the namespace's loopback MTU
		address string // the listener's
		maxUDP  int
		big     string // a name whose answer fits maxUDP, not the MTU
		batch   bool
	}{
		// big's answer is about 770 bytes, huge's about 1530.
		{"ipv4 recvmmsg", 600, "127.0.0.1:0", 0, "big.example.com.", true},
		{"ipv4 one datagram per call", 600, "127.0.0.1:0", 0, "big.example.com.", false},
		{"ipv6", 1280, "[::1]:0", 4096, "huge.example.com.", true},
	} {
		t.Run(tc.name, func(t *testing.T) {
			in := smallMTUNetns(t, tc.mtu)
			cfg := testConfig()
			cfg.Listeners = []ListenerConfig{{Address: tc.address}}
			cfg.DisableUDPBatch = !tc.batch
			if tc.maxUDP > 0 {
				cfg.MaxUDPSize = tc.maxUDP
			}
			s := startServerIn(t, cfg, Options{}, snap, in)
			var nc net.Conn
			var err error
			in(func() { nc, err = net.Dial("udp", s.UDPAddrs()[0].String()) })
			if err != nil {
				t.Fatal(err)
			}
			c := &dns.Conn{Conn: nc, UDPSize: 65535}
			defer c.Close()
			ask := func(name string) *dns.Msg {
				t.Helper()
				m := query(name, dns.TypeTXT)
				m.SetEdns0(4096, false)
				_ = c.SetDeadline(time.Now().Add(3 * time.Second))
				if err := c.WriteMsg(m); err != nil {
					t.Fatal(err)
				}
				r, err := c.ReadMsg()
				if err != nil {
					t.Fatalf("%s: %v", name, err)
				}
				return r
			}
			// www's answer fits the MTU: whole.
			if r := ask("www.example.com."); r.Truncated || r.Rcode != dns.RcodeSuccess {
				t.Fatalf("small answer: %v", r)
			}
			r := ask(tc.big)
			if !r.Truncated || len(r.Answer) != 0 || len(r.Question) != 1 || r.Question[0].Name != tc.big || !r.Authoritative {
				t.Fatalf("answer past the MTU: want TC with the question, got %v", r)
			}
			// The socket still answers after a refused send.
			if r := ask("www.example.com."); r.Truncated {
				t.Fatalf("after a cut answer: %v", r)
			}
		})
	}
}
