package querylog

import (
	"context"
	"errors"
	"testing"
	"time"
)

// TestSeriesFromRollups: the totals over time come in buckets of the step
// asked for, every bucket present, blocked counted apart; a step that is
// not whole minutes or makes more than 1000 buckets is refused.
func TestSeriesFromRollups(t *testing.T) {
	base := time.Date(2026, 3, 1, 12, 0, 0, 0, time.UTC)
	c := &clock{t: base.Add(3*time.Hour + 10*time.Minute)}
	w := openTest(t, cfgIn(t.TempDir()), Options{Now: c.now})
	for i, ts := range []time.Duration{5 * time.Minute, 20 * time.Minute, 70 * time.Minute, 130 * time.Minute, 131 * time.Minute, 190 * time.Minute} {
		st := "answered"
		if i%2 == 1 {
			st = "blocked"
		}
		w.Enqueue(row(base.Add(ts), "x.example", "10.0.0.1", st))
	}
	flush(t, w)
	pts, err := w.Series(context.Background(), 4*time.Hour, time.Hour)
	if err != nil {
		t.Fatal(err)
	}
	// window 08:10..15:10 → hours 11 (empty), 12, 13, 14, 15
	type p struct{ h, total, blocked int64 }
	var got []p
	for _, x := range pts {
		got = append(got, p{int64(x.TS.Hour()), x.Total, x.Blocked})
	}
	want := []p{{11, 0, 0}, {12, 2, 1}, {13, 1, 0}, {14, 2, 1}, {15, 1, 1}}
	if len(got) != len(want) {
		t.Fatalf("series %v, want %v", got, want)
	}
	for i := range want {
		if got[i] != want[i] {
			t.Fatalf("series %v, want %v", got, want)
		}
	}
	for _, bad := range []time.Duration{90 * time.Second, 10 * time.Second} {
		if _, err := w.Series(context.Background(), 24*time.Hour, bad); !errors.Is(err, ErrInvalid) {
			t.Errorf("step %s: %v, want ErrInvalid", bad, err)
		}
	}
}
