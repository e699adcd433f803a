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
	answers       *answerStats
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
	ev := prometheus.NewCounterVec(prometheus.CounterOpts{
		Namespace: "service", Subsystem: "dns", Name: "ecs_clients_total",
		Help: "EDNS Client Subnet options from listeners.ecsClientFrom forwarders, by result: used as the client, or short_prefix (ignored: not a /32 or /128).",
	}, []string{"result"})
	counter := func(name, help string) prometheus.Counter {
		return prometheus.NewCounter(prometheus.CounterOpts{Namespace: "service", Subsystem: "dns_cache", Name: name, Help: help})
	}
	m := &metrics{
		answers:       newAnswerStats(),
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
	if reg != nil {
		for _, c := range []prometheus.Collector{m.answers, pv, m.cacheHits, m.cacheMisses, m.cachePrefetch, m.cacheStale, m.shed, ev} {
			if err := reg.Register(c); err != nil {
				return nil, fmt.Errorf("register: %w", err)
			}
		}
	}
	return m, nil
}

// observe counts q at once; a UDP batch counts its queries in a
// statsBatch instead.
func (m *metrics) observe(q *Query) {
	t, c, b, ns := answerCell(q)
	a := m.answers
	a.counts[c].Add(1)
	a.buckets[t][b].Add(1)
	a.sumNanos[t].Add(ns)
}

func (m *metrics) panicked(stage int) {
	if stage >= 0 && stage < len(m.panics) {
		m.panics[stage].Inc()
	}
}
