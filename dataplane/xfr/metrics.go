package xfr

import (
	"fmt"
	"time"

	"github.com/miekg/dns"
	"github.com/prometheus/client_golang/prometheus"

	"github.com/svcdns/svc/dataplane"
)

// Metrics are the transfer and NOTIFY counters.
type Metrics struct {
	total    *prometheus.CounterVec
	bytes    *prometheus.CounterVec
	duration *prometheus.HistogramVec
	notify   *prometheus.CounterVec
}

// NewMetrics registers the metrics with reg (nil: kept, not registered).
func NewMetrics(reg prometheus.Registerer) (*Metrics, error) {
	m := &Metrics{
		total: prometheus.NewCounterVec(prometheus.CounterOpts{Name: "service_xfr_total",
			Help: "Zone transfers answered, by zone, type (axfr, ixfr) and result (axfr, ixfr, ixfr-axfr, ixfr-uptodate, refused, notauth, badkey, badsig, badtime, servfail, formerr, aborted)."},
			[]string{"zone", "type", "result"}),
		bytes: prometheus.NewCounterVec(prometheus.CounterOpts{Name: "service_xfr_bytes_total",
			Help: "Bytes of zone transfer answers written, by zone and type."}, []string{"zone", "type"}),
		duration: prometheus.NewHistogramVec(prometheus.HistogramOpts{Name: "service_xfr_duration_seconds",
			Help: "Time to answer a zone transfer, by type.", Buckets: prometheus.ExponentialBuckets(0.001, 4, 10)}, []string{"type"}),
		notify: prometheus.NewCounterVec(prometheus.CounterOpts{Name: "service_notify_sent_total",
			Help: "NOTIFY messages sent to secondaries, by zone and result (the answer's rcode, timeout or error)."}, []string{"zone", "result"}),
	}
	if reg != nil {
		for _, c := range []prometheus.Collector{m.total, m.bytes, m.duration, m.notify} {
			if err := reg.Register(c); err != nil {
				return nil, fmt.Errorf("xfr metrics: %w", err)
			}
		}
	}
	return m, nil
}

func (m *Metrics) observe(r dataplane.TransferResult, typ string, took time.Duration) {
	if m == nil {
		return
	}
	zone := r.Zone
	if zone == "" {
		zone = "-" // not a zone of ours: one series, not one per name asked
	}
	m.total.WithLabelValues(zone, typ, r.Mode).Inc()
	m.bytes.WithLabelValues(zone, typ).Add(float64(r.Bytes))
	m.duration.WithLabelValues(typ).Observe(took.Seconds())
}

func (m *Metrics) notified(zone string, rcode int, err error) {
	if m == nil {
		return
	}
	res := dns.RcodeToString[rcode]
	if err != nil {
		res = "timeout"
	}
	m.notify.WithLabelValues(zone, res).Inc()
}
