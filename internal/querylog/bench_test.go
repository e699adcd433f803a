package querylog

import (
	"context"
	"database/sql"
	"fmt"
	"os"
	"runtime"
	"strconv"
	"syscall"
	"testing"
	"time"
)

func benchRows(n int, start time.Time) []Row { return benchRowsSpread(n, start, 1000, 0) }

// benchRowsSpread makes n rows over domains names (1 ms apart), starting
// with name offset off.
func benchRowsSpread(n int, start time.Time, domains, off int) []Row {
	statuses := []string{"answered", "cached", "cached", "cached", "blocked", "authoritative", "failed"}
	rows := make([]Row, n)
	for i := range rows {
		rows[i] = Row{
			Time: start.Add(time.Duration(i) * time.Millisecond), Node: "node-a",
			Client: fmt.Sprintf("192.0.2.%d", i%50), ClientName: "client", Domain: fmt.Sprintf("host%d.example-domain.com", (off+i)%domains),
			QType: "A", Rcode: "NOERROR", Status: statuses[i%len(statuses)], List: "", Upstream: "192.0.2.53:53",
			Transport: "udp", Duration: 1500 * time.Microsecond,
		}
	}
	return rows
}

// BenchmarkWriteRows measures rows per second through the writer's batch
// path (filter, rollups, one transaction per 5000 rows) into SQLite. Run
// with -cpu 1 for the one-core number.
func BenchmarkWriteRows(b *testing.B) {
	cfg := DefaultConfig()
	cfg.DataDir = b.TempDir()
	w, err := Open(context.Background(), cfg, Options{MaintainEvery: -1})
	if err != nil {
		b.Fatal(err)
	}
	defer w.Close()
	const batch = 5000
	src := benchRows(batch, time.Now())
	buf := make([]Row, batch)
	ctx := context.Background()
	b.ResetTimer()
	start, cpu0 := time.Now(), cpuTime()
	n := 0
	for n < b.N {
		copy(buf, src)
		for i := range buf { // time moves on: 1 ms per row
			buf[i].Time = buf[i].Time.Add(time.Duration(n) * time.Millisecond)
		}
		if err := w.write(ctx, buf); err != nil {
			b.Fatal(err)
		}
		n += batch
	}
	el, cpu := time.Since(start), cpuTime()-cpu0
	b.StopTimer()
	b.ReportMetric(float64(n)/cpu.Seconds(), "rows/cpu-s")
	var ms runtime.MemStats
	runtime.ReadMemStats(&ms)
	b.ReportMetric(float64(n)/el.Seconds(), "rows/s")
	b.ReportMetric(float64(ms.HeapInuse)/(1<<20), "heapMiB")
	b.ReportMetric(bytesPerRow(b, w.store.w, n), "B/row")
}

// bytesPerRow is the file's used pages (after a checkpoint) per row.
func bytesPerRow(b *testing.B, db *sql.DB, rows int) float64 {
	var pc, fl, ps int64
	for q, dst := range map[string]*int64{"PRAGMA page_count": &pc, "PRAGMA freelist_count": &fl, "PRAGMA page_size": &ps} {
		if err := db.QueryRow(q).Scan(dst); err != nil {
			b.Fatal(err)
		}
	}
	return float64((pc-fl)*ps) / float64(rows)
}

// BenchmarkWriteRowsVsLegacy writes the same batches alternately through
// the legacy layout's path (database/sql, text columns, four indexes) and
// the writer's path (compact layout, postings), and reports rows per CPU
// second of each, their ratio and the bytes per row on disk. Sub-benchmarks:
// 1000 or 100000 distinct domains (50 clients).
func BenchmarkWriteRowsVsLegacy(b *testing.B) {
	for _, domains := range []int{1000, 100000} {
		b.Run(fmt.Sprintf("domains=%d", domains), func(b *testing.B) {
			ctx := context.Background()
			lw := newLegacyWriter(b, b.TempDir())
			defer lw.db.Close()
			cfg := DefaultConfig()
			cfg.DataDir = b.TempDir()
			w, err := Open(ctx, cfg, Options{MaintainEvery: -1})
			if err != nil {
				b.Fatal(err)
			}
			defer w.Close()
			const batch = 5000
			t0 := time.Now()
			buf := make([]Row, batch)
			var cpuLegacy, cpuCompact time.Duration
			n := 0
			for n < b.N {
				src := benchRowsSpread(batch, t0.Add(time.Duration(n)*time.Millisecond), domains, n)
				copy(buf, src)
				c0 := cpuTime()
				if err := lw.write(ctx, buf); err != nil {
					b.Fatal(err)
				}
				c1 := cpuTime()
				copy(buf, src)
				if err := w.write(ctx, buf); err != nil {
					b.Fatal(err)
				}
				cpuLegacy += c1 - c0
				cpuCompact += cpuTime() - c1
				n += batch
			}
			b.StopTimer()
			legacy, compact := float64(n)/cpuLegacy.Seconds(), float64(n)/cpuCompact.Seconds()
			b.ReportMetric(legacy, "legacy-rows/cpu-s")
			b.ReportMetric(compact, "rows/cpu-s")
			b.ReportMetric(compact/legacy, "ratio")
			for _, db := range []*sql.DB{lw.db, w.store.w} {
				if _, err := db.Exec("PRAGMA wal_checkpoint(TRUNCATE)"); err != nil {
					b.Fatal(err)
				}
			}
			b.ReportMetric(bytesPerRow(b, lw.db, n), "legacy-B/row")
			b.ReportMetric(bytesPerRow(b, w.store.w, n), "B/row")
		})
	}
}

