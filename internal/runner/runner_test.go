package runner_test

import (
	"context"
	"errors"
	"fmt"
	"path/filepath"
	"runtime"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"

	"github.com/svcdns/svc/api/v1alpha1"
	"github.com/svcdns/svc/controllers/policies"
	"github.com/svcdns/svc/internal/runner"
	"github.com/svcdns/svc/internal/store"
	"github.com/svcdns/svc/internal/store/sqlite"
	"github.com/svcdns/svc/internal/validation"
)

// openStore is a real SQLite store file admitted by the CRD validation.
func openStore(t *testing.T) store.Store {
	t.Helper()
	v, err := validation.New()
	if err != nil {
		t.Fatal(err)
	}
	st, err := sqlite.NewStore(t.Context(), filepath.Join(t.TempDir(), "state.db"), v, sqlite.Options{})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { st.Close() })
	return st
}

func applyPolicy(t *testing.T, st store.Store, name string, priority int64) {
	t.Helper()
	u := &unstructured.Unstructured{Object: map[string]any{
		"apiVersion": "service.io/v1alpha1", "kind": "Policy",
		"metadata": map[string]any{"name": name, "namespace": "default"},
		"spec":     map[string]any{"clientGroupRefs": []any{"kids"}, "priority": priority},
	}}
	if _, err := st.Apply(t.Context(), u, store.ApplyOptions{Manager: store.ManagerAPI}); err != nil {
		t.Fatalf("apply policy %s: %v", name, err)
	}
}

// run starts r and returns a stop that waits for Run to return.
func run(t *testing.T, r *runner.Runner) (stop func() error) {
	t.Helper()
	ctx, cancel := context.WithCancel(t.Context())
	done := make(chan error, 1)
	go func() { done <- r.Run(ctx) }()
	var once sync.Once
	var err error
	stop = func() error {
		once.Do(func() {
			cancel()
			select {
			case err = <-done:
			case <-time.After(10 * time.Second):
				err = errors.New("Run did not return within 10s of its context ending")
			}
		})
		return err
	}
	t.Cleanup(func() { _ = stop() })
	return stop
}

func waitFor(t *testing.T, what string, cond func() bool) {
	t.Helper()
	for deadline := time.Now().Add(10 * time.Second); time.Now().Before(deadline); time.Sleep(5 * time.Millisecond) {
		if cond() {
			return
		}
	}
	t.Fatalf("timed out waiting for %s", what)
}

// countingStore counts status writes and their conflicts, and how many run
// at once for one object.
type countingStore struct {
	store.Store
	mu                sync.Mutex
	inflight          map[string]int
	writes, conflicts int
	maxConcurrent     int
}

func (c *countingStore) UpdateStatus(ctx context.Context, u *unstructured.Unstructured) (*unstructured.Unstructured, error) {
	k := u.GetNamespace() + "/" + u.GetName()
	c.mu.Lock()
	c.inflight[k]++
	c.maxConcurrent = max(c.maxConcurrent, c.inflight[k])
	c.mu.Unlock()
	time.Sleep(5 * time.Millisecond) // widen the window a racing write would hit
	out, err := c.Store.UpdateStatus(ctx, u)
	c.mu.Lock()
	c.inflight[k]--
	if err == nil {
		c.writes++
	} else if errors.Is(err, store.ErrConflict) {
		c.conflicts++
	}
	c.mu.Unlock()
	return out, err
}

// slowChecker finds one problem per policy whose message carries the
// policy's priority, so every spec change needs a new status; it is slow,
// as the real check (it lists groups and lists) can be.
// Once counting (checks > 0), every check finds a new message.
type slowChecker struct{ checks *atomic.Int64 }

func (c slowChecker) CheckPolicy(_ context.Context, p *v1alpha1.Policy) ([]policies.Problem, error) {
	time.Sleep(10 * time.Millisecond)
	msg := fmt.Sprintf("priority %d", p.Spec.Priority)
	if c.checks.Load() > 0 {
		msg = fmt.Sprintf("check %d", c.checks.Add(1))
	}
	return []policies.Problem{{Reason: policies.ReasonUnknownService, Message: msg}}, nil
}

