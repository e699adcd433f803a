package querylog

import (
	"context"
	"database/sql"
	"fmt"
	"strings"
	"testing"

	"github.com/svcdns/svc/internal/sqlitedb"
)

// The write path of the legacy schema 2 layout (text columns, indexes on
// ts, domain hash, client hash and status, inserts through database/sql in
// 100-row statements), as it was before the compact layout, never
// released: the baseline of BenchmarkWriteRowsVsLegacy, and it writes a
// legacy file TestUnknownLayoutRefused requires to be refused.

// schemaV2LegacyQueries is the legacy layout's queries table.
const schemaV2LegacyQueries = `
CREATE TABLE queries (
  id INTEGER PRIMARY KEY,
  ts INTEGER NOT NULL,
  client TEXT NOT NULL DEFAULT '',
  domain TEXT NOT NULL DEFAULT '',
  qtype TEXT NOT NULL DEFAULT '',
  status TEXT NOT NULL DEFAULT '',
  node TEXT NOT NULL DEFAULT '',
  client_name TEXT NOT NULL DEFAULT '',
  rcode TEXT NOT NULL DEFAULT '',
  reason TEXT NOT NULL DEFAULT '',
  list TEXT NOT NULL DEFAULT '',
  rule TEXT NOT NULL DEFAULT '',
  policy TEXT NOT NULL DEFAULT '',
  upstream TEXT NOT NULL DEFAULT '',
  zone TEXT NOT NULL DEFAULT '',
  transport TEXT NOT NULL DEFAULT '',
  duration_us INTEGER NOT NULL DEFAULT 0,
  dh INTEGER NOT NULL DEFAULT 0, -- nameHash(domain): the domain index
  ch INTEGER NOT NULL DEFAULT 0  -- nameHash(client): the client index
);
CREATE INDEX IF NOT EXISTS queries_ts ON queries(ts);
CREATE INDEX IF NOT EXISTS queries_dh ON queries(dh);
CREATE INDEX IF NOT EXISTS queries_ch ON queries(ch);
CREATE INDEX IF NOT EXISTS queries_status ON queries(status);`

const legacyInsertColumns = "id, ts, client, domain, qtype, status, node, client_name, rcode, reason, list, rule, policy, upstream, zone, transport, duration_us, dh, ch"

// openLegacy creates querylog.db in dir with the legacy layout.
func openLegacy(tb testing.TB, dir string) *sql.DB {
	tb.Helper()
	db, err := sqlitedb.Open(DBPath(dir), writerOptions)
	if err != nil {
		tb.Fatal(err)
	}
	db.SetMaxOpenConns(1)
	for _, q := range []string{"PRAGMA page_size = 16384", "PRAGMA auto_vacuum = INCREMENTAL", "VACUUM",
		schemaV2LegacyQueries, schemaV2Rollups, "PRAGMA user_version = 2"} {
		if _, err := db.Exec(q); err != nil {
			tb.Fatal(err)
		}
	}
	return db
}

// legacyWriter is the old batch path: policy, ids, rows, rollups.
type legacyWriter struct {
	db     *sql.DB
	pol    *policy
	nextID int64
	agg    rollup
	hour   hourCounts
	args   []any
}

func newLegacyWriter(tb testing.TB, dir string) *legacyWriter {
	cfg := DefaultConfig()
	p, err := compilePolicy(cfg, []byte("k"))
	if err != nil {
		tb.Fatal(err)
	}
	lw := &legacyWriter{db: openLegacy(tb, dir), pol: p, nextID: 1}
	lw.hour.reset(0)
	return lw
}

func legacyInsertSQL(n int) string {
	var b strings.Builder
	b.WriteString("INSERT INTO queries (" + legacyInsertColumns + ") VALUES ")
	for i := range n {
		if i > 0 {
			b.WriteByte(',')
		}
		b.WriteString("(?,?,?,?,?,?,?,?,?,?,?,?,?,?,?,?,?,?,?)")
	}
	return b.String()
}

func (lw *legacyWriter) write(ctx context.Context, batch []Row) error {
	rows := batch[:0]
	agg := &lw.agg
	agg.reset()
	for i := range batch {
		r := &batch[i]
		if lw.pol.excluded(r) {
			continue
		}
		keep := lw.pol.apply(r)
		agg.add(r, keep)
		if !keep {
			continue
		}
		r.ID = lw.nextID
		lw.nextID++
		rows = append(rows, *r)
	}
	agg.finish()
	return inTx(ctx, lw.db, func(tx *sql.Tx) error {
		var chunk *sql.Stmt
		for rest := rows; len(rest) > 0; {
			n := min(len(rest), 100)
			lw.args = lw.args[:0]
			for i := range rest[:n] {
				r := &rest[i]
				lw.args = append(lw.args, r.ID, r.Time.UnixMicro(), r.Client, r.Domain, r.QType, r.Status, r.Node, r.ClientName,
					r.Rcode, r.Reason, r.List, r.Rule, r.Policy, r.Upstream, r.Zone, r.Transport, r.Duration.Microseconds(),
					nameHash(r.Domain), nameHash(r.Client))
			}
			var err error
			if n == 100 {
				if chunk == nil {
					if chunk, err = tx.PrepareContext(ctx, legacyInsertSQL(100)); err != nil {
						return err
					}
					defer chunk.Close()
				}
				_, err = chunk.ExecContext(ctx, lw.args...)
			} else {
				_, err = tx.ExecContext(ctx, legacyInsertSQL(n), lw.args...)
			}
			if err != nil {
				return fmt.Errorf("legacy insert: %w", err)
			}
			rest = rest[n:]
		}
		st, err := tx.PrepareContext(ctx, totalsSQL)
		if err != nil {
			return err
		}
		defer st.Close()
		for _, res := range resolutions {
			m := agg.totalsAt(res.step)
			for k, v := range m {
				if _, err := st.ExecContext(ctx, res.step, k.min, k.status, v.count, v.durUS); err != nil {
					return err
				}
			}
		}
		cs, err := tx.PrepareContext(ctx, clientsSQL)
		if err != nil {
			return err
		}
		defer cs.Close()
		for k, v := range agg.clients {
			if _, err := cs.ExecContext(ctx, k, v.name, v.group, v.last); err != nil {
				return err
			}
		}
		for i := range rows { // the hour's name counts, in memory
			lw.countHour(&rows[i])
		}
		return nil
	})
}

func (lw *legacyWriter) countHour(r *Row) {
	for i := range dims {
		k := dimValue(i, r)
		if k == "" {
			continue
		}
		c := lw.hour.counts[i][k]
		if c == nil {
			c = &hourCount{}
			lw.hour.counts[i][k] = c
		}
		c.count++
	}
}
