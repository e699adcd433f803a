package dataplane

import (
	"net/netip"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/miekg/dns"
)

// TestSwapUnderLoad swaps snapshots while clients query: every query must be
// answered, from one of the two worlds, within the client's timeout.
func TestSwapUnderLoad(t *testing.T) {
	tabA := testTable(t)
	tabB := testTable(t, ep("swap", "A", "192.0.2.200"))
	s := startServer(t, testConfig(), NewSnapshot(SnapshotInput{Authority: tabA, Version: "a"}))
	const clients, perClient = 4, 300
	var answered, failed atomic.Int64
	var wg sync.WaitGroup
	stop := make(chan struct{})
	go func() {
		for i := 0; ; i++ {
			select {
			case <-stop:
				return
			default:
			}
			if i%2 == 0 {
				s.Swap(NewSnapshot(SnapshotInput{Authority: tabB, Version: "b"}))
			} else {
				s.Swap(NewSnapshot(SnapshotInput{Authority: tabA, Version: "a"}))
			}
			time.Sleep(100 * time.Microsecond)
		}
	}()
	for i := range clients {
		wg.Add(1)
		go func() {
			defer wg.Done()
			c := &dns.Client{Net: []string{"udp", "tcp"}[i%2], Timeout: 2 * time.Second}
			addr := s.UDPAddrs()[0].String()
			if c.Net == "tcp" {
				addr = s.TCPAddrs()[0].String()
			}
			for range perClient {
				r, _, err := c.Exchange(query("swap.example.com.", dns.TypeA), addr)
				switch {
				case err != nil:
					failed.Add(1)
				case r.Rcode == dns.RcodeSuccess && len(r.Answer) == 1, r.Rcode == dns.RcodeNameError:
					answered.Add(1)
				default:
					failed.Add(1)
				}
			}
		}()
	}
	wg.Wait()
	close(stop)
	if failed.Load() != 0 || answered.Load() != clients*perClient {
		t.Fatalf("answered %d, failed %d of %d", answered.Load(), failed.Load(), clients*perClient)
	}
}

// FuzzServeWire feeds random packets to the pipeline: it must never panic,
// must answer or drop within a deadline, and any answer must parse.
func FuzzServeWire(f *testing.F) {
	for _, tc := range goldenCases {
		f.Add(tc.packet(f))
	}
	f.Add([]byte{})
	f.Add(make([]byte, 12))
	s, err := New(testConfig(), Options{})
	if err != nil {
		f.Fatal(err)
	}
	s.Swap(NewSnapshot(SnapshotInput{Authority: testTable(f)}))
	client := netip.MustParseAddrPort("192.0.2.9:5353")
	f.Fuzz(func(t *testing.T, pkt []byte) {
		done := make(chan []byte, 1)
		go func() {
			out, _ := s.ServeWire(pkt, client, TransportUDP, nil)
			done <- out
		}()
		select {
		case out := <-done:
			if out == nil {
				return
			}
			if len(out) > 512 && len(pkt) >= 12 {
				// Without a valid OPT the answer must fit 512 bytes; with one, 1232.
				if len(out) > 1232 {
					t.Fatalf("answer of %d bytes over UDP", len(out))
				}
			}
			if len(out) < 12 || out[2]&0x80 == 0 {
				t.Fatalf("answer without QR: %x", out)
			}
		case <-time.After(2 * time.Second):
			t.Fatal("no answer or drop within 2s")
		}
	})
}

// FuzzFastSlowParity sends each packet to two servers over the same
// snapshot, one with the hand-written fast path and one that sends
// everything through miekg/dns (DisableFastPath, the escape hatch): both
// must drop the same packets and give the same answer (bytes, or the same
// message where only compression differs) for every packet miekg/dns can
// parse. CI runs it for a fixed time (hack/fuzz-ci.sh).
func FuzzFastSlowParity(f *testing.F) {
	for _, tc := range append(append([]goldenCase(nil), goldenCases...), blockCases...) {
		f.Add(tc.packet(f))
	}
	f.Add([]byte{})
	f.Add(make([]byte, 12))
	// The block answers of testBlocker are made on the fast path too.
	snap := NewSnapshot(SnapshotInput{Authority: testTable(f), Blocker: testBlocker(f), BlockingEnabled: true})
	newServer := func(slow bool) *Server {
		cfg := testConfig()
		cfg.DisableFastPath = slow
		s, err := New(cfg, Options{})
		if err != nil {
			f.Fatal(err)
		}
		s.Swap(snap)
		return s
	}
	fast, slow := newServer(false), newServer(true)
	client := netip.MustParseAddrPort("192.0.2.9:5353")
	f.Fuzz(func(t *testing.T, pkt []byte) {
		a, _ := fast.ServeWire(pkt, client, TransportUDP, nil)
		b, _ := slow.ServeWire(pkt, client, TransportUDP, nil)
		if (a == nil) != (b == nil) {
			t.Fatalf("fast answered %v, slow answered %v", a != nil, b != nil)
		}
		if a == nil {
			return
		}
		if new(dns.Msg).Unpack(pkt) != nil {
			// The fast path reads the header, the question and OPT and
			// skips other records unparsed, where miekg/dns refuses the
			// whole packet (FORMERR): a documented difference; the answer
			// must still be well formed.
			if new(dns.Msg).Unpack(a) != nil {
				t.Fatalf("fast answer does not parse: %x", a)
			}
			return
		}
		if !sameAnswer(a, b) {
			ma, mb := new(dns.Msg), new(dns.Msg)
			ea, eb := ma.Unpack(a), mb.Unpack(b)
			t.Fatalf("fast and slow answers differ\nfast (%v):\n%v\nslow (%v):\n%v\nfast %x\nslow %x", ea, ma, eb, mb, a, b)
		}
	})
}

// sameAnswer compares two wire answers: bytes first, then (for layouts
// that differ only in name compression) the parsed messages.
func sameAnswer(a, b []byte) bool {
	if string(a) == string(b) {
		return true
	}
	ma, mb := new(dns.Msg), new(dns.Msg)
	if ma.Unpack(a) != nil || mb.Unpack(b) != nil {
		return false
	}
	return ma.String() == mb.String()
}
