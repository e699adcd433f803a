package dnslog_test

import (
	"context"
	"fmt"
	"net/netip"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/miekg/dns"

	"github.com/svcdns/svc/api/v1alpha1"
	"github.com/svcdns/svc/dataplane"
	"github.com/svcdns/svc/dataplane/authority"
	"github.com/svcdns/svc/internal/dnslog"
	"github.com/svcdns/svc/internal/querylog"
)

// capture keeps the records the data plane logs.
type capture struct{ recs []dataplane.QueryRecord }

func (c *capture) Log(rec dataplane.QueryRecord) { c.recs = append(c.recs, rec) }

// authRecords are the records of 10,000 authoritative answers for distinct
// names from one client, as make bench's auth workload asks them.
func authRecords(b testing.TB) []dataplane.QueryRecord {
	z := v1alpha1.DNSZone{}
	z.Name, z.Spec.ZoneName = "bench", "bench"
	rs := v1alpha1.DNSRecordSet{}
	rs.Namespace, rs.Name = "default", "hosts"
	rs.Spec.ZoneRef.Name = "bench"
	const n = 10000
	for i := range n {
		rs.Spec.Endpoints = append(rs.Spec.Endpoints, v1alpha1.Endpoint{DNSName: fmt.Sprintf("h%d", i), RecordType: "A", Targets: []string{"192.0.2.1"}})
	}
	tab, problems := authority.Compile([]v1alpha1.DNSZone{z}, []v1alpha1.DNSRecordSet{rs}, time.Now())
	if len(problems) > 0 {
		b.Fatal(problems)
	}
	c := &capture{}
	s, err := dataplane.New(dataplane.Config{Node: "n"}, dataplane.Options{QueryLogger: c})
	if err != nil {
		b.Fatal(err)
	}
	s.Swap(dataplane.NewSnapshot(dataplane.SnapshotInput{Authority: tab}))
	client := netip.MustParseAddrPort("127.0.0.1:5353")
	for i := range n {
		m := new(dns.Msg)
		m.SetQuestion(fmt.Sprintf("h%d.bench.", i*7919%n), dns.TypeA)
		pkt, err := m.Pack()
		if err != nil {
			b.Fatal(err)
		}
		s.ServeWire(pkt, client, dataplane.TransportUDP, nil)
	}
	if len(c.recs) != n || c.recs[0].Status != dataplane.StatusAuthoritative {
		b.Fatalf("%d records (first %v), want %d authoritative", len(c.recs), c.recs[0].Status, n)
	}
	return c.recs
}

// blockRecords are authRecords turned into the records of blocked queries
// as make bench's block workload logs them: list, policy and a rule per
// name (the name a plain domain list stores).
func blockRecords(b testing.TB) []dataplane.QueryRecord {
	recs := authRecords(b)
	for i := range recs {
		r := &recs[i]
		r.Status, r.Reason, r.Rcode, r.Zone = dataplane.StatusBlocked, dataplane.ReasonBlockList, dns.RcodeNameError, ""
		r.List, r.Policy = "default/ads", "(global)"
		r.Rule = strings.TrimSuffix(r.Name(), ".")
	}
	return recs
}

// BenchmarkLogPipeline is the query log's whole cost per query with the
// default configuration: the data plane's Log call, the conversion to a
// row and the writer's batches into querylog.db, as CPU time of the
// process per row (run with -cpu 1 for one core's share).
func BenchmarkLogPipeline(b *testing.B) {
	b.Run("auth", func(b *testing.B) { benchLogPipeline(b, authRecords(b)) })
	b.Run("block", func(b *testing.B) { benchLogPipeline(b, blockRecords(b)) })
}

func benchLogPipeline(b *testing.B, recs []dataplane.QueryRecord) {
	w := openWriter(b)
	// A buffer large enough that the writer takes its full 5,000-row
	// batches, as it does under load, between the flushes that keep the
	// benchmark from outrunning it.
	lg := dnslog.NewBuffered(w, 1<<15)
	defer lg.Close()
	ctx := context.Background()
	start := time.Now()
	b.ReportAllocs()
	b.ResetTimer()
	cpu0 := cpuTime()
	for i := range b.N {
		rec := &recs[i%len(recs)]
		rec.Time = start.Add(time.Duration(i) * 10 * time.Microsecond)
		lg.Log(*rec)
		if i%(1<<14) == 1<<14-1 {
			if err := lg.Flush(ctx); err != nil {
				b.Fatal(err)
			}
		}
	}
	if err := lg.Flush(ctx); err != nil {
		b.Fatal(err)
	}
	cpu := cpuTime() - cpu0
	b.StopTimer()
	if d := lg.Dropped(); d > 0 {
		b.Fatalf("%d records dropped", d)
	}
	// Rows the writer drops cost nothing to write: a setting that drops
	// would look cheaper per row.
	if d := w.Dropped(); d > 0 {
		b.Fatalf("%v rows dropped by the writer", d)
	}
	b.ReportMetric(float64(cpu.Nanoseconds())/float64(b.N), "cpu-ns/row")
}

// openWriter is a query-log writer with the default configuration on a
// fresh querylog.db, closed when the test ends (no maintenance ticks).
func openWriter(tb testing.TB) *querylog.Writer {
	tb.Helper()
	cfg := querylog.DefaultConfig()
	cfg.DataDir = tb.TempDir()
	w, err := querylog.Open(context.Background(), cfg, querylog.Options{MaintainEvery: -1})
	if err != nil {
		tb.Fatal(err)
	}
	tb.Cleanup(func() { _ = w.Close() })
	return w
}

func cpuTime() time.Duration {
	var ru syscall.Rusage
	_ = syscall.Getrusage(syscall.RUSAGE_SELF, &ru)
	return time.Duration(ru.Utime.Nano() + ru.Stime.Nano())
}
