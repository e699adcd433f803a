package querylog

import (
	"context"
	"database/sql"
	"fmt"
	"math/rand/v2"
	"os"
	"reflect"
	"strings"
	"testing"
	"time"
)

// layoutRows are rows with every column used, some empty.
func layoutRows(n int, base time.Time) []Row {
	rows := make([]Row, n)
	statuses := []string{"answered", "cached", "cached", "blocked", "failed", "authoritative", "rewritten"}
	for i := range rows {
		r := Row{Time: base.Add(time.Duration(i) * time.Second), Node: "n1", Client: fmt.Sprintf("10.0.0.%d", i%7),
			Domain: fmt.Sprintf("d%d.example", i%11), QType: []string{"A", "AAAA", "TXT"}[i%3], Rcode: "NOERROR",
			Status: statuses[i%len(statuses)], Transport: []string{"udp", "tcp", "doh"}[i%3], Duration: time.Duration(i) * time.Microsecond}
		if r.Status == "blocked" {
			r.List, r.Rule, r.Reason, r.Rcode = fmt.Sprintf("list%d", i%2), "||"+r.Domain+"^", "blocklist", "NXDOMAIN"
		}
		if r.Status == "answered" {
			r.Upstream = "192.0.2.53:53"
			r.Policy = "kids"
		}
		if i%5 == 0 {
			r.ClientName, r.Zone = "laptop", "corp.example"
		}
		if i%13 == 0 {
			r.Client, r.Domain = "", ""
		}
		rows[i] = r
	}
	return rows
}

// normalize drops what the store does not keep (Group) and gives ids.
func normalizeRows(rows []Row, firstID int64) []Row {
	out := make([]Row, len(rows))
	for i, r := range rows {
		r.ID, r.Group, r.Time = firstID+int64(i), "", time.UnixMicro(r.Time.UnixMicro()).UTC()
		out[i] = r
	}
	return out
}

func allRows(t *testing.T, w *Writer) []Row {
	t.Helper()
	var out []Row
	f := Filter{Limit: maxLimit}
	for {
		rows, next, err := w.Rows(context.Background(), f)
		if err != nil {
			t.Fatal(err)
		}
		out = append(out, rows...)
		if next == "" {
			break
		}
		f.Continue = next
	}
	// oldest first
	for i, j := 0, len(out)-1; i < j; i, j = i+1, j-1 {
		out[i], out[j] = out[j], out[i]
	}
	return out
}

// checkLayout requires the blocks layout in the writer's meta.
func checkLayout(t *testing.T, w *Writer) {
	t.Helper()
	var layout string
	if err := w.store.r.QueryRow("SELECT v FROM meta WHERE k = 'layout'").Scan(&layout); err != nil || layout != layoutBlocks {
		t.Fatalf("layout %q %v", layout, err)
	}
}

// Names past a kind's dictionary cap are stored as text and still read,
// filtered and reopened correctly.
func TestNamesPastCapStoredAsText(t *testing.T) {
	old := kindCap[kList]
	kindCap[kList] = 3
	defer func() { kindCap[kList] = old }()
	cfg := DefaultConfig()
	cfg.DataDir, cfg.RetentionRaw = t.TempDir(), 0
	base := time.Now().Add(-time.Hour)
	w, err := Open(context.Background(), cfg, Options{MaintainEvery: -1})
	if err != nil {
		t.Fatal(err)
	}
	var src []Row
	for i := range 20 {
		r := row(base.Add(time.Duration(i)*time.Second), "x.example", "10.0.0.1", "blocked")
		r.List = fmt.Sprintf("%d", i%6) // numeric-looking names too
		src = append(src, r)
		w.Enqueue(r)
	}
	flush(t, w)
	// Decoded without the dictionary, only values stored as text are left.
	texts := 0
	for _, b := range rawBlocks(t, w) {
		for id := b.first; id <= b.last; id++ {
			var r Row
			b.row(id, &r)
			if r.List != "" {
				texts++
			}
		}
	}
	if texts == 0 {
		t.Fatal("no list stored as text")
	}
	check := func(w *Writer) {
		want := normalizeRows(src, 1)
		if got := allRows(t, w); !reflect.DeepEqual(got, want) {
			t.Fatalf("rows differ:\n got %+v\nwant %+v", got, want)
		}
		for l := range 6 {
			rows, _, err := w.Rows(context.Background(), Filter{List: fmt.Sprint(l), Status: "blocked", Limit: 100})
			if err != nil || len(rows) == 0 {
				t.Fatalf("list %d: %d rows %v", l, len(rows), err)
			}
			for _, r := range rows {
				if r.List != fmt.Sprint(l) {
					t.Fatalf("list %d: got row of list %q", l, r.List)
				}
			}
		}
	}
	check(w)
	if err := w.Close(); err != nil {
		t.Fatal(err)
	}
	w2 := openTest(t, cfg, Options{})
	check(w2)
}

