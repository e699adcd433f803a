package unblock

import (
	"context"
	"errors"
	"net/netip"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"sigs.k8s.io/yaml"

	"github.com/svcdns/svc/api/v1alpha1"
	"github.com/svcdns/svc/internal/settings"
	"github.com/svcdns/svc/internal/store"
	"github.com/svcdns/svc/internal/store/sqlite"
	"github.com/svcdns/svc/internal/validation"
)

// clock is an injected, settable clock.
type clock struct {
	mu sync.Mutex
	t  time.Time
}

func (c *clock) now() time.Time      { c.mu.Lock(); defer c.mu.Unlock(); return c.t }
func (c *clock) add(d time.Duration) { c.mu.Lock(); c.t = c.t.Add(d); c.mu.Unlock() }

func newTestService(t *testing.T, cfg settings.UnblockRequests) (*Service, store.Store, *clock) {
	t.Helper()
	ctx := context.Background()
	v, err := validation.New()
	if err != nil {
		t.Fatal(err)
	}
	st, err := sqlite.NewStore(ctx, filepath.Join(t.TempDir(), "state.db"), v, sqlite.Options{})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { st.Close() })
	c := &clock{t: time.Now().UTC().Truncate(time.Second)}
	var mu sync.Mutex
	s := NewService(st, func() settings.UnblockRequests { mu.Lock(); defer mu.Unlock(); return cfg }, c.now)
	return s, st, c
}

func defaults() settings.UnblockRequests {
	return settings.UnblockRequests{Enabled: true, RateLimit: 5, MaxPending: 1000, PendingExpiry: 336 * time.Hour, Retention: 720 * time.Hour}
}

func applyYAML(t *testing.T, st store.Store, docs ...string) {
	t.Helper()
	for _, d := range docs {
		u := &unstructured.Unstructured{}
		if err := yaml.Unmarshal([]byte(d), &u.Object); err != nil {
			t.Fatal(err)
		}
		if _, err := st.Apply(context.Background(), u, store.ApplyOptions{Manager: store.ManagerAPI}); err != nil {
			t.Fatalf("apply %s: %v", d, err)
		}
	}
}

func TestSubmitMergeLimitsAndRefusals(t *testing.T) {
	ctx := context.Background()
	cfg := defaults()
	cfg.MaxPending = 3
	s, _, c := newTestService(t, cfg)
	a := netip.MustParseAddr("2001:db8:1:2::10")
	sub := Submission{Domain: "Ads.Example.com.", Client: a, Namespace: "team", Policy: "team/kids", List: "team/ads", Rule: "||ads.example.com^", Reason: "school\x00 work", Requester: "kid@example.org"}
	r1, err := s.Submit(ctx, sub)
	if err != nil || r1.Merged || r1.Namespace != "team" || !strings.HasPrefix(r1.Name, "ads.example.com-") {
		t.Fatalf("first submit: %+v, %v", r1, err)
	}
	got, err := s.Get(ctx, "team", r1.Name)
	if err != nil {
		t.Fatal(err)
	}
	if got.Spec.Domain != "ads.example.com" || got.Spec.Reason != "school work" || got.Spec.Policy != "team/kids" || got.Spec.Rule != "||ads.example.com^" ||
		got.Spec.Requester.IP != "2001:db8:1:2::10" || got.Spec.Requester.Contact != "kid@example.org" {
		t.Errorf("stored spec: %+v %+v", got.Spec, got.Spec.Requester)
	}
	if got.Status.Phase != PhasePending || got.Status.ExpiresAt == nil || !got.Status.ExpiresAt.Time.Equal(c.now().Add(336*time.Hour)) || got.Status.Submissions != 1 {
		t.Errorf("status: %+v", got.Status)
	}
	// the same domain and client again: merged
	r2, err := s.Submit(ctx, sub)
	if err != nil || !r2.Merged || r2.Name != r1.Name {
		t.Fatalf("repeat: %+v, %v", r2, err)
	}
	if got, _ := s.Get(ctx, "team", r1.Name); got.Status.Submissions != 2 {
		t.Errorf("submissions = %d, want 2", got.Status.Submissions)
	}
	// three more from the same /64 (other hosts): 5 in the hour, then 429
	for i, d := range []string{"b.example.com", "c.example.com", "d.example.com"} {
		sub2 := sub
		sub2.Domain, sub2.Client = d, netip.MustParseAddr("2001:db8:1:2::"+string(rune('a'+i)))
		if _, err := s.Submit(ctx, sub2); err != nil && !errors.Is(err, ErrTooManyPending) {
			t.Fatalf("submit %s: %v", d, err)
		} else if d == "d.example.com" && !errors.Is(err, ErrTooManyPending) {
			t.Fatalf("4th pending request with maxPending 3: %v", err)
		}
	}
	var rl *RateLimitedError
	sub.Client = netip.MustParseAddr("2001:db8:1:2:ffff::1")
	if _, err := s.Submit(ctx, sub); !errors.As(err, &rl) || rl.RetryAfter <= 0 || rl.RetryAfter > time.Hour {
		t.Fatalf("6th from the /64: %v", err)
	}
	// another /64 is not limited, but maxPending is cluster-wide
	sub.Client, sub.Domain = netip.MustParseAddr("2001:db8:1:3::1"), "e.example.com"
	if _, err := s.Submit(ctx, sub); !errors.Is(err, ErrTooManyPending) {
		t.Fatalf("maxPending: %v", err)
	}
	// an hour later the /64 may file again
	c.add(time.Hour + time.Second)
	sub.Client, sub.Domain = netip.MustParseAddr("2001:db8:1:2::10"), "ads.example.com"
	if r, err := s.Submit(ctx, sub); err != nil || !r.Merged {
		t.Fatalf("after an hour: %+v %v", r, err)
	}
	// refusals
	for _, bad := range []Submission{
		{Domain: "not a name", Client: a}, {Domain: "x.org", Client: a, Reason: strings.Repeat("é", 1001)},
		{Domain: "x.org", Client: a, Reason: "\xff"}, {Domain: "x.org"},
	} {
		if _, err := s.Submit(ctx, bad); !errors.Is(err, ErrInvalid) {
			t.Errorf("Submit(%+v) = %v, want ErrInvalid", bad, err)
		}
	}
	off := defaults()
	off.Enabled = false
	s2, _, _ := newTestService(t, off)
	if _, err := s2.Submit(ctx, Submission{Domain: "x.org", Client: a}); !errors.Is(err, ErrDisabled) {
		t.Errorf("disabled: %v", err)
	}
}

