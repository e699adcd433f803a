package operator_test

import (
	"context"
	"fmt"
	"os"
	"sync"
	"testing"
	"time"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/client-go/kubernetes"

	"github.com/svcdns/svc/internal/operator"
	"github.com/svcdns/svc/internal/store"
	"github.com/svcdns/svc/internal/store/kube"
	"github.com/svcdns/svc/internal/store/storetest"
	"github.com/svcdns/svc/internal/validation"
	"github.com/svcdns/svc/test/kube/kubeenv"
)

var (
	env  *kubeenv.Env
	skip string
)

func TestMain(m *testing.M) {
	if skip = kubeenv.SkipReason(); skip != "" {
		os.Exit(m.Run())
	}
	var err error
	if env, err = kubeenv.Start(); err != nil {
		fmt.Fprintln(os.Stderr, err)
		os.Exit(1)
	}
	code := m.Run()
	if err := env.Stop(); err != nil {
		fmt.Fprintln(os.Stderr, "stop envtest:", err)
	}
	os.Exit(code)
}

func eventually(t *testing.T, what string, cond func() bool) {
	t.Helper()
	deadline := time.Now().Add(45 * time.Second)
	for !cond() {
		if time.Now().After(deadline) {
			t.Fatalf("timed out waiting for %s", what)
		}
		time.Sleep(100 * time.Millisecond)
	}
}

// openStore opens a kube store on the test apiserver, with the namespaces
// the tests use.
func openStore(t *testing.T) store.Store {
	t.Helper()
	ctx := t.Context()
	if err := env.Namespaces(ctx, kube.DefaultNamespace, "web"); err != nil {
		t.Fatal(err)
	}
	d, err := kube.Open(ctx, env.Config, kube.Options{EncryptionKey: []byte("0123456789abcdef0123456789abcdef")})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = d.Close() })
	v, err := validation.New()
	if err != nil {
		t.Fatal(err)
	}
	return store.New(d, v)
}

func TestLeaderElectionAndStatus(t *testing.T) {
	if skip != "" {
		t.Skip(skip)
	}
	ctx := t.Context()
	st := openStore(t)

	start := func(name string) (*operator.Operator, context.CancelFunc, chan error) {
		op, err := operator.New(env.Config, operator.Options{
			Store: st, LeaseDuration: 3 * time.Second, RenewDeadline: 2 * time.Second, RetryPeriod: 500 * time.Millisecond,
		})
		if err != nil {
			t.Fatal(err)
		}
		octx, cancel := context.WithCancel(ctx)
		done := make(chan error, 1)
		go func() { done <- op.Run(octx) }()
		t.Cleanup(func() { cancel(); <-done })
		return op, cancel, done
	}
	cs := kubernetes.NewForConfigOrDie(env.Config)
	holder := func() string {
		l, err := cs.CoordinationV1().Leases(kube.DefaultNamespace).Get(ctx, "service-operator", metav1.GetOptions{})
		if err != nil || l.Spec.HolderIdentity == nil {
			return ""
		}
		return *l.Spec.HolderIdentity
	}

	op1, stop1, done1 := start("one")
	select {
	case <-op1.Elected():
	case <-time.After(30 * time.Second):
		t.Fatal("first operator not elected")
	}
	first := holder()
	if first == "" {
		t.Fatal("no lease holder")
	}
	op2, _, _ := start("two")

	// The leader reconciles: status with observedGeneration and Ready.
	zone := storetest.Zone("example.com", "")
	// The record set lives in namespace web, which the zone must admit.
	_ = unstructured.SetNestedField(zone.Object, "All", "spec", "recordSetNamespaces", "from")
	if _, err := st.Apply(ctx, zone, store.ApplyOptions{Manager: store.ManagerAPI}); err != nil {
		t.Fatal(err)
	}
	if _, err := st.Apply(ctx, storetest.RecordSet("web", "www", "example.com", "192.0.2.1", "192.0.2.2"), store.ApplyOptions{Manager: store.ManagerAPI}); err != nil {
		t.Fatal(err)
	}
	eventually(t, "record set status", func() bool {
		rs, err := st.Get(ctx, store.KindDNSRecordSet, "web", "www")
		if err != nil {
			return false
		}
		og, _, _ := unstructured.NestedInt64(rs.Object, "status", "observedGeneration")
		n, _, _ := unstructured.NestedInt64(rs.Object, "status", "names")
		conds, _, _ := unstructured.NestedSlice(rs.Object, "status", "conditions")
		ready := false
		for _, c := range conds {
			if m := c.(map[string]any); m["type"] == "Ready" && m["status"] == "True" {
				ready = true
			}
		}
		return og == 1 && n == 1 && ready
	})
	eventually(t, "zone status", func() bool {
		z, err := st.Get(ctx, store.KindDNSZone, "", "example.com")
		if err != nil {
			return false
		}
		og, _, _ := unstructured.NestedInt64(z.Object, "status", "observedGeneration")
		return og == 1
	})
	eventually(t, "a Kubernetes Event for the record set", func() bool {
		evs, err := cs.EventsV1().Events("web").List(ctx, metav1.ListOptions{})
		if err != nil {
			return false
		}
		for _, e := range evs.Items {
			if e.Regarding.Name == "www" && e.Reason == "Serving" {
				return true
			}
		}
		return false
	})
	select {
	case <-op2.Elected():
		t.Fatal("second operator elected while the first leads")
	default:
	}

	// Stopping the leader moves the lease.
	stop1()
	if err := <-done1; err != nil {
		t.Fatal(err)
	}
	done1 <- nil // for the cleanup
	select {
	case <-op2.Elected():
	case <-time.After(30 * time.Second):
		t.Fatal("lease did not move to the second operator")
	}
	if h := holder(); h == first || h == "" {
		t.Fatalf("lease holder %q after the leader stopped (was %q)", h, first)
	}
}

