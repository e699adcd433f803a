package sqlite_test

import (
	"fmt"
	"path/filepath"
	"slices"
	"testing"
	"time"

	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"

	"github.com/svcdns/svc/internal/store"
	"github.com/svcdns/svc/internal/store/sqlite"
	"github.com/svcdns/svc/internal/store/storetest"
)

// A follower that falls behind the retained change log (the sqlite side of
// an apiserver's 410 after a restart or compaction) lists again: it gets a
// Synced event with the current objects, without the ones deleted meanwhile,
// and goes on delivering changes; the channel never closes.
func TestFollowListsAgainAfterExpiry(t *testing.T) {
	ctx := t.Context()
	s := open(t, filepath.Join(t.TempDir(), "state.db"), sqlite.Options{ChangeLogRetain: 5, WatchBuffer: 1})
	apply := func(name string) {
		t.Helper()
		if _, err := s.Apply(ctx, storetest.RecordSet("ns", name, "z", "192.0.2.1"), store.ApplyOptions{Manager: store.ManagerAPI}); err != nil {
			t.Fatal(err)
		}
	}
	apply("gone")
	events := store.Follow(ctx, s, []string{store.KindDNSRecordSet}, store.FollowOptions{MinBackoff: 10 * time.Millisecond})
	next := func() store.Event {
		t.Helper()
		select {
		case ev, ok := <-events:
			if !ok {
				t.Fatal("follow channel closed")
			}
			return ev
		case <-time.After(20 * time.Second):
			t.Fatal("no event from Follow within 20s")
		}
		return store.Event{}
	}
	if ev := next(); ev.Type != store.Synced || len(ev.Objects) != 1 {
		t.Fatalf("first event %s with %d objects, want Synced with 1", ev.Type, len(ev.Objects))
	}
	// Nobody reads while many more changes commit than the log retains.
	if err := s.Delete(ctx, store.KindDNSRecordSet, "ns", "gone", store.DeleteOptions{Manager: store.ManagerAPI}); err != nil {
		t.Fatal(err)
	}
	const n = 300
	for i := range n {
		apply(fmt.Sprintf("rs-%d", i))
	}
	var synced *store.Event
	for deadline := time.Now().Add(30 * time.Second); synced == nil; {
		if time.Now().After(deadline) {
			t.Fatal("no second Synced event after the watch fell behind the change log")
		}
		if ev := next(); ev.Type == store.Synced {
			synced = &ev
		} else if ev.Type == store.Error {
			t.Fatalf("Follow passed an error on: %v", ev.Err)
		}
	}
	var names []string
	for _, o := range synced.Objects {
		names = append(names, o.GetName())
	}
	if slices.Contains(names, "gone") {
		t.Fatal("the relist still holds the object deleted while the watch lagged")
	}
	// Changes after the relist arrive as events again.
	apply("after")
	for deadline := time.Now().Add(20 * time.Second); ; {
		if time.Now().After(deadline) {
			t.Fatal("no event for a write after the relist")
		}
		if ev := next(); ev.Object != nil && ev.Object.GetName() == "after" {
			break
		}
	}
}

func TestSyncedKeys(t *testing.T) {
	known := map[string]bool{"ns/a": true, "ns/b": true}
	got := store.SyncedKeys(known, []*unstructured.Unstructured{storetest.RecordSet("ns", "b", "z", "192.0.2.1"), storetest.RecordSet("ns", "c", "z", "192.0.2.1")})
	slices.Sort(got)
	if want := []string{"ns/a", "ns/b", "ns/c"}; !slices.Equal(got, want) {
		t.Fatalf("keys %v, want %v (listed ones and the vanished one)", got, want)
	}
	if known["ns/a"] || !known["ns/b"] || !known["ns/c"] {
		t.Fatalf("known after sync: %v", known)
	}
}
