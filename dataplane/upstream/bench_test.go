package upstream

import (
	"context"
	"math/rand/v2"
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

// BenchmarkUDPExchange compares, in one run, the pooled UDP exchange with
// the per-query socket it replaced ("fresh", still used by bootstrap and
// when the pool is full) and with miekg/dns's dns.Client.Exchange, all
// against the same allocation-free echo server. "serial" runs one query at
// a time; "parallel" keeps 16 goroutines per GOMAXPROCS querying, as the
// data plane does under load.
func BenchmarkUDPExchange(b *testing.B) {
	addr := startUDPEcho(b)
	a, err := ParseAddress(addr)
	if err != nil {
		b.Fatal(err)
	}
	m, err := newMetrics(nil)
	if err != nil {
		b.Fatal(err)
	}
	msg := query("www.example.org", dns.TypeA)
	msg.SetEdns0(1232, false)
	wire, err := msg.Pack()
	if err != nil {
		b.Fatal(err)
	}
	bufs := newBufPool()
	d := &dialer{}
	pooled := &udpTransport{addr: a, d: d, tcp: newStreamTransport(tcpDial(d, a)), pool: newUDPPool(a, d, m)}
	fresh := &udpTransport{addr: a, d: d, tcp: newStreamTransport(tcpDial(d, a))}
	b.Cleanup(func() { _ = pooled.close(); _ = fresh.close() })
	viaTransport := func(t transport) func(ctx context.Context) error {
		return func(ctx context.Context) error {
			_, err := exchangeWire(ctx, t, bufs, wire, uint16(rand.Uint32()), msg.Question[0])
			return err
		}
	}
	client := &dns.Client{Net: "udp", Timeout: 2 * time.Second}
	kinds := []struct {
		name string
		f    func(ctx context.Context) error
	}{
		{"pooled", viaTransport(pooled)},
		{"fresh", viaTransport(fresh)},
		{"miekg", func(ctx context.Context) error {
			m := msg.Copy()
			m.Id = dns.Id()
			_, _, err := client.ExchangeContext(ctx, m, addr)
			return err
		}},
	}
	for _, mode := range []string{"serial", "parallel"} {
		for _, k := range kinds {
			b.Run(mode+"/"+k.name, func(b *testing.B) {
				b.ReportAllocs()
				if mode == "serial" {
					for b.Loop() {
						ctx, cancel := context.WithTimeout(context.Background(), 2*time.Second)
						err := k.f(ctx)
						cancel()
						if err != nil {
							b.Fatal(err)
						}
					}
					return
				}
				b.SetParallelism(16)
				b.RunParallel(func(pb *testing.PB) {
					for pb.Next() {
						ctx, cancel := context.WithTimeout(context.Background(), 2*time.Second)
						err := k.f(ctx)
						cancel()
						if err != nil {
							b.Error(err)
							return
						}
					}
				})
			})
		}
	}
}
