package dataplane

import (
	"sync/atomic"
	"time"

	"github.com/prometheus/client_golang/prometheus"
)

// latencyBounds are the upper bounds of service_dns_query_duration_seconds'
// buckets, in nanoseconds and in seconds.
var (
	latencyBounds = [...]time.Duration{
		50 * time.Microsecond, 100 * time.Microsecond, 250 * time.Microsecond, 500 * time.Microsecond,
		time.Millisecond, 2500 * time.Microsecond, 5 * time.Millisecond, 10 * time.Millisecond,
		25 * time.Millisecond, 50 * time.Millisecond, 100 * time.Millisecond, 250 * time.Millisecond,
		500 * time.Millisecond, time.Second, 2500 * time.Millisecond,
	}
	latencyBoundSeconds = func() (s [len(latencyBounds)]float64) {
		for i, b := range latencyBounds {
			s[i] = b.Seconds()
		}
		return s
	}()
)

const (
	numRcodes      = len(rcodeLabels)
	numAnswerCells = int(numTransports) * int(numStatuses) * numRcodes
	numBuckets     = len(latencyBounds) + 1 // the last: over every bound
)

// answerStats holds service_dns_queries_total and
// service_dns_query_duration_seconds as plain atomic counters and builds
// the metrics at scrape. client_golang's counter and histogram cost five
// atomic operations per query, the histogram's sum a CAS loop on a float:
// 1% of a UDP loop's samples. Counted here, a UDP batch adds its queries
// once per cell it touched (statsBatch), and other transports pay three
// atomic adds.
type answerStats struct {
	counts   [numAnswerCells]atomic.Uint64
	buckets  [numTransports][numBuckets]atomic.Uint64
	sumNanos [numTransports]atomic.Uint64

	queriesDesc, durationDesc *prometheus.Desc
}

func newAnswerStats() *answerStats {
	return &answerStats{
		queriesDesc: prometheus.NewDesc("service_dns_queries_total",
			"DNS queries answered, by transport, status class and rcode.",
			[]string{"transport", "status", "rcode"}, nil),
		durationDesc: prometheus.NewDesc("service_dns_query_duration_seconds",
			"Time from reading a query to its answer being decided.",
			[]string{"transport"}, nil),
	}
}

// answerCell is q's transport (UDP when unknown), its index in
// answerStats.counts, the bucket of its duration and the duration in
// nanoseconds.
func answerCell(q *Query) (t Transport, cell, bucket int, nanos uint64) {
	t = q.Transport
	if t >= numTransports {
		t = TransportUDP
	}
	st := q.Status
	if st >= numStatuses {
		st = StatusFailed
	}
	cell = (int(t)*int(numStatuses)+int(st))*numRcodes + rcodeIndex(q.Rcode)
	d := max(q.Duration, 0)
	for bucket < len(latencyBounds) && d > latencyBounds[bucket] {
		bucket++
	}
	return t, cell, bucket, uint64(d)
}

func (a *answerStats) Describe(ch chan<- *prometheus.Desc) {
	ch <- a.queriesDesc
	ch <- a.durationDesc
}

// Collect reports every cell, zeros included, as the labelled children
// created up front did before.
func (a *answerStats) Collect(ch chan<- prometheus.Metric) {
	for t := range numTransports {
		for st := range numStatuses {
			for r, rl := range rcodeLabels {
				v := a.counts[(int(t)*int(numStatuses)+int(st))*numRcodes+r].Load()
				ch <- prometheus.MustNewConstMetric(a.queriesDesc, prometheus.CounterValue, float64(v),
					t.String(), st.String(), rl)
			}
		}
		var n uint64
		cum := make(map[float64]uint64, len(latencyBounds))
		for b := range numBuckets {
			n += a.buckets[t][b].Load()
			if b < len(latencyBounds) {
				cum[latencyBoundSeconds[b]] = n
			}
		}
		sum := time.Duration(a.sumNanos[t].Load()).Seconds()
		ch <- prometheus.MustNewConstHistogram(a.durationDesc, n, sum, cum, t.String())
	}
}

// statsBatch counts a UDP batch's answered queries with plain adds and
// publishes them once per batch (flush): a batch touches a few cells and
// buckets however many queries it has. Every query it counts is UDP.
type statsBatch struct {
	counts  [numAnswerCells]uint32
	buckets [numBuckets]uint32
	nanos   uint64
	hits    uint32     // fresh cache hits (service_dns_cache_hits_total)
	touched [64]uint16 // cells counted since the last flush
	nt      int
	all     bool // more cells than touched holds: flush scans them all
}

func (b *statsBatch) add(q *Query) {
	_, c, bk, ns := answerCell(q)
	if b.counts[c] == 0 {
		if b.nt < len(b.touched) {
			b.touched[b.nt] = uint16(c)
			b.nt++
		} else {
			b.all = true
		}
	}
	b.counts[c]++
	b.buckets[bk]++
	b.nanos += ns
	if q.freshHit {
		b.hits++
	}
}

// flush adds the batch's counts to m and clears them; t is the batch's
// transport.
func (b *statsBatch) flush(m *metrics, t Transport) {
	if b.nt == 0 && !b.all {
		return // nothing counted: every add touches a cell
	}
	a := m.answers
	if b.hits != 0 {
		m.cacheHits.Add(float64(b.hits))
		b.hits = 0
	}
	if b.all {
		for c, n := range b.counts {
			if n != 0 {
				a.counts[c].Add(uint64(n))
				b.counts[c] = 0
			}
		}
	} else {
		for _, c := range b.touched[:b.nt] {
			a.counts[c].Add(uint64(b.counts[c]))
			b.counts[c] = 0
		}
	}
	b.nt, b.all = 0, false
	for i, n := range b.buckets {
		if n != 0 {
			a.buckets[t][i].Add(uint64(n))
			b.buckets[i] = 0
		}
	}
	a.sumNanos[t].Add(b.nanos)
	b.nanos = 0
}
