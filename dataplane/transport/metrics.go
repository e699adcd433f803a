package transport

import (
	"fmt"

	"github.com/prometheus/client_golang/prometheus"
)

type metrics struct {
	conns    *prometheus.GaugeVec
	rejected *prometheus.CounterVec
	dotConns prometheus.Gauge
}

// newMetrics registers service_dns_transport_connections{transport} and
// service_dns_transport_rejected_total{transport,reason}.
func newMetrics(reg prometheus.Registerer) (*metrics, error) {
	m := &metrics{
		conns: prometheus.NewGaugeVec(prometheus.GaugeOpts{
			Name: "service_dns_transport_connections",
			Help: "Open connections of the encrypted DNS transports.",
		}, []string{"transport"}),
		rejected: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "service_dns_transport_rejected_total",
			Help: "Requests, streams and connections refused by an encrypted DNS transport, by reason.",
		}, []string{"transport", "reason"}),
	}
	m.dotConns = m.conns.WithLabelValues("dot")
	if reg != nil {
		for _, c := range []prometheus.Collector{m.conns, m.rejected} {
			if err := reg.Register(c); err != nil {
				return nil, fmt.Errorf("transport metrics: %w", err)
			}
		}
	}
	return m, nil
}

func (m *metrics) reject(transport, reason string) {
	m.rejected.WithLabelValues(transport, reason).Inc()
}