// Two changes of one Policy in quick succession, plus re-checks asked for
// from outside its watch (a list or group changed), never run two status
// writes for it at once: before, each event started its own goroutine, and
// with several workers and no per-key exclusion they raced into conflicts.
func TestPolicyStatusWritesAreSerialized(t *testing.T) {
	st := openStore(t)
	cs := &countingStore{Store: st, inflight: map[string]int{}}
	var checks atomic.Int64
	pols := &policies.Reconciler{Store: cs, Checker: slowChecker{&checks}, Now: time.Now}
	r, err := runner.New(st, nil, runner.Controller{Kind: policies.Kind, Reconciler: runner.ReconcilerFunc(
		func(ctx context.Context, ns, name string) (time.Duration, error) {
			_, err := pols.Reconcile(ctx, ns, name)
			return 0, err
		}), Workers: 4})
	if err != nil {
		t.Fatal(err)
	}
	applyPolicy(t, st, "p", 1)
	stop := run(t, r)
	q := r.Queue(policies.Kind)
	for round := int64(2); round <= 11; round++ {
		applyPolicy(t, st, "p", round)
		applyPolicy(t, st, "p", round+100) // the second change at once
		for range 5 {
			q.Enqueue("default", "p")
		}
	}
	waitFor(t, "the last change's status", func() bool {
		u, err := st.Get(t.Context(), policies.Kind, "default", "p")
		if err != nil {
			return false
		}
		conds, _, _ := unstructured.NestedSlice(u.Object, "status", "conditions")
		for _, c := range conds {
			if m, _ := c.(map[string]any); m["type"] == "Degraded" && m["message"] == "priority 111" {
				return true
			}
		}
		return false
	})
	// The spec changes above conflict with status writes that read the
	// object before them (retried); re-checks alone must never conflict.
	cs.mu.Lock()
	specConflicts, writes := cs.conflicts, cs.writes
	cs.mu.Unlock()
	checks.Store(1000) // every re-check now finds a new message: each one writes
	var wg sync.WaitGroup
	for range 5 {
		wg.Go(func() {
			for range 20 {
				q.Enqueue("default", "p")
				time.Sleep(time.Millisecond)
			}
		})
	}
	wg.Wait()
	waitFor(t, "the re-checks' writes", func() bool {
		cs.mu.Lock()
		defer cs.mu.Unlock()
		return cs.writes > writes && cs.inflight["default/p"] == 0
	})
	time.Sleep(100 * time.Millisecond)
	if err := stop(); err != nil {
		t.Fatal(err)
	}
	cs.mu.Lock()
	defer cs.mu.Unlock()
	t.Logf("status writes %d (%d for 100 re-checks), conflicts %d while specs changed, %d after; most at once for one policy %d",
		cs.writes, cs.writes-writes, specConflicts, cs.conflicts-specConflicts, cs.maxConcurrent)
	if cs.maxConcurrent != 1 {
		t.Errorf("status writes for one policy ran %d at once; want 1", cs.maxConcurrent)
	}
	if n := cs.conflicts - specConflicts; n != 0 {
		t.Errorf("%d conflicts between re-checks of one policy; want 0", n)
	}
}

// A burst of 1,000 changes to 10 objects is coalesced: while a reconcile is
// busy, the changes of every object wait as one key, and the last reconcile
// of each object sees its last change.
func TestBurstIsCoalesced(t *testing.T) {
	st := openStore(t)
	for i := range 10 {
		applyPolicy(t, st, fmt.Sprintf("p%d", i), 0)
	}
	gate := make(chan struct{})
	var calls atomic.Int64
	var mu sync.Mutex
	seen := map[string]int64{} // last priority each reconcile saw
	r, err := runner.New(st, nil, runner.Controller{Kind: policies.Kind, Reconciler: runner.ReconcilerFunc(
		func(ctx context.Context, ns, name string) (time.Duration, error) {
			calls.Add(1)
			select {
			case <-gate:
			case <-ctx.Done():
				return 0, ctx.Err()
			}
			u, err := st.Get(ctx, policies.Kind, ns, name)
			if err != nil {
				return 0, err
			}
			p, _, _ := unstructured.NestedInt64(u.Object, "spec", "priority")
			mu.Lock()
			seen[name] = p
			mu.Unlock()
			return 0, nil
		})})
	if err != nil {
		t.Fatal(err)
	}
	stop := run(t, r)
	waitFor(t, "the first reconcile", func() bool { return calls.Load() > 0 })
	for i := range 1000 {
		applyPolicy(t, st, fmt.Sprintf("p%d", i%10), int64(i/10+1))
	}
	time.Sleep(200 * time.Millisecond) // let the watch deliver the burst
	close(gate)
	waitFor(t, "every object's last change", func() bool {
		mu.Lock()
		defer mu.Unlock()
		for i := range 10 {
			if seen[fmt.Sprintf("p%d", i)] != 100 {
				return false
			}
		}
		return true
	})
	if err := stop(); err != nil {
		t.Fatal(err)
	}
	t.Logf("1000 changes to 10 objects: %d reconciles", calls.Load())
	// one per object for the list, one per object for the burst, and a
	// few for changes that arrived while their key was being reconciled
	if n := calls.Load(); n > 40 {
		t.Errorf("%d reconciles for 1000 changes to 10 objects; want them coalesced (at most 40)", n)
	}
}

