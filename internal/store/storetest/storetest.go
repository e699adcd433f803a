// Package storetest is the conformance suite every store driver passes: the
// sqlite driver runs it on a temp file, the kube driver on envtest.
package storetest

import (
	"context"
	"errors"
	"fmt"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/labels"

	"github.com/svcdns/svc/internal/store"
)

// Run runs the suite; newStore returns an empty store that the test closes.
func Run(t *testing.T, newStore func(t *testing.T) store.Store) {
	tests := []struct {
		name string
		fn   func(t *testing.T, s store.Store)
	}{
		{"CreateUpdateUnchanged", testCreateUpdateUnchanged},
		{"DefaultingIsUnchanged", testDefaultingIsUnchanged},
		{"Preconditions", testPreconditions},
		{"DryRun", testDryRun},
		{"ManagedBy", testManagedBy},
		{"StatusPreserved", testStatusPreserved},
		{"Invalid", testInvalid},
		{"SizeCap", testSizeCap},
		{"LabelSelector", testLabelSelector},
		{"PagingExactlyOnceWhileAdding", testPagingWhileAdding},
		{"ConcurrentStaleApplies", testConcurrentStaleApplies},
		{"NoLostUpdate", testNoLostUpdate},
		{"WatchFromVersion", testWatchFromVersion},
		{"WatchLiveNoGapsNoDuplicates", testWatchLive},
		{"WatchInitialState", testWatchInitial},
		{"SlowWatcherDoesNotBlockWriters", testSlowWatcher},
		{"Delete", testDelete},
		{"ZoneDelete", testZoneDelete},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			s := newStore(t)
			tc.fn(t, s)
		})
	}
}

func ctxFor(t *testing.T) context.Context {
	ctx, cancel := context.WithTimeout(t.Context(), 60*time.Second)
	t.Cleanup(cancel)
	return ctx
}

// Zone builds a DNSZone object.
func Zone(name, zoneName string) *unstructured.Unstructured {
	u := &unstructured.Unstructured{Object: map[string]any{
		"apiVersion": "service.io/v1alpha1",
		"kind":       store.KindDNSZone,
		"metadata":   map[string]any{"name": name},
		"spec":       map[string]any{},
	}}
	if zoneName != "" {
		_ = unstructured.SetNestedField(u.Object, zoneName, "spec", "zoneName")
	}
	return u
}

// RecordSet builds a DNSRecordSet in zone with one A endpoint per target.
func RecordSet(namespace, name, zone string, targets ...string) *unstructured.Unstructured {
	ts := make([]any, len(targets))
	for i, t := range targets {
		ts[i] = t
	}
	return &unstructured.Unstructured{Object: map[string]any{
		"apiVersion": "service.io/v1alpha1",
		"kind":       store.KindDNSRecordSet,
		"metadata":   map[string]any{"name": name, "namespace": namespace},
		"spec": map[string]any{
			"zoneRef": map[string]any{"name": zone},
			"endpoints": []any{map[string]any{
				"dnsName": name + "." + zone, "recordType": "A", "targets": ts,
			}},
		},
	}}
}

func mustApply(t *testing.T, s store.Store, obj *unstructured.Unstructured, m store.Manager) store.ApplyResult {
	t.Helper()
	res, err := s.Apply(ctxFor(t), obj, store.ApplyOptions{Manager: m})
	if err != nil {
		t.Fatalf("apply %s/%s: %v", obj.GetKind(), obj.GetName(), err)
	}
	return res
}

func version(t *testing.T, rv string) int64 {
	t.Helper()
	v, err := strconv.ParseInt(rv, 10, 64)
	if err != nil || v <= 0 {
		t.Fatalf("resourceVersion %q is not a positive decimal", rv)
	}
	return v
}

