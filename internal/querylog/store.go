package querylog

import (
	"context"
	"crypto/rand"
	"database/sql"
	"errors"
	"fmt"
	"log/slog"
	"os"
	"path/filepath"
	"strconv"
	"sync/atomic"
	"time"

	"github.com/svcdns/svc/internal/sqlitedb"
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

// schemaV2Rollups are the rollup and meta tables of schema 2.
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

// bucketBits: postings carry the row id >> bucketBits in their key, so a
// read walks buckets of 16384 ids newest first (see postings.go).
const bucketBits = 14

// schemaV2Names is the names dictionary and the postings (see postings.go:
// they answer client, domain and status filters).
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
	ckpt   *checkpointer
	// wstmts: the writer connection's statements (rawconn.go), touched
	// only inside writeTx, which holds the pool's one connection.
	wstmts writerStmts
	// pend is the writer's postings not yet in the table (postings.go).
	pend atomic.Pointer[pendingPostings]
}

// DBPath returns the path of the query log in dataDir.
func DBPath(dataDir string) string { return filepath.Join(dataDir, "querylog.db") }

// The query log may lose its last batches in a power cut, never the file
// (synchronous NORMAL in WAL); in-memory temp tables serve the reads'
// sorts and the writer's postings. Readers keep a large page cache. The
// writer's is 1 MiB: it appends (the tree's right edge and the small
// rollup tables are what it reads back, a batch dirties a few dozen
// pages), a larger cache only fills with the pages it wrote, and SQLite
// scans that cache's hash table at every commit (pcache1TruncateUnsafe:
// 6% of the writer's CPU at 64 MiB, still 1.1% of the server's samples
// on make bench's auth workload at 4 MiB, gone from the profile at 1 MiB).
var (
	writerOptions   = sqlitedb.Options{BusyTimeout: 10 * time.Second, WAL: true, Synchronous: sqlitedb.SyncNormal, CacheKiB: 1024, TempMemory: true, ImmediateTx: true, AutoCheckpoint: writerAutoCheckpoint}
	readerOptions   = sqlitedb.Options{BusyTimeout: 10 * time.Second, WAL: true, Synchronous: sqlitedb.SyncNormal, CacheKiB: 65536, TempMemory: true, QueryOnly: true}
	precheckOptions = sqlitedb.Options{BusyTimeout: 10 * time.Second, ReadOnly: true}
)

func openStore(ctx context.Context, path string, log *slog.Logger) (*store, error) {
	if err := precheck(ctx, path); err != nil {
		return nil, fmt.Errorf("open querylog %s: %w", path, err)
	}
	w, err := sqlitedb.OpenSingle(path, writerOptions)
	if err != nil {
		return nil, fmt.Errorf("open querylog %s: %w", path, err)
	}
	if err := migrate(ctx, w); err != nil {
		w.Close()
		return nil, fmt.Errorf("open querylog %s: %w", path, err)
	}
	nm := newNames()
	if err := nm.load(ctx, w); err != nil {
		w.Close()
		return nil, fmt.Errorf("open querylog %s: %w", path, err)
	}
	r, err := sqlitedb.Open(path, readerOptions)
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
	if st.ckpt, err = startCheckpointer(path, log); err != nil {
		st.close()
		return nil, fmt.Errorf("open querylog %s: %w", path, err)
	}
	return st, nil
}

func (s *store) close() error {
	var err error
	if s.ckpt != nil {
		err = s.ckpt.close()
	}
	s.rstmts.close()
	s.wstmts.close()
	return errors.Join(err, s.r.Close(), s.w.Close())
}

// What opening a file must do.
const (
	openAsIs = iota
	openCreate
)

// inspect decides what opening a file must do. Only an empty file (it is
// created) and the block layout of schema 2 are known: the layouts before
// it (schema 1, the legacy and the compact layouts of schema 2) were never
// in a release, so there is nothing to convert. Anything else is refused
// before a byte is written.
func inspect(ctx context.Context, db *sql.DB) (int, error) {
	var v int
	if err := db.QueryRowContext(ctx, "PRAGMA user_version").Scan(&v); err != nil {
		return 0, fmt.Errorf("read schema version: %w", err)
	}
	switch {
	case v > SchemaVersion:
		return 0, fmt.Errorf("schema %d is newer than this binary's (%d): run the newer binary, or %s", v, SchemaVersion, moveAway)
	case v == SchemaVersion:
		layout, err := readLayout(ctx, db)
		if err != nil {
			return 0, err
		}
		if layout != layoutBlocks {
			return 0, fmt.Errorf("schema %d file of an unknown layout %q (this binary reads %q); %s", v, layout, layoutBlocks, moveAway)
		}
		return openAsIs, nil
	case v == 0:
		var n int
		if err := db.QueryRowContext(ctx, "SELECT count(*) FROM sqlite_master").Scan(&n); err != nil {
			return 0, fmt.Errorf("inspect schema: %w", err)
		}
		if n != 0 {
			return 0, fmt.Errorf("file has tables but no schema version: not a query log of this program; %s", moveAway)
		}
		return openCreate, nil
	}
	return 0, fmt.Errorf("schema %d of an unknown layout (this binary reads schema %d, layout %q); %s", v, SchemaVersion, layoutBlocks, moveAway)
}

// moveAway is what a refused file's error tells the user to do.
const moveAway = "the file is left unchanged: stop the node, move the file (with its -wal and -shm files) out of the data directory, and start again; the query log is then rebuilt empty"

// precheck inspects an existing file through a read-only connection, so a
// file this binary refuses is not even switched to WAL.
func precheck(ctx context.Context, path string) error {
	if _, err := os.Stat(path); err != nil {
		return nil // a new file, or Open reports the problem
	}
	db, err := sqlitedb.Open(path, precheckOptions)
	if err != nil {
		return err
	}
	defer db.Close()
	_, err = inspect(ctx, db)
	return err
}

// migrate creates schema 2 (block layout) in a new file; a block-layout
// file is opened as it is.
func migrate(ctx context.Context, db *sql.DB) error {
	m, err := inspect(ctx, db)
	if err != nil {
		return err
	}
	if m != openCreate {
		// Tables added to schema 2 later (their readers need them; an
		// older binary ignores them).
		if _, err := db.ExecContext(ctx, schemaUpstreamLatency); err != nil {
			return fmt.Errorf("create upstream_latency: %w", err)
		}
		return nil
	}
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
		for _, q := range []string{schemaV2Blocks, schemaV2Names, schemaV2Rollups, schemaUpstreamLatency, layoutSQL, fmt.Sprintf("PRAGMA user_version = %d", SchemaVersion)} {
			if _, err := tx.ExecContext(ctx, q); err != nil {
				return fmt.Errorf("create schema: %w", err)
			}
		}
		return nil
	})
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
