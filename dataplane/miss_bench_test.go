package dataplane

import (
	"context"
	"encoding/binary"
	"errors"
	"net"
	"net/netip"
	"testing"
	"time"

	"github.com/miekg/dns"

	"github.com/svcdns/svc/dataplane/cache"
)

// answerForwarder answers every A query in-process, as an upstream would
// after unpacking: a fresh message with one A record.
type answerForwarder struct{}

func (answerForwarder) Forward(ctx context.Context, group string, req *dns.Msg, client netip.Addr) (*dns.Msg, string, error) {
	m := new(dns.Msg)
	m.SetReply(req)
	m.RecursionAvailable = true
	m.Answer = []dns.RR{&dns.A{Hdr: dns.RR_Header{Name: req.Question[0].Name, Rrtype: dns.TypeA, Class: dns.ClassINET, Ttl: 300}, A: net.IP{198, 51, 100, 1}}}
	return m, "in-process", nil
}

// missQuery is an A query for m0000000000000.example.net.; uniqueName
// writes a sequence number into its digits so every query misses.
func missQuery(tb testing.TB) []byte {
	b, err := query("m0000000000000.example.net.", dns.TypeA).Pack()
	if err != nil {
		tb.Fatal(err)
	}
	return b
}

func uniqueName(b []byte, seq uint64) {
	for j := 12 + 1 + 13; j >= 12+1+1; j-- {
		b[j] = byte('0' + seq%10)
		seq /= 10
	}
	binary.BigEndian.PutUint16(b, uint16(seq))
}

// BenchmarkServeWireCacheMiss is the data plane's share of a cache miss:
// ServeWire of unique names (ingress, cache lookup, upstream stage, cache
// insert, answer packing, log stage) against an in-process forwarder, so
// allocs/op are the pipeline's plus the forwarder's three or so.
func BenchmarkServeWireCacheMiss(b *testing.B) {
	cc := cache.DefaultConfig()
	s, err := New(Config{Node: "bench", Cache: cc}, Options{})
	if err != nil {
		b.Fatal(err)
	}
	s.Swap(NewSnapshot(SnapshotInput{Forwarder: answerForwarder{}}))
	pkt := missQuery(b)
	client := netip.MustParseAddrPort("192.0.2.9:5353")
	out := make([]byte, 0, 4096)
	var seq uint64
	b.ReportAllocs()
	for b.Loop() {
		seq++
		uniqueName(pkt, seq)
		out, _ = s.ServeWire(pkt, client, TransportUDP, out[:0])
	}
	if len(out) < 12 || out[3]&0xF != 0 || binary.BigEndian.Uint16(out[6:]) != 1 {
		b.Fatalf("bad answer % x", out)
	}
}

// startUDPResponder serves answer on a loopback UDP socket until the test
// ends: each datagram's reply is answer(out[:0], query), not sent when ok
// is false. It returns the socket's address.
func startUDPResponder(tb testing.TB, answer func(out, q []byte) (reply []byte, ok bool)) string {
	c, err := net.ListenUDP("udp", &net.UDPAddr{IP: net.IPv4(127, 0, 0, 1)})
	if err != nil {
		tb.Fatal(err)
	}
	_ = c.SetReadBuffer(4 << 20)
	done := make(chan struct{})
	go func() {
		defer close(done)
		in := make([]byte, 1500)
		out := make([]byte, 0, 1500)
		for {
			n, addr, err := c.ReadFromUDPAddrPort(in)
			if err != nil {
				if errors.Is(err, net.ErrClosed) {
					return
				}
				continue
			}
			var ok bool
			if out, ok = answer(out[:0], in[:n]); ok {
				_, _ = c.WriteToUDPAddrPort(out, addr)
			}
		}
	}()
	tb.Cleanup(func() { c.Close(); <-done })
	return c.LocalAddr().String()
}

// startPlainUpstream is an allocation-free loopback upstream: it answers
// each A query with one A record (name compressed to the question).
func startPlainUpstream(tb testing.TB) string {
	rr := []byte{0xC0, 12, 0, 1, 0, 1, 0, 0, 1, 44, 0, 4, 198, 51, 100, 1}
	return startUDPResponder(tb, func(out, in []byte) ([]byte, bool) {
		n := len(in)
		if n < 17 {
			return out, false
		}
		out = append(out, in...)
		out[2] |= 0x80 // QR
		out[3] = 0x80  // RA, NOERROR
		binary.BigEndian.PutUint16(out[6:], 1)
		binary.BigEndian.PutUint16(out[8:], 0)
		binary.BigEndian.PutUint16(out[10:], 0)
		// Keep header and question only (drop the query's OPT).
		end := 12
		for end < n && in[end] != 0 {
			end += 1 + int(in[end])
		}
		end += 5
		if end > n {
			return out, false
		}
		return append(out[:end], rr...), true
	})
}

// BenchmarkUDPCacheMiss is a cache miss end to end on loopback: a client
// socket keeps 16 unique-name queries in flight against the UDP listener,
// which forwards them through dataplane/upstream (pooled sockets) to an
// allocation-free upstream. The read loop, the workers, the upstream
// exchange and the batched answers all run; allocs/op counts every
// goroutine of the process (the client and the upstream allocate nothing).
func BenchmarkUDPCacheMiss(b *testing.B) {
	res := resolverFor(b, startPlainUpstream(b))
	cfg := Config{Node: "bench", Listeners: []ListenerConfig{{Address: "127.0.0.1:0", Protocols: []string{"udp"}}}, Sockets: 1, Cache: cache.DefaultConfig()}
	s := startServer(b, cfg, NewSnapshot(SnapshotInput{Forwarder: res, Router: res}))
	c, err := net.DialUDP("udp", nil, net.UDPAddrFromAddrPort(s.UDPAddrs()[0]))
	if err != nil {
		b.Fatal(err)
	}
	defer c.Close()
	_ = c.SetReadBuffer(4 << 20)
	pkt := missQuery(b)
	buf := make([]byte, 1500)
	const window = 16
	var seq uint64
	send := func() {
		seq++
		uniqueName(pkt, seq)
		if _, err := c.Write(pkt); err != nil {
			b.Fatal(err)
		}
	}
	for range window {
		send()
	}
	b.ReportAllocs()
	for b.Loop() {
		_ = c.SetReadDeadline(time.Now().Add(5 * time.Second))
		n, err := c.Read(buf)
		if err != nil {
			b.Fatal(err)
		}
		if n < 12 || buf[3]&0xF != 0 {
			b.Fatalf("bad answer % x", buf[:n])
		}
		send()
	}
	for range window { // drain
		_ = c.SetReadDeadline(time.Now().Add(5 * time.Second))
		if _, err := c.Read(buf); err != nil {
			b.Fatal(err)
		}
	}
}