func testCreateUpdateUnchanged(t *testing.T, s store.Store) {
	ctx := ctxFor(t)
	rs := RecordSet("default", "www", "example.com", "192.0.2.1")
	r1 := mustApply(t, s, rs, store.ManagerAPI)
	if r1.Result != store.Created {
		t.Fatalf("first apply: %s, want created", r1.Result)
	}
	o := r1.Object
	created := o.GetCreationTimestamp()
	if o.GetGeneration() != 1 || o.GetUID() == "" || created.IsZero() {
		t.Fatalf("created object: generation %d uid %q creationTimestamp %v", o.GetGeneration(), o.GetUID(), o.GetCreationTimestamp())
	}
	if o.GetAnnotations()[store.ManagerAnnotation] != "api" {
		t.Fatalf("managed-by annotation %q, want api", o.GetAnnotations()[store.ManagerAnnotation])
	}
	v1 := version(t, r1.ResourceVersion)

	r2 := mustApply(t, s, rs, store.ManagerAPI)
	if r2.Result != store.Unchanged || r2.ResourceVersion != r1.ResourceVersion {
		t.Fatalf("re-apply: %s at %s, want unchanged at %s", r2.Result, r2.ResourceVersion, r1.ResourceVersion)
	}

	withLabel := rs.DeepCopy()
	withLabel.SetLabels(map[string]string{"team": "a"})
	r3 := mustApply(t, s, withLabel, store.ManagerAPI)
	if r3.Result != store.Updated || r3.Object.GetGeneration() != 1 {
		t.Fatalf("label change: %s generation %d, want updated generation 1", r3.Result, r3.Object.GetGeneration())
	}
	v3 := version(t, r3.ResourceVersion)
	if v3 <= v1 {
		t.Fatalf("version did not grow: %d then %d", v1, v3)
	}

	spec := RecordSet("default", "www", "example.com", "192.0.2.2")
	spec.SetLabels(map[string]string{"team": "a"})
	r4 := mustApply(t, s, spec, store.ManagerAPI)
	if r4.Result != store.Updated || r4.Object.GetGeneration() != 2 {
		t.Fatalf("spec change: %s generation %d, want updated generation 2", r4.Result, r4.Object.GetGeneration())
	}
	if r4.Object.GetUID() != o.GetUID() || !r4.Object.GetCreationTimestamp().Time.Equal(created.Time) {
		t.Fatalf("uid or creationTimestamp changed on update")
	}
	got, err := s.Get(ctx, store.KindDNSRecordSet, "default", "www")
	if err != nil {
		t.Fatal(err)
	}
	if got.GetResourceVersion() != r4.ResourceVersion {
		t.Fatalf("get: version %s, want %s", got.GetResourceVersion(), r4.ResourceVersion)
	}
	ts, _, _ := unstructured.NestedSlice(got.Object, "spec", "endpoints")
	if fmt.Sprint(ts) != fmt.Sprint([]any{map[string]any{"dnsName": "www.example.com", "recordType": "A", "targets": []any{"192.0.2.2"}}}) {
		t.Fatalf("stored endpoints %v", ts)
	}
}

func testDefaultingIsUnchanged(t *testing.T, s store.Store) {
	r1 := mustApply(t, s, Zone("example.com", ""), store.ManagerAPI)
	if typ, _, _ := unstructured.NestedString(r1.Object.Object, "spec", "type"); typ != "primary" {
		t.Fatalf("spec.type not defaulted: %q", typ)
	}
	r2 := mustApply(t, s, Zone("example.com", ""), store.ManagerAPI)
	if r2.Result != store.Unchanged {
		t.Fatalf("re-apply of a defaulted object: %s, want unchanged", r2.Result)
	}
}

func testPreconditions(t *testing.T, s store.Store) {
	ctx := ctxFor(t)
	if _, err := s.Apply(ctx, RecordSet("ns", "a", "z", "192.0.2.1"), store.ApplyOptions{Manager: store.ManagerAPI, ResourceVersion: "5"}); !errors.Is(err, store.ErrPrecondition) {
		t.Fatalf("apply with a version to a missing object: %v, want ErrPrecondition", err)
	}
	r1 := mustApply(t, s, RecordSet("ns", "a", "z", "192.0.2.1"), store.ManagerAPI)
	r2, err := s.Apply(ctx, RecordSet("ns", "a", "z", "192.0.2.2"), store.ApplyOptions{Manager: store.ManagerAPI, ResourceVersion: r1.ResourceVersion})
	if err != nil || r2.Result != store.Updated {
		t.Fatalf("apply with the current version: %v %v", r2.Result, err)
	}
	if _, err := s.Apply(ctx, RecordSet("ns", "a", "z", "192.0.2.3"), store.ApplyOptions{Manager: store.ManagerAPI, ResourceVersion: r1.ResourceVersion}); !errors.Is(err, store.ErrPrecondition) {
		t.Fatalf("apply with a stale version: %v, want ErrPrecondition", err)
	}
	if err := s.Delete(ctx, store.KindDNSRecordSet, "ns", "a", store.DeleteOptions{ResourceVersion: r1.ResourceVersion}); !errors.Is(err, store.ErrPrecondition) {
		t.Fatalf("delete with a stale version: %v, want ErrPrecondition", err)
	}
	if err := s.Delete(ctx, store.KindDNSRecordSet, "ns", "a", store.DeleteOptions{ResourceVersion: r2.ResourceVersion}); err != nil {
		t.Fatalf("delete with the current version: %v", err)
	}
}

