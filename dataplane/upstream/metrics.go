package upstream

import (
	"errors"
	"fmt"

	"github.com/prometheus/client_golang/prometheus"
)

// Error reasons of service_upstream_errors_total. A race lost in parallel_best
// is not an error and is not counted.
const (
	reasonTimeout   = "timeout"   // no answer within the group timeout
	reasonNetwork   = "network"   // dial, TLS, read or write failed
	reasonServfail  = "servfail"  // answer with rcode SERVFAIL
	reasonRefused   = "refused"   // answer with rcode REFUSED
	reasonMismatch  = "mismatch"  // answer for another ID or question
	reasonMalformed = "malformed" // answer that does not parse or is too large
	reasonHTTP      = "http"      // DoH status or content type not 200 dns-message
	reasonBootstrap = "bootstrap" // host name of the upstream did not resolve
)

var reasons = [...]string{
	reasonTimeout, reasonNetwork, reasonServfail, reasonRefused,
	reasonMismatch, reasonMalformed, reasonHTTP, reasonBootstrap,
}

// metrics holds the vectors shared by every Resolver built on one
// registerer. A second New on the same registerer reuses the collectors
// already registered (prometheus.AlreadyRegisteredError), so rebuilding the
// Resolver on reconfiguration neither panics nor resets counters.
type metrics struct {
	latency    *prometheus.HistogramVec
	errors     *prometheus.CounterVec
	udpDropped *prometheus.CounterVec
	// udpRetransmits counts pooled UDP queries sent again after their RTO.
	udpRetransmits *prometheus.CounterVec
	coalesced      *prometheus.CounterVec
}

func newMetrics(reg prometheus.Registerer) (*metrics, error) {
	latency := prometheus.NewHistogramVec(prometheus.HistogramOpts{
		Name:    "service_upstream_request_duration_seconds",
		Help:    "Time from sending a query to an upstream to its valid answer, by group and upstream.",
		Buckets: []float64{.001, .0025, .005, .01, .025, .05, .1, .25, .5, 1, 2.5, 5},
	}, []string{"group", "upstream"})
	errs := prometheus.NewCounterVec(prometheus.CounterOpts{
		Name: "service_upstream_errors_total",
		Help: "Failed exchanges with an upstream, by group, upstream and reason.",
	}, []string{"group", "upstream", "reason"})
	dropped := prometheus.NewCounterVec(prometheus.CounterOpts{
		Name: "service_upstream_udp_dropped_total",
		Help: "Datagrams read on pooled upstream UDP sockets and dropped, by server and reason (unsolicited, late, mismatch, malformed).",
	}, []string{"server", "reason"})
	retransmits := prometheus.NewCounterVec(prometheus.CounterOpts{
		Name: "service_upstream_udp_retransmits_total",
		Help: "Queries on pooled upstream UDP sockets sent again, with the same ID, because no answer came within the retransmission timeout (a datagram lost on the way), by server.",
	}, []string{"server"})
	coalesced := prometheus.NewCounterVec(prometheus.CounterOpts{
		Name: "service_upstream_coalesced_total",
		Help: "Queries answered by an identical question already in flight to the same group, instead of a query of their own.",
	}, []string{"group"})
	m := &metrics{latency: latency, errors: errs, udpDropped: dropped, udpRetransmits: retransmits, coalesced: coalesced}
	if reg == nil {
		return m, nil
	}
	var err error
	if m.latency, err = registerOrReuse(reg, latency); err != nil {
		return nil, err
	}
	if m.errors, err = registerOrReuse(reg, errs); err != nil {
		return nil, err
	}
	if m.udpDropped, err = registerOrReuse(reg, dropped); err != nil {
		return nil, err
	}
	if m.udpRetransmits, err = registerOrReuse(reg, retransmits); err != nil {
		return nil, err
	}
	if m.coalesced, err = registerOrReuse(reg, coalesced); err != nil {
		return nil, err
	}
	return m, nil
}

func registerOrReuse[T prometheus.Collector](reg prometheus.Registerer, c T) (T, error) {
	err := reg.Register(c)
	if err == nil {
		return c, nil
	}
	if are, ok := errors.AsType[prometheus.AlreadyRegisteredError](err); ok {
		if existing, ok := are.ExistingCollector.(T); ok {
			return existing, nil
		}
	}
	return c, fmt.Errorf("register upstream metrics: %w", err)
}

// upstreamMetrics are the children of one upstream, created up front so the
// hot path does no label lookup and every series exists from the start.
type upstreamMetrics struct {
	latency prometheus.Observer
	errors  map[string]prometheus.Counter
}

func (m *metrics) forUpstream(group, name string) upstreamMetrics {
	um := upstreamMetrics{
		latency: m.latency.WithLabelValues(group, name),
		errors:  make(map[string]prometheus.Counter, len(reasons)),
	}
	for _, r := range reasons {
		um.errors[r] = m.errors.WithLabelValues(group, name, r)
	}
	return um
}
