package sqlite_test

import (
	"fmt"
	"path/filepath"
	"testing"

	"github.com/svcdns/svc/internal/store"
	"github.com/svcdns/svc/internal/store/sqlite"
	"github.com/svcdns/svc/internal/store/storetest"
)

// BenchmarkApply10k applies 10,000 DNSRecordSets (each a durable commit) and
// reports objects per second.
func BenchmarkApply10k(b *testing.B) {
	const n = 10000
	for b.Loop() {
		b.StopTimer()
		s, err := sqlite.NewStore(b.Context(), filepath.Join(b.TempDir(), "state.db"), storetest.SchemaLite{}, sqlite.Options{})
		if err != nil {
			b.Fatal(err)
		}
		b.StartTimer()
		for i := range n {
			rs := storetest.RecordSet(fmt.Sprintf("ns%d", i%10), fmt.Sprintf("rs-%05d", i), "example.com", "192.0.2.1", "192.0.2.2")
			if _, err := s.Apply(b.Context(), rs, store.ApplyOptions{Manager: store.ManagerAPI}); err != nil {
				b.Fatal(err)
			}
		}
		b.StopTimer()
		s.Close()
		b.StartTimer()
	}
	b.ReportMetric(float64(n*b.N)/b.Elapsed().Seconds(), "objects/s")
}

// BenchmarkListPaged lists 10,000 DNSRecordSets in pages of 500.
func BenchmarkListPaged(b *testing.B) {
	const n = 10000
	ctx := b.Context()
	s, err := sqlite.NewStore(ctx, filepath.Join(b.TempDir(), "state.db"), storetest.SchemaLite{}, sqlite.Options{})
	if err != nil {
		b.Fatal(err)
	}
	defer s.Close()
	for i := range n {
		rs := storetest.RecordSet(fmt.Sprintf("ns%d", i%10), fmt.Sprintf("rs-%05d", i), "example.com", "192.0.2.1", "192.0.2.2")
		if _, err := s.Apply(ctx, rs, store.ApplyOptions{Manager: store.ManagerAPI}); err != nil {
			b.Fatal(err)
		}
	}
	b.ResetTimer()
	for b.Loop() {
		opts := store.ListOptions{Kind: store.KindDNSRecordSet, Limit: 500}
		got := 0
		for range n {
			res, err := s.List(ctx, opts)
			if err != nil {
				b.Fatal(err)
			}
			got += len(res.Items)
			if res.Continue == "" {
				break
			}
			opts.Continue = res.Continue
		}
		if got != n {
			b.Fatalf("listed %d, want %d", got, n)
		}
	}
	b.ReportMetric(float64(n*b.N)/b.Elapsed().Seconds(), "objects/s")
}
