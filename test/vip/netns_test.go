package vip_test

import (
	"bytes"
	"context"
	"crypto/rand"
	"encoding/hex"
	"fmt"
	"net"
	"net/netip"
	"os"
	"os/exec"
	"path/filepath"
	"runtime"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/miekg/dns"
	"golang.org/x/sys/unix"
)

// segment is one layer-2 segment made of network namespaces: a hub
// namespace holding a bridge, and hosts each in its own namespace with eth0
// plugged into the bridge. Nothing is created in the test's own namespace,
// and the names carry a random tag, so parallel runs do not collide; every
// namespace is deleted when the test ends, failed or not.
type segment struct {
	t   *testing.T
	tag string
	hub string
}

// run runs a command and fails the test with its output.
func run(t testing.TB, name string, args ...string) string {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	out, err := exec.CommandContext(ctx, name, args...).CombinedOutput()
	if err != nil {
		t.Fatalf("%s %s: %v\n%s", name, strings.Join(args, " "), err, out)
	}
	return string(out)
}

// requireRoot fails (under CI) or skips the test when it cannot create
// network namespaces, and fails when a tool is missing.
func requireTools(t *testing.T) {
	t.Helper()
	if os.Getenv("SKIP_VIP") != "" {
		t.Skip("SKIP_VIP is set")
	}
	if os.Geteuid() != 0 {
		if os.Getenv("CI") != "" {
			t.Fatal("test/vip needs root (network namespaces, keepalived); CI runs as root (SKIP_VIP=1 skips)")
		}
		t.Skip("not root: test/vip needs network namespaces (CI runs it as root; SKIP_VIP=1 skips)")
	}
	for _, tool := range []string{"ip", "keepalived"} {
		if _, err := exec.LookPath(tool); err != nil {
			t.Fatalf("%s is not installed: run hack/install-test-deps.sh (make test-deps), or SKIP_VIP=1", tool)
		}
	}
}

func newSegment(t *testing.T) *segment {
	t.Helper()
	b := make([]byte, 3)
	_, _ = rand.Read(b)
	s := &segment{t: t, tag: "svip" + hex.EncodeToString(b)}
	s.hub = s.netns("hub")
	run(t, "ip", "-n", s.hub, "link", "add", "br0", "type", "bridge")
	run(t, "ip", "-n", s.hub, "link", "set", "br0", "up")
	return s
}

// netns creates a namespace named after the segment's tag.
func (s *segment) netns(name string) string {
	s.t.Helper()
	ns := s.tag + "-" + name
	run(s.t, "ip", "netns", "add", ns)
	s.t.Cleanup(func() {
		// Processes the test started are gone by now (cleanups run in
		// reverse); a straggler would keep the namespace alive unnamed.
		for _, pid := range nsPIDs(ns) {
			_ = syscall.Kill(pid, syscall.SIGKILL)
		}
		_ = exec.Command("ip", "netns", "del", ns).Run()
	})
	run(s.t, "ip", "-n", ns, "link", "set", "lo", "up")
	return ns
}

// host adds a namespace with eth0 at addr/24 on the segment and lets
// sockets bind addresses the host does not have yet (the VIPs).
func (s *segment) host(name string, addr string) string {
	s.t.Helper()
	ns := s.netns(name)
	port := "p-" + name
	run(s.t, "ip", "-n", s.hub, "link", "add", port, "type", "veth", "peer", "name", "eth0", "netns", ns)
	run(s.t, "ip", "-n", s.hub, "link", "set", port, "master", "br0", "up")
	run(s.t, "ip", "-n", ns, "addr", "add", addr+"/24", "dev", "eth0")
	run(s.t, "ip", "-n", ns, "link", "set", "eth0", "up")
	run(s.t, "ip", "netns", "exec", ns, "sh", "-c", "echo 1 > /proc/sys/net/ipv4/ip_nonlocal_bind")
	return ns
}

// nsPIDs are the processes in a namespace.
func nsPIDs(ns string) []int {
	out, _ := exec.Command("ip", "netns", "pids", ns).Output()
	var pids []int
	for _, f := range strings.Fields(string(out)) {
		// Never the test itself: udpIn's locked goroutine may have run on
		// the main thread, whose namespace is the one `ip netns pids` reads
		// for the whole process (the CI run was SIGKILLed by this cleanup).
		if pid, err := strconv.Atoi(f); err == nil && pid != os.Getpid() {
			pids = append(pids, pid)
		}
	}
	return pids
}