func testDryRun(t *testing.T, s store.Store) {
	ctx := ctxFor(t)
	dry := store.ApplyOptions{Manager: store.ManagerAPI, DryRun: true}
	r, err := s.Apply(ctx, RecordSet("ns", "dry", "z", "192.0.2.1"), dry)
	if err != nil || r.Result != store.Created {
		t.Fatalf("dry-run create: %v %v", r.Result, err)
	}
	if _, err := s.Get(ctx, store.KindDNSRecordSet, "ns", "dry"); !errors.Is(err, store.ErrNotFound) {
		t.Fatalf("dry run stored the object: %v", err)
	}
	if _, err := s.Apply(ctx, RecordSet("ns", "dry", "", "192.0.2.1"), dry); !errors.Is(err, store.ErrInvalid) {
		t.Fatalf("dry run of an invalid object: %v, want ErrInvalid", err)
	}
	real := mustApply(t, s, RecordSet("ns", "dry", "z", "192.0.2.1"), "file:a.yaml")
	if _, err := s.Apply(ctx, RecordSet("ns", "dry", "z", "192.0.2.2"), dry); !errors.As(err, new(*store.ManagedByError)) {
		t.Fatalf("dry run over another manager: %v, want ManagedByError", err)
	}
	r, err = s.Apply(ctx, RecordSet("ns", "dry", "z", "192.0.2.2"), store.ApplyOptions{Manager: "file:a.yaml", DryRun: true})
	if err != nil || r.Result != store.Updated {
		t.Fatalf("dry-run update: %v %v", r.Result, err)
	}
	got, _ := s.Get(ctx, store.KindDNSRecordSet, "ns", "dry")
	if got.GetResourceVersion() != real.ResourceVersion {
		t.Fatal("dry-run update changed the stored object")
	}
}

func testManagedBy(t *testing.T, s store.Store) {
	ctx := ctxFor(t)
	file := store.Manager("file:objects.d/zones.yaml")
	mustApply(t, s, Zone("example.org", ""), file)
	_, err := s.Apply(ctx, Zone("example.org", ""), store.ApplyOptions{Manager: store.ManagerAPI})
	var mb *store.ManagedByError
	if !errors.As(err, &mb) || mb.Owner != file {
		t.Fatalf("apply over a file-managed object: %v, want ManagedByError{%s}", err, file)
	}
	if err := s.Delete(ctx, store.KindDNSZone, "", "example.org", store.DeleteOptions{Manager: store.ManagerAPI}); !errors.As(err, &mb) {
		t.Fatalf("delete of a file-managed object by api: %v, want ManagedByError", err)
	}
	if _, err := s.Get(ctx, store.KindDNSZone, "", "example.org"); err != nil {
		t.Fatalf("refused delete removed the object: %v", err)
	}
	// An annotation in the input cannot claim another manager's object.
	claim := Zone("example.org", "")
	claim.SetAnnotations(map[string]string{store.ManagerAnnotation: "api"})
	if _, err := s.Apply(ctx, claim, store.ApplyOptions{Manager: store.ManagerAPI}); !errors.As(err, &mb) {
		t.Fatalf("apply carrying a managed-by annotation: %v, want ManagedByError", err)
	}
	if err := s.Delete(ctx, store.KindDNSZone, "", "example.org", store.DeleteOptions{Manager: file}); err != nil {
		t.Fatalf("delete by the owner: %v", err)
	}
}

func testStatusPreserved(t *testing.T, s store.Store) {
	ctx := ctxFor(t)
	r1 := mustApply(t, s, RecordSet("ns", "st", "z", "192.0.2.1"), store.ManagerAPI)
	withStatus := r1.Object.DeepCopy()
	_ = unstructured.SetNestedField(withStatus.Object, int64(1), "status", "observedGeneration")
	_ = unstructured.SetNestedField(withStatus.Object, int64(1), "status", "names")
	// A spec change in the status write is ignored.
	_ = unstructured.SetNestedField(withStatus.Object, "other", "spec", "zoneRef", "name")
	st, err := s.UpdateStatus(ctx, withStatus)
	if err != nil {
		t.Fatalf("update status: %v", err)
	}
	if ref, _, _ := unstructured.NestedString(st.Object, "spec", "zoneRef", "name"); ref != "z" || st.GetGeneration() != 1 {
		t.Fatalf("status write changed spec (%q) or generation (%d)", ref, st.GetGeneration())
	}
	if version(t, st.GetResourceVersion()) <= version(t, r1.ResourceVersion) {
		t.Fatalf("status write did not bump the version")
	}
	if _, err := s.UpdateStatus(ctx, withStatus); !errors.Is(err, store.ErrConflict) {
		t.Fatalf("status write with a stale version: %v, want ErrConflict", err)
	}

	in := RecordSet("ns", "st", "z", "192.0.2.9")
	_ = unstructured.SetNestedField(in.Object, int64(99), "status", "names")
	r2 := mustApply(t, s, in, store.ManagerAPI)
	if n, _, _ := unstructured.NestedInt64(r2.Object.Object, "status", "names"); n != 1 {
		t.Fatalf("apply changed status.names to %d, want 1 kept", n)
	}
	if r2.Object.GetGeneration() != 2 {
		t.Fatalf("generation %d after spec change, want 2", r2.Object.GetGeneration())
	}
	got, _ := s.Get(ctx, store.KindDNSRecordSet, "ns", "st")
	if n, _, _ := unstructured.NestedInt64(got.Object, "status", "observedGeneration"); n != 1 {
		t.Fatalf("stored status.observedGeneration %d, want 1", n)
	}
	if _, err := s.UpdateStatus(ctx, RecordSet("ns", "missing", "z", "192.0.2.1")); !errors.Is(err, store.ErrNotFound) {
		t.Fatalf("status of a missing object: %v, want ErrNotFound", err)
	}
}

