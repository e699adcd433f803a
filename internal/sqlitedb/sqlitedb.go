// Package sqlitedb opens the service's SQLite files (state, query log,
// audit, session revocations) through one connection-string dialect: the
// caller names the pragmas the file needs as Options, and every pragma is
// applied by the driver on each new connection of the pool (a pragma set
// with Exec would reach only one connection of a database/sql pool).
package sqlitedb

import (
	"context"
	"database/sql"
	"errors"
	"fmt"
	"strconv"
	"strings"
	"time"

	_ "modernc.org/sqlite" // registers the "sqlite" database/sql driver
)

// Sync is PRAGMA synchronous.
type Sync string

const (
	// SyncDefault leaves SQLite's default (FULL).
	SyncDefault Sync = ""
	// SyncNormal: in WAL mode a power cut may lose the last commits, never
	// corrupt the file.
	SyncNormal Sync = "NORMAL"
	// SyncFull: a commit is on disk when it returns.
	SyncFull Sync = "FULL"
)

// Options are the pragmas and open flags one file asks for.
type Options struct {
	// BusyTimeout is how long a statement waits for another connection's
	// lock before SQLITE_BUSY (PRAGMA busy_timeout; 0: fail at once).
	BusyTimeout time.Duration
	// WAL switches the file to write-ahead logging (PRAGMA journal_mode).
	WAL         bool
	Synchronous Sync
	ForeignKeys bool
	// CacheKiB is the page cache per connection (PRAGMA cache_size = -KiB;
	// 0: SQLite's default).
	CacheKiB int
	// TempMemory keeps temporary tables and indexes in memory (temp_store).
	TempMemory bool
	// ImmediateTx makes BEGIN take the write lock at once (BEGIN
	// IMMEDIATE), so a writer fails early instead of deadlocking on upgrade.
	ImmediateTx bool
	// QueryOnly refuses writes on these connections (PRAGMA query_only).
	QueryOnly bool
	// AutoCheckpoint is the WAL size in pages past which a commit runs a
	// checkpoint (PRAGMA wal_autocheckpoint; 0: SQLite's 1,000; negative:
	// never). That checkpoint fsyncs the WAL and the database inside the
	// committing call, which on a busy disk holds the caller for tens of
	// milliseconds: an opener that must not wait checkpoints from another
	// connection and keeps this as a backstop.
	AutoCheckpoint int
	// ReadOnly opens the file read-only (SQLite's mode=ro): nothing, not
	// even the journal mode, is changed, and a missing file is an error.
	ReadOnly bool
}

// DSN is the connection string of path with o, in the one dialect every
// opener uses: a file: URI, each pragma as _pragma=name(value) in a fixed
// order (busy_timeout first, so the pragmas after it wait for locks;
// query_only last, so it does not refuse the journal-mode change).
func DSN(path string, o Options) (string, error) {
	if path == "" {
		return "", errors.New("empty database path")
	}
	if strings.ContainsAny(path, "?#") {
		return "", fmt.Errorf("database path %q must not contain ? or #: move the data directory to a path without them", path)
	}
	if o.ReadOnly && o.WAL {
		return "", fmt.Errorf("database %s: ReadOnly cannot switch the journal mode", path)
	}
	switch o.Synchronous {
	case SyncDefault, SyncNormal, SyncFull:
	default:
		return "", fmt.Errorf("database %s: synchronous %q is not one of NORMAL, FULL", path, o.Synchronous)
	}
	q := make([]string, 0, 10)
	if o.ReadOnly {
		q = append(q, "mode=ro")
	}
	// The values are built here from typed options, never from user text.
	pragma := func(p string) { q = append(q, "_pragma="+p) }
	pragma("busy_timeout(" + strconv.FormatInt(o.BusyTimeout.Milliseconds(), 10) + ")")
	if o.WAL {
		pragma("journal_mode(WAL)")
	}
	if o.Synchronous != SyncDefault {
		pragma("synchronous(" + string(o.Synchronous) + ")")
	}
	if o.ForeignKeys {
		pragma("foreign_keys(1)")
	}
	if o.CacheKiB > 0 {
		pragma("cache_size(-" + strconv.Itoa(o.CacheKiB) + ")")
	}
	if o.TempMemory {
		pragma("temp_store(MEMORY)")
	}
	if o.AutoCheckpoint != 0 {
		pragma("wal_autocheckpoint(" + strconv.Itoa(max(o.AutoCheckpoint, 0)) + ")")
	}
	if o.QueryOnly {
		pragma("query_only(1)")
	}
	if o.ImmediateTx {
		q = append(q, "_txlock=immediate")
	}
	return "file:" + path + "?" + strings.Join(q, "&"), nil
}

