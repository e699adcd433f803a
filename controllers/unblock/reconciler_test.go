package unblock

import (
	"context"
	"encoding/json"
	"net/netip"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/testutil"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"

	"github.com/svcdns/svc/api/v1alpha1"
	"github.com/svcdns/svc/internal/settings"
	"github.com/svcdns/svc/internal/store"
	"github.com/svcdns/svc/internal/store/sqlite"
	ub "github.com/svcdns/svc/internal/unblock"
	"github.com/svcdns/svc/internal/validation"
)

func TestNext(t *testing.T) {
	t0 := time.Date(2026, 11, 1, 0, 0, 0, 0, time.UTC)
	cfg := settings.UnblockRequests{PendingExpiry: 336 * time.Hour, Retention: 720 * time.Hour}
	at := func(d time.Duration) *metav1.Time { t := metav1.NewTime(t0.Add(d)); return &t }
	req := func(phase string, expires, decided *metav1.Time) *v1alpha1.UnblockRequest {
		r := &v1alpha1.UnblockRequest{ObjectMeta: metav1.ObjectMeta{CreationTimestamp: metav1.NewTime(t0)}}
		r.Status.Phase, r.Status.ExpiresAt, r.Status.DecidedAt = phase, expires, decided
		return r
	}
	cases := []struct {
		name  string
		r     *v1alpha1.UnblockRequest
		now   time.Duration
		act   Action
		after time.Duration
	}{
		{"pending without expiry (kubectl)", req("", nil, nil), time.Minute, Init, 0},
		{"pending before expiry: look again at it (capped)", req("pending", at(336*time.Hour), nil), time.Minute, None, maxWait},
		{"pending just before expiry", req("pending", at(336*time.Hour), nil), 336*time.Hour - 10*time.Second, None, 10 * time.Second},
		{"pending at expiry", req("pending", at(336*time.Hour), nil), 336 * time.Hour, Expire, 0},
		{"timed approval running", req("approved", at(2*time.Hour), at(time.Hour)), 90 * time.Minute, None, 30 * time.Minute},
		{"timed approval over", req("approved", at(2*time.Hour), at(time.Hour)), 2 * time.Hour, End, 0},
		{"timed approval past retention still ends first", req("approved", at(2000*time.Hour), at(time.Hour)), 1000 * time.Hour, None, maxWait},
		{"permanent approval within retention", req("approved", nil, at(time.Hour)), 700 * time.Hour, None, maxWait},
		{"permanent approval past retention", req("approved", nil, at(time.Hour)), 721 * time.Hour, Delete, 0},
		{"denied past retention", req("denied", nil, at(time.Hour)), 721 * time.Hour, Delete, 0},
		{"denied within retention", req("denied", nil, at(time.Hour)), 720*time.Hour + 59*time.Minute, None, time.Minute},
		{"expired pending: retention from the expiry", req("expired", at(336*time.Hour), nil), 1000 * time.Hour, None, maxWait},
		{"expired pending past retention", req("expired", at(336*time.Hour), nil), 1056 * time.Hour, Delete, 0},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			act, after := Next(c.r, t0.Add(c.now), cfg)
			if act != c.act || after != c.after {
				t.Errorf("Next = %q, %v; want %q, %v", act, after, c.act, c.after)
			}
		})
	}
}

// fakeClock is the injected clock of the lifecycle test.
type fakeClock struct {
	mu sync.Mutex
	t  time.Time
}

func (c *fakeClock) Now() time.Time { c.mu.Lock(); defer c.mu.Unlock(); return c.t }
func (c *fakeClock) Add(d time.Duration) {
	c.mu.Lock()
	c.t = c.t.Add(d)
	c.mu.Unlock()
}

type recorded struct{ reasons []string }

func (r *recorded) Eventf(_ runtime.Object, _ runtime.Object, _, reason, _, _ string, _ ...any) {
	r.reasons = append(r.reasons, reason)
}