func testInvalid(t *testing.T, s store.Store) {
	ctx := ctxFor(t)
	bad := RecordSet("ns", "bad", "", "192.0.2.1")
	_, err := s.Apply(ctx, bad, store.ApplyOptions{Manager: store.ManagerAPI})
	if !errors.Is(err, store.ErrInvalid) || !strings.Contains(err.Error(), "spec.zoneRef") {
		t.Fatalf("apply without zoneRef: %v, want ErrInvalid naming spec.zoneRef", err)
	}
	if _, err := s.Get(ctx, store.KindDNSRecordSet, "ns", "bad"); !errors.Is(err, store.ErrNotFound) {
		t.Fatalf("invalid object was stored: %v", err)
	}
	mustApply(t, s, RecordSet("ns", "imm", "z1", "192.0.2.1"), store.ManagerAPI)
	if _, err := s.Apply(ctx, RecordSet("ns", "imm", "z2", "192.0.2.1"), store.ApplyOptions{Manager: store.ManagerAPI}); !errors.Is(err, store.ErrInvalid) {
		t.Fatalf("changing an immutable field: %v, want ErrInvalid (old object passed to the admitter)", err)
	}
	if _, err := s.Apply(ctx, RecordSet("ns", "x", "z", "192.0.2.1"), store.ApplyOptions{}); !errors.Is(err, store.ErrInvalid) {
		t.Fatalf("apply without a manager: %v, want ErrInvalid", err)
	}
}

// bigRecordSet is a valid record set of about size bytes of JSON (the
// schema caps annotations well below the store's limit, targets it does not).
func bigRecordSet(name string, size int) *unstructured.Unstructured {
	const each = 1000
	targets := make([]string, size/(each+3))
	for i := range targets {
		targets[i] = fmt.Sprintf("%04d", i) + strings.Repeat("x", each-4)
	}
	return asTXT(RecordSet("ns", name, "z", targets...))
}

// asTXT makes a RecordSet's endpoint TXT: free text passes the admitter's
// parse of every target (an A target must be an address).
func asTXT(u *unstructured.Unstructured) *unstructured.Unstructured {
	eps, _, _ := unstructured.NestedSlice(u.Object, "spec", "endpoints")
	eps[0].(map[string]any)["recordType"] = "TXT"
	_ = unstructured.SetNestedSlice(u.Object, eps, "spec", "endpoints")
	return u
}

func testSizeCap(t *testing.T, s store.Store) {
	ctx := ctxFor(t)
	if _, err := s.Apply(ctx, bigRecordSet("big", store.MaxObjectBytes+4096), store.ApplyOptions{Manager: store.ManagerAPI}); !errors.Is(err, store.ErrTooLarge) {
		t.Fatalf("apply over %d bytes: %v, want ErrTooLarge", store.MaxObjectBytes, err)
	}
	if _, err := s.Get(ctx, store.KindDNSRecordSet, "ns", "big"); !errors.Is(err, store.ErrNotFound) {
		t.Fatalf("oversized object stored: %v", err)
	}
	// Just under the cap is stored.
	if _, err := s.Apply(ctx, bigRecordSet("big", store.MaxObjectBytes-8192), store.ApplyOptions{Manager: store.ManagerAPI}); err != nil {
		t.Fatalf("apply just under the cap: %v", err)
	}
}

func testLabelSelector(t *testing.T, s store.Store) {
	ctx := ctxFor(t)
	for i := range 30 {
		rs := RecordSet("ns", fmt.Sprintf("r%02d", i), "z", "192.0.2.1")
		team := "a"
		if i%3 == 0 {
			team = "b"
		}
		rs.SetLabels(map[string]string{"team": team})
		mustApply(t, s, rs, store.ManagerAPI)
	}
	mustApply(t, s, RecordSet("other", "r99", "z", "192.0.2.1"), store.ManagerAPI)
	sel, err := labels.Parse("team=b")
	if err != nil {
		t.Fatal(err)
	}
	cases := []struct {
		name  string
		opts  store.ListOptions
		want  int
		pages int // at most
	}{
		{"all", store.ListOptions{Kind: store.KindDNSRecordSet}, 31, 1},
		{"namespace", store.ListOptions{Kind: store.KindDNSRecordSet, Namespace: "ns"}, 30, 1},
		{"selector", store.ListOptions{Kind: store.KindDNSRecordSet, Selector: sel}, 10, 1},
		{"selector paged", store.ListOptions{Kind: store.KindDNSRecordSet, Selector: sel, Limit: 3}, 10, 5},
		{"other kind", store.ListOptions{Kind: store.KindDNSZone}, 0, 1},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			items, pages := listAll(t, ctx, s, tc.opts)
			if len(items) != tc.want || pages > tc.pages {
				t.Fatalf("got %d items in %d pages, want %d in at most %d", len(items), pages, tc.want, tc.pages)
			}
			for _, it := range items {
				if tc.opts.Selector != nil && !tc.opts.Selector.Matches(labels.Set(it.GetLabels())) {
					t.Fatalf("%s does not match the selector", it.GetName())
				}
			}
		})
	}
	if _, err := s.List(ctx, store.ListOptions{Kind: store.KindDNSRecordSet, Continue: "not a token"}); !errors.Is(err, store.ErrInvalid) {
		t.Fatalf("malformed continue: %v, want ErrInvalid", err)
	}
}