// BenchmarkEnqueue is the cost the data plane pays per query.
func BenchmarkEnqueue(b *testing.B) {
	cfg := DefaultConfig()
	cfg.DataDir = b.TempDir()
	w, err := Open(context.Background(), cfg, Options{MaintainEvery: -1})
	if err != nil {
		b.Fatal(err)
	}
	defer w.Close()
	r := benchRows(1, time.Now())[0]
	b.ReportAllocs()
	b.ResetTimer()
	for range b.N {
		w.Enqueue(r)
	}
}

// fillSQL builds n synthetic rows in SQL (fast setup for read benchmarks):
// 5000 domains, 2000 clients, 1 in 20 blocked, one row per 10 ms.
func fillSQL(b *testing.B, w *Writer, n int, start time.Time) {
	b.Helper()
	nm := w.store.names
	id := func(k int, s string) int64 { return nm.encode(k, s).(int64) }
	blocked, answered, cached := id(kStatus, "blocked"), id(kStatus, "answered"), id(kStatus, "cached")
	a, noerr, node, ads, udp := id(kQType, "A"), id(kRcode, "NOERROR"), id(kNode, "node-a"), id(kList, "ads"), id(kTransport, "udp")
	err := w.store.writeTx(context.Background(), func(d *dconn) error {
		for _, e := range nm.staged {
			if err := d.exec("INSERT INTO names (id, kind, name) VALUES (?, ?, ?)", e.id, int64(e.kind), e.name); err != nil {
				return err
			}
		}
		return nil
	})
	if err != nil {
		b.Fatal(err)
	}
	nm.committed()
	q := fmt.Sprintf(`WITH RECURSIVE x(i) AS (SELECT 1 UNION ALL SELECT i+1 FROM x WHERE i < %d),
y(id, c, d) AS (SELECT i, '10.' || (i %% 2000 / 250) || '.' || (i %% 250), 'host' || (i %% 5000) || '.example-domain.com' FROM x)
INSERT INTO queries (`+rowColumns+`)
SELECT id, %d + id*10000,
  CASE WHEN id %% 20 = 0 THEN %d WHEN id %% 3 = 0 THEN %d ELSE %d END,
  d, c, %d, %d, %d, NULL, NULL, CASE WHEN id %% 20 = 0 THEN %d END, NULL, NULL, NULL, NULL, %d, 1500
  FROM y`, n, start.UnixMicro(), blocked, answered, cached, a, noerr, node, ads, udp)
	if _, err := w.store.w.Exec(q); err != nil {
		b.Fatal(err)
	}
	if err := buildPostings(context.Background(), w.store.w, 1, 5000); err != nil {
		b.Fatal(err)
	}
	w.nextID = int64(n) + 1
}

// BenchmarkFilteredPage measures one page (50 rows) with filters over a
// large table; -benchtime short, the table is built once per size.
func BenchmarkFilteredPage(b *testing.B) {
	n := 1_000_000
	if v, err := strconv.Atoi(os.Getenv("QUERYLOG_BENCH_ROWS")); err == nil && v > 0 {
		n = v // e.g. 10000000 for the full-size target (slow to build)
	}
	cfg := DefaultConfig()
	cfg.DataDir = b.TempDir()
	start := time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC)
	end := start.Add(time.Duration(n) * 10 * time.Millisecond)
	w, err := Open(context.Background(), cfg, Options{MaintainEvery: -1, Now: func() time.Time { return end }})
	if err != nil {
		b.Fatal(err)
	}
	defer w.Close()
	t0 := time.Now()
	fillSQL(b, w, n, start)
	b.Logf("built %d rows in %v", n, time.Since(t0))
	ctx := context.Background()
	first, next, err := w.Rows(ctx, Filter{Status: "blocked", Limit: 50})
	if err != nil || len(first) != 50 || next == "" {
		b.Fatalf("setup page: %d rows %v", len(first), err)
	}
	for _, tc := range []struct {
		name string
		f    Filter
	}{
		{"none", Filter{}},
		{"client", Filter{Client: "10.3.7"}},
		{"status", Filter{Status: "blocked"}},
		{"class", Filter{StatusClass: "blocked"}},
		{"domain", Filter{Domain: "host4242.example-domain.com"}},
		{"domain-substring", Filter{Domain: "host4242.", DomainMatch: MatchSubstring}},
		{"list", Filter{List: "ads"}},
		{"window", Filter{Since: start.Add(time.Hour), Until: start.Add(90 * time.Minute), Status: "blocked"}},
		{"client-window", Filter{Client: "10.3.7", Since: start.Add(time.Hour), Until: start.Add(2 * time.Hour)}},
		{"continue", Filter{Status: "blocked", Continue: next}},
	} {
		b.Run(tc.name, func(b *testing.B) {
			tc.f.Limit = 50
			for range b.N {
				rows, _, err := w.Rows(ctx, tc.f)
				if err != nil || len(rows) == 0 {
					b.Fatalf("%d rows %v", len(rows), err)
				}
			}
		})
	}
}

// cpuTime is the process's user+system CPU time: on a shared, loaded
// machine rows per CPU second is the number that means something.
func cpuTime() time.Duration {
	var ru syscall.Rusage
	_ = syscall.Getrusage(syscall.RUSAGE_SELF, &ru)
	return time.Duration(ru.Utime.Nano() + ru.Stime.Nano())
}
