package querylog

import (
	"context"
	"crypto/rand"
	"database/sql"
	"database/sql/driver"
	"errors"
	"fmt"
	"path/filepath"
	"strings"
	"sync"
	"time"

	"modernc.org/sqlite" // registers the "sqlite" database/sql driver
)

// SchemaVersion is the version of querylog.db this code writes (PRAGMA user_version).
const SchemaVersion = 2

// Resolutions of the totals table, in seconds, with how long each is kept
// (0: forever).
var resolutions = []struct {
	step int64
	keep time.Duration
}{
	{60, 35 * 24 * time.Hour},
	{3600, 400 * 24 * time.Hour},
	{86400, 0},
}

// SchemaV1 is the first, simpler query-log schema: one table without
// rollups. Kept for the upgrade path (and its test).
const SchemaV1 = `
CREATE TABLE queries (
  id INTEGER PRIMARY KEY,
  ts INTEGER NOT NULL,      -- unix microseconds
  client TEXT NOT NULL DEFAULT '',
  domain TEXT NOT NULL DEFAULT '',
  qtype TEXT NOT NULL DEFAULT '',
  status TEXT NOT NULL DEFAULT ''
);
CREATE INDEX queries_ts ON queries(ts);
PRAGMA user_version = 1;
`

// v2 columns added to the v1 table, in order.
var v2Columns = []string{"node", "client_name", "rcode", "reason", "list", "rule", "policy", "upstream", "zone", "transport"}

const schemaV2Tables = `
CREATE TABLE IF NOT EXISTS totals (
  res INTEGER NOT NULL,     -- bucket length in seconds: 60, 3600, 86400
  ts INTEGER NOT NULL,      -- bucket start, unix seconds
  status TEXT NOT NULL,
  count INTEGER NOT NULL,
  dur_us INTEGER NOT NULL,  -- sum of latencies
  PRIMARY KEY (res, ts, status)
) WITHOUT ROWID;
CREATE TABLE IF NOT EXISTS top_hourly (
  hour INTEGER NOT NULL,    -- unix seconds of the hour
  dim TEXT NOT NULL,        -- domain, client, upstream, list, zone
  key TEXT NOT NULL,        -- '' collects names past the in-memory cap
  count INTEGER NOT NULL,
  blocked INTEGER NOT NULL,
  PRIMARY KEY (hour, dim, key)
) WITHOUT ROWID;
CREATE TABLE IF NOT EXISTS clients (
  key TEXT PRIMARY KEY,
  name TEXT NOT NULL DEFAULT '',
  grp TEXT NOT NULL DEFAULT '',
  last_seen INTEGER NOT NULL  -- unix microseconds
) WITHOUT ROWID;
CREATE TABLE IF NOT EXISTS meta (k TEXT PRIMARY KEY, v BLOB) WITHOUT ROWID;
CREATE INDEX IF NOT EXISTS queries_ts ON queries(ts);
CREATE INDEX IF NOT EXISTS queries_dh ON queries(dh);
CREATE INDEX IF NOT EXISTS queries_ch ON queries(ch);
CREATE INDEX IF NOT EXISTS queries_status ON queries(status);
`

const schemaV2Queries = `
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
);`

// rowColumns is the insert/select column order of queries.
const rowColumns = "id, ts, client, domain, qtype, status, node, client_name, rcode, reason, list, rule, policy, upstream, zone, transport, duration_us"

const nRowColumns = 17

// insertColumns are rowColumns and the hash columns the indexes use.
const insertColumns = rowColumns + ", dh, ch"

const nInsertColumns = nRowColumns + 2

// hashFunc is the SQL name of nameHash (used by the v1 upgrade).
const hashFunc = "svc_querylog_hash"

var registerHash sync.Once

// nameHash is the 64-bit FNV-1a hash of s, 0 for "". The dh and ch columns
// hold it for domain and client: an 8-byte integer key keeps the index
// B-trees small and their comparisons cheap; lookups compare the hash and
// then the text, so a collision never returns a wrong row.
func nameHash(s string) int64 {
	if s == "" {
		return 0
	}
	h := uint64(14695981039346656037)
	for i := 0; i < len(s); i++ {
		h ^= uint64(s[i])
		h *= 1099511628211
	}
	return int64(h)
}

// store is querylog.db: one writer connection, a pool of readers.
type store struct {
	path string
	w, r *sql.DB
}

// DBPath returns the path of the query log in dataDir.
func DBPath(dataDir string) string { return filepath.Join(dataDir, "querylog.db") }