func listAll(t *testing.T, ctx context.Context, s store.Store, opts store.ListOptions) ([]*unstructured.Unstructured, int) {
	t.Helper()
	var out []*unstructured.Unstructured
	for pages := 1; pages < 100000; pages++ {
		res, err := s.List(ctx, opts)
		if err != nil {
			t.Fatalf("list page %d: %v", pages, err)
		}
		if opts.Limit > 0 && len(res.Items) > opts.Limit {
			t.Fatalf("page of %d items over limit %d", len(res.Items), opts.Limit)
		}
		out = append(out, res.Items...)
		if res.Continue == "" {
			return out, pages
		}
		opts.Continue = res.Continue
	}
	t.Fatal("paging did not end")
	return nil, 0
}

func testPagingWhileAdding(t *testing.T, s store.Store) {
	ctx := ctxFor(t)
	const n = 200
	for i := range n {
		mustApply(t, s, RecordSet("ns", fmt.Sprintf("k%04d", i*2), "z", "192.0.2.1"), store.ManagerAPI)
	}
	done := make(chan error, 1)
	go func() {
		// Odd names land between the existing ones, ahead of and behind the cursor.
		for i := range n {
			if _, err := s.Apply(ctx, RecordSet("ns", fmt.Sprintf("k%04d", i*2+1), "z", "192.0.2.1"), store.ApplyOptions{Manager: store.ManagerAPI}); err != nil {
				done <- err
				return
			}
		}
		done <- nil
	}()
	items, _ := listAll(t, ctx, s, store.ListOptions{Kind: store.KindDNSRecordSet, Limit: 7})
	if err := <-done; err != nil {
		t.Fatal(err)
	}
	seen := map[string]int{}
	for _, it := range items {
		seen[it.GetName()]++
	}
	for name, c := range seen {
		if c != 1 {
			t.Fatalf("%s listed %d times", name, c)
		}
	}
	for i := range n {
		if seen[fmt.Sprintf("k%04d", i*2)] != 1 {
			t.Fatalf("k%04d, present throughout, was not listed", i*2)
		}
	}
}

func testConcurrentStaleApplies(t *testing.T, s store.Store) {
	ctx := ctxFor(t)
	base := mustApply(t, s, RecordSet("ns", "race", "z", "192.0.2.0"), store.ManagerAPI)
	const workers = 16
	var wg sync.WaitGroup
	errs := make([]error, workers)
	for i := range workers {
		wg.Go(func() {
			_, errs[i] = s.Apply(ctx, RecordSet("ns", "race", "z", fmt.Sprintf("192.0.2.%d", i+1)),
				store.ApplyOptions{Manager: store.ManagerAPI, ResourceVersion: base.ResourceVersion})
		})
	}
	wg.Wait()
	winner := -1
	for i, err := range errs {
		switch {
		case err == nil:
			if winner >= 0 {
				t.Fatalf("workers %d and %d both won", winner, i)
			}
			winner = i
		case errors.Is(err, store.ErrConflict), errors.Is(err, store.ErrPrecondition):
		default:
			t.Fatalf("worker %d: %v, want ErrConflict or ErrPrecondition", i, err)
		}
	}
	if winner < 0 {
		t.Fatal("no worker won")
	}
	got, err := s.Get(ctx, store.KindDNSRecordSet, "ns", "race")
	if err != nil {
		t.Fatal(err)
	}
	if c := store.RecordCount(got); c != 1 || !strings.Contains(fmt.Sprint(got.Object["spec"]), fmt.Sprintf("192.0.2.%d]", winner+1)) {
		t.Fatalf("stored %v, want the winner's target 192.0.2.%d", got.Object["spec"], winner+1)
	}
}