// TestLifecycleOnSQLite: pending expires, a timed approval ends and its
// entries go, decided requests are deleted after retention; the gauge
// follows (injected clock, real SQLite store).
func TestLifecycleOnSQLite(t *testing.T) {
	ctx := context.Background()
	v, err := validation.New()
	if err != nil {
		t.Fatal(err)
	}
	st, err := sqlite.NewStore(ctx, filepath.Join(t.TempDir(), "state.db"), v, sqlite.Options{})
	if err != nil {
		t.Fatal(err)
	}
	defer st.Close()
	clk := &fakeClock{t: time.Now().UTC().Truncate(time.Second)}
	cfg := settings.UnblockRequests{Enabled: true, RateLimit: 100, MaxPending: 100, PendingExpiry: 2 * time.Hour, Retention: 24 * time.Hour}
	svc := ub.NewService(st, func() settings.UnblockRequests { return cfg }, clk.Now)
	reg := prometheus.NewRegistry()
	ev := &recorded{}
	rec := &Reconciler{Store: st, Settings: func() settings.UnblockRequests { return cfg }, Now: clk.Now, Metrics: NewMetrics(reg), Events: ev}
	file := func(d string) ub.Result {
		r, err := svc.Submit(ctx, ub.Submission{Domain: d, Client: netip.MustParseAddr("192.0.2.1")})
		if err != nil {
			t.Fatal(err)
		}
		return r
	}
	reconcileAll := func() {
		page, err := st.List(ctx, store.ListOptions{Kind: Kind})
		if err != nil {
			t.Fatal(err)
		}
		for _, u := range page.Items {
			if _, err := rec.Reconcile(ctx, u.GetNamespace(), u.GetName()); err != nil {
				t.Fatal(err)
			}
		}
	}
	gauge := func(phase string) float64 { return testutil.ToFloat64(rec.Metrics.gauge.WithLabelValues(phase)) }
	stale := file("stale.example.com")
	timed := file("timed.example.com")
	denied := file("denied.example.com")
	if _, err := svc.Approve(ctx, timed.Namespace, timed.Name, ub.Approval{Duration: 3 * time.Hour, By: "alice"}); err != nil {
		t.Fatal(err)
	}
	if _, err := svc.Deny(ctx, denied.Namespace, denied.Name, "no", "bob"); err != nil {
		t.Fatal(err)
	}
	reconcileAll()
	if gauge("pending") != 1 || gauge("approved") != 1 || gauge("denied") != 1 {
		t.Fatalf("gauge: pending %v approved %v denied %v", gauge("pending"), gauge("approved"), gauge("denied"))
	}
	clk.Add(2 * time.Hour)
	after, err := rec.Reconcile(ctx, stale.Namespace, stale.Name)
	if err != nil {
		t.Fatal(err)
	}
	r, _ := svc.Get(ctx, stale.Namespace, stale.Name)
	if ub.Phase(r) != ub.PhaseExpired || after <= 0 {
		t.Fatalf("stale request: %s, again after %v", ub.Phase(r), after)
	}
	clk.Add(time.Hour)
	reconcileAll()
	r, _ = svc.Get(ctx, timed.Namespace, timed.Name)
	if ub.Phase(r) != ub.PhaseExpired {
		t.Fatalf("timed approval: %s", ub.Phase(r))
	}
	bl, err := st.Get(ctx, "BlockList", timed.Namespace, "unblocked")
	if err != nil {
		t.Fatal(err)
	}
	if strings.Contains(mustJSON(t, bl.Object), "timed.example.com") {
		t.Fatalf("the ended approval's entry is still in the list: %v", bl.Object)
	}
	if gauge("expired") != 2 || gauge("pending") != 0 || gauge("approved") != 0 {
		t.Fatalf("gauge after expiry: expired %v pending %v approved %v", gauge("expired"), gauge("pending"), gauge("approved"))
	}
	if strings.Join(ev.reasons, ",") != "Expired,ApprovalEnded" {
		t.Errorf("events: %v", ev.reasons)
	}
	// a timed approval whose request is deleted before it ends takes its
	// entry with it
	gone := file("gone.example.com")
	if _, err := svc.Approve(ctx, gone.Namespace, gone.Name, ub.Approval{Duration: 100 * time.Hour}); err != nil {
		t.Fatal(err)
	}
	reconcileAll()
	if err := st.Delete(ctx, Kind, gone.Namespace, gone.Name, store.DeleteOptions{}); err != nil {
		t.Fatal(err)
	}
	if _, err := rec.Reconcile(ctx, gone.Namespace, gone.Name); err != nil {
		t.Fatal(err)
	}
	bl, _ = st.Get(ctx, "BlockList", gone.Namespace, "unblocked")
	if strings.Contains(mustJSON(t, bl.Object), "gone.example.com") {
		t.Fatalf("a deleted request's running approval left its entry: %v", bl.Object)
	}

	clk.Add(25 * time.Hour)
	reconcileAll()
	page, _ := st.List(ctx, store.ListOptions{Kind: Kind})
	if len(page.Items) != 0 || gauge("expired") != 0 || gauge("denied") != 0 {
		t.Fatalf("after retention: %d requests left, gauge expired %v denied %v", len(page.Items), gauge("expired"), gauge("denied"))
	}
}

func mustJSON(t *testing.T, v any) string {
	t.Helper()
	b, err := json.Marshal(v)
	if err != nil {
		t.Fatal(err)
	}
	return string(b)
}