func openStore(ctx context.Context, path string) (*store, error) {
	if strings.ContainsAny(path, "?#") {
		return nil, fmt.Errorf("querylog: path %q must not contain ? or #", path)
	}
	registerHash.Do(func() {
		sqlite.MustRegisterDeterministicScalarFunction(hashFunc, 1, func(_ *sqlite.FunctionContext, args []driver.Value) (driver.Value, error) {
			switch v := args[0].(type) {
			case string:
				return nameHash(v), nil
			case []byte:
				return nameHash(string(v)), nil
			}
			return int64(0), nil
		})
	})
	common := "_busy_timeout=10000&_journal_mode=WAL&_synchronous=NORMAL&_pragma=cache_size(-65536)&_pragma=temp_store(MEMORY)"
	w, err := sql.Open("sqlite", "file:"+path+"?"+common+"&_txlock=immediate")
	if err != nil {
		return nil, fmt.Errorf("open querylog %s: %w", path, err)
	}
	w.SetMaxOpenConns(1)
	w.SetMaxIdleConns(1)
	w.SetConnMaxLifetime(0)
	w.SetConnMaxIdleTime(0)
	if err := migrate(ctx, w); err != nil {
		w.Close()
		return nil, fmt.Errorf("open querylog %s: %w", path, err)
	}
	r, err := sql.Open("sqlite", "file:"+path+"?"+common+"&_query_only=1")
	if err != nil {
		w.Close()
		return nil, fmt.Errorf("open querylog %s: %w", path, err)
	}
	r.SetMaxOpenConns(4)
	r.SetMaxIdleConns(4)
	return &store{path: path, w: w, r: r}, nil
}

func (s *store) close() error {
	return errors.Join(s.r.Close(), s.w.Close())
}

// migrate creates schema 2 or upgrades a version 1 file in place.
func migrate(ctx context.Context, db *sql.DB) error {
	var v int
	if err := db.QueryRowContext(ctx, "PRAGMA user_version").Scan(&v); err != nil {
		return fmt.Errorf("read schema version: %w", err)
	}
	switch {
	case v == SchemaVersion:
		return nil
	case v > SchemaVersion:
		return fmt.Errorf("querylog schema %d is newer than this binary (%d)", v, SchemaVersion)
	case v == 0:
		var n int
		if err := db.QueryRowContext(ctx, "SELECT count(*) FROM sqlite_master").Scan(&n); err != nil {
			return fmt.Errorf("inspect schema: %w", err)
		}
		if n != 0 {
			return fmt.Errorf("querylog: file has tables but no schema version")
		}
		// auto_vacuum must be chosen before the first table exists; it lets
		// the size cap give pages back to the file system.
		// The DSN already switched the empty file to WAL, so the change
		// takes effect through VACUUM (instant on an empty file).
		for _, q := range []string{"PRAGMA page_size = 16384", "PRAGMA auto_vacuum = INCREMENTAL", "VACUUM"} {
			if _, err := db.ExecContext(ctx, q); err != nil {
				return fmt.Errorf("set auto_vacuum: %w", err)
			}
		}
		return inTx(ctx, db, func(tx *sql.Tx) error {
			for _, q := range []string{schemaV2Queries, schemaV2Tables, fmt.Sprintf("PRAGMA user_version = %d", SchemaVersion)} {
				if _, err := tx.ExecContext(ctx, q); err != nil {
					return fmt.Errorf("create schema: %w", err)
				}
			}
			return nil
		})
	case v == 1:
		return inTx(ctx, db, func(tx *sql.Tx) error { return upgradeV1(ctx, tx) })
	}
	return fmt.Errorf("querylog: unknown schema version %d", v)
}

// upgradeV1 adds the v2 columns, indexes and rollup tables and rebuilds the
// rollups from the rows already there.
func upgradeV1(ctx context.Context, tx *sql.Tx) error {
	stmts := []string{}
	for _, c := range v2Columns {
		stmts = append(stmts, "ALTER TABLE queries ADD COLUMN "+c+" TEXT NOT NULL DEFAULT ''")
	}
	stmts = append(stmts, "ALTER TABLE queries ADD COLUMN duration_us INTEGER NOT NULL DEFAULT 0",
		"ALTER TABLE queries ADD COLUMN dh INTEGER NOT NULL DEFAULT 0",
		"ALTER TABLE queries ADD COLUMN ch INTEGER NOT NULL DEFAULT 0",
		"UPDATE queries SET dh = "+hashFunc+"(domain), ch = "+hashFunc+"(client)",
		schemaV2Tables)
	for _, r := range resolutions {
		stmts = append(stmts, fmt.Sprintf(`INSERT INTO totals (res, ts, status, count, dur_us)
SELECT %d, (ts/1000000/%d)*%d AS b, status, count(*), 0 FROM queries GROUP BY b, status`, r.step, r.step, r.step))
	}
	for _, d := range [][2]string{{DimDomains, "domain"}, {DimClients, "client"}} {
		stmts = append(stmts, fmt.Sprintf(`INSERT INTO top_hourly (hour, dim, key, count, blocked)
SELECT (ts/3600000000)*3600 AS h, '%s', %s, count(*), sum(status = 'blocked') FROM queries WHERE %s != '' GROUP BY h, %s`, d[0], d[1], d[1], d[1]))
	}
	stmts = append(stmts, `INSERT INTO clients (key, name, last_seen) SELECT client, '', max(ts) FROM queries WHERE client != '' GROUP BY client`,
		fmt.Sprintf("PRAGMA user_version = %d", SchemaVersion))
	for _, q := range stmts {
		if _, err := tx.ExecContext(ctx, q); err != nil {
			return fmt.Errorf("upgrade querylog schema 1 to 2: %w", err)
		}
	}
	return nil
}