// testNoLostUpdate runs read-modify-write loops with preconditions: every
// increment that succeeded is in the final object.
func testNoLostUpdate(t *testing.T, s store.Store) {
	ctx := ctxFor(t)
	mustApply(t, s, asTXT(RecordSet("ns", "counter", "z", "0")), store.ManagerAPI)
	const workers, each = 4, 10
	var wg sync.WaitGroup
	errc := make(chan error, workers)
	for range workers {
		wg.Go(func() {
			for done, tries := 0, 0; done < each; tries++ {
				if tries > 1000 {
					errc <- errors.New("too many retries")
					return
				}
				cur, err := s.Get(ctx, store.KindDNSRecordSet, "ns", "counter")
				if err != nil {
					errc <- err
					return
				}
				eps, _, _ := unstructured.NestedSlice(cur.Object, "spec", "endpoints")
				n, _ := strconv.Atoi(eps[0].(map[string]any)["targets"].([]any)[0].(string))
				_, err = s.Apply(ctx, asTXT(RecordSet("ns", "counter", "z", strconv.Itoa(n+1))),
					store.ApplyOptions{Manager: store.ManagerAPI, ResourceVersion: cur.GetResourceVersion()})
				switch {
				case err == nil:
					done++
				case errors.Is(err, store.ErrConflict), errors.Is(err, store.ErrPrecondition):
				default:
					errc <- err
					return
				}
			}
		})
	}
	wg.Wait()
	close(errc)
	for err := range errc {
		t.Fatal(err)
	}
	got, _ := s.Get(ctx, store.KindDNSRecordSet, "ns", "counter")
	eps, _, _ := unstructured.NestedSlice(got.Object, "spec", "endpoints")
	if n := eps[0].(map[string]any)["targets"].([]any)[0]; n != strconv.Itoa(workers*each) {
		t.Fatalf("counter %v, want %d: an update was lost", n, workers*each)
	}
}

// collect reads n events or fails after a timeout.
func collect(t *testing.T, ch <-chan store.Event, n int) []store.Event {
	t.Helper()
	var out []store.Event
	timeout := time.After(30 * time.Second)
	for len(out) < n {
		select {
		case ev, ok := <-ch:
			if !ok {
				t.Fatalf("watch closed after %d of %d events", len(out), n)
			}
			if ev.Type == store.Error {
				t.Fatalf("watch error after %d events: %v", len(out), ev.Err)
			}
			out = append(out, ev)
		case <-timeout:
			t.Fatalf("timed out after %d of %d events", len(out), n)
		}
	}
	return out
}

// expectQuiet fails when the watch delivers another event soon.
func expectQuiet(t *testing.T, ch <-chan store.Event) {
	t.Helper()
	select {
	case ev := <-ch:
		t.Fatalf("unexpected event %s %s at %s", ev.Type, ev.Object.GetName(), ev.Object.GetResourceVersion())
	case <-time.After(200 * time.Millisecond):
	}
}

func testWatchFromVersion(t *testing.T, s store.Store) {
	ctx := ctxFor(t)
	start := mustApply(t, s, RecordSet("ns", "before", "z", "192.0.2.1"), store.ManagerAPI)
	type want struct {
		typ  store.EventType
		name string
	}
	var wants []want
	for i := range 10 {
		mustApply(t, s, RecordSet("ns", fmt.Sprintf("w%d", i), "z", "192.0.2.1"), store.ManagerAPI)
		wants = append(wants, want{store.Added, fmt.Sprintf("w%d", i)})
	}
	mustApply(t, s, Zone("watched.example", ""), store.ManagerAPI) // another kind
	mustApply(t, s, RecordSet("ns", "w3", "z", "192.0.2.9"), store.ManagerAPI)
	wants = append(wants, want{store.Modified, "w3"})
	if err := s.Delete(ctx, store.KindDNSRecordSet, "ns", "w5", store.DeleteOptions{}); err != nil {
		t.Fatal(err)
	}
	wants = append(wants, want{store.Deleted, "w5"})

	wctx, cancel := context.WithCancel(ctx)
	defer cancel()
	ch, err := s.Watch(wctx, store.WatchOptions{Kind: store.KindDNSRecordSet, ResourceVersion: start.ResourceVersion})
	if err != nil {
		t.Fatal(err)
	}
	evs := collect(t, ch, len(wants))
	last := version(t, start.ResourceVersion)
	for i, ev := range evs {
		if ev.Type != wants[i].typ || ev.Object.GetName() != wants[i].name {
			t.Fatalf("event %d: %s %s, want %s %s", i, ev.Type, ev.Object.GetName(), wants[i].typ, wants[i].name)
		}
		v := version(t, ev.Object.GetResourceVersion())
		if v <= last {
			t.Fatalf("event %d: version %d not after %d", i, v, last)
		}
		last = v
	}
	expectQuiet(t, ch)
	// A live change follows the replay.
	mustApply(t, s, RecordSet("ns", "after", "z", "192.0.2.1"), store.ManagerAPI)
	if ev := collect(t, ch, 1)[0]; ev.Type != store.Added || ev.Object.GetName() != "after" {
		t.Fatalf("live event %s %s, want ADDED after", ev.Type, ev.Object.GetName())
	}
	cancel()
	for range ch { // closed when the context ends
	}
}