func TestNamesRollback(t *testing.T) {
	n := newNames()
	a := n.encode(kList, "a")
	n.committed()
	b := n.encode(kList, "b")
	n.rollback()
	if _, ok := n.lookup(kList, "b"); ok || n.decode(b) != "" || n.decode(a) != "a" {
		t.Fatalf("after rollback: %v %v", n.decode(a), n.decode(b))
	}
	if c := n.encode(kList, "c"); c != b {
		t.Fatalf("id not reused after rollback: %v vs %v", c, b)
	}
}

// rawBlocks decodes every block of w's file without the names dictionary.
func rawBlocks(t *testing.T, w *Writer) []*rowBlock {
	t.Helper()
	rs, err := w.store.r.Query("SELECT first, last, data FROM blocks ORDER BY first")
	if err != nil {
		t.Fatal(err)
	}
	defer rs.Close()
	var out []*rowBlock
	for rs.Next() {
		var first, last int64
		var data []byte
		if err := rs.Scan(&first, &last, &data); err != nil {
			t.Fatal(err)
		}
		b, err := decodeBlock(first, data, nil)
		if err != nil || b.last != last {
			t.Fatalf("block %d..%d: %v", first, last, err)
		}
		out = append(out, b)
	}
	if err := rs.Err(); err != nil {
		t.Fatal(err)
	}
	return out
}

// checkFilters pages through each filter and compares with Filter.Match
// over all rows (want, oldest first).
func checkFilters(t *testing.T, w *Writer, want []Row, extra ...Filter) {
	t.Helper()
	mid := want[len(want)/2].Time
	filters := []Filter{
		{Client: "10.0.0.3"}, {Client: "10.0.0.99"}, {Domain: "d4.example"}, {Domain: "d4", DomainMatch: MatchSubstring},
		{Status: "blocked"}, {StatusClass: ClassAllowed}, {StatusClass: ClassError}, {List: "list1"}, {QType: "TXT"},
		{Upstream: "192.0.2.53:53"}, {Zone: "corp.example"}, {Policy: "kids"}, {Since: mid}, {Until: mid},
		{Since: mid.Add(-time.Minute), Until: mid.Add(time.Minute)},
		{Client: "10.0.0.3", Status: "blocked"}, {Client: "10.0.0.3", StatusClass: ClassAllowed, QType: "A"},
		{Domain: "d4.example", Client: "10.0.0.3", Since: want[0].Time.Add(10 * time.Second)},
		{Status: "blocked", StatusClass: ClassAllowed},
	}
	filters = append(filters, extra...)
	for _, f := range filters {
		var exp []int64
		for i := len(want) - 1; i >= 0; i-- {
			if f.Match(&want[i]) {
				exp = append(exp, want[i].ID)
			}
		}
		var got []int64
		f.Limit = 7
		if len(want) > 10_000 {
			f.Limit = 997
		}
		for pages := 0; ; pages++ {
			if pages > 10000 {
				t.Fatalf("%+v: no end", f)
			}
			rows, next, err := w.Rows(context.Background(), f)
			if err != nil {
				t.Fatalf("%+v: %v", f, err)
			}
			for i := range rows {
				if !f.Match(&rows[i]) {
					t.Fatalf("%+v: row %+v does not match", f, rows[i])
				}
				got = append(got, rows[i].ID)
			}
			if next == "" {
				break
			}
			f.Continue = next
		}
		if fmt.Sprint(got) != fmt.Sprint(exp) {
			t.Fatalf("%+v:\n got %v\nwant %v", f, got, exp)
		}
	}
}

