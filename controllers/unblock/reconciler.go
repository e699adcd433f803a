// Package unblock is the UnblockRequest reconciler: pending requests past
// unblockRequests.pendingExpiry expire, timed approvals end (their allow
// entries leave the list), and decided or expired requests are deleted
// after unblockRequests.retention. It runs on the local runner with the
// sqlite store and on the operator's controller-runtime manager with the
// kube store (internal/node builds it once for both).
package unblock

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"sync"
	"time"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/svcdns/svc/api/v1alpha1"
	"github.com/svcdns/svc/controllers/events"
	"github.com/svcdns/svc/internal/settings"
	"github.com/svcdns/svc/internal/store"
	ub "github.com/svcdns/svc/internal/unblock"
)

// Kind is the reconciled store kind.
const Kind = ub.Kind

// Action is what a request needs now.
type Action string

const (
	None   Action = ""
	Init   Action = "init"   // a request written without the service (kubectl): give it its expiry
	Expire Action = "expire" // pending past its expiry
	End    Action = "end"    // a timed approval whose time is up
	Delete Action = "delete" // decided or expired, past retention
)

// maxWait bounds how long a request is left alone, so a changed
// retention or expiry setting is applied within that time.
const maxWait = time.Hour

// Next decides what a request needs at now and, when nothing, how long
// until it may need something. Pure: table-tested.
func Next(r *v1alpha1.UnblockRequest, now time.Time, cfg settings.UnblockRequests) (Action, time.Duration) {
	created := r.CreationTimestamp.Time
	until := func(t time.Time) (Action, time.Duration) {
		d := t.Sub(now)
		return None, min(max(d, time.Second), maxWait)
	}
	retained := func(from time.Time) (Action, time.Duration) {
		if cfg.Retention <= 0 {
			return None, 0
		}
		if !now.Before(from.Add(cfg.Retention)) {
			return Delete, 0
		}
		return until(from.Add(cfg.Retention))
	}
	decidedAt := created
	if r.Status.DecidedAt != nil {
		decidedAt = r.Status.DecidedAt.Time
	}
	switch ub.Phase(r) {
	case ub.PhasePending:
		if r.Status.ExpiresAt == nil {
			return Init, 0
		}
		if !now.Before(r.Status.ExpiresAt.Time) {
			return Expire, 0
		}
		return until(r.Status.ExpiresAt.Time)
	case ub.PhaseApproved:
		if r.Status.ExpiresAt != nil {
			if !now.Before(r.Status.ExpiresAt.Time) {
				return End, 0
			}
			return until(r.Status.ExpiresAt.Time)
		}
		// permanent: the request goes after retention, its entries stay
		return retained(decidedAt)
	case ub.PhaseDenied:
		return retained(decidedAt)
	case ub.PhaseExpired:
		from := decidedAt
		if r.Status.ExpiresAt != nil && r.Status.ExpiresAt.After(from) {
			from = r.Status.ExpiresAt.Time
		}
		return retained(from)
	}
	return None, 0
}

// Reconciler moves one UnblockRequest along its lifecycle.
type Reconciler struct {
	Store    store.Store
	Settings func() settings.UnblockRequests
	Now      func() time.Time
	// Events records Kubernetes Events (nil: none; the sqlite store).
	Events  events.Recorder
	Metrics *Metrics
	Logger  *slog.Logger

	// running are the timed approvals last seen running (namespace/name to
	// their list): a request deleted before its approval ended takes its
	// entries with it, or they would never expire.
	running sync.Map
}

