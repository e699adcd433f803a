package querylog

import (
	"context"
	"database/sql/driver"
	"fmt"
	"strings"
	"testing"
)

// The write path of the compact layout (compact-1: one queries row per
// query, 17 bound values, 64-row INSERTs), as it was before blocks, never
// released: the same-run baseline of BenchmarkWriteRowsVsCompact, and it
// writes a compact file TestUnknownLayoutRefused requires to be refused.

// schemaV2CompactQueries is the compact layout's queries table:
// dictionary-encoded columns (see names.go), NULL for empty values, no
// secondary index.
const schemaV2CompactQueries = `
CREATE TABLE queries (
  id INTEGER PRIMARY KEY,
  ts INTEGER NOT NULL,       -- unix microseconds
  status,                    -- names.id, or the text past the dictionary cap
  domain TEXT,               -- NULL for ''
  client TEXT,
  qtype, rcode, node, client_name, reason, list, rule, policy, upstream, zone, transport, -- like status
  duration_us INTEGER NOT NULL
);`

// rowColumns is the insert column order of the compact queries table.
const rowColumns = "id, ts, status, domain, client, qtype, rcode, node, client_name, reason, list, rule, policy, upstream, zone, transport, duration_us"

const nRowColumns = 17

// useCompactPath switches w to the compact layout's row inserts (the rest
// of the batch path, postings and rollups included, is shared).
func useCompactPath(tb testing.TB, w *Writer) {
	tb.Helper()
	if _, err := w.store.w.Exec(schemaV2CompactQueries); err != nil {
		tb.Fatal(err)
	}
	w.posts.bits = 10 // the compact layout's 1024 groups
	w.posts.pub = nil // written per batch, as the compact layout was
	w.storeRows = func(d *dconn, rows []Row) error { return d.insertCompactRows(w.store.names, &w.posts, rows) }
}

// makeCompactFile writes rows (in batches of 5000) into a compact-1 file in dir.
func makeCompactFile(tb testing.TB, dir string, rows []Row) {
	tb.Helper()
	cfg := DefaultConfig()
	cfg.DataDir, cfg.RetentionRaw = dir, 0
	w, err := Open(context.Background(), cfg, Options{MaintainEvery: -1})
	if err != nil {
		tb.Fatal(err)
	}
	useCompactPath(tb, w)
	for i := 0; i < len(rows); i += 5000 {
		batch := append([]Row(nil), rows[i:min(i+5000, len(rows))]...)
		if err := w.write(context.Background(), batch); err != nil {
			tb.Fatal(err)
		}
	}
	for _, q := range []string{"DROP TABLE blocks", "UPDATE meta SET v = 'compact-1' WHERE k = 'layout'"} {
		if _, err := w.store.w.Exec(q); err != nil {
			tb.Fatal(err)
		}
	}
	if err := w.Close(); err != nil {
		tb.Fatal(err)
	}
}

// insertChunk is how many rows one INSERT statement carries (64 and 100
// measured alike; 1 costs about 20% more).
const insertChunk = 64

func insertCompactSQL(n int) string {
	var b strings.Builder
	b.WriteString("INSERT INTO queries (" + rowColumns + ") VALUES ")
	row := "(" + strings.TrimSuffix(strings.Repeat("?,", nRowColumns), ",") + ")"
	for i := range n {
		if i > 0 {
			b.WriteByte(',')
		}
		b.WriteString(row)
	}
	return b.String()
}

// insertRows writes rows (ids assigned) with the names encoded by nm; new
// names are inserted first.
func (d *dconn) insertCompactRows(nm *names, pb *postingBuilder, rows []Row) error {
	pb.reset()
	vals := make([][nRowColumns]any, 0, insertChunk)
	chunkSQL := insertCompactSQL(insertChunk)
	oneSQL := insertCompactSQL(1)
	flushVals := func() error {
		q := oneSQL
		if len(vals) == insertChunk {
			q = chunkSQL
		}
		st, err := d.stmt(q)
		if err != nil {
			return fmt.Errorf("prepare insert: %w", err)
		}
		if q == oneSQL {
			for i := range vals {
				d.setNV(vals[i : i+1])
				if err := d.execNV(st); err != nil {
					return fmt.Errorf("insert rows: %w", err)
				}
			}
		} else {
			d.setNV(vals)
			if err := d.execNV(st); err != nil {
				return fmt.Errorf("insert rows: %w", err)
			}
		}
		vals = vals[:0]
		return nil
	}
	pending := 0 // staged names already written
	for i := range rows {
		r := &rows[i]
		var v [nRowColumns]any
		v[0], v[1] = r.ID, r.Time.UnixMicro()
		v[2] = nm.encode(kStatus, r.Status)
		v[3], v[4] = nullable(r.Domain), nullable(r.Client)
		for k := kQType; k <= kTransport; k++ { // the compact layout predates client IDs
			v[5+k-kQType] = nm.encode(k, *rowField(r, k))
		}
		v[16] = r.Duration.Microseconds()
		pb.addRow(r.ID, r.Domain, 0, r.Client, v[2])
		if len(nm.staged) > pending {
			for _, e := range nm.staged[pending:] {
				if err := d.exec("INSERT INTO names (id, kind, name) VALUES (?, ?, ?)", e.id, int64(e.kind), e.name); err != nil {
					return fmt.Errorf("insert names: %w", err)
				}
			}
			pending = len(nm.staged)
		}
		vals = append(vals, v)
		if len(vals) == insertChunk {
			if err := flushVals(); err != nil {
				return err
			}
		}
	}
	if len(vals) > 0 {
		if err := flushVals(); err != nil {
			return err
		}
	}
	return pb.write(d)
}

func (d *dconn) setNV(vals [][nRowColumns]any) {
	d.nv = d.nv[:0]
	for i := range vals {
		for _, v := range vals[i] {
			d.nv = append(d.nv, driver.NamedValue{Ordinal: len(d.nv) + 1, Value: v})
		}
	}
}

func nullable(s string) any {
	if s == "" {
		return nil
	}
	return s
}
