package dataplane

import (
	"net"
	"net/netip"
	"testing"
	"time"

	"github.com/miekg/dns"
)

// Helpers of the batched-loop tests, exported for package dataplane_test.

// SendBurst writes every datagram of burst to addr from one socket, then
// reads answers until each id in ids has one, and returns them by id
// (answers to other ids, such as a malformed datagram's, are skipped).
func SendBurst(t testing.TB, addr netip.AddrPort, burst [][]byte, ids map[uint16]bool) map[uint16]*dns.Msg {
	t.Helper()
	c, err := net.DialUDP("udp", nil, net.UDPAddrFromAddrPort(addr))
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	for _, b := range burst {
		if _, err := c.Write(b); err != nil {
			t.Fatal(err)
		}
	}
	got := map[uint16]*dns.Msg{}
	buf := make([]byte, 1500)
	_ = c.SetReadDeadline(time.Now().Add(5 * time.Second))
	for len(got) < len(ids) {
		n, err := c.Read(buf)
		if err != nil {
			t.Fatalf("%d queries unanswered: %v", len(ids)-len(got), err)
		}
		m := new(dns.Msg)
		if err := m.Unpack(buf[:n]); err != nil {
			t.Fatalf("answer does not unpack: %v", err)
		}
		if ids[m.Id] {
			got[m.Id] = m
		}
	}
	return got
}

// NotPrefetched returns the question names of burst's well-formed
// datagrams that are not keys of prefetched (wire names).
func NotPrefetched(burst [][]byte, prefetched map[string]int) []string {
	var out []string
	for _, b := range burst {
		m := new(dns.Msg)
		if m.Unpack(b) != nil || len(m.Question) != 1 {
			continue
		}
		wire := make([]byte, 256)
		n, _ := dns.PackDomainName(m.Question[0].Name, wire, 0, nil, false)
		if prefetched[string(wire[:n])] == 0 {
			out = append(out, m.Question[0].Name)
		}
	}
	return out
}
