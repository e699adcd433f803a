package querylog

import (
	"context"
	"database/sql"
	"fmt"
	"strings"
	"testing"
	"time"
)

// The write path of the legacy schema 2 layout (text columns, indexes on
// ts, domain hash, client hash and status, inserts through database/sql in
// 100-row statements), as it was before the compact layout: it writes the
// files TestUpgradeFromLegacyV2 converts and is the baseline of
// BenchmarkWriteRowsVsLegacy.

const legacyInsertColumns = "id, ts, client, domain, qtype, status, node, client_name, rcode, reason, list, rule, policy, upstream, zone, transport, duration_us, dh, ch"

// openLegacy creates querylog.db in dir with the legacy layout.
func openLegacy(tb testing.TB, dir string) *sql.DB {
	tb.Helper()
	common := "_busy_timeout=10000&_journal_mode=WAL&_synchronous=NORMAL&_pragma=cache_size(-65536)&_pragma=temp_store(MEMORY)"
	db, err := sql.Open("sqlite", "file:"+DBPath(dir)+"?"+common+"&_txlock=immediate")
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

// BenchmarkConvertLegacy times opening (converting) a legacy schema 2 file
// of n rows (SVC_BENCH_ROWS, default 200,000; 1000 domains, 50 clients).
func BenchmarkConvertLegacy(b *testing.B) {
	benchConvert(b, func(b *testing.B, dir string, n int) {
		lw := newLegacyWriter(b, dir)
		t0 := time.Now()
		for i := 0; i < n; i += 5000 {
			batch := benchRowsSpread(min(5000, n-i), t0.Add(time.Duration(i)*time.Millisecond), 1000, i)
			if err := lw.write(context.Background(), batch); err != nil {
				b.Fatal(err)
			}
		}
		lw.db.Close()
	})
}
