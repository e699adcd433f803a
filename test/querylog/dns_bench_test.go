package querylog_test

import (
	"context"
	"fmt"
	"net/netip"
	"syscall"
	"testing"
	"time"

	"github.com/miekg/dns"

	"github.com/svcdns/svc/api/v1alpha1"
	"github.com/svcdns/svc/dataplane"
	"github.com/svcdns/svc/dataplane/authority"
	"github.com/svcdns/svc/dataplane/cache"
	"github.com/svcdns/svc/internal/querylog"
	"github.com/svcdns/svc/internal/querylog/dnslog"
)

func cpuNow() time.Duration {
	var ru syscall.Rusage
	_ = syscall.Getrusage(syscall.RUSAGE_SELF, &ru)
	return time.Duration(ru.Utime.Nano() + ru.Stime.Nano())
}

// BenchmarkDNSLogOnOff serves authoritative queries (1000 names, 1000
// clients) through a real dataplane.Server's ServeWire, once without a query
// logger and once with dnslog -> querylog.Writer -> SQLite, interleaved in
// the same run. The "on" side includes the writer goroutine's work (Flush
// before the clock stops). It reports queries per CPU second of the whole
// process for both and their ratio (log on / log off), and the same for wall
// time. With GOMAXPROCS=1 the writer shares the data plane's core.
func BenchmarkDNSLogOnOff(b *testing.B) {
	cfg := querylog.DefaultConfig()
	cfg.DataDir, cfg.Node = b.TempDir(), "node-a"
	w, err := querylog.Open(context.Background(), cfg, querylog.Options{MaintainEvery: -1})
	if err != nil {
		b.Fatal(err)
	}
	defer w.Close()
	z := v1alpha1.DNSZone{}
	z.Name, z.Spec.ZoneName = "example-com", "example.com"
	rs := v1alpha1.DNSRecordSet{}
	rs.Namespace, rs.Name = "default", "hosts"
	rs.Spec.ZoneRef.Name = "example-com"
	const names = 1000
	for i := range names {
		rs.Spec.Endpoints = append(rs.Spec.Endpoints, v1alpha1.Endpoint{DNSName: fmt.Sprintf("h%d", i), RecordType: "A", Targets: []string{"192.0.2.1"}})
	}
	tab, problems := authority.Compile([]v1alpha1.DNSZone{z}, []v1alpha1.DNSRecordSet{rs}, time.Now())
	if len(problems) > 0 {
		b.Fatal(problems)
	}
	mk := func(logger dataplane.QueryLogger) *dataplane.Server {
		cc := cache.DefaultConfig()
		cc.MaxEntries = 1000
		s, err := dataplane.New(dataplane.Config{Node: "node-a", Listeners: []dataplane.ListenerConfig{{Address: "127.0.0.1:0"}}, Sockets: 1, Cache: cc},
			dataplane.Options{QueryLogger: logger})
		if err != nil {
			b.Fatal(err)
		}
		s.Swap(dataplane.NewSnapshot(dataplane.SnapshotInput{Authority: tab}))
		return s
	}
	off, on := mk(nil), mk(dnslog.New(w))
	pkts := make([][]byte, names)
	for i := range pkts {
		m := new(dns.Msg)
		m.SetQuestion(fmt.Sprintf("h%d.example.com.", i), dns.TypeA)
		m.Id = uint16(i)
		pkts[i], _ = m.Pack()
	}
	clients := make([]netip.AddrPort, 1000)
	for i := range clients {
		clients[i] = netip.AddrPortFrom(netip.AddrFrom4([4]byte{10, 0, byte(i >> 8), byte(i)}), 5353)
	}
	out := make([]byte, 0, 4096)
	ctx := context.Background()
	// Each round stays under the writer's buffer, so no row is dropped.
	const round = 10000
	var cpuOff, cpuOn, wallOff, wallOn time.Duration
	var n int
	run := func(s *dataplane.Server, flush bool) (time.Duration, time.Duration) {
		t0, c0 := time.Now(), cpuNow()
		for i := range round {
			out, _ = s.ServeWire(pkts[(n+i)%names], clients[(n+i)%len(clients)], dataplane.TransportUDP, out[:0])
		}
		if flush {
			if err := w.Flush(ctx); err != nil {
				b.Fatal(err)
			}
		}
		return time.Since(t0), cpuNow() - c0
	}
	before := w.Dropped()
	b.ResetTimer()
	for n < b.N {
		wl, c := run(off, false)
		wallOff, cpuOff = wallOff+wl, cpuOff+c
		wl, c = run(on, true)
		wallOn, cpuOn = wallOn+wl, cpuOn+c
		n += round
	}
	b.StopTimer()
	if d := w.Dropped() - before; d > 0 {
		b.Logf("dropped %v rows", d)
	}
	b.ReportMetric(float64(n)/cpuOff.Seconds(), "qps-off/cpu-s")
	b.ReportMetric(float64(n)/cpuOn.Seconds(), "qps-on/cpu-s")
	b.ReportMetric(cpuOff.Seconds()/cpuOn.Seconds(), "on/off-cpu")
	b.ReportMetric(wallOff.Seconds()/wallOn.Seconds(), "on/off-wall")
}
