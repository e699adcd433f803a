package edge

import (
	"fmt"
	"net"
	"net/netip"
	"os"
	"path/filepath"
	"slices"
	"sync"
	"testing"
	"time"

	"github.com/miekg/dns"

	"github.com/svcdns/svc/test/freeport"
	"github.com/svcdns/svc/test/nodetest"
	"github.com/svcdns/svc/test/testpki"
)

// load asks name from src at addr with conc concurrent UDP clients for d
// and returns the answered queries per second and the latencies.
func load(src, addr, name string, conc int, d time.Duration) (qps float64, lat []time.Duration, lost int) {
	var mu sync.Mutex
	var wg sync.WaitGroup
	deadline := time.Now().Add(d)
	q := new(dns.Msg)
	q.SetQuestion(name, dns.TypeA)
	for range conc {
		wg.Go(func() {
			c, err := net.DialUDP("udp", &net.UDPAddr{IP: net.ParseIP(src)}, net.UDPAddrFromAddrPort(netip.MustParseAddrPort(addr)))
			if err != nil {
				return
			}
			defer c.Close()
			var mine []time.Duration
			miss := 0
			buf := make([]byte, 1500)
			for id := uint16(1); time.Now().Before(deadline); id++ {
				q.Id = id
				b, _ := q.Pack()
				start := time.Now()
				if _, err := c.Write(b); err != nil {
					miss++
					continue
				}
				_ = c.SetReadDeadline(time.Now().Add(time.Second))
				if _, err := c.Read(buf); err != nil {
					miss++
					continue
				}
				mine = append(mine, time.Since(start))
			}
			mu.Lock()
			lat = append(lat, mine...)
			lost += miss
			mu.Unlock()
		})
	}
	wg.Wait()
	slices.Sort(lat)
	return float64(len(lat)) / d.Seconds(), lat, lost
}

func pct(lat []time.Duration, p float64) time.Duration {
	if len(lat) == 0 {
		return 0
	}
	return lat[min(len(lat)-1, int(float64(len(lat))*p))]
}

// BenchmarkEdgeVsDirect (make bench, section "edge"): one node, asked the
// same cached name directly and through svc edge run (dnsdist, resolver
// pool: nothing cached at the edge) in the same run; reports both rates
// and the latency the edge adds at the median and p99.
func BenchmarkEdgeVsDirect(b *testing.B) {
	d := 3 * time.Second
	if v, err := time.ParseDuration(os.Getenv("BENCH_EDGE_DURATION")); err == nil {
		d = v
	}
	pki := testpki.New(b)
	tokenFile := filepath.Join(b.TempDir(), "token")
	if err := os.WriteFile(tokenFile, []byte(internalToken+"\n"), 0o600); err != nil {
		b.Fatal(err)
	}
	n := startNode(b, "n1", "127.0.0.11", freeport.UDPTCP(b), startUpstream(b), pki, tokenFile)
	listen := freeport.UDPTCP(b)
	edgeAddr := fmt.Sprintf("127.0.0.1:%d", listen)
	e := startEdge(b, "--backends", "n1="+n.DNS(), "--listen", edgeAddr,
		"--console", fmt.Sprintf("127.0.0.1:%d", freeport.UDPTCP(b)), "--api", fmt.Sprintf("127.0.0.1:%d", freeport.UDPTCP(b)),
		"--health-address", "127.0.0.1:0", "--config-dir", b.TempDir(), "--poll-zones=false", "--threads", "2")
	nodetest.Eventually(b, 30*time.Second, "edge ready", func() bool { return e.ready(b).Ready })
	const name = "bench.example."
	// Warm the node's cache both ways.
	for _, a := range []string{n.DNS(), edgeAddr} {
		if got := outcome(ask(adult, a, name)); got != "answered" {
			b.Fatalf("%s: %s", a, got)
		}
	}
	b.ResetTimer()
	for range b.N {
		dq, dl, dlost := load(adult, n.DNS(), name, 8, d)
		eq, el, elost := load(adult, edgeAddr, name, 8, d)
		b.ReportMetric(dq, "direct-qps")
		b.ReportMetric(eq, "edge-qps")
		b.ReportMetric(eq/dq, "edge/direct")
		b.ReportMetric(float64(pct(dl, 0.5).Microseconds()), "direct-p50-us")
		b.ReportMetric(float64(pct(dl, 0.99).Microseconds()), "direct-p99-us")
		b.ReportMetric(float64((pct(el, 0.5) - pct(dl, 0.5)).Microseconds()), "added-p50-us")
		b.ReportMetric(float64((pct(el, 0.99) - pct(dl, 0.99)).Microseconds()), "added-p99-us")
		b.ReportMetric(float64(dlost+elost), "lost")
	}
}
