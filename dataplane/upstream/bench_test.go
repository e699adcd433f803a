package upstream

import (
	"context"
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