// A failing reconcile is retried with growing waits until it succeeds, and
// the first pass reports the failure on Initial.
func TestFailingReconcileIsRetriedWithBackoff(t *testing.T) {
	st := openStore(t)
	applyPolicy(t, st, "p", 1)
	var mu sync.Mutex
	var at []time.Time
	initial := make(chan error, 1)
	r, err := runner.New(st, nil, runner.Controller{Kind: policies.Kind, MinBackoff: 20 * time.Millisecond, MaxBackoff: time.Second,
		Initial: initial, Reconciler: runner.ReconcilerFunc(func(ctx context.Context, ns, name string) (time.Duration, error) {
			mu.Lock()
			defer mu.Unlock()
			at = append(at, time.Now())
			if len(at) <= 4 {
				return 0, fmt.Errorf("attempt %d fails", len(at))
			}
			return 0, nil
		})})
	if err != nil {
		t.Fatal(err)
	}
	stop := run(t, r)
	select {
	case err := <-initial:
		if err == nil || err.Error() != "attempt 1 fails" {
			t.Errorf("initial pass reported %v, want attempt 1's error", err)
		}
	case <-time.After(10 * time.Second):
		t.Fatal("no initial pass")
	}
	waitFor(t, "the fifth attempt", func() bool { mu.Lock(); defer mu.Unlock(); return len(at) >= 5 })
	time.Sleep(300 * time.Millisecond) // a success is not retried
	if err := stop(); err != nil {
		t.Fatal(err)
	}
	mu.Lock()
	defer mu.Unlock()
	if len(at) != 5 {
		t.Errorf("%d attempts, want 5 (4 failures, then success, then none)", len(at))
	}
	for i := 1; i < len(at); i++ {
		gap, want := at[i].Sub(at[i-1]), 20*time.Millisecond<<(i-1)
		t.Logf("retry %d after %v", i, gap.Round(time.Millisecond))
		if gap < want*9/10 {
			t.Errorf("retry %d after %v, want at least %v (exponential backoff)", i, gap, want)
		}
	}
}

// Stopping the runner while a reconcile is in flight returns once it has
// returned, and leaves no goroutine behind (watch, queues, workers).
func TestShutdownLeavesNoGoroutines(t *testing.T) {
	st := openStore(t)
	applyPolicy(t, st, "p", 1)
	time.Sleep(50 * time.Millisecond)
	before := runtime.NumGoroutine()
	inflight := make(chan struct{})
	var once sync.Once
	r, err := runner.New(st, nil,
		runner.Controller{Kind: policies.Kind, Workers: 3, Reconciler: runner.ReconcilerFunc(func(ctx context.Context, ns, name string) (time.Duration, error) {
			once.Do(func() { close(inflight) })
			<-ctx.Done()
			return 0, ctx.Err()
		})},
		runner.Controller{Kind: policies.GroupKind, Reconciler: runner.ReconcilerFunc(func(context.Context, string, string) (time.Duration, error) {
			return time.Hour, nil // a pending delayed add must not hold a goroutine either
		})})
	if err != nil {
		t.Fatal(err)
	}
	stop := run(t, r)
	<-inflight
	if err := stop(); err != nil {
		t.Fatal(err)
	}
	var now int
	for range 200 {
		if now = runtime.NumGoroutine(); now <= before {
			return
		}
		time.Sleep(10 * time.Millisecond)
	}
	buf := make([]byte, 1<<16)
	t.Errorf("%d goroutines after stop, %d before:\n%s", now, before, buf[:runtime.Stack(buf, true)])
}

// A closed store ends Run with its error instead of a silent stop.
func TestClosedStoreEndsRun(t *testing.T) {
	st := openStore(t)
	r, err := runner.New(st, nil, runner.Controller{Kind: policies.Kind, Reconciler: runner.ReconcilerFunc(
		func(context.Context, string, string) (time.Duration, error) { return 0, nil })})
	if err != nil {
		t.Fatal(err)
	}
	done := make(chan error, 1)
	go func() { done <- r.Run(t.Context()) }()
	time.Sleep(100 * time.Millisecond)
	st.Close()
	select {
	case err := <-done:
		if !errors.Is(err, store.ErrClosed) {
			t.Errorf("Run returned %v, want ErrClosed", err)
		}
	case <-time.After(10 * time.Second):
		t.Fatal("Run did not end after the store closed")
	}
}