// Open opens path with o. database/sql connects lazily: the pragmas are
// applied (and a bad file reported) at the first use.
func Open(path string, o Options) (*sql.DB, error) {
	dsn, err := DSN(path, o)
	if err != nil {
		return nil, err
	}
	db, err := sql.Open("sqlite", dsn)
	if err != nil {
		return nil, fmt.Errorf("open %s: %w", path, err)
	}
	return db, nil
}

// OpenSingle opens path with o as a pool of one connection kept open for
// the pool's life: a database's writer (one at a time, and its page cache
// kept warm) or a checkpointer.
func OpenSingle(path string, o Options) (*sql.DB, error) {
	db, err := Open(path, o)
	if err != nil {
		return nil, err
	}
	db.SetMaxOpenConns(1)
	db.SetMaxIdleConns(1)
	db.SetConnMaxLifetime(0)
	db.SetConnMaxIdleTime(0)
	return db, nil
}

// Pragmas are the settings a connection reports (PRAGMA name, read back).
type Pragmas struct {
	BusyTimeout time.Duration
	JournalMode string // "wal", "delete", ...
	Synchronous int    // 0 OFF, 1 NORMAL, 2 FULL, 3 EXTRA
	ForeignKeys bool
	CacheSize   int // negative: KiB
	TempStore   int // 2: memory
	QueryOnly   bool
	// AutoCheckpoint is the WAL size in pages that makes a commit
	// checkpoint (0: never).
	AutoCheckpoint int
}

// Read returns the pragmas of one connection of db.
func Read(ctx context.Context, db interface {
	QueryRowContext(context.Context, string, ...any) *sql.Row
}) (Pragmas, error) {
	var p Pragmas
	var busy int64
	var fk, qo int
	for _, r := range []struct {
		name string
		dst  any
	}{
		{"busy_timeout", &busy}, {"journal_mode", &p.JournalMode}, {"synchronous", &p.Synchronous},
		{"foreign_keys", &fk}, {"cache_size", &p.CacheSize}, {"temp_store", &p.TempStore}, {"query_only", &qo},
		{"wal_autocheckpoint", &p.AutoCheckpoint},
	} {
		if err := db.QueryRowContext(ctx, "PRAGMA "+r.name).Scan(r.dst); err != nil {
			return p, fmt.Errorf("read PRAGMA %s: %w", r.name, err)
		}
	}
	p.BusyTimeout, p.ForeignKeys, p.QueryOnly = time.Duration(busy)*time.Millisecond, fk == 1, qo == 1
	return p, nil
}

// Check reads the pragmas of a connection of db and reports each one o
// asks for that the connection does not have.
func Check(ctx context.Context, db interface {
	QueryRowContext(context.Context, string, ...any) *sql.Row
}, o Options) error {
	p, err := Read(ctx, db)
	if err != nil {
		return err
	}
	var errs []error
	want := func(ok bool, name string, got, exp any) {
		if !ok {
			errs = append(errs, fmt.Errorf("PRAGMA %s = %v, want %v", name, got, exp))
		}
	}
	want(p.BusyTimeout == o.BusyTimeout.Truncate(time.Millisecond), "busy_timeout", p.BusyTimeout, o.BusyTimeout)
	if o.WAL {
		want(p.JournalMode == "wal", "journal_mode", p.JournalMode, "wal")
	}
	switch o.Synchronous {
	case SyncNormal:
		want(p.Synchronous == 1, "synchronous", p.Synchronous, "1 (NORMAL)")
	case SyncFull:
		want(p.Synchronous == 2, "synchronous", p.Synchronous, "2 (FULL)")
	}
	want(p.ForeignKeys == o.ForeignKeys, "foreign_keys", p.ForeignKeys, o.ForeignKeys)
	if o.CacheKiB > 0 {
		want(p.CacheSize == -o.CacheKiB, "cache_size", p.CacheSize, -o.CacheKiB)
	}
	if o.TempMemory {
		want(p.TempStore == 2, "temp_store", p.TempStore, "2 (MEMORY)")
	}
	want(p.QueryOnly == o.QueryOnly, "query_only", p.QueryOnly, o.QueryOnly)
	switch {
	case o.AutoCheckpoint < 0:
		want(p.AutoCheckpoint == 0, "wal_autocheckpoint", p.AutoCheckpoint, "0 (never)")
	case o.AutoCheckpoint > 0:
		want(p.AutoCheckpoint == o.AutoCheckpoint, "wal_autocheckpoint", p.AutoCheckpoint, o.AutoCheckpoint)
	default:
		want(p.AutoCheckpoint == 1000, "wal_autocheckpoint", p.AutoCheckpoint, "1000 (SQLite's default)")
	}
	return errors.Join(errs...)
}
