package dataplane_test

import (
	"runtime"
	"testing"
	"time"

	"github.com/miekg/dns"

	"github.com/svcdns/svc/dataplane"
	"github.com/svcdns/svc/dataplane/cache"
	"github.com/svcdns/svc/test/benchzone"
)

// BenchmarkUDPAuthPrefetchOnOff answers the auth workload of
// hack/bench-peers.sh (10,000 names of one zone, shuffled) through the
// server's real UDP loop, alternating stretches of 2,048 answers with the
// zone's prefetch on and off (two snapshots of one table). It reports the
// server's CPU time per answer of each (process CPU less the load
// thread's) and the ratio on ÷ off: below 1, the prefetch pays. Compare
// ratios within one run.
func BenchmarkUDPAuthPrefetchOnOff(b *testing.B) {
	tab, err := benchzone.Table(time.Now())
	if err != nil {
		b.Fatal(err)
	}
	if tab.PrefetchStages() == 0 {
		b.Fatal("the bench zone is not prefetched")
	}
	on := dataplane.NewSnapshot(dataplane.SnapshotInput{Version: "on", Authority: tab})
	off := dataplane.WithoutPrefetch(on)
	srv := startUDPBench(b, cache.DefaultConfig(), on)
	var pkts [][]byte
	for k, name := range benchzone.Query() {
		pkts = append(pkts, packQuery(b, name, uint16(k)))
	}
	runtime.LockOSThread()
	defer runtime.UnlockOSThread()
	c := newUDPClient(b, srv.UDPAddrs()[0], 32)
	var next int
	c.run(pkts, &next, 4096, dns.RcodeSuccess) // page faults, caches
	var won, woff sample
	const stretch = 2048
	b.ResetTimer()
	for done := 0; done < b.N; done += stretch {
		n := min(stretch, b.N-done)
		srv.Swap(on)
		won.add(c.run(pkts, &next, n, dns.RcodeSuccess))
		srv.Swap(off)
		woff.add(c.run(pkts, &next, n, dns.RcodeSuccess))
	}
	b.StopTimer()
	if c.bad > 0 {
		b.Fatalf("%d answers had the wrong rcode", c.bad)
	}
	per := func(s sample) float64 { return float64(s.cpu.Nanoseconds()) / float64(s.answers) }
	b.ReportMetric(per(won), "on-cpu-ns/ans")
	b.ReportMetric(per(woff), "off-cpu-ns/ans")
	b.ReportMetric(per(won)/per(woff), "cpu-ratio")
	b.ReportMetric(float64(won.allocs)/float64(won.answers), "on-allocs/ans")
	b.ReportMetric(float64(c.lost), "lost")
}
