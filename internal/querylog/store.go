package querylog

import (
	"context"
	"crypto/rand"
	"database/sql"
	"database/sql/driver"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strconv"
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

// schemaV2Rollups are the rollup and meta tables of schema 2 (both layouts).
const schemaV2Rollups = `
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
`

// schemaV2LegacyQueries is the first layout of schema 2 (text columns, hash
// indexes over the whole table); files written by it are converted to the
// compact layout at open. Kept for that conversion, its test and the
// baseline of BenchmarkWriteRows.
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

// legacyV2Columns are the queries columns of the legacy layout, in order.
var legacyV2Columns = []string{"id", "ts", "client", "domain", "qtype", "status", "node", "client_name", "rcode", "reason", "list", "rule", "policy", "upstream", "zone", "transport", "duration_us", "dh", "ch"}

// layoutCompact names the compact layout of schema 2 in meta ('layout'):
// one table row per query. Files in it are converted to the block layout
// at open; the legacy layout and schema 1 go through it.
const layoutCompact = "compact-1"

// bucketBits: postings carry the row id >> bucketBits in their key, so a
// read walks buckets of 16384 ids newest first (see postings.go).
const bucketBits = 14

// schemaV2CompactQueries is the queries table of the compact layout:
// dictionary-encoded columns (see names.go), NULL for empty values, no
// secondary index. Kept for the conversions and the benchmarks' baseline.
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

// schemaV2Names is the names dictionary and the postings (see postings.go:
// they answer client, domain and status filters) of the compact and the
// block layout.
const schemaV2Names = `
CREATE TABLE names (
  id INTEGER PRIMARY KEY,
  kind INTEGER NOT NULL,     -- which column (names.go)
  name TEXT NOT NULL,
  UNIQUE (kind, name)
);
CREATE TABLE postings (
  k INTEGER NOT NULL,        -- bucket<<34 | dim<<32 | value
  first INTEGER NOT NULL,    -- first id
  ids BLOB,                  -- the other ids, uvarint deltas (NULL: none)
  PRIMARY KEY (k, first)
) WITHOUT ROWID;`

// rowColumns is the insert/select column order of the compact queries table.
const rowColumns = "id, ts, status, domain, client, qtype, rcode, node, client_name, reason, list, rule, policy, upstream, zone, transport, duration_us"

const nRowColumns = 17

// hashFunc is the SQL name of nameHash (used by the upgrades).
const hashFunc = "svc_querylog_hash"

var registerHash sync.Once

// nameHash is the 64-bit FNV-1a hash of s, 0 for "". Lookups compare the
// key and then the text, so a collision never returns a wrong row.
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

// bucketOf is the postings bucket of a row id.
func bucketOf(id int64) int64 { return id >> bucketBits }

// store is querylog.db: one writer connection, a pool of readers, and the
// in-memory copy of the names dictionary.
type store struct {
	path   string
	w, r   *sql.DB
	names  *names
	rstmts stmtCache  // prepared statements on r
	cache  blockCache // decoded blocks of recent reads
	cut    rawCut     // rows older than the last retention cut are hidden
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
	if err := precheck(ctx, path); err != nil {
		return nil, fmt.Errorf("open querylog %s: %w", path, err)
	}
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
	nm := newNames()
	if err := nm.load(ctx, w); err != nil {
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
	st := &store{path: path, w: w, r: r, names: nm, rstmts: stmtCache{db: r}}
	if err := st.loadRawCut(ctx); err != nil {
		st.close()
		return nil, fmt.Errorf("open querylog %s: %w", path, err)
	}
	return st, nil
}

func (s *store) close() error {
	s.rstmts.close()
	return errors.Join(s.r.Close(), s.w.Close())
}

// Migrations inspect finds.
const (
	migNone = iota
	migCreate
	migV1
	migLegacyV2
	migCompact
)

// inspect decides what opening a file must do, and refuses files it does
// not know before anything is written.
func inspect(ctx context.Context, db *sql.DB) (int, error) {
	var v int
	if err := db.QueryRowContext(ctx, "PRAGMA user_version").Scan(&v); err != nil {
		return 0, fmt.Errorf("read schema version: %w", err)
	}
	switch {
	case v > SchemaVersion:
		return 0, fmt.Errorf("querylog schema %d is newer than this binary (%d)", v, SchemaVersion)
	case v == SchemaVersion:
		layout, err := readLayout(ctx, db)
		if err != nil {
			return 0, err
		}
		switch layout {
		case layoutBlocks:
			return migNone, nil
		case layoutCompact:
			return migCompact, nil
		case "":
			cols, err := tableColumns(ctx, db, "queries")
			if err != nil {
				return 0, err
			}
			// The legacy layout, also as first released: without the
			// dh/ch hash columns (text indexes on domain and client).
			got := strings.Join(cols, ",")
			if got != strings.Join(legacyV2Columns, ",") && got != strings.Join(legacyV2Columns[:len(legacyV2Columns)-2], ",") {
				return 0, fmt.Errorf("querylog: schema 2 file of an unknown layout (queries columns %v); not changed", cols)
			}
			return migLegacyV2, nil
		default:
			return 0, fmt.Errorf("querylog: schema 2 file of an unknown layout %q; not changed", layout)
		}
	case v == 0:
		var n int
		if err := db.QueryRowContext(ctx, "SELECT count(*) FROM sqlite_master").Scan(&n); err != nil {
			return 0, fmt.Errorf("inspect schema: %w", err)
		}
		if n != 0 {
			return 0, fmt.Errorf("querylog: file has tables but no schema version; not changed")
		}
		return migCreate, nil
	case v == 1:
		cols, err := tableColumns(ctx, db, "queries")
		if err != nil {
			return 0, err
		}
		if strings.Join(cols, ",") != "id,ts,client,domain,qtype,status" {
			return 0, fmt.Errorf("querylog: schema 1 file of an unknown layout (queries columns %v); not changed", cols)
		}
		return migV1, nil
	}
	return 0, fmt.Errorf("querylog: unknown schema version %d; not changed", v)
}

// precheck inspects an existing file through a read-only connection, so a
// file this binary refuses is not even switched to WAL.
func precheck(ctx context.Context, path string) error {
	if _, err := os.Stat(path); err != nil {
		return nil // a new file, or Open reports the problem
	}
	db, err := sql.Open("sqlite", "file:"+path+"?mode=ro&_busy_timeout=10000")
	if err != nil {
		return err
	}
	defer db.Close()
	_, err = inspect(ctx, db)
	return err
}

// migrate creates schema 2 (block layout), or converts a version 1 file or
// a version 2 file of the legacy or the compact layout, each in one
// transaction: version 1 and the legacy layout become compact first.
func migrate(ctx context.Context, db *sql.DB) error {
	m, err := inspect(ctx, db)
	if err != nil {
		return err
	}
	switch m {
	case migCreate:
		// auto_vacuum must be chosen before the first table exists; it lets
		// the size cap give pages back to the file system.
		// The DSN already switched the empty file to WAL, so the change
		// takes effect through VACUUM (instant on an empty file).
		for _, q := range []string{"PRAGMA page_size = " + strconv.Itoa(pageSize), "PRAGMA auto_vacuum = INCREMENTAL", "VACUUM"} {
			if _, err := db.ExecContext(ctx, q); err != nil {
				return fmt.Errorf("set auto_vacuum: %w", err)
			}
		}
		return inTx(ctx, db, func(tx *sql.Tx) error {
			for _, q := range []string{schemaV2Blocks, schemaV2Names, schemaV2Rollups, layoutSQL, fmt.Sprintf("PRAGMA user_version = %d", SchemaVersion)} {
				if _, err := tx.ExecContext(ctx, q); err != nil {
					return fmt.Errorf("create schema: %w", err)
				}
			}
			return nil
		})
	case migV1, migLegacyV2:
		return inTx(ctx, db, func(tx *sql.Tx) error {
			if err := convertLegacy(ctx, tx, m == migV1); err != nil {
				return err
			}
			return convertCompact(ctx, tx)
		})
	case migCompact:
		return inTx(ctx, db, func(tx *sql.Tx) error { return convertCompact(ctx, tx) })
	}
	return nil
}

// pageSize of new files: 4 KiB pages keep the pages a batch dirties (and
// writes to the WAL) small.
const pageSize = 4096

var layoutSQL = "INSERT OR REPLACE INTO meta (k, v) VALUES ('layout', '" + layoutBlocks + "')"

// readLayout returns meta 'layout' ("" when there is none).
func readLayout(ctx context.Context, db *sql.DB) (string, error) {
	var n int
	if err := db.QueryRowContext(ctx, "SELECT count(*) FROM sqlite_master WHERE type = 'table' AND name = 'meta'").Scan(&n); err != nil {
		return "", fmt.Errorf("inspect schema: %w", err)
	}
	if n == 0 {
		return "", nil
	}
	var v sql.NullString
	err := db.QueryRowContext(ctx, "SELECT CAST(v AS TEXT) FROM meta WHERE k = 'layout'").Scan(&v)
	if err != nil && !errors.Is(err, sql.ErrNoRows) {
		return "", fmt.Errorf("read layout: %w", err)
	}
	return v.String, nil
}

func tableColumns(ctx context.Context, db *sql.DB, table string) ([]string, error) {
	rs, err := db.QueryContext(ctx, "SELECT name FROM pragma_table_info(?) ORDER BY cid", table)
	if err != nil {
		return nil, fmt.Errorf("inspect schema: %w", err)
	}
	defer rs.Close()
	var cols []string
	for rs.Next() {
		var c string
		if err := rs.Scan(&c); err != nil {
			return nil, fmt.Errorf("inspect schema: %w", err)
		}
		cols = append(cols, c)
	}
	return cols, rs.Err()
}

// convertLegacy rewrites the queries table of a version 1 file or of a
// version 2 file of the legacy layout into the compact layout's queries
// table and names (convertCompact then makes blocks of it), keeping ids
// and values. For version 1 it also creates the rollup tables and rebuilds
// the rollups from the rows; a legacy version 2 file keeps its rollups.
func convertLegacy(ctx context.Context, tx *sql.Tx, v1 bool) error {
	stmts := []string{"ALTER TABLE queries RENAME TO queries_old", schemaV2CompactQueries, schemaV2Names, schemaV2Rollups}
	if v1 {
		for _, r := range resolutions {
			stmts = append(stmts, fmt.Sprintf(`INSERT INTO totals (res, ts, status, count, dur_us)
SELECT %d, (ts/1000000/%d)*%d AS b, status, count(*), 0 FROM queries_old GROUP BY b, status`, r.step, r.step, r.step))
		}
		for _, d := range [][2]string{{DimDomains, "domain"}, {DimClients, "client"}} {
			stmts = append(stmts, fmt.Sprintf(`INSERT INTO top_hourly (hour, dim, key, count, blocked)
SELECT (ts/3600000000)*3600 AS h, '%s', %s, count(*), sum(status = 'blocked') FROM queries_old WHERE %s != '' GROUP BY h, %s`, d[0], d[1], d[1], d[1]))
		}
		stmts = append(stmts, `INSERT INTO clients (key, name, last_seen) SELECT client, '', max(ts) FROM queries_old WHERE client != '' GROUP BY client`)
	}
	has := func(c string) bool { return !v1 || c == "status" || c == "qtype" }
	sel := []string{"id", "ts"}
	for k, c := range kindCols {
		if !has(c) {
			continue
		}
		// The most frequent names get ids, up to the kind's cap.
		stmts = append(stmts, fmt.Sprintf("INSERT INTO names (kind, name) SELECT %d, %s FROM queries_old WHERE %s != '' GROUP BY %s ORDER BY count(*) DESC, %s LIMIT %d",
			k, c, c, c, c, capOf(k)))
	}
	enc := func(k int) string {
		c := kindCols[k]
		if !has(c) {
			return "NULL"
		}
		return fmt.Sprintf("CASE WHEN %s != '' THEN coalesce((SELECT n.id FROM names n WHERE n.kind = %d AND n.name = %s), %s) END", c, k, c, c)
	}
	sel = append(sel, enc(kStatus), "nullif(domain, '')", "nullif(client, '')")
	for k := kQType; k < nKinds; k++ {
		sel = append(sel, enc(k))
	}
	if v1 {
		sel = append(sel, "0")
	} else {
		sel = append(sel, "duration_us")
	}
	stmts = append(stmts, "INSERT INTO queries ("+rowColumns+") SELECT "+strings.Join(sel, ", ")+" FROM queries_old ORDER BY id",
		"DROP TABLE queries_old")
	from := "2 (legacy layout)"
	if v1 {
		from = "1"
	}
	for _, q := range stmts {
		if _, err := tx.ExecContext(ctx, q); err != nil {
			return fmt.Errorf("upgrade querylog schema %s to 2: %w", from, err)
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
	err := s.w.QueryRowContext(ctx, "SELECT last FROM blocks ORDER BY first DESC LIMIT 1").Scan(&id)
	if err != nil && !errors.Is(err, sql.ErrNoRows) {
		return 0, fmt.Errorf("read last id: %w", err)
	}
	return id.Int64, nil
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
