package querylog

import (
	"context"
	"fmt"
	"sync"
	"testing"
	"time"
)

// clock is an injected, settable clock.
type clock struct {
	mu sync.Mutex
	t  time.Time
}

func (c *clock) now() time.Time  { c.mu.Lock(); defer c.mu.Unlock(); return c.t }
func (c *clock) set(t time.Time) { c.mu.Lock(); c.t = t; c.mu.Unlock() }

func openTest(t *testing.T, cfg Config, opts Options) *Writer {
	t.Helper()
	if cfg.DataDir == "" {
		cfg.DataDir = t.TempDir()
	}
	opts.MaintainEvery = -1
	w, err := Open(context.Background(), cfg, opts)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		if err := w.Close(); err != nil {
			t.Error(err)
		}
	})
	return w
}

func row(ts time.Time, domain, client, status string) Row {
	return Row{Time: ts, Domain: domain, Client: client, Status: status, QType: "A", Rcode: "NOERROR", Node: "n1", Duration: 2 * time.Millisecond}
}

func flush(t *testing.T, w *Writer) {
	t.Helper()
	if err := w.Flush(context.Background()); err != nil {
		t.Fatal(err)
	}
}

func TestRetentionDeletesOldestRawRowsAndRollups(t *testing.T) {
	base := time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC)
	c := &clock{t: base}
	cfg := DefaultConfig()
	cfg.RetentionRaw = 48 * time.Hour
	w := openTest(t, cfg, Options{Now: c.now})
	// One row a day for 40 days.
	for d := range 40 {
		w.Enqueue(row(base.Add(time.Duration(d)*24*time.Hour), fmt.Sprintf("day%d.example", d), "10.0.0.1", "answered"))
	}
	flush(t, w)
	c.set(base.Add(39*24*time.Hour + time.Hour))
	if err := w.Maintain(context.Background()); err != nil {
		t.Fatal(err)
	}
	rows, _, err := w.Rows(context.Background(), Filter{Limit: 100})
	if err != nil || len(rows) != 2 || rows[0].Domain != "day39.example" || rows[1].Domain != "day38.example" {
		t.Fatalf("raw rows after retention: %+v %v", rows, err)
	}
	// Per-minute totals keep 35 days, per-hour and per-day everything here.
	var n60, n3600, n86400 int
	for _, p := range []struct {
		res int
		n   *int
	}{{60, &n60}, {3600, &n3600}, {86400, &n86400}} {
		if err := w.store.r.QueryRow("SELECT count(*) FROM totals WHERE res = ?", p.res).Scan(p.n); err != nil {
			t.Fatal(err)
		}
	}
	if n60 != 35 || n3600 != 40 || n86400 != 40 {
		t.Fatalf("totals rows per resolution: %d %d %d, want 35 40 40", n60, n3600, n86400)
	}
	// The summary over 30 days still counts what raw retention deleted.
	sum, err := w.Summary(context.Background(), 30*24*time.Hour)
	if err != nil || sum.Total != 30 {
		t.Fatalf("30-day summary %+v %v", sum, err)
	}
	// Live update: retention 0 keeps rows until the size cap.
	cfg.RetentionRaw = 0
	if err := w.Update(cfg); err != nil {
		t.Fatal(err)
	}
	c.set(base.Add(400 * 24 * time.Hour))
	if err := w.Maintain(context.Background()); err != nil {
		t.Fatal(err)
	}
	if rows, _, _ := w.Rows(context.Background(), Filter{}); len(rows) != 2 {
		t.Fatalf("retention 0 deleted rows: %d left", len(rows))
	}
}

func TestSizeCapDeletesOldestFirst(t *testing.T) {
	base := time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC)
	c := &clock{t: base}
	cfg := DefaultConfig()
	cfg.RetentionRaw = 0
	cfg.MaxDBBytes = 1 << 20
	w := openTest(t, cfg, Options{Now: c.now})
	const n = 20000
	for i := range n {
		r := row(base.Add(time.Duration(i)*100*time.Millisecond), fmt.Sprintf("host-%d.some-longer-domain-name.example", i), fmt.Sprintf("10.0.%d.%d", i/256%256, i%256), "answered")
		for !w.Enqueue(r) {
			flush(t, w)
		}
	}
	flush(t, w)
	used, _, err := w.store.usedBytes(context.Background())
	if err != nil || used <= cfg.MaxDBBytes {
		t.Fatalf("test data too small: %d bytes %v", used, err)
	}
	c.set(base.Add(n * 100 * time.Millisecond))
	if err := w.Maintain(context.Background()); err != nil {
		t.Fatal(err)
	}
	_, file, err := w.store.usedBytes(context.Background())
	if err != nil || file > cfg.MaxDBBytes {
		t.Fatalf("file %d bytes after cap of %d: %v", file, cfg.MaxDBBytes, err)
	}
	var lo, hi, cnt int64
	if err := w.store.r.QueryRow("SELECT min(first), max(last), sum(last - first + 1) FROM blocks").Scan(&lo, &hi, &cnt); err != nil {
		t.Fatal(err)
	}
	if hi != n || cnt != hi-lo+1 || cnt >= n || cnt < n/10 {
		t.Fatalf("after cap: ids %d..%d, %d rows; want the newest kept, contiguous", lo, hi, cnt)
	}
	t.Logf("size cap kept %d of %d rows in %d bytes", cnt, n, file)
}

