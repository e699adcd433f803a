package querylog

import (
	"context"
	"database/sql"
	"fmt"
	"math/rand/v2"
	"testing"
	"time"
)

// The hour's domain counts, found by the block encoder as it stores each
// batch, are the counts of the rows: per hour and name, blocked included,
// across batches, two hour boundaries (one inside a batch, with rows going
// back across it), and with the names past the cap summed under "".
func TestHourDomainCountsMatchRows(t *testing.T) {
	for _, limit := range []int{100000, 150} {
		t.Run(fmt.Sprint("cap", limit), func(t *testing.T) {
			cfg := DefaultConfig()
			cfg.DataDir = t.TempDir()
			w := openTest(t, cfg, Options{DomainCap: limit, HourTopKeep: 1 << 20})
			rng := rand.New(rand.NewPCG(27, uint64(limit)))
			base := time.Date(2026, 5, 1, 9, 50, 0, 0, time.UTC)
			var rows []Row
			for b := range 6 {
				var batch []Row
				for i := range 1500 {
					// 80 minutes in 6 batches: 10:00 in the first, 11:00
					// in the last.
					ts := base.Add(time.Duration(b*1500+i) * 80 * time.Minute / 9000)
					if b == 3 && i%100 == 7 {
						ts = base // back into hour 9 while hour 10 is counted
					}
					if b == 5 && i > 1200 && i%50 == 0 {
						ts = base.Add(69 * time.Minute) // 10:59, after 11:00 began
					}
					status := "answered"
					if rng.IntN(3) == 0 {
						status = "blocked"
					}
					d := fmt.Sprintf("d%d.example", rng.IntN(400))
					if rng.IntN(40) == 0 {
						d = ""
					}
					batch = append(batch, row(ts, d, "192.0.2.1", status))
				}
				for _, r := range batch {
					w.Enqueue(r)
				}
				flush(t, w)
				rows = append(rows, batch...)
			}
			// A domain filter (postings, whose groups the encoder takes
			// from the hour's counts) finds each row of the name.
			for _, d := range []string{"d7.example", "d123.example", "d399.example"} {
				n := 0
				for _, r := range rows {
					if r.Domain == d {
						n++
					}
				}
				got, _, err := w.Rows(context.Background(), Filter{Domain: d, Limit: 1000})
				if err != nil || len(got) != n {
					t.Fatalf("filter %s: %d rows (%v), want %d", d, len(got), err, n)
				}
			}
			if err := w.Close(); err != nil {
				t.Fatal(err)
			}
			want := referenceHourCounts(rows, limit)
			got := storedHourCounts(t, cfg.DataDir)
			if len(got) != len(want) {
				t.Errorf("%d (hour, name) counts stored, want %d", len(got), len(want))
			}
			for k, v := range want {
				if got[k] != v {
					t.Errorf("%v: got %v, want %v", k, got[k], v)
				}
			}
		})
	}
}

type hourKey struct {
	hour int64
	name string
}

// referenceHourCounts counts rows as the writer's hour does: a row counts
// in the latest hour seen so far; past limit names an hour sums the rest
// under "".
func referenceHourCounts(rows []Row, limit int) map[hourKey][2]int64 {
	out := map[hourKey][2]int64{}
	names := map[int64]int{}
	var cur int64
	for _, r := range rows {
		sec := r.Time.Unix()
		cur = max(cur, sec-sec%3600)
		if r.Domain == "" {
			continue
		}
		k := hourKey{cur, r.Domain}
		if _, ok := out[k]; !ok {
			if names[cur] >= limit {
				k.name = ""
			}
			if _, ok := out[k]; !ok {
				names[cur]++
			}
		}
		v := out[k]
		v[0]++
		if r.Status == "blocked" {
			v[1]++
		}
		out[k] = v
	}
	return out
}

func storedHourCounts(t *testing.T, dir string) map[hourKey][2]int64 {
	t.Helper()
	db, err := sql.Open("sqlite", "file:"+DBPath(dir))
	if err != nil {
		t.Fatal(err)
	}
	defer db.Close()
	rs, err := db.QueryContext(context.Background(), "SELECT hour, key, count, blocked FROM top_hourly WHERE dim = 'domains'")
	if err != nil {
		t.Fatal(err)
	}
	defer rs.Close()
	out := map[hourKey][2]int64{}
	for rs.Next() {
		var k hourKey
		var v [2]int64
		if err := rs.Scan(&k.hour, &k.name, &v[0], &v[1]); err != nil {
			t.Fatal(err)
		}
		out[k] = v
	}
	if err := rs.Err(); err != nil {
		t.Fatal(err)
	}
	return out
}

// Rows left out by exclusions in the middle of a batch leave the others
// stored whole, in order and with consecutive ids: the rows before the
// first exclusion stay in place, the rows after it move down.
func TestExclusionsInsideABatch(t *testing.T) {
	cfg := DefaultConfig()
	cfg.ExcludeDomains = []string{"skip.example"}
	w := openTest(t, cfg, Options{})
	base := time.Date(2026, 5, 1, 9, 0, 0, 0, time.UTC)
	var want []string
	for i := range 200 {
		d := fmt.Sprintf("d%d.example", i)
		if i >= 50 && i%7 == 0 {
			d = "skip.example"
		} else {
			want = append(want, d)
		}
		w.Enqueue(row(base.Add(time.Duration(i)*time.Millisecond), d, fmt.Sprintf("192.0.2.%d", i%5), "answered"))
	}
	flush(t, w)
	got := allRows(t, w)
	if len(got) != len(want) {
		t.Fatalf("%d rows stored, want %d", len(got), len(want))
	}
	for i, r := range got {
		if r.Domain != want[i] || r.ID != got[0].ID+int64(i) {
			t.Fatalf("row %d: id %d domain %q, want id %d domain %q", i, r.ID, r.Domain, got[0].ID+int64(i), want[i])
		}
		if r.Client == "" || r.Status != "answered" {
			t.Fatalf("row %d lost its fields: %+v", i, r)
		}
	}
}
