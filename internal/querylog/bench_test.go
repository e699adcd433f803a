package querylog

import (
	"context"
	"database/sql"
	"flag"
	"fmt"
	"os"
	"runtime"
	"slices"
	"strconv"
	"strings"
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
	runtime.GC()
	runtime.ReadMemStats(&ms)
	b.ReportMetric(float64(ms.HeapAlloc)/(1<<20), "liveMiB") // after GC: what the writer keeps
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
// the writer's path (block layout, postings), and reports rows per CPU
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

// BenchmarkWriteRowsVsCompact writes the same batches alternately through
// the compact layout's path (one queries row per query, 17 bound values;
// compact_test.go) and the writer's block path, both with postings and
// rollups, and reports rows per CPU second of each, their ratio and the
// bytes per row on disk. Sub-benchmarks: 1000 or 100000 distinct domains
// (50 clients).
func BenchmarkWriteRowsVsCompact(b *testing.B) {
	for _, domains := range []int{1000, 100000} {
		b.Run(fmt.Sprintf("domains=%d", domains), func(b *testing.B) {
			ctx := context.Background()
			open := func() *Writer {
				cfg := DefaultConfig()
				cfg.DataDir = b.TempDir()
				w, err := Open(ctx, cfg, Options{MaintainEvery: -1})
				if err != nil {
					b.Fatal(err)
				}
				return w
			}
			cw, w := open(), open()
			defer cw.Close()
			defer w.Close()
			useCompactPath(b, cw)
			const batch = 5000
			t0 := time.Now()
			buf := make([]Row, batch)
			var cpuCompact, cpuBlocks time.Duration
			n := 0
			for n < b.N {
				src := benchRowsSpread(batch, t0.Add(time.Duration(n)*time.Millisecond), domains, n)
				copy(buf, src)
				c0 := cpuTime()
				if err := cw.write(ctx, buf); err != nil {
					b.Fatal(err)
				}
				c1 := cpuTime()
				copy(buf, src)
				if err := w.write(ctx, buf); err != nil {
					b.Fatal(err)
				}
				cpuCompact += c1 - c0
				cpuBlocks += cpuTime() - c1
				n += batch
			}
			b.StopTimer()
			compact, blocks := float64(n)/cpuCompact.Seconds(), float64(n)/cpuBlocks.Seconds()
			b.ReportMetric(compact, "compact-rows/cpu-s")
			b.ReportMetric(blocks, "rows/cpu-s")
			b.ReportMetric(blocks/compact, "ratio")
			for _, w := range []*Writer{cw, w} {
				if _, err := w.store.w.Exec("PRAGMA wal_checkpoint(TRUNCATE)"); err != nil {
					b.Fatal(err)
				}
			}
			b.ReportMetric(bytesPerRow(b, cw.store.w, n), "compact-B/row")
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

// pageDB is the database BenchmarkFilteredPage builds once per process
// and size (removed by TestMain).
var pageDB struct {
	dir                        string
	rows                       int
	buildS, rowsPerCPU, perRow float64 // how the build went
}

// pageBenchRows is the table size of BenchmarkFilteredPage: SVC_BENCH_ROWS,
// else 10,000,000 when -test.bench names FilteredPage, else 200,000 (so
// -bench . stays short).
func pageBenchRows() int {
	if v, err := strconv.Atoi(os.Getenv("SVC_BENCH_ROWS")); err == nil && v > 0 {
		return v
	}
	if f := flag.Lookup("test.bench"); f != nil && strings.Contains(f.Value.String(), "FilteredPage") {
		return 10_000_000
	}
	return 200_000
}

// pageStart is the ts of the first row of the page benchmark; one row per
// 10 ms.
var pageStart = time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC)

// pageRow is row i of the page benchmark: 2000 clients plus a rare one
// (1 row in 100,000), 10% of rows for one popular domain, the rest over
// 50,000 names, 1 in 20 blocked by list "ads", 1 in 10,000 failed, a
// third of the rest answered (with an upstream), the others cached; 1 in
// 4 AAAA and 1 in 1000 TXT.
func pageRow(i int, clients, domains []string) Row {
	x := uint64(i)*0x9E3779B97F4A7C15 + 1
	x ^= x >> 29
	x *= 0xBF58476D1CE4E5B9
	x ^= x >> 32
	r := Row{Time: pageStart.Add(time.Duration(i) * 10 * time.Millisecond), Node: "node-a", QType: "A", Rcode: "NOERROR",
		Transport: "udp", Duration: 1500 * time.Microsecond, Client: clients[x%uint64(len(clients))]}
	if i%100_000 == 77 {
		r.Client = "10.99.0.1"
	}
	if x>>20%10 == 0 {
		r.Domain = "popular.example"
	} else {
		r.Domain = domains[x>>24%uint64(len(domains))]
	}
	switch {
	case x>>8%20 == 0:
		r.Status, r.List, r.Rule, r.Rcode = "blocked", "ads", "||"+r.Domain+"^", "NXDOMAIN"
	case x>>8%10_000 == 1:
		r.Status, r.Rcode = "failed", "SERVFAIL"
	case x>>40%3 == 0:
		r.Status, r.Upstream = "answered", "192.0.2.53:53"
	default:
		r.Status = "cached"
	}
	switch {
	case x>>44%1000 == 0:
		r.QType = "TXT"
	case x>>44%4 == 0:
		r.QType = "AAAA"
	}
	return r
}

// openPageDB returns a writer on the page benchmark's database, building
// it through the writer's batch path on first use.
func openPageDB(b *testing.B, n int) *Writer {
	b.Helper()
	end := pageStart.Add(time.Duration(n) * 10 * time.Millisecond)
	opts := Options{MaintainEvery: -1, Now: func() time.Time { return end }}
	ctx := context.Background()
	if pageDB.dir != "" && pageDB.rows == n {
		cfg := DefaultConfig()
		cfg.DataDir, cfg.RetentionRaw = pageDB.dir, 0
		w, err := Open(ctx, cfg, opts)
		if err != nil {
			b.Fatal(err)
		}
		return w
	}
	if pageDB.dir != "" {
		os.RemoveAll(pageDB.dir)
	}
	dir, err := os.MkdirTemp("", "querylog-pages-")
	if err != nil {
		b.Fatal(err)
	}
	pageDB.dir, pageDB.rows = dir, 0
	cfg := DefaultConfig()
	cfg.DataDir, cfg.RetentionRaw = dir, 0
	w, err := Open(ctx, cfg, opts)
	if err != nil {
		b.Fatal(err)
	}
	clients := make([]string, 2000)
	for i := range clients {
		clients[i] = fmt.Sprintf("10.%d.%d.%d", i/65536, i/256%256, i%256)
	}
	domains := make([]string, 50_000)
	for i := range domains {
		domains[i] = fmt.Sprintf("host%d.example-domain.com", i)
	}
	t0, c0 := time.Now(), cpuTime()
	batch := make([]Row, 0, 5000)
	for i := range n {
		batch = append(batch, pageRow(i, clients, domains))
		if len(batch) == cap(batch) || i == n-1 {
			if err := w.write(ctx, batch); err != nil {
				b.Fatal(err)
			}
			batch = batch[:0]
		}
	}
	if _, err := w.store.w.Exec("PRAGMA wal_checkpoint(TRUNCATE)"); err != nil {
		b.Fatal(err)
	}
	pageDB.buildS, pageDB.rowsPerCPU = time.Since(t0).Seconds(), float64(n)/(cpuTime()-c0).Seconds()
	pageDB.perRow = bytesPerRow(b, w.store.w, n)
	pageDB.rows = n
	return w
}

// BenchmarkFilteredPage times the first page (50 rows, newest first) of
// each filter the routes offer over a large table (see pageBenchRows; the
// table is built once per run in a temp dir, about 3 minutes for 10^7
// rows). Each sub-benchmark reports the p50 and max of its calls in wall
// time and in process CPU time (the first call runs with cold caches; on a
// shared machine the CPU times are the steadier numbers); "worst" reports
// the worst of them.
//
//	go test -run '^$' -bench FilteredPage -benchtime 20x ./internal/querylog
func BenchmarkFilteredPage(b *testing.B) {
	n := pageBenchRows()
	var w *Writer
	// The build, through the writer's batch path into a growing table:
	// rows per CPU second over the whole build and bytes per row at the end.
	b.Run("build", func(b *testing.B) {
		if w == nil {
			w = openPageDB(b, n)
		}
		b.ReportMetric(float64(n), "table-rows")
		b.ReportMetric(pageDB.buildS, "build-s")
		b.ReportMetric(pageDB.rowsPerCPU, "rows/cpu-s")
		b.ReportMetric(pageDB.perRow, "B/row")
	})
	if w == nil {
		b.Fatal("no table")
	}
	defer w.Close()
	ctx := context.Background()
	last := pageStart.Add(time.Duration(n) * 10 * time.Millisecond)
	mid := pageStart.Add(time.Duration(n/2) * 10 * time.Millisecond)
	first, _, err := w.Rows(ctx, Filter{Status: "blocked", Limit: 50})
	if err != nil || len(first) != 50 {
		b.Fatalf("setup page: %d rows %v", len(first), err)
	}
	deep := encodeContinue(int64(n / 3))
	// Per filter: p50 of the last run, max over all runs (the first call
	// of the first run has cold caches).
	p50s, maxs := map[string]time.Duration{}, map[string]time.Duration{}
	cpuP50s, cpuMaxs := map[string]time.Duration{}, map[string]time.Duration{}
	for _, tc := range []struct {
		name string
		f    Filter
	}{
		{"none", Filter{}},
		{"client-rare", Filter{Client: "10.99.0.1"}},
		{"client", Filter{Client: "10.0.3.7"}},
		{"domain-common", Filter{Domain: "popular.example"}},
		{"domain-rare", Filter{Domain: "host4242.example-domain.com"}},
		{"domain-absent", Filter{Domain: "absent.example"}},
		{"domain-substring", Filter{Domain: "host4242.", DomainMatch: MatchSubstring}},
		{"status-blocked", Filter{Status: "blocked"}},
		{"status-failed", Filter{Status: "failed"}},
		{"class-error", Filter{StatusClass: ClassError}},
		{"class-allowed", Filter{StatusClass: ClassAllowed}},
		{"list", Filter{List: "ads"}},
		{"qtype-txt", Filter{QType: "TXT"}},
		{"upstream", Filter{Upstream: "192.0.2.53:53"}},
		{"window", Filter{Since: mid, Until: mid.Add(time.Hour)}},
		{"since", Filter{Since: last.Add(-10 * time.Minute)}},
		{"until-old", Filter{Until: pageStart.Add(time.Hour)}},
		{"combined-window", Filter{Client: "10.0.3.7", Status: "blocked", Since: mid, Until: mid.Add(6 * time.Hour)}},
		{"combined-rare", Filter{Client: "10.99.0.1", StatusClass: ClassAllowed, QType: "A"}},
		{"combined-domain", Filter{Domain: "popular.example", Status: "blocked", List: "ads"}},
		{"continue-deep", Filter{Status: "blocked", Continue: deep}},
	} {
		b.Run(tc.name, func(b *testing.B) {
			tc.f.Limit = 50
			times := make([]time.Duration, 0, b.N)
			cpus := make([]time.Duration, 0, b.N)
			got := 0
			for range b.N {
				t, c := time.Now(), cpuTime()
				rows, _, err := w.Rows(ctx, tc.f)
				times, cpus = append(times, time.Since(t)), append(cpus, cpuTime()-c)
				if err != nil {
					b.Fatal(err)
				}
				got = len(rows)
			}
			slices.Sort(times)
			slices.Sort(cpus)
			p50, mx := times[len(times)/2], times[len(times)-1]
			p50s[tc.name], maxs[tc.name] = p50, max(maxs[tc.name], mx)
			cpuP50s[tc.name], cpuMaxs[tc.name] = cpus[len(cpus)/2], max(cpuMaxs[tc.name], cpus[len(cpus)-1])
			b.ReportMetric(float64(p50.Microseconds())/1000, "p50-ms")
			b.ReportMetric(float64(maxs[tc.name].Microseconds())/1000, "max-ms")
			b.ReportMetric(float64(cpuP50s[tc.name].Microseconds())/1000, "cpu-p50-ms")
			b.ReportMetric(float64(cpuMaxs[tc.name].Microseconds())/1000, "cpu-max-ms")
			b.ReportMetric(float64(got), "rows")
		})
	}
	var worstP50, worstMax, worstCPUP50, worstCPUMax time.Duration
	for k := range p50s {
		worstP50, worstMax = max(worstP50, p50s[k]), max(worstMax, maxs[k])
		worstCPUP50, worstCPUMax = max(worstCPUP50, cpuP50s[k]), max(worstCPUMax, cpuMaxs[k])
	}
	b.Run("worst", func(b *testing.B) {
		b.ReportMetric(float64(worstP50.Microseconds())/1000, "p50-ms")
		b.ReportMetric(float64(worstMax.Microseconds())/1000, "max-ms")
		b.ReportMetric(float64(worstCPUP50.Microseconds())/1000, "cpu-p50-ms")
		b.ReportMetric(float64(worstCPUMax.Microseconds())/1000, "cpu-max-ms")
		b.ReportMetric(float64(n), "table-rows")
	})
}

func TestMain(m *testing.M) {
	code := m.Run()
	if pageDB.dir != "" {
		os.RemoveAll(pageDB.dir)
	}
	os.Exit(code)
}

// cpuTime is the process's user+system CPU time: on a shared, loaded
// machine rows per CPU second is the number that means something.
func cpuTime() time.Duration {
	var ru syscall.Rusage
	_ = syscall.Getrusage(syscall.RUSAGE_SELF, &ru)
	return time.Duration(ru.Utime.Nano() + ru.Stime.Nano())
}