// Filters over several postings buckets, with rows written out of time
// order (within the allowed disorder), answer exactly what a scan of all
// rows would, page after page.
func TestFiltersAcrossBuckets(t *testing.T) {
	if testing.Short() {
		t.Skip("writes 60,000 rows")
	}
	cfg := DefaultConfig()
	cfg.RetentionRaw = 0
	base := time.Date(2026, 3, 1, 0, 0, 0, 0, time.UTC)
	n := 60_000 // bucketOf(60000) = 3: four buckets
	w := openTest(t, cfg, Options{ScanBudget: 20_000, Now: func() time.Time { return base.Add(time.Duration(n) * 100 * time.Millisecond) }})
	rnd := rand.New(rand.NewPCG(1, 2))
	src := layoutRows(n, base)
	for i := range src {
		src[i].Time = base.Add(time.Duration(i)*100*time.Millisecond - time.Duration(rnd.IntN(20))*time.Second)
		if rnd.IntN(5000) == 0 {
			src[i].Client = "10.9.9.9" // rare
		}
	}
	for i := 0; i < n; i += 5000 {
		batch := append([]Row(nil), src[i:i+5000]...)
		if err := w.write(context.Background(), batch); err != nil {
			t.Fatal(err)
		}
	}
	want := normalizeRows(src, 1)
	checkFilters(t, w, want, Filter{Client: "10.9.9.9"}, Filter{Client: "10.9.9.9", Status: "cached"},
		Filter{Until: base.Add(10 * time.Minute), Domain: "d3.example"}, Filter{Since: base.Add(50 * time.Minute), Client: "10.0.0.2", List: "list0"})
}

// The clients table's changes wait in memory between writes: Clients
// overlays them at once, Close writes them, a reopened file has them.
func TestClientsPendingOverlayAndClose(t *testing.T) {
	cfg := DefaultConfig()
	cfg.DataDir, cfg.RetentionRaw = t.TempDir(), 0
	now := time.Now()
	w, err := Open(context.Background(), cfg, Options{MaintainEvery: -1, Now: func() time.Time { return now }})
	if err != nil {
		t.Fatal(err)
	}
	r := row(now.Add(-time.Minute), "a.example", "10.0.0.1", "cached")
	r.ClientName, r.Group = "laptop", "kids"
	w.Enqueue(r)
	r2 := row(now.Add(-time.Second), "b.example", "10.0.0.1", "cached")
	w.Enqueue(r2)
	flush(t, w)
	check := func(w *Writer) {
		t.Helper()
		cl, err := w.Clients(context.Background(), ClientsRequest{})
		if err != nil || len(cl.Items) != 1 {
			t.Fatalf("clients %+v %v", cl, err)
		}
		it := cl.Items[0]
		if it.Name != "laptop" || it.Group != "kids" || it.LastSeen == nil || !it.LastSeen.Equal(time.UnixMicro(r2.Time.UnixMicro())) {
			t.Fatalf("client %+v, want laptop/kids last seen %v", it, r2.Time)
		}
	}
	check(w)
	var n int
	if err := w.store.r.QueryRow("SELECT count(*) FROM clients").Scan(&n); err != nil || n != 0 {
		t.Fatalf("clients written before they were due: %d %v", n, err)
	}
	if err := w.Close(); err != nil {
		t.Fatal(err)
	}
	w2 := openTest(t, cfg, Options{Now: func() time.Time { return now }})
	check(w2)
}

