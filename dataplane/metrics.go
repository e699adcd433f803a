package dataplane

import (
	"fmt"

	"github.com/miekg/dns"
	"github.com/prometheus/client_golang/prometheus"
)

// rcodes with their own label; others count as "other".
var rcodeLabels = [...]string{"NOERROR", "FORMERR", "SERVFAIL", "NXDOMAIN", "NOTIMP", "REFUSED", "other", "BADVERS"}

func rcodeIndex(rc int) int {
	switch {
	case rc >= 0 && rc <= dns.RcodeRefused:
		return rc
	case rc == dns.RcodeBadVers:
		return 7
	}
	return 6
}

type metrics struct {
	queries       [numTransports][numStatuses][len(rcodeLabels)]prometheus.Counter
	latency       [numTransports]prometheus.Observer
	cacheHits     prometheus.Counter
	cacheMisses   prometheus.Counter
	cachePrefetch prometheus.Counter
	cacheStale    prometheus.Counter
	shed          prometheus.Counter
	// ECS options of listeners.ecsClientFrom forwarders: used as the
	// client, or ignored for a source prefix shorter than one address.
	ecsUsed, ecsShort prometheus.Counter
	panics            []prometheus.Counter // by stage index
}

// newMetrics creates every label child up front so counting never allocates.
func newMetrics(reg prometheus.Registerer, stages []stage) (*metrics, error) {
	pv := prometheus.NewCounterVec(prometheus.CounterOpts{
		Namespace: "service", Subsystem: "dns", Name: "panics_total",
		Help: "Queries whose stage panicked; each was answered SERVFAIL (EDE Other) and logged with its stack.",
	}, []string{"stage"})
	qv := prometheus.NewCounterVec(prometheus.CounterOpts{
		Namespace: "service", Subsystem: "dns", Name: "queries_total",
		Help: "DNS queries answered, by transport, status class and rcode.",
	}, []string{"transport", "status", "rcode"})
	lv := prometheus.NewHistogramVec(prometheus.HistogramOpts{
		Namespace: "service", Subsystem: "dns", Name: "query_duration_seconds",
		Help:    "Time from reading a query to its answer being decided.",
		Buckets: []float64{0.00005, 0.0001, 0.00025, 0.0005, 0.001, 0.0025, 0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1, 2.5},
	}, []string{"transport"})
	ev := prometheus.NewCounterVec(prometheus.CounterOpts{
		Namespace: "service", Subsystem: "dns", Name: "ecs_clients_total",
		Help: "EDNS Client Subnet options from listeners.ecsClientFrom forwarders, by result: used as the client, or short_prefix (ignored: not a /32 or /128).",
	}, []string{"result"})
	counter := func(name, help string) prometheus.Counter {
		return prometheus.NewCounter(prometheus.CounterOpts{Namespace: "service", Subsystem: "dns_cache", Name: name, Help: help})
	}
	m := &metrics{
		cacheHits:     counter("hits_total", "Cache hits (fresh)."),
		cacheMisses:   counter("misses_total", "Cache misses."),
		cachePrefetch: counter("prefetches_total", "Background refreshes of popular entries."),
		cacheStale:    counter("stale_total", "Stale answers served (RFC 8767)."),
		shed: prometheus.NewCounter(prometheus.CounterOpts{Namespace: "service", Subsystem: "dns", Name: "shed_total",
			Help: "UDP queries dropped because MaxWorkers queries were already waiting for upstreams."}),
		ecsUsed:  ev.WithLabelValues("used"),
		ecsShort: ev.WithLabelValues("short_prefix"),
	}
	for _, st := range stages {
		m.panics = append(m.panics, pv.WithLabelValues(st.name))
	}
	for t := range numTransports {
		m.latency[t] = lv.WithLabelValues(t.String())
		for st := range numStatuses {
			for r, rl := range rcodeLabels {
				m.queries[t][st][r] = qv.WithLabelValues(t.String(), st.String(), rl)
			}
		}
	}
	if reg != nil {
		for _, c := range []prometheus.Collector{qv, lv, pv, m.cacheHits, m.cacheMisses, m.cachePrefetch, m.cacheStale, m.shed, ev} {
			if err := reg.Register(c); err != nil {
				return nil, fmt.Errorf("register: %w", err)
			}
		}
	}
	return m, nil
}

func (m *metrics) observe(q *Query) {
	t := q.Transport
	if t >= numTransports {
		t = TransportUDP
	}
	st := q.Status
	if st >= numStatuses {
		st = StatusFailed
	}
	m.queries[t][st][rcodeIndex(q.Rcode)].Inc()
	m.latency[t].Observe(q.Duration.Seconds())
}

func (m *metrics) panicked(stage int) {
	if stage >= 0 && stage < len(m.panics) {
		m.panics[stage].Inc()
	}
}