func testWatchLive(t *testing.T, s store.Store) {
	ctx := ctxFor(t)
	wctx, cancel := context.WithCancel(ctx)
	defer cancel()
	ch, err := s.Watch(wctx, store.WatchOptions{Kind: store.KindDNSRecordSet})
	if err != nil {
		t.Fatal(err)
	}
	const writers, each = 4, 50
	var wg sync.WaitGroup
	for w := range writers {
		wg.Go(func() {
			for i := range each {
				if _, err := s.Apply(ctx, RecordSet("ns", fmt.Sprintf("live-%d-%d", w, i), "z", "192.0.2.1"), store.ApplyOptions{Manager: store.ManagerAPI}); err != nil {
					t.Error(err)
					return
				}
			}
		})
	}
	evs := collect(t, ch, writers*each)
	wg.Wait()
	seen := map[string]bool{}
	var last int64
	for _, ev := range evs {
		v := version(t, ev.Object.GetResourceVersion())
		if v <= last {
			t.Fatalf("versions out of order: %d after %d", v, last)
		}
		last = v
		if seen[ev.Object.GetName()] {
			t.Fatalf("duplicate event for %s", ev.Object.GetName())
		}
		seen[ev.Object.GetName()] = true
	}
	expectQuiet(t, ch)
}

func testWatchInitial(t *testing.T, s store.Store) {
	ctx := ctxFor(t)
	mustApply(t, s, RecordSet("ns", "a", "z", "192.0.2.1"), store.ManagerAPI)
	mustApply(t, s, RecordSet("ns", "b", "z", "192.0.2.1"), store.ManagerAPI)
	mustApply(t, s, Zone("z.example", ""), store.ManagerAPI)
	wctx, cancel := context.WithCancel(ctx)
	defer cancel()
	ch, err := s.Watch(wctx, store.WatchOptions{Kind: store.KindDNSRecordSet})
	if err != nil {
		t.Fatal(err)
	}
	evs := collect(t, ch, 2)
	for _, ev := range evs {
		if ev.Type != store.Added {
			t.Fatalf("initial event %s, want ADDED", ev.Type)
		}
	}
	expectQuiet(t, ch)
	if err := s.Delete(ctx, store.KindDNSRecordSet, "ns", "a", store.DeleteOptions{}); err != nil {
		t.Fatal(err)
	}
	if ev := collect(t, ch, 1)[0]; ev.Type != store.Deleted || ev.Object.GetName() != "a" {
		t.Fatalf("got %s %s, want DELETED a", ev.Type, ev.Object.GetName())
	}
}

func testSlowWatcher(t *testing.T, s store.Store) {
	ctx := ctxFor(t)
	wctx, cancel := context.WithCancel(ctx)
	defer cancel()
	ch, err := s.Watch(wctx, store.WatchOptions{})
	if err != nil {
		t.Fatal(err)
	}
	// Nobody reads ch while 600 writes commit: more than any channel buffer.
	const n = 600
	deadline := time.Now().Add(45 * time.Second)
	for i := range n {
		if time.Now().After(deadline) {
			t.Fatalf("writes stalled behind an unread watch after %d", i)
		}
		mustApply(t, s, RecordSet("ns", fmt.Sprintf("slow-%d", i), "z", "192.0.2.1"), store.ManagerAPI)
	}
	// The watcher then gets every change, or an error telling it to relist.
	got := 0
	timeout := time.After(30 * time.Second)
	for got < n {
		select {
		case ev, ok := <-ch:
			if !ok || ev.Type == store.Error {
				return
			}
			got++
		case <-timeout:
			t.Fatalf("slow watcher got %d of %d events and no error", got, n)
		}
	}
}

func testDelete(t *testing.T, s store.Store) {
	ctx := ctxFor(t)
	mustApply(t, s, RecordSet("ns", "gone", "z", "192.0.2.1"), store.ManagerAPI)
	if err := s.Delete(ctx, store.KindDNSRecordSet, "ns", "gone", store.DeleteOptions{Manager: store.ManagerAPI}); err != nil {
		t.Fatal(err)
	}
	if _, err := s.Get(ctx, store.KindDNSRecordSet, "ns", "gone"); !errors.Is(err, store.ErrNotFound) {
		t.Fatalf("get after delete: %v, want ErrNotFound", err)
	}
	if err := s.Delete(ctx, store.KindDNSRecordSet, "ns", "gone", store.DeleteOptions{}); !errors.Is(err, store.ErrNotFound) {
		t.Fatalf("second delete: %v, want ErrNotFound", err)
	}
	// A re-created object is new: generation 1, new uid.
	r := mustApply(t, s, RecordSet("ns", "gone", "z", "192.0.2.1"), store.ManagerAPI)
	if r.Result != store.Created || r.Object.GetGeneration() != 1 {
		t.Fatalf("re-create: %s generation %d", r.Result, r.Object.GetGeneration())
	}
}

