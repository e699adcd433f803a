package querylog

import (
	"context"
	"math"
	"testing"
	"time"
)

// TestTopUpstreamsLatency: /stats/top upstreams carries each upstream's
// average and 95th percentile answer time of forwarded queries, from the
// hour already written and the current one in memory, and survives a
// reopen; cached answers do not count.
func TestTopUpstreamsLatency(t *testing.T) {
	c := &clock{t: time.Now().UTC().Truncate(time.Hour).Add(30 * time.Minute)}
	dir := t.TempDir()
	w := openTest(t, cfgIn(dir), Options{Now: c.now})
	prev := c.now().Add(-time.Hour)
	add := func(ts time.Time, up string, ms float64, status string) {
		r := row(ts, "x.example", "10.0.0.1", status)
		r.Upstream, r.Duration = up, time.Duration(ms*float64(time.Millisecond))
		w.Enqueue(r)
	}
	// fast: 1..100 ms spread evenly over two hours (p95 ≈ 95 ms, avg 50.5).
	for i := 1; i <= 100; i++ {
		ts := prev
		if i%2 == 0 {
			ts = c.now()
		}
		add(ts, "fast:53", float64(i), "answered")
	}
	add(c.now(), "fast:53", 0.01, "cached") // not counted
	for i := 0; i < 10; i++ {
		add(c.now(), "slow:53", 400, "answered")
	}
	flush(t, w)
	check := func(w *Writer, when string) {
		t.Helper()
		top, err := w.Top(context.Background(), TopRequest{Dim: DimUpstreams})
		if err != nil {
			t.Fatal(err)
		}
		got := map[string]TopItem{}
		for _, it := range top.Items {
			got[it.Key] = it
		}
		f, s := got["fast:53"], got["slow:53"]
		if math.Abs(f.AvgLatencyMS-50.5) > 0.01 || f.P95LatencyMS < 95*0.85 || f.P95LatencyMS > 95*1.15 {
			t.Errorf("%s: fast avg %.2f p95 %.2f, want 50.5 and about 95", when, f.AvgLatencyMS, f.P95LatencyMS)
		}
		if math.Abs(s.AvgLatencyMS-400) > 0.01 || s.P95LatencyMS < 400*0.85 || s.P95LatencyMS > 400*1.15 {
			t.Errorf("%s: slow avg %.2f p95 %.2f, want 400 and about 400", when, s.AvgLatencyMS, s.P95LatencyMS)
		}
		if f.Count != 101 {
			t.Errorf("%s: fast count %d, want 101 (the cached answer counts as a query)", when, f.Count)
		}
	}
	check(w, "open")
	if err := w.Close(); err != nil {
		t.Fatal(err)
	}
	w2 := openTest(t, cfgIn(dir), Options{Now: c.now})
	check(w2, "reopened")
}

func cfgIn(dir string) Config {
	c := DefaultConfig()
	c.DataDir = dir
	return c
}