func inTx(ctx context.Context, db *sql.DB, fn func(*sql.Tx) error) error {
	tx, err := db.BeginTx(ctx, nil)
	if err != nil {
		return fmt.Errorf("begin: %w", err)
	}
	if err := fn(tx); err != nil {
		_ = tx.Rollback()
		return err
	}
	if err := tx.Commit(); err != nil {
		return fmt.Errorf("commit: %w", err)
	}
	return nil
}

// pseudonymKey returns the per-file HMAC key, creating it once.
func (s *store) pseudonymKey(ctx context.Context) ([]byte, error) {
	var key []byte
	err := s.w.QueryRowContext(ctx, "SELECT v FROM meta WHERE k = 'pseudonym_key'").Scan(&key)
	if err == nil && len(key) > 0 {
		return key, nil
	}
	if err != nil && !errors.Is(err, sql.ErrNoRows) {
		return nil, fmt.Errorf("read pseudonym key: %w", err)
	}
	key = make([]byte, 32)
	_, _ = rand.Read(key)
	if _, err := s.w.ExecContext(ctx, "INSERT OR REPLACE INTO meta (k, v) VALUES ('pseudonym_key', ?)", key); err != nil {
		return nil, fmt.Errorf("store pseudonym key: %w", err)
	}
	return key, nil
}

func (s *store) maxID(ctx context.Context) (int64, error) {
	var id sql.NullInt64
	if err := s.w.QueryRowContext(ctx, "SELECT max(id) FROM queries").Scan(&id); err != nil {
		return 0, fmt.Errorf("read last id: %w", err)
	}
	return id.Int64, nil
}

const insertChunk = 100

// inserter holds the prepared multi-row insert of one transaction.
type inserter struct {
	tx    *sql.Tx
	chunk *sql.Stmt
	args  []any
}

func insertSQL(n int) string {
	var b strings.Builder
	b.WriteString("INSERT INTO queries (" + insertColumns + ") VALUES ")
	for i := range n {
		if i > 0 {
			b.WriteByte(',')
		}
		b.WriteString("(?,?,?,?,?,?,?,?,?,?,?,?,?,?,?,?,?,?,?)")
	}
	return b.String()
}

func (in *inserter) insert(ctx context.Context, rows []Row) error {
	if cap(in.args) < insertChunk*nInsertColumns {
		in.args = make([]any, 0, insertChunk*nInsertColumns)
	}
	for len(rows) > 0 {
		n := min(len(rows), insertChunk)
		in.args = in.args[:0]
		for i := range rows[:n] {
			r := &rows[i]
			in.args = append(in.args, r.ID, r.Time.UnixMicro(), r.Client, r.Domain, r.QType, r.Status, r.Node, r.ClientName,
				r.Rcode, r.Reason, r.List, r.Rule, r.Policy, r.Upstream, r.Zone, r.Transport, r.Duration.Microseconds(),
				nameHash(r.Domain), nameHash(r.Client))
		}
		var err error
		if n == insertChunk {
			if in.chunk == nil {
				if in.chunk, err = in.tx.PrepareContext(ctx, insertSQL(insertChunk)); err != nil {
					return fmt.Errorf("prepare insert: %w", err)
				}
			}
			_, err = in.chunk.ExecContext(ctx, in.args...)
		} else {
			_, err = in.tx.ExecContext(ctx, insertSQL(n), in.args...)
		}
		if err != nil {
			return fmt.Errorf("insert rows: %w", err)
		}
		rows = rows[n:]
	}
	return nil
}

// usedBytes is the size of the pages holding data (page_count minus free
// pages, times page_size).
func (s *store) usedBytes(ctx context.Context) (used, file int64, err error) {
	var pc, fl, ps int64
	if err = s.w.QueryRowContext(ctx, "PRAGMA page_count").Scan(&pc); err == nil {
		if err = s.w.QueryRowContext(ctx, "PRAGMA freelist_count").Scan(&fl); err == nil {
			err = s.w.QueryRowContext(ctx, "PRAGMA page_size").Scan(&ps)
		}
	}
	if err != nil {
		return 0, 0, fmt.Errorf("read database size: %w", err)
	}
	return (pc - fl) * ps, pc * ps, nil
}