// hasAddr says whether addr is on eth0 in ns.
func hasAddr(t testing.TB, ns, addr string) bool {
	t.Helper()
	out, err := exec.Command("ip", "-n", ns, "-4", "-o", "addr", "show", "dev", "eth0").Output()
	if err != nil {
		return false
	}
	return strings.Contains(string(out), " "+addr+"/")
}

// udpIn opens a UDP socket in namespace ns: the socket stays in the
// namespace it was created in, whichever thread uses it later.
func udpIn(t testing.TB, ns string) net.PacketConn {
	t.Helper()
	type res struct {
		pc  net.PacketConn
		err error
	}
	ch := make(chan res, 1)
	go func() {
		// This thread's namespace changes and it is never unlocked: the
		// runtime discards it when the goroutine ends.
		runtime.LockOSThread()
		f, err := os.Open(filepath.Join("/var/run/netns", ns))
		if err != nil {
			ch <- res{err: err}
			return
		}
		defer f.Close()
		if err := unix.Setns(int(f.Fd()), unix.CLONE_NEWNET); err != nil {
			ch <- res{err: fmt.Errorf("setns %s: %w", ns, err)}
			return
		}
		pc, err := net.ListenPacket("udp4", "0.0.0.0:0")
		ch <- res{pc, err}
	}()
	r := <-ch
	if r.err != nil {
		t.Fatal(r.err)
	}
	t.Cleanup(func() { r.pc.Close() })
	return r.pc
}

// prober sends the health query to a VIP from the client namespace every
// interval and counts answers and losses (no answer within timeout).
type prober struct {
	mu     sync.Mutex
	sent   int
	lost   int
	lastOK time.Time
	// losses are the send times of the lost queries.
	losses []time.Time
}

func (p *prober) run(ctx context.Context, pc net.PacketConn, vip string, interval, timeout time.Duration) {
	dst := net.UDPAddrFromAddrPort(netip.AddrPortFrom(netip.MustParseAddr(vip), 53))
	buf := make([]byte, 1500)
	t := time.NewTicker(interval)
	defer t.Stop()
	for id := uint16(1); ctx.Err() == nil; id++ {
		m := new(dns.Msg)
		m.SetQuestion("health.service.internal.", dns.TypeTXT)
		m.Id = id
		wire, _ := m.Pack()
		sent := time.Now()
		ok := false
		if _, err := pc.WriteTo(wire, dst); err == nil {
			deadline := sent.Add(timeout)
			for !ok && time.Now().Before(deadline) {
				_ = pc.SetReadDeadline(deadline)
				n, from, err := pc.ReadFrom(buf)
				if err != nil {
					break
				}
				r := new(dns.Msg)
				// The answer must come from the VIP itself, as a client's
				// resolver requires.
				if r.Unpack(buf[:n]) == nil && r.Id == id && from.String() == dst.String() && r.Rcode == dns.RcodeSuccess {
					ok = true
				}
			}
		}
		p.mu.Lock()
		p.sent++
		if ok {
			p.lastOK = time.Now()
		} else {
			p.lost++
			p.losses = append(p.losses, sent)
		}
		p.mu.Unlock()
		select {
		case <-ctx.Done():
		case <-t.C:
		}
	}
}

// snapshot returns sent, lost and the time of the last answer.
func (p *prober) snapshot() (int, int, time.Time) {
	p.mu.Lock()
	defer p.mu.Unlock()
	return p.sent, p.lost, p.lastOK
}

// lostSince counts the losses sent at or after t0 and the span from t0 to
// the last of them.
func (p *prober) lostSince(t0 time.Time) (int, time.Duration) {
	p.mu.Lock()
	defer p.mu.Unlock()
	n, span := 0, time.Duration(0)
	for _, l := range p.losses {
		if !l.Before(t0) {
			n++
			span = l.Sub(t0)
		}
	}
	return n, span
}

// logTail is the last lines of a process log that mention s.
func grepLines(log, s string) string {
	var b bytes.Buffer
	for _, l := range strings.Split(log, "\n") {
		if strings.Contains(l, s) {
			b.WriteString(l + "\n")
		}
	}
	return b.String()
}