// laggingStore hides objects from Get for a while, as a store whose cache
// has not yet seen the event that triggered a reconcile.
type laggingStore struct {
	store.Store
	mu     sync.Mutex
	hidden map[string]time.Time // kind/namespace/name: visible from
}

func (l *laggingStore) hide(kind, ns, name string, d time.Duration) {
	l.mu.Lock()
	defer l.mu.Unlock()
	l.hidden[kind+"/"+ns+"/"+name] = time.Now().Add(d)
}

func (l *laggingStore) Get(ctx context.Context, kind, ns, name string) (*unstructured.Unstructured, error) {
	l.mu.Lock()
	until, ok := l.hidden[kind+"/"+ns+"/"+name]
	l.mu.Unlock()
	if ok && time.Now().Before(until) {
		return nil, fmt.Errorf("%s/%s/%s: %w", kind, ns, name, store.ErrNotFound)
	}
	return l.Store.Get(ctx, kind, ns, name)
}

// The manager's cache and the store's are separate informers: a reconcile
// may start before the store shows its object. It must be looked at again,
// not taken for deleted.
func TestStatusWhenStoreLags(t *testing.T) {
	if skip != "" {
		t.Skip(skip)
	}
	ctx := t.Context()
	st := openStore(t)
	lag := &laggingStore{Store: st, hidden: map[string]time.Time{}}
	runElected(t, operator.Options{LeaseName: "service-operator-lag", Store: lag})

	lagZone := storetest.Zone("lag.example", "")
	_ = unstructured.SetNestedField(lagZone.Object, "All", "spec", "recordSetNamespaces", "from") // admits namespace web
	if _, err := st.Apply(ctx, lagZone, store.ApplyOptions{Manager: store.ManagerAPI}); err != nil {
		t.Fatal(err)
	}
	lag.hide(store.KindDNSRecordSet, "web", "lag", 2*time.Second)
	if _, err := st.Apply(ctx, storetest.RecordSet("web", "lag", "lag.example", "192.0.2.3"), store.ApplyOptions{Manager: store.ManagerAPI}); err != nil {
		t.Fatal(err)
	}
	eventually(t, "record set status after the store caught up", func() bool {
		rs, err := st.Get(ctx, store.KindDNSRecordSet, "web", "lag")
		if err != nil {
			return false
		}
		conds, _, _ := unstructured.NestedSlice(rs.Object, "status", "conditions")
		for _, c := range conds {
			if m := c.(map[string]any); m["type"] == "Ready" {
				return m["status"] == "True"
			}
		}
		return false
	})
}

// TestTriggerQueuesOnTheControllersQueue: a reconcile asked for through a
// Trigger (a BlockList change re-checking the policies that name it) runs
// on the controller's own queue, one at a time with the reconciles its
// watch starts, instead of beside them (two status writes racing).
func TestTriggerQueuesOnTheControllersQueue(t *testing.T) {
	if skip != "" {
		t.Skip(skip)
	}
	ctx := t.Context()
	if err := env.Namespaces(ctx, kube.DefaultNamespace, "web"); err != nil {
		t.Fatal(err)
	}
	var mu sync.Mutex
	calls := map[string]int{}
	running, maxRunning := map[string]int{}, 0
	trig := operator.NewTrigger()
	rec := operator.ReconcilerFunc(func(ctx context.Context, ns, name string) (time.Duration, error) {
		k := ns + "/" + name
		mu.Lock()
		calls[k]++
		running[k]++
		maxRunning = max(maxRunning, running[k])
		mu.Unlock()
		time.Sleep(20 * time.Millisecond)
		mu.Lock()
		running[k]--
		mu.Unlock()
		return 0, nil
	})
	runElected(t, operator.Options{LeaseName: "trigger-test",
		Controllers: []operator.Controller{{Kind: "Policy", Reconciler: rec, Trigger: trig}}})
	for range 50 {
		if !trig.Enqueue("web", "kids") {
			t.Fatal("trigger refused with a running controller")
		}
	}
	eventually(t, "the triggered reconcile", func() bool {
		mu.Lock()
		defer mu.Unlock()
		return calls["web/kids"] > 0
	})
	time.Sleep(300 * time.Millisecond) // let any queued duplicates run
	mu.Lock()
	defer mu.Unlock()
	if maxRunning != 1 {
		t.Errorf("web/kids reconciled %d at a time, want 1", maxRunning)
	}
	if calls["web/kids"] >= 50 {
		t.Errorf("50 triggers ran %d reconciles: the queue did not fold duplicates", calls["web/kids"])
	}
	t.Logf("50 triggers for one policy: %d reconciles, at most %d at once", calls["web/kids"], maxRunning)
}

// runElected runs an operator with short lease timings until the test ends
// and waits (at most 30 s) until it leads.
func runElected(t *testing.T, opts operator.Options) *operator.Operator {
	t.Helper()
	opts.LeaseDuration, opts.RenewDeadline, opts.RetryPeriod = 3*time.Second, 2*time.Second, 500*time.Millisecond
	op, err := operator.New(env.Config, opts)
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(t.Context())
	done := make(chan error, 1)
	go func() { done <- op.Run(ctx) }()
	t.Cleanup(func() { cancel(); <-done })
	select {
	case <-op.Elected():
	case <-time.After(30 * time.Second):
		t.Fatal("operator not elected")
	}
	return op
}