func TestOverloadDropsAndCounts(t *testing.T) {
	w := openTest(t, DefaultConfig(), Options{BufferRows: 8, BatchRows: 8})
	now := time.Now()
	accepted := 0
	start := time.Now()
	const n = 50000
	for i := range n {
		if w.Enqueue(row(now, "x.example", "10.0.0.1", "answered")) {
			accepted++
		}
		_ = i
	}
	if el := time.Since(start); el > 2*time.Second {
		t.Fatalf("Enqueue blocked: %v for %d rows", el, n)
	}
	flush(t, w)
	if d := w.Dropped(); d == 0 || int(d)+accepted != n {
		t.Fatalf("dropped %v + accepted %d != %d", d, accepted, n)
	}
	var cnt int
	if err := w.store.r.QueryRow("SELECT coalesce(sum(last - first + 1), 0) FROM blocks").Scan(&cnt); err != nil || cnt != accepted {
		t.Fatalf("%d rows stored, %d accepted: %v", cnt, accepted, err)
	}
}

func TestSlogSink(t *testing.T) {
	cfg := DefaultConfig()
	cfg.Sink = SinkSlog
	var buf syncBuffer
	w := openTest(t, cfg, Options{Logger: newJSONLogger(&buf)})
	w.Enqueue(row(time.Now(), "slog.example", "10.0.0.1", "blocked"))
	flush(t, w)
	if _, _, err := w.Rows(context.Background(), Filter{}); err != ErrNoStore {
		t.Fatalf("rows from slog sink: %v", err)
	}
	if s := buf.String(); !contains(s, `"domain":"slog.example"`) || !contains(s, `"status":"blocked"`) || !contains(s, `"msg":"query"`) {
		t.Fatalf("slog line: %s", s)
	}
}

func TestUnindexedFilterPagesAreBounded(t *testing.T) {
	w := openTest(t, DefaultConfig(), Options{ScanBudget: 10})
	base := time.Now().Add(-time.Hour)
	for i := range 55 {
		r := row(base.Add(time.Duration(i)*time.Second), fmt.Sprintf("h%d.example", i), "10.0.0.1", "answered")
		if i == 4 || i == 30 {
			r.List = "rare"
		}
		w.Enqueue(r)
	}
	flush(t, w)
	var got []int64
	pages := 0
	f := Filter{List: "rare", Limit: 50}
	for ; pages < 100; pages++ {
		rows, next, err := w.Rows(context.Background(), f)
		if err != nil {
			t.Fatal(err)
		}
		for _, r := range rows {
			got = append(got, r.ID)
		}
		if next == "" {
			break
		}
		f.Continue = next
	}
	if fmt.Sprint(got) != "[31 5]" || pages < 5 || pages > 6 {
		t.Fatalf("ids %v in %d pages, want [31 5] in about 55/10 pages", got, pages+1)
	}
	// With an indexed filter the page is not windowed.
	rows, _, err := w.Rows(context.Background(), Filter{List: "rare", Status: "answered"})
	if err != nil || len(rows) != 2 {
		t.Fatalf("indexed: %d rows %v", len(rows), err)
	}
}

// Retention deletes whole blocks; the rows of a partly expired block that
// are older than the cut are hidden from every read (pages, the stream's
// replay, after a reopen too), so nothing older than the retention shows.
func TestRetentionHidesOldRowsOfPartlyExpiredBlock(t *testing.T) {
	base := time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC)
	c := &clock{t: base}
	cfg := DefaultConfig()
	cfg.DataDir, cfg.RetentionRaw = t.TempDir(), time.Hour
	w, err := Open(context.Background(), cfg, Options{Now: c.now, MaintainEvery: -1})
	if err != nil {
		t.Fatal(err)
	}
	var batch []Row
	for i := range 120 { // one block: a row a minute for two hours
		batch = append(batch, row(base.Add(time.Duration(i)*time.Minute), fmt.Sprintf("d%d.example", i), "10.0.0.1", "cached"))
	}
	if err := w.write(context.Background(), batch); err != nil {
		t.Fatal(err)
	}
	c.set(base.Add(150 * time.Minute)) // cut at 90 minutes: rows 90..119 stay
	if err := w.Maintain(context.Background()); err != nil {
		t.Fatal(err)
	}
	check := func(w *Writer) {
		t.Helper()
		rows, _, err := w.Rows(context.Background(), Filter{Limit: 1000})
		if err != nil || len(rows) != 30 || rows[29].ID != 91 {
			t.Fatalf("rows after retention: %d %v", len(rows), err)
		}
		if rows, _, _ := w.Rows(context.Background(), Filter{Client: "10.0.0.1", Limit: 1000}); len(rows) != 30 {
			t.Fatalf("client rows after retention: %d", len(rows))
		}
		var ids []int64
		ctx, cancel := context.WithCancel(context.Background())
		defer cancel()
		_ = w.Stream(ctx, 0, 10, nil, func(r Row) error {
			ids = append(ids, r.ID)
			if r.ID == 120 {
				cancel()
			}
			return nil
		})
		if len(ids) != 30 || ids[0] != 91 {
			t.Fatalf("stream replay after retention: %v", ids)
		}
	}
	check(w)
	if err := w.Close(); err != nil {
		t.Fatal(err)
	}
	w2 := openTest(t, cfg, Options{Now: c.now})
	check(w2)
}
