package node

import (
	"strings"
	"sync"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	dto "github.com/prometheus/client_model/go"

	unblockctl "github.com/svcdns/svc/controllers/unblock"
)

// nodeMetrics are the node's own series: snapshot builds and their age, and the
// size of the compiled block lists. Query, cache, upstream, rate-limit and
// query-log series come from the packages that count them.
type nodeMetrics struct {
	buildSeconds prometheus.Histogram
	builtAt      prometheus.Gauge
	listRules    *prometheus.GaugeVec
	listFetches  *prometheus.CounterVec

	// reg registers series made on first use (the unblock request gauge
	// exists only where the reconciler runs: the operator in Kubernetes).
	reg         prometheus.Registerer
	unblockOnce sync.Once
	unblock     *unblockctl.Metrics
}

// unblockMetrics is service_unblock_requests{phase}, registered on first
// use.
func (m *nodeMetrics) unblockMetrics() *unblockctl.Metrics {
	if m == nil {
		return nil
	}
	m.unblockOnce.Do(func() { m.unblock = unblockctl.NewMetrics(m.reg) })
	return m.unblock
}

func newNodeMetrics(reg prometheus.Registerer) *nodeMetrics {
	m := &nodeMetrics{
		buildSeconds: prometheus.NewHistogram(prometheus.HistogramOpts{
			Name: "service_snapshot_build_seconds", Help: "Time to compile one data-plane snapshot.",
			Buckets: prometheus.ExponentialBuckets(0.0005, 4, 10),
		}),
		builtAt: prometheus.NewGauge(prometheus.GaugeOpts{
			Name: "service_snapshot_built_timestamp_seconds", Help: "Unix time the served snapshot was built; its age is time() minus this.",
		}),
		listRules: prometheus.NewGaugeVec(prometheus.GaugeOpts{
			Name: "service_blocklist_rules", Help: "Rules compiled per block list (namespace/name).",
		}, []string{"list"}),
		listFetches: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "service_blocklist_fetches_total",
			Help: "URL fetches of block-list sources by list (namespace/name) and result: ok, not_modified, degraded (failed, cached body served), error.",
		}, []string{"list", "result"}),
	}
	m.reg = reg
	if reg != nil {
		reg.MustRegister(m.buildSeconds, m.builtAt, m.listRules, m.listFetches)
	}
	return m
}

func (m *nodeMetrics) observeBuild(start time.Time) {
	if m == nil {
		return
	}
	m.buildSeconds.Observe(time.Since(start).Seconds())
	m.builtAt.Set(float64(start.UnixNano()) / 1e9)
}

func (m *nodeMetrics) setListRules(list string, rules int, present bool) {
	if m == nil {
		return
	}
	if !present {
		m.listRules.DeleteLabelValues(list)
		return
	}
	m.listRules.WithLabelValues(list).Set(float64(rules))
}

// listFetched counts one fetch outcome (blocklists.Options.OnFetch).
func (m *nodeMetrics) listFetched(list, result string) {
	if m == nil {
		return
	}
	m.listFetches.WithLabelValues(list, result).Inc()
}

// withoutRuntime leaves out the go_* and process_* families of a gatherer:
// controller-runtime's registry has its own Go and process collectors,
// which the node's registry already serves (served twice, /metrics fails).
type withoutRuntime struct{ g prometheus.Gatherer }

func (w withoutRuntime) Gather() ([]*dto.MetricFamily, error) {
	fams, err := w.g.Gather()
	out := fams[:0]
	for _, f := range fams {
		if n := f.GetName(); !strings.HasPrefix(n, "go_") && !strings.HasPrefix(n, "process_") {
			out = append(out, f)
		}
	}
	return out, err
}