// After retention and the size cap deleted rows, the postings of the
// deleted rows are gone or skipped: filtered pages list the rows left.
func TestFiltersAfterDeletes(t *testing.T) {
	base := time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC)
	c := &clock{t: base}
	cfg := DefaultConfig()
	cfg.RetentionRaw = time.Hour
	w := openTest(t, cfg, Options{Now: c.now})
	src := layoutRows(40_000, base) // one row a second: 11 hours
	for i := 0; i < len(src); i += 5000 {
		batch := append([]Row(nil), src[i:i+5000]...)
		if err := w.write(context.Background(), batch); err != nil {
			t.Fatal(err)
		}
	}
	c.set(src[len(src)-1].Time)
	if err := w.Maintain(context.Background()); err != nil {
		t.Fatal(err)
	}
	cut := c.now().Add(-time.Hour)
	var want []Row
	for _, r := range normalizeRows(src, 1) {
		if !r.Time.Before(cut) {
			want = append(want, r)
		}
	}
	if got := allRows(t, w); !reflect.DeepEqual(got, want) {
		t.Fatalf("after retention: %d rows, want %d", len(got), len(want))
	}
	var below int
	if err := w.store.r.QueryRow("SELECT count(*) FROM postings WHERE k < ?", postKey(bucketOf(want[0].ID), 0, 0)).Scan(&below); err != nil || below != 0 {
		t.Fatalf("%d postings of deleted buckets left: %v", below, err)
	}
	checkFilters(t, w, want)
}

// Files of a layout this binary does not read are refused at open, with an
// error naming the file and what to do, and left byte for byte as they
// were: the layouts before blocks were never released, so none is
// converted. The legacy and compact files are written by the old write
// paths kept as benchmark baselines (legacy_test.go, compact_test.go).
func TestUnknownLayoutRefused(t *testing.T) {
	exec := func(stmts ...string) func(t *testing.T, dir string) {
		return func(t *testing.T, dir string) {
			db, err := sql.Open("sqlite", "file:"+DBPath(dir))
			if err != nil {
				t.Fatal(err)
			}
			defer db.Close()
			for _, q := range stmts {
				if _, err := db.Exec(q); err != nil {
					t.Fatal(err)
				}
			}
		}
	}
	rows := layoutRows(300, time.Date(2026, 5, 1, 10, 0, 0, 0, time.UTC))
	for name, c := range map[string]struct {
		make func(t *testing.T, dir string)
		want string
	}{
		"schema1": {exec("CREATE TABLE queries (id INTEGER PRIMARY KEY, ts INTEGER NOT NULL, client TEXT, domain TEXT, qtype TEXT, status TEXT)", "PRAGMA user_version = 1"),
			"schema 1 of an unknown layout"},
		"legacy": {func(t *testing.T, dir string) {
			lw := newLegacyWriter(t, dir)
			defer lw.db.Close()
			if err := lw.write(context.Background(), append([]Row(nil), rows...)); err != nil {
				t.Fatal(err)
			}
		}, `unknown layout ""`},
		"compact": {func(t *testing.T, dir string) { makeCompactFile(t, dir, rows) }, `unknown layout "compact-1"`},
		"meta": {exec("CREATE TABLE meta (k TEXT PRIMARY KEY, v BLOB)", "INSERT INTO meta VALUES ('layout', 'blocks-9')", "PRAGMA user_version = 2"),
			`unknown layout "blocks-9"`},
		"noversion": {exec("CREATE TABLE other (x)"), "no schema version"},
		"newer":     {exec("PRAGMA user_version = 3"), "newer than this binary"},
	} {
		t.Run(name, func(t *testing.T) {
			dir := t.TempDir()
			c.make(t, dir)
			files := func() map[string]string {
				m := map[string]string{}
				// -shm is the WAL's shared-memory index: any reader
				// writes it, the data is in the file and the WAL (a
				// reader of a WAL file may leave an empty one behind).
				for _, suf := range []string{"", "-wal"} {
					b, err := os.ReadFile(DBPath(dir) + suf)
					if err == nil && len(b) > 0 {
						m[suf] = string(b)
					}
				}
				return m
			}
			before := files()
			cfg := DefaultConfig()
			cfg.DataDir = dir
			w, err := Open(context.Background(), cfg, Options{MaintainEvery: -1})
			if err == nil {
				w.Close()
				t.Fatal("opened")
			}
			for _, want := range []string{DBPath(dir), c.want, "move the file", "rebuilt empty"} {
				if !strings.Contains(err.Error(), want) {
					t.Errorf("error %q does not say %q", err, want)
				}
			}
			if after := files(); !reflect.DeepEqual(before, after) {
				for k := range before {
					if before[k] != after[k] {
						t.Errorf("querylog.db%s changed", k)
					}
				}
				t.Fatal("file changed")
			}
		})
	}
}
