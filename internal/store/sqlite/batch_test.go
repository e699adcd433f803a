package sqlite_test

import (
	"errors"
	"path/filepath"
	"strings"
	"testing"

	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"

	"github.com/svcdns/svc/internal/store"
	"github.com/svcdns/svc/internal/store/sqlite"
	"github.com/svcdns/svc/internal/store/storetest"
)

// TestApplyBatchAllOrNothing: a batch whose last object is refused stores
// none of the others (zone import writes a zone and many record sets this
// way); an accepted batch creates, updates and deletes in one commit.
func TestApplyBatchAllOrNothing(t *testing.T) {
	ctx := t.Context()
	s, err := sqlite.NewStore(ctx, filepath.Join(t.TempDir(), "state.db"), storetest.SchemaLite{}, sqlite.Options{})
	if err != nil {
		t.Fatal(err)
	}
	defer s.Close()
	api := store.ApplyOptions{Manager: store.ManagerAPI}
	if _, err := s.Apply(ctx, storetest.RecordSet("default", "old", "example.com", "192.0.2.9"), api); err != nil {
		t.Fatal(err)
	}
	huge := storetest.RecordSet("default", "huge", "example.com", strings.Repeat("x", store.MaxObjectBytes))
	_, err = s.ApplyBatch(ctx, []*unstructured.Unstructured{
		storetest.Zone("example.com", "example.com"),
		storetest.RecordSet("default", "a", "example.com", "192.0.2.1"),
		huge,
	}, []store.Key{{Kind: store.KindDNSRecordSet, Namespace: "default", Name: "old"}}, api)
	if !errors.Is(err, store.ErrTooLarge) {
		t.Fatalf("batch with an object over the cap: %v, want ErrTooLarge", err)
	}
	for _, k := range [][3]string{{store.KindDNSZone, "", "example.com"}, {store.KindDNSRecordSet, "default", "a"}} {
		if _, err := s.Get(ctx, k[0], k[1], k[2]); !errors.Is(err, store.ErrNotFound) {
			t.Errorf("%v stored by a refused batch: %v", k, err)
		}
	}
	if _, err := s.Get(ctx, store.KindDNSRecordSet, "default", "old"); err != nil {
		t.Errorf("a refused batch deleted old: %v", err)
	}

	res, err := s.ApplyBatch(ctx, []*unstructured.Unstructured{
		storetest.Zone("example.com", "example.com"),
		storetest.RecordSet("default", "a", "example.com", "192.0.2.1"),
	}, []store.Key{{Kind: store.KindDNSRecordSet, Namespace: "default", Name: "old"}, {Kind: store.KindDNSRecordSet, Namespace: "default", Name: "gone"}}, api)
	if err != nil {
		t.Fatal(err)
	}
	if len(res) != 2 || res[0].Result != store.Created || res[1].Result != store.Created || res[1].ResourceVersion == "" {
		t.Fatalf("results: %+v", res)
	}
	if _, err := s.Get(ctx, store.KindDNSRecordSet, "default", "old"); !errors.Is(err, store.ErrNotFound) {
		t.Errorf("old not deleted: %v", err)
	}
	res, err = s.ApplyBatch(ctx, []*unstructured.Unstructured{storetest.RecordSet("default", "a", "example.com", "192.0.2.1")}, nil, api)
	if err != nil || res[0].Result != store.Unchanged {
		t.Fatalf("same batch again: %+v %v", res, err)
	}
	// Ownership is checked for every object and delete.
	if _, err := s.Apply(ctx, storetest.RecordSet("default", "theirs", "example.com", "192.0.2.5"), store.ApplyOptions{Manager: "file:/etc/x.yaml"}); err != nil {
		t.Fatal(err)
	}
	_, err = s.ApplyBatch(ctx, nil, []store.Key{{Kind: store.KindDNSRecordSet, Namespace: "default", Name: "theirs"}}, api)
	var mb *store.ManagedByError
	if !errors.As(err, &mb) {
		t.Fatalf("deleting another manager's object: %v", err)
	}
}