func listEntries(t *testing.T, st store.Store, ns, name string) (*v1alpha1.BlockList, []v1alpha1.BlockListEntry) {
	t.Helper()
	ls, err := store.ListTyped[v1alpha1.BlockList](context.Background(), st, kindBlockList, ns)
	if err != nil {
		t.Fatal(err)
	}
	for i := range ls {
		if ls[i].Name == name {
			var out []v1alpha1.BlockListEntry
			for _, s := range ls[i].Spec.Sources {
				out = append(out, s.Entries...)
			}
			return &ls[i], out
		}
	}
	return nil, nil
}

func TestApproveDenyEnd(t *testing.T) {
	ctx := context.Background()
	s, st, c := newTestService(t, defaults())
	applyYAML(t, st, `{apiVersion: service.io/v1alpha1, kind: ClientGroup, metadata: {name: kids, namespace: team}, spec: {addresses: ["192.0.2.10"]}}`,
		`{apiVersion: service.io/v1alpha1, kind: Policy, metadata: {name: kids, namespace: team}, spec: {clientGroupRefs: [kids], blockListRefs: [ads]}}`)
	file := func(d string, last byte) Result {
		r, err := s.Submit(ctx, Submission{Domain: d, Client: netip.AddrFrom4([4]byte{192, 0, 2, last}), Namespace: "team", Policy: "team/kids"})
		if err != nil {
			t.Fatal(err)
		}
		return r
	}
	r := file("ads.example.com", 10)
	// groups: a list for the group, attached to its policy
	got, err := s.Approve(ctx, r.Namespace, r.Name, Approval{Scope: "groups", Groups: []string{"kids"}, Match: "subdomains", Duration: time.Hour, By: "alice", Comment: "ok for school"})
	if err != nil {
		t.Fatal(err)
	}
	if got.Status.Phase != PhaseApproved || got.Status.DecidedBy != "alice" || got.Status.Entry != "team/unblocked-kids" ||
		got.Status.ExpiresAt == nil || !got.Status.ExpiresAt.Time.Equal(c.now().Add(time.Hour)) || got.Spec.Scope != "groups" || got.Spec.Duration != "1h0m0s" {
		t.Fatalf("approved: spec %+v status %+v", got.Spec, got.Status)
	}
	bl, ents := listEntries(t, st, "team", "unblocked-kids")
	if bl == nil || bl.Spec.Mode != "allow" || bl.Spec.Global == nil || *bl.Spec.Global || len(ents) != 2 || ents[0].Request != "team/"+r.Name || ents[0].CreatedBy != "alice" {
		t.Fatalf("list: %+v entries %+v", bl, ents)
	}
	pols, _ := store.ListTyped[v1alpha1.Policy](ctx, st, kindPolicy, "team")
	if len(pols) != 1 || len(pols[0].Spec.AllowListRefs) != 1 || pols[0].Spec.AllowListRefs[0] != "unblocked-kids" {
		t.Fatalf("policy refs: %+v", pols[0].Spec)
	}
	// decided twice: conflict
	if _, err := s.Deny(ctx, r.Namespace, r.Name, "no", "bob"); !errors.Is(err, ErrDecided) {
		t.Fatalf("deny an approved request: %v", err)
	}
	// unknown group, with the nearest name
	r2 := file("b.example.com", 11)
	if _, err := s.Approve(ctx, r2.Namespace, r2.Name, Approval{Scope: "groups", Groups: []string{"kid"}}); err == nil || !strings.Contains(err.Error(), "team/kids") {
		t.Fatalf("unknown group: %v", err)
	}
	// everyone: the namespace's global list
	if _, err := s.Approve(ctx, r2.Namespace, r2.Name, Approval{By: "alice"}); err != nil {
		t.Fatal(err)
	}
	if bl, ents := listEntries(t, st, "team", "unblocked"); bl == nil || bl.Spec.Global != nil || len(ents) != 1 || ents[0].Value != "b.example.com" {
		t.Fatalf("everyone list: %+v %+v", bl, ents)
	}
	// deny records who, when and why
	r3 := file("c.example.com", 12)
	d, err := s.Deny(ctx, r3.Namespace, r3.Name, "not for school", "bob")
	if err != nil || d.Status.Phase != PhaseDenied || d.Status.DecidedBy != "bob" || d.Status.Comment != "not for school" || d.Status.DecidedAt == nil {
		t.Fatalf("deny: %+v %v", d.Status, err)
	}
	// the timed approval ends: its entries go, the other request's stay
	c.add(time.Hour)
	cur, _ := s.Get(ctx, r.Namespace, r.Name)
	ended, err := EndApproval(ctx, st, cur, c.now())
	if err != nil || ended.Status.Phase != PhaseExpired {
		t.Fatalf("end: %+v %v", ended, err)
	}
	if _, ents := listEntries(t, st, "team", "unblocked-kids"); len(ents) != 0 {
		t.Fatalf("entries left after the approval ended: %+v", ents)
	}
	if _, ents := listEntries(t, st, "team", "unblocked"); len(ents) != 1 {
		t.Fatalf("the other approval's entry went too: %+v", ents)
	}
	// listing: pending first
	r4 := file("d.example.com", 13)
	all, err := s.List(ctx, ListOptions{})
	if err != nil || len(all) != 4 || all[0].Name != r4.Name {
		t.Fatalf("list: %d items, first %v, %v", len(all), all[0].Name, err)
	}
	if p, _ := s.List(ctx, ListOptions{Phase: PhaseDenied}); len(p) != 1 || p[0].Name != r3.Name {
		t.Fatalf("phase filter: %+v", p)
	}
}