func testZoneDelete(t *testing.T, s store.Store) {
	ctx := ctxFor(t)
	mustApply(t, s, Zone(store.DefaultZoneName, "."), store.ManagerAPI)
	mustApply(t, s, Zone("example.com", ""), store.ManagerAPI)
	mustApply(t, s, Zone("example.net", ""), store.ManagerAPI)
	mustApply(t, s, RecordSet("a", "www", "example.com", "192.0.2.1", "192.0.2.2"), store.ManagerAPI)
	mustApply(t, s, RecordSet("b", "mail", "example.com", "192.0.2.3"), store.ManagerAPI)
	mustApply(t, s, RecordSet("a", "www-net", "example.net", "192.0.2.4"), store.ManagerAPI)

	if err := s.Delete(ctx, store.KindDNSZone, "", "example.com", store.DeleteOptions{}); !errors.Is(err, store.ErrZoneNotEmpty) {
		t.Fatalf("plain delete of a referenced zone: %v, want ErrZoneNotEmpty", err)
	}
	for _, del := range []func() error{
		func() error {
			return s.Delete(ctx, store.KindDNSZone, "", store.DefaultZoneName, store.DeleteOptions{})
		},
		func() error {
			_, err := s.DeleteZone(ctx, store.DefaultZoneName, store.DeleteZoneOptions{Manager: store.ManagerAPI})
			return err
		},
	} {
		if err := del(); !errors.Is(err, store.ErrDefaultZone) {
			t.Fatalf("delete of the default zone: %v, want ErrDefaultZone", err)
		}
	}

	dry, err := s.DeleteZone(ctx, "example.com", store.DeleteZoneOptions{Manager: store.ManagerAPI, DryRun: true})
	if err != nil {
		t.Fatal(err)
	}
	if dry != (store.DeleteZoneResult{RecordSets: 2, Records: 3}) {
		t.Fatalf("dry run: %+v, want 2 record sets, 3 records", dry)
	}
	if _, err := s.Get(ctx, store.KindDNSRecordSet, "a", "www"); err != nil {
		t.Fatalf("dry run deleted: %v", err)
	}

	file := store.Manager("file:rr.yaml")
	mustApply(t, s, RecordSet("c", "ftp", "example.com", "192.0.2.5"), file)
	var mb *store.ManagedByError
	if _, err := s.DeleteZone(ctx, "example.com", store.DeleteZoneOptions{Manager: store.ManagerAPI}); !errors.As(err, &mb) || mb.Owner != file {
		t.Fatalf("zone delete with a file-managed record set: %v, want ManagedByError{%s}", err, file)
	}
	if _, err := s.Get(ctx, store.KindDNSRecordSet, "a", "www"); err != nil {
		t.Fatalf("refused zone delete removed a record set: %v", err)
	}
	if err := s.Delete(ctx, store.KindDNSRecordSet, "c", "ftp", store.DeleteOptions{Manager: file}); err != nil {
		t.Fatal(err)
	}

	res, err := s.DeleteZone(ctx, "example.com", store.DeleteZoneOptions{Manager: store.ManagerAPI})
	if err != nil || res != (store.DeleteZoneResult{RecordSets: 2, Records: 3}) {
		t.Fatalf("zone delete: %+v %v", res, err)
	}
	for _, k := range []store.Key{{Kind: store.KindDNSZone, Name: "example.com"}, {Kind: store.KindDNSRecordSet, Namespace: "a", Name: "www"}, {Kind: store.KindDNSRecordSet, Namespace: "b", Name: "mail"}} {
		if _, err := s.Get(ctx, k.Kind, k.Namespace, k.Name); !errors.Is(err, store.ErrNotFound) {
			t.Fatalf("%s after zone delete: %v, want ErrNotFound", k, err)
		}
	}
	if _, err := s.Get(ctx, store.KindDNSRecordSet, "a", "www"); !errors.Is(err, store.ErrNotFound) {
		t.Fatal("record set survived")
	}
	if _, err := s.Get(ctx, store.KindDNSZone, "", "example.net"); err != nil {
		t.Fatalf("other zone: %v", err)
	}
	items, _ := listAll(t, ctx, s, store.ListOptions{Kind: store.KindDNSRecordSet})
	if len(items) != 1 || items[0].GetNamespace() != "a" {
		t.Fatalf("record sets left: %d, want the example.net one", len(items))
	}
	// An empty zone deletes plainly.
	if _, err := s.DeleteZone(ctx, "example.net", store.DeleteZoneOptions{Manager: store.ManagerAPI}); err != nil {
		t.Fatal(err)
	}
}
