package upstream

import (
	"context"
	"net"
	"testing"
	"time"

	"github.com/miekg/dns"
)

// BenchmarkForwardUDP measures one Forward to a loopback UDP upstream. The
// upstream (miekg/dns) runs in this process, so its cost is included.
func BenchmarkForwardUDP(b *testing.B) {
	for _, strategy := range []Strategy{Strict, ParallelBest} {
		b.Run(string(strategy), func(b *testing.B) {
			servers := []string{startUDP(b, answerA("192.0.2.1"))}
			if strategy == ParallelBest {
				servers = append(servers, startUDP(b, answerA("192.0.2.1")))
			}
			r := newResolver(b, group1(strategy, 2*time.Second, servers...))
			req := query("www.example.org", dns.TypeA)
			req.SetEdns0(1232, false)
			ctx := context.Background()
			b.ReportAllocs()
			for b.Loop() {
				if _, _, err := r.Forward(ctx, "", req, clientAddr); err != nil {
					b.Fatal(err)
				}
			}
		})
	}
}

// startUDPEcho answers every query with itself marked as a response (no
// records), costing no allocations, so the benchmark shows the client side.
func startUDPEcho(tb testing.TB) string {
	tb.Helper()
	pc, err := net.ListenPacket("udp", "127.0.0.1:0")
	if err != nil {
		tb.Fatal(err)
	}
	done := make(chan struct{})
	go func() {
		defer close(done)
		buf := make([]byte, 4096)
		for {
			n, from, err := pc.ReadFrom(buf)
			if err != nil {
				return
			}
			if n < 12 {
				continue
			}
			buf[2] |= 0x80
			_, _ = pc.WriteTo(buf[:n], from)
		}
	}()
	tb.Cleanup(func() {
		pc.Close()
		<-done
	})
	return pc.LocalAddr().String()
}

// BenchmarkForwardUDPClientOnly is BenchmarkForwardUDP against an echo
// server that allocates nothing: allocs/op is the forwarder's own cost.
func BenchmarkForwardUDPClientOnly(b *testing.B) {
	r := newResolver(b, group1(Strict, 2*time.Second, startUDPEcho(b)))
	req := query("www.example.org", dns.TypeA)
	req.SetEdns0(1232, false)
	ctx := context.Background()
	b.ReportAllocs()
	for b.Loop() {
		if _, _, err := r.Forward(ctx, "", req, clientAddr); err != nil {
			b.Fatal(err)
		}
	}
}
