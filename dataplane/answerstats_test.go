package dataplane

import (
	"math"
	"math/rand/v2"
	"net"
	"testing"
	"time"

	"github.com/miekg/dns"
	"github.com/prometheus/client_golang/prometheus"
	dto "github.com/prometheus/client_model/go"
)

// family returns the gathered family name of reg, or fails.
func family(t *testing.T, reg prometheus.Gatherer, name string) *dto.MetricFamily {
	t.Helper()
	fams, err := reg.Gather()
	if err != nil {
		t.Fatal(err)
	}
	for _, f := range fams {
		if f.GetName() == name {
			return f
		}
	}
	t.Fatalf("no metric family %s", name)
	return nil
}

// withLabels is the metric of f whose labels are want (name, value pairs).
func withLabels(t *testing.T, f *dto.MetricFamily, want ...string) *dto.Metric {
	t.Helper()
next:
	for _, m := range f.GetMetric() {
		got := map[string]string{}
		for _, l := range m.GetLabel() {
			got[l.GetName()] = l.GetValue()
		}
		for i := 0; i < len(want); i += 2 {
			if got[want[i]] != want[i+1] {
				continue next
			}
		}
		return m
	}
	t.Fatalf("%s has no series %v", f.GetName(), want)
	return nil
}

// The metrics count every query a client sends, over the UDP batch loop
// (whose counts and cache hits are published once per batch) and over
// TCP, by status and rcode, with each one's duration in the histogram.
func TestAnswerMetricsCountEveryQuery(t *testing.T) {
	reg := prometheus.NewRegistry()
	up := startUpstream(t)
	s := startServerWith(t, testConfig(), Options{Registerer: reg},
		NewSnapshot(SnapshotInput{Version: "t", Authority: testTable(t), Forwarder: &testForwarder{addr: up.addr}}))

	c, err := net.Dial("udp", s.UDPAddrs()[0].String())
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	// Rounds of 8 writes then 8 reads, so the loop reads batches of
	// several queries.
	names := []string{"www.example.com.", "cached.example.net.", "www.example.com.", "nope.example.com."}
	const rounds = 10
	buf := make([]byte, 2048)
	for range rounds {
		for i := range 8 {
			m := query(names[i%len(names)], dns.TypeA)
			b, _ := m.Pack()
			if _, err := c.Write(b); err != nil {
				t.Fatal(err)
			}
		}
		for range 8 {
			_ = c.SetReadDeadline(time.Now().Add(3 * time.Second))
			if _, err := c.Read(buf); err != nil {
				t.Fatal(err)
			}
		}
	}
	for range 3 {
		exchange(t, s, "tcp", query("www.example.com.", dns.TypeA))
	}

	q := family(t, reg, "service_dns_queries_total")
	for _, tc := range []struct {
		transport, rcode string
		want             float64
	}{
		{"udp", "NOERROR", rounds * 4},
		{"udp", "NXDOMAIN", rounds * 2},
		{"tcp", "NOERROR", 3},
		{"tcp", "NXDOMAIN", 0},
		{"doh", "NOERROR", 0},
	} {
		m := withLabels(t, q, "transport", tc.transport, "status", "authoritative", "rcode", tc.rcode)
		if got := m.GetCounter().GetValue(); got != tc.want {
			t.Errorf("queries_total{%s,authoritative,%s} = %v, want %v", tc.transport, tc.rcode, got, tc.want)
		}
	}
	// cached.example.net.: its first query or two (sent in one batch) miss,
	// the rest are fresh hits.
	hits := family(t, reg, "service_dns_cache_hits_total").GetMetric()[0].GetCounter().GetValue()
	misses := family(t, reg, "service_dns_cache_misses_total").GetMetric()[0].GetCounter().GetValue()
	cached := withLabels(t, q, "transport", "udp", "status", "cached", "rcode", "NOERROR").GetCounter().GetValue()
	answered := withLabels(t, q, "transport", "udp", "status", "answered", "rcode", "NOERROR").GetCounter().GetValue()
	if hits+misses != rounds*2 || hits < rounds*2-2 || cached != hits || answered != misses {
		t.Errorf("cache: %v hits, %v misses, %v answered cached, %v from the upstream; want %d queries, at most 2 misses",
			hits, misses, cached, answered, rounds*2)
	}
	d := family(t, reg, "service_dns_query_duration_seconds")
	for _, tc := range []struct {
		transport string
		want      uint64
	}{{"udp", rounds * 8}, {"tcp", 3}, {"dot", 0}} {
		h := withLabels(t, d, "transport", tc.transport).GetHistogram()
		if h.GetSampleCount() != tc.want {
			t.Errorf("%s: duration count %d, want %d", tc.transport, h.GetSampleCount(), tc.want)
		}
		if (tc.want > 0) != (h.GetSampleSum() > 0) || h.GetSampleSum() > float64(tc.want)*3 {
			t.Errorf("%s: duration sum %v for %d queries", tc.transport, h.GetSampleSum(), tc.want)
		}
		if n := len(h.GetBucket()); n != len(latencyBounds) {
			t.Fatalf("%s: %d buckets, want %d", tc.transport, n, len(latencyBounds))
		}
		last := h.GetBucket()[len(latencyBounds)-1].GetCumulativeCount()
		if last > h.GetSampleCount() || (tc.want > 0 && last == 0) {
			t.Errorf("%s: 2.5 s bucket %d of %d queries", tc.transport, last, h.GetSampleCount())
		}
	}
}

