package querylog

import (
	"context"
	"database/sql/driver"
	"fmt"
	"strings"
)

// The write path talks to the sqlite driver connection directly
// (database/sql's Conn.Raw): one transaction per batch, statements prepared
// once per batch, arguments bound from a driver.NamedValue slice reused
// from row to row. database/sql's per-call argument conversion and
// connection bookkeeping cost about as much as SQLite's own insert.

// dconn is the writer's driver connection inside one transaction.
type dconn struct {
	c     driver.Conn
	stmts map[string]driver.Stmt
	nv    []driver.NamedValue
}

// writeTx runs fn in one transaction (BEGIN IMMEDIATE, from the DSN) on the
// writer connection.
func (s *store) writeTx(ctx context.Context, fn func(*dconn) error) error {
	c, err := s.w.Conn(ctx)
	if err != nil {
		return fmt.Errorf("writer connection: %w", err)
	}
	defer c.Close()
	return c.Raw(func(dc any) error {
		d := &dconn{c: dc.(driver.Conn), stmts: map[string]driver.Stmt{}}
		defer d.closeStmts()
		tx, err := dc.(driver.ConnBeginTx).BeginTx(ctx, driver.TxOptions{})
		if err != nil {
			return fmt.Errorf("begin: %w", err)
		}
		if err := fn(d); err != nil {
			_ = tx.Rollback()
			return err
		}
		if err := tx.Commit(); err != nil {
			return fmt.Errorf("commit: %w", err)
		}
		return nil
	})
}

func (d *dconn) closeStmts() {
	for _, st := range d.stmts {
		st.Close()
	}
}

func (d *dconn) stmt(query string) (driver.Stmt, error) {
	if st := d.stmts[query]; st != nil {
		return st, nil
	}
	st, err := d.c.(driver.ConnPrepareContext).PrepareContext(context.Background(), query)
	if err != nil {
		return nil, err
	}
	d.stmts[query] = st
	return st, nil
}

// exec runs a cached statement; args are driver values (int64, string,
// []byte, nil).
func (d *dconn) exec(query string, args ...any) error {
	st, err := d.stmt(query)
	if err != nil {
		return err
	}
	d.nv = d.nv[:0]
	for i, a := range args {
		d.nv = append(d.nv, driver.NamedValue{Ordinal: i + 1, Value: a})
	}
	return d.execNV(st)
}

// execNV runs st with d.nv. The context has no Done channel: the driver
// then starts no interrupt watcher per call.
func (d *dconn) execNV(st driver.Stmt) error {
	_, err := st.(driver.StmtExecContext).ExecContext(context.Background(), d.nv)
	return err
}

// insertChunk is how many rows one INSERT statement carries (64 and 100
// measured alike; 1 costs about 20% more).
const insertChunk = 64

func insertSQL(n int) string {
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
func (d *dconn) insertRows(nm *names, pb *postingBuilder, rows []Row) error {
	pb.reset()
	vals := make([][nRowColumns]any, 0, insertChunk)
	chunkSQL := insertSQL(insertChunk)
	oneSQL := insertSQL(1)
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
		for k := kQType; k < nKinds; k++ {
			v[5+k-kQType] = nm.encode(k, *rowField(r, k))
		}
		v[16] = r.Duration.Microseconds()
		pb.addRow(r.ID, r.Domain, r.Client, v[2])
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
