package querylog

import (
	"context"
	"database/sql/driver"
	"fmt"
)

// The write path talks to the sqlite driver connection directly
// (database/sql's Conn.Raw): one transaction per batch, statements prepared
// once per connection (writerStmts), arguments bound from a
// driver.NamedValue slice reused from row to row. database/sql's per-call
// argument conversion and connection bookkeeping cost about as much as
// SQLite's own insert.

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
		conn := dc.(driver.Conn)
		s.wstmts.use(conn)
		d := &dconn{c: conn, stmts: s.wstmts.m}
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
		if s.ckpt != nil {
			s.ckpt.committed()
		}
		return nil
	})
}

// writerStmts are the writer connection's prepared statements, kept from
// one transaction to the next: the write path uses about ten fixed
// statements, and preparing them again for every batch cost 0.6% of a
// server answering the auth workload (perf). They belong to the driver
// connection they were prepared on and are used only inside Raw on it; if
// database/sql ever replaces that connection, they are dropped.
type writerStmts struct {
	conn driver.Conn
	m    map[string]driver.Stmt
}

// use makes the statements those of conn. Statements of a connection
// database/sql has replaced are dropped, not closed: that connection is
// closed already, and finalizing on it would touch its freed state.
func (w *writerStmts) use(conn driver.Conn) {
	if w.conn == conn && w.m != nil {
		return
	}
	w.conn, w.m = conn, map[string]driver.Stmt{}
}

// close finalizes the statements (before their connection closes).
func (w *writerStmts) close() {
	for _, st := range w.m {
		_ = st.Close()
	}
	w.conn, w.m = nil, nil
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