// answerStats reports what client_golang's CounterVec and HistogramVec
// report for the same queries, whether counted one by one (observe) or
// per batch (statsBatch).
func TestAnswerStatsMatchClientGolang(t *testing.T) {
	ref := prometheus.NewRegistry()
	qv := prometheus.NewCounterVec(prometheus.CounterOpts{
		Name: "service_dns_queries_total", Help: "DNS queries answered, by transport, status class and rcode.",
	}, []string{"transport", "status", "rcode"})
	bounds := latencyBoundSeconds
	lv := prometheus.NewHistogramVec(prometheus.HistogramOpts{
		Name: "service_dns_query_duration_seconds", Help: "Time from reading a query to its answer being decided.",
		Buckets: bounds[:],
	}, []string{"transport"})
	ref.MustRegister(qv, lv)
	for tr := range numTransports {
		lv.WithLabelValues(tr.String())
		for st := range numStatuses {
			for _, rl := range rcodeLabels {
				qv.WithLabelValues(tr.String(), st.String(), rl)
			}
		}
	}

	m := &metrics{answers: newAnswerStats()}
	got := prometheus.NewRegistry()
	got.MustRegister(m.answers)
	var sb statsBatch
	rng := rand.New(rand.NewPCG(1, 2))
	rcodes := []int{dns.RcodeSuccess, dns.RcodeNameError, dns.RcodeServerFailure, dns.RcodeRefused, dns.RcodeBadVers, 15}
	for i := range 5000 {
		q := &Query{
			Transport: Transport(rng.IntN(int(numTransports) + 1)), // one past: counted as UDP
			Status:    Status(rng.IntN(int(numStatuses))),
			Rcode:     rcodes[rng.IntN(len(rcodes))],
			// exact bounds too: a bucket's bound is inclusive
			Duration: latencyBounds[rng.IntN(len(latencyBounds))] + time.Duration(rng.IntN(3)-1),
		}
		if i%7 == 0 {
			q.Duration = time.Duration(rng.Int64N(int64(4 * time.Second)))
		}
		tr := q.Transport
		if tr >= numTransports {
			tr = TransportUDP
		}
		qv.WithLabelValues(tr.String(), q.Status.String(), rcodeLabels[rcodeIndex(q.Rcode)]).Inc()
		lv.WithLabelValues(tr.String()).Observe(q.Duration.Seconds())
		if tr == TransportUDP && i%3 != 0 {
			sb.add(q)
			if i%13 == 0 {
				sb.flush(m, TransportUDP)
			}
		} else {
			m.observe(q)
		}
	}
	sb.flush(m, TransportUDP)

	rq, gq := family(t, ref, "service_dns_queries_total"), family(t, got, "service_dns_queries_total")
	if len(rq.GetMetric()) != len(gq.GetMetric()) {
		t.Fatalf("%d query series, client_golang %d", len(gq.GetMetric()), len(rq.GetMetric()))
	}
	for i, r := range rq.GetMetric() {
		g := gq.GetMetric()[i]
		r.Counter.CreatedTimestamp = nil // client_golang's own; not in the text exposition
		if r.String() != g.String() {
			t.Fatalf("series %d: %v, client_golang %v", i, g, r)
		}
	}
	rd, gd := family(t, ref, "service_dns_query_duration_seconds"), family(t, got, "service_dns_query_duration_seconds")
	if rd.GetHelp() != gd.GetHelp() || rq.GetHelp() != gq.GetHelp() || rd.GetType() != gd.GetType() {
		t.Errorf("help or type differ from client_golang's")
	}
	for i, r := range rd.GetMetric() {
		rh, gh := r.GetHistogram(), gd.GetMetric()[i].GetHistogram()
		if rh.GetSampleCount() != gh.GetSampleCount() {
			t.Errorf("series %d: count %d, client_golang %d", i, gh.GetSampleCount(), rh.GetSampleCount())
		}
		if d := math.Abs(rh.GetSampleSum() - gh.GetSampleSum()); d > 1e-6*math.Max(1, rh.GetSampleSum()) {
			t.Errorf("series %d: sum %v, client_golang %v", i, gh.GetSampleSum(), rh.GetSampleSum())
		}
		for j, rb := range rh.GetBucket() {
			gb := gh.GetBucket()[j]
			if rb.GetUpperBound() != gb.GetUpperBound() || rb.GetCumulativeCount() != gb.GetCumulativeCount() {
				t.Errorf("series %d bucket %d: le %v %d, client_golang le %v %d", i, j,
					gb.GetUpperBound(), gb.GetCumulativeCount(), rb.GetUpperBound(), rb.GetCumulativeCount())
			}
		}
	}
}