// racingStore lets the reconciler's Init win the first status write after
// a request is created, as it does when the local runner sees the new
// object first.
type racingStore struct {
	store.Store
	once sync.Once
	now  func() time.Time
}

func (r *racingStore) UpdateStatus(ctx context.Context, u *unstructured.Unstructured) (*unstructured.Unstructured, error) {
	r.once.Do(func() {
		cur, err := r.Store.Get(ctx, u.GetKind(), u.GetNamespace(), u.GetName())
		if err != nil {
			panic(err)
		}
		req, _ := fromUnstructured(cur)
		if _, err := InitPending(ctx, r.Store, req, r.now().Add(time.Hour), r.now()); err != nil {
			panic(err)
		}
	})
	return r.Store.UpdateStatus(ctx, u)
}

func TestSubmitWhileTheReconcilerInitialises(t *testing.T) {
	ctx := context.Background()
	s, st, c := newTestService(t, defaults())
	s.st = &racingStore{Store: st, now: c.now}
	r, err := s.Submit(ctx, Submission{Domain: "race.example.com", Client: netip.MustParseAddr("192.0.2.9")})
	if err != nil {
		t.Fatalf("submit lost to the reconciler's Init: %v", err)
	}
	got, err := s.Get(ctx, r.Namespace, r.Name)
	if err != nil {
		t.Fatal(err)
	}
	if got.Status.Phase != PhasePending || got.Status.ExpiresAt == nil || got.Status.LastSubmittedAt == nil || got.Status.Submissions != 1 {
		t.Fatalf("status after the race: %+v", got.Status)
	}
}
