package querylog_test

import (
	"context"
	"fmt"
	"net/netip"
	"runtime"
	"syscall"
	"testing"
	"time"

	"github.com/miekg/dns"
	"golang.org/x/sys/unix"

	"github.com/svcdns/svc/api/v1alpha1"
	"github.com/svcdns/svc/dataplane"
	"github.com/svcdns/svc/dataplane/authority"
	"github.com/svcdns/svc/dataplane/cache"
	"github.com/svcdns/svc/internal/dnslog"
	"github.com/svcdns/svc/internal/querylog"
)

func cpuNow() time.Duration {
	var ru syscall.Rusage
	_ = syscall.Getrusage(syscall.RUSAGE_SELF, &ru)
	return time.Duration(ru.Utime.Nano() + ru.Stime.Nano())
}

// BenchmarkDNSLogOnOff serves authoritative queries (1000 names, 1000
// clients) through a real dataplane.Server's ServeWire, once without a query
// logger and once with dnslog -> querylog.Writer -> SQLite, interleaved in
// the same run, and reports two ratios of log off to log on:
//
//   - dataplane-on/off: CPU of the thread answering DNS (the benchmark
//     goroutine, locked to its thread, read with CLOCK_THREAD_CPUTIME_ID).
//     This is what logging costs the DNS path when the converter and the
//     writer have a core of their own: one record copied into a channel.
//   - process-on/off: CPU of the whole process, the writer's SQLite work
//     included (Flush before the clock stops), i.e. everything on one
//     machine's budget. With GOMAXPROCS=1 the writer shares the data
//     plane's core.
//
// No row is dropped: each round stays under the hand-off and writer buffers.
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
	lg := dnslog.New(w)
	defer lg.Close()
	off, on := mk(nil), mk(lg)
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
	// Each round stays under the hand-off buffer (dnslog.DefaultBuffer).
	const round = 2000
	runtime.LockOSThread()
	defer runtime.UnlockOSThread()
	var procOff, procOn, threadOff, threadOn time.Duration
	var n int
	run := func(s *dataplane.Server, flush bool) (thread, proc time.Duration) {
		c0, t0 := cpuNow(), threadNow()
		for i := range round {
			out, _ = s.ServeWire(pkts[(n+i)%names], clients[(n+i)%len(clients)], dataplane.TransportUDP, out[:0])
		}
		thread = threadNow() - t0
		if flush {
			if err := lg.Flush(ctx); err != nil {
				b.Fatal(err)
			}
		}
		return thread, cpuNow() - c0
	}
	before, lgBefore := w.Dropped(), lg.Dropped()
	b.ResetTimer()
	for n < b.N {
		th, c := run(off, false)
		threadOff, procOff = threadOff+th, procOff+c
		th, c = run(on, true)
		threadOn, procOn = threadOn+th, procOn+c
		n += round
	}
	b.StopTimer()
	if d := w.Dropped() - before + float64(lg.Dropped()-lgBefore); d > 0 {
		b.Fatalf("dropped %v rows", d)
	}
	b.ReportMetric(float64(n)/threadOff.Seconds(), "dataplane-qps-off/cpu-s")
	b.ReportMetric(float64(n)/threadOn.Seconds(), "dataplane-qps-on/cpu-s")
	b.ReportMetric(threadOff.Seconds()/threadOn.Seconds(), "dataplane-on/off")
	b.ReportMetric(float64(threadOn-threadOff)/float64(n), "log-ns/q")
	b.ReportMetric(float64(n)/procOn.Seconds(), "process-qps-on/cpu-s")
	b.ReportMetric(procOff.Seconds()/procOn.Seconds(), "process-on/off")
}

// threadNow is the CPU time of the calling thread.
func threadNow() time.Duration {
	var ts unix.Timespec
	_ = unix.ClockGettime(unix.CLOCK_THREAD_CPUTIME_ID, &ts)
	return time.Duration(ts.Nano())
}