// Reconcile implements runner.Reconciler and operator.Reconciler.
func (r *Reconciler) Reconcile(ctx context.Context, ns, name string) (time.Duration, error) {
	key := ns + "/" + name
	u, err := r.Store.Get(ctx, Kind, ns, name)
	if errors.Is(err, store.ErrNotFound) {
		r.Metrics.forget(key)
		if list, ok := r.running.LoadAndDelete(key); ok {
			if err := ub.RemoveEntries(ctx, r.Store, list.(string), key); err != nil {
				r.running.Store(key, list)
				return 0, fmt.Errorf("unblock request %s deleted during its approval: remove its entries from %s: %w", key, list, err)
			}
			r.log().Info("unblock request deleted during its timed approval: its allow entries were removed", "request", key, "list", list)
		}
		return 0, nil
	}
	if err != nil {
		return 0, fmt.Errorf("unblock request %s: %w", key, err)
	}
	req, err := ub.FromUnstructured(u)
	if err != nil {
		return 0, err
	}
	cfg := r.Settings()
	now := r.Now()
	for range 3 { // init, then expire at most: bounded
		act, after := Next(req, now, cfg)
		switch act {
		case None:
			r.Metrics.set(key, ub.Phase(req))
			if ub.Phase(req) == ub.PhaseApproved && req.Status.ExpiresAt != nil && req.Status.Entry != "" {
				r.running.Store(key, req.Status.Entry)
			} else {
				r.running.Delete(key)
			}
			return after, nil
		case Init:
			exp := now.Add(cfg.PendingExpiry)
			if c := req.CreationTimestamp.Time; !c.IsZero() {
				exp = c.Add(cfg.PendingExpiry)
			}
			req, err = ub.InitPending(ctx, r.Store, req, exp, now)
		case Expire:
			req, err = ub.Expire(ctx, r.Store, req, now)
			if err == nil {
				r.event(req, "Expired", "no decision before unblockRequests.pendingExpiry; the requester may file again")
			}
		case End:
			req, err = ub.EndApproval(ctx, r.Store, req, now)
			if err == nil {
				r.running.Delete(key)
				r.event(req, "ApprovalEnded", "the timed approval ended; its allow entries were removed from "+req.Status.Entry)
				r.log().Info("unblock approval ended", "request", key, "domain", req.Spec.Domain, "list", req.Status.Entry)
			}
		case Delete:
			err = r.Store.Delete(ctx, Kind, ns, name, store.DeleteOptions{ResourceVersion: req.ResourceVersion})
			if err == nil || errors.Is(err, store.ErrNotFound) {
				r.Metrics.forget(key)
				r.log().Info("unblock request deleted after retention", "request", key, "phase", ub.Phase(req))
				return 0, nil
			}
		}
		if err != nil {
			return 0, fmt.Errorf("unblock request %s: %s: %w", key, act, err)
		}
	}
	r.Metrics.set(key, ub.Phase(req))
	return time.Second, nil
}

func (r *Reconciler) event(req *v1alpha1.UnblockRequest, reason, note string) {
	if r.Events == nil {
		return
	}
	req.APIVersion, req.Kind = v1alpha1.GroupVersion.String(), Kind
	r.Events.Eventf(req, nil, events.Normal, reason, "Reconcile", "%s: %s", req.Spec.Domain, note)
}

func (r *Reconciler) log() *slog.Logger {
	if r.Logger == nil {
		return slog.Default()
	}
	return r.Logger
}

// Metrics is the gauge service_unblock_requests{phase}: requests per phase
// as the reconciler last saw them (in Kubernetes: on the operator leader).
type Metrics struct {
	mu     sync.Mutex
	phases map[string]string // namespace/name -> phase
	gauge  *prometheus.GaugeVec
}

// NewMetrics registers the gauge with reg (nil: not registered).
func NewMetrics(reg prometheus.Registerer) *Metrics {
	m := &Metrics{phases: map[string]string{}, gauge: prometheus.NewGaugeVec(prometheus.GaugeOpts{
		Name: "service_unblock_requests", Help: "Unblock requests by phase: pending, approved, denied, expired.",
	}, []string{"phase"})}
	for _, p := range ub.Phases {
		m.gauge.WithLabelValues(p).Set(0)
	}
	if reg != nil {
		reg.MustRegister(m.gauge)
	}
	return m
}

func (m *Metrics) set(key, phase string) {
	if m == nil {
		return
	}
	m.mu.Lock()
	defer m.mu.Unlock()
	if old, ok := m.phases[key]; ok {
		if old == phase {
			return
		}
		m.gauge.WithLabelValues(old).Dec()
	}
	m.phases[key] = phase
	m.gauge.WithLabelValues(phase).Inc()
}

func (m *Metrics) forget(key string) {
	if m == nil {
		return
	}
	m.mu.Lock()
	defer m.mu.Unlock()
	if old, ok := m.phases[key]; ok {
		m.gauge.WithLabelValues(old).Dec()
		delete(m.phases, key)
	}
}
