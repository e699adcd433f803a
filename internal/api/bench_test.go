package api

import (
	"context"
	"encoding/json"
	"fmt"
	"slices"
	"testing"
	"time"

	"github.com/svcdns/svc/internal/store"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
)

// reportLatency reports the p50 and p99 of per-request durations.
func reportLatency(b *testing.B, durs []time.Duration) {
	b.Helper()
	if len(durs) == 0 {
		return
	}
	slices.Sort(durs)
	pct := func(p float64) float64 {
		i := int(float64(len(durs)-1) * p)
		return float64(durs[i].Microseconds()) / 1000
	}
	b.ReportMetric(pct(0.50), "p50-ms")
	b.ReportMetric(pct(0.99), "p99-ms")
}

// BenchmarkListRecordSets1000 is an authenticated (API token) GET of 1,000
// DNSRecordSets from the real sqlite store, over HTTP on loopback.
func BenchmarkListRecordSets1000(b *testing.B) {
	e := newEnv(b)
	ctx := context.Background()
	zone := &unstructured.Unstructured{Object: map[string]any{"apiVersion": "service.io/v1alpha1", "kind": "DNSZone",
		"metadata": map[string]any{"name": "example"}, "spec": map[string]any{"zoneName": "example.com", "defaultTTL": int64(300)}}}
	if _, err := e.st.Apply(ctx, zone, store.ApplyOptions{Manager: store.ManagerAPI}); err != nil {
		b.Fatal(err)
	}
	for i := range 1000 {
		rs := &unstructured.Unstructured{Object: map[string]any{"apiVersion": "service.io/v1alpha1", "kind": "DNSRecordSet",
			"metadata": map[string]any{"name": fmt.Sprintf("rs-%04d", i), "namespace": "default"},
			"spec": map[string]any{"zoneRef": map[string]any{"name": "example"}, "endpoints": []any{
				map[string]any{"dnsName": fmt.Sprintf("host-%d", i), "recordType": "A", "recordTTL": int64(300),
					"targets": []any{fmt.Sprintf("192.0.2.%d", i%250+1), fmt.Sprintf("198.51.100.%d", i%250+1)}},
			}}}}
		if _, err := e.st.Apply(ctx, rs, store.ApplyOptions{Manager: store.ManagerAPI}); err != nil {
			b.Fatal(err)
		}
	}
	c := e.withToken(e.adminToken())
	const path = "/objects/dnsrecordsets?namespace=default&limit=1000"
	r := c.do("GET", path, nil)
	var list struct {
		Items    []json.RawMessage `json:"items"`
		Continue string            `json:"continue"`
	}
	if err := json.Unmarshal(r.body, &list); r.code != 200 || err != nil || len(list.Items) != 1000 || list.Continue != "" {
		b.Fatalf("list: %d, %d items, continue %q: %v", r.code, len(list.Items), list.Continue, err)
	}
	b.SetBytes(int64(len(r.body)))
	durs := make([]time.Duration, 0, 1024)
	b.ResetTimer()
	for b.Loop() {
		start := time.Now()
		r := c.do("GET", path, nil)
		durs = append(durs, time.Since(start))
		if r.code != 200 {
			b.Fatalf("list: %d", r.code)
		}
	}
	b.StopTimer()
	reportLatency(b, durs)
}

// BenchmarkTokenAuthMe is a token-authenticated GET /auth/me: token parse,
// store lookup, constant-time hash check, owner re-read and grants.
func BenchmarkTokenAuthMe(b *testing.B) {
	e := newEnv(b)
	c := e.withToken(e.adminToken())
	if r := c.do("GET", "/auth/me", nil); r.code != 200 {
		b.Fatalf("me: %d %s", r.code, r.body)
	}
	durs := make([]time.Duration, 0, 1024)
	b.ResetTimer()
	for b.Loop() {
		start := time.Now()
		r := c.do("GET", "/auth/me", nil)
		durs = append(durs, time.Since(start))
		if r.code != 200 {
			b.Fatalf("me: %d", r.code)
		}
	}
	b.StopTimer()
	reportLatency(b, durs)
}
