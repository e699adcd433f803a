package sqlitedb

import (
	"context"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"
)

// Every connection of the pool has the pragmas asked for, read back with
// PRAGMA, and a read-only open leaves the file untouched.
func TestOptionsReachEveryConnection(t *testing.T) {
	ctx := context.Background()
	path := filepath.Join(t.TempDir(), "x.db")
	for _, o := range []Options{
		{BusyTimeout: 10 * time.Second, WAL: true, Synchronous: SyncFull, ForeignKeys: true, ImmediateTx: true},
		{BusyTimeout: 10 * time.Second, WAL: true, Synchronous: SyncNormal, CacheKiB: 65536, TempMemory: true},
		{BusyTimeout: 10 * time.Second, WAL: true, Synchronous: SyncNormal, AutoCheckpoint: 16384, ImmediateTx: true},
		{BusyTimeout: time.Second, WAL: true, AutoCheckpoint: -1},
		{BusyTimeout: 5 * time.Second, WAL: true, Synchronous: SyncNormal, QueryOnly: true},
		{BusyTimeout: time.Second, ReadOnly: true},
	} {
		db, err := Open(path, o)
		if err != nil {
			t.Fatal(err)
		}
		db.SetMaxOpenConns(3)
		// Hold three connections at once so the check sees more than one.
		conns := make([]interface{ Close() error }, 0, 3)
		for range 3 {
			c, err := db.Conn(ctx)
			if err != nil {
				t.Fatal(err)
			}
			if err := Check(ctx, c, o); err != nil {
				t.Errorf("%+v: %v", o, err)
			}
			conns = append(conns, c)
		}
		for _, c := range conns {
			c.Close()
		}
		if o.QueryOnly {
			if _, err := db.ExecContext(ctx, "CREATE TABLE t (x)"); err == nil {
				t.Error("query_only connection wrote")
			}
		}
		db.Close()
	}
	// Check notices a pragma that is not what was asked.
	db, err := Open(path, Options{BusyTimeout: time.Second})
	if err != nil {
		t.Fatal(err)
	}
	defer db.Close()
	if err := Check(ctx, db, Options{BusyTimeout: time.Second, ForeignKeys: true, Synchronous: SyncNormal, AutoCheckpoint: -1}); err == nil ||
		!strings.Contains(err.Error(), "foreign_keys") || !strings.Contains(err.Error(), "synchronous") ||
		!strings.Contains(err.Error(), "wal_autocheckpoint") {
		t.Fatalf("Check = %v, want foreign_keys, synchronous and wal_autocheckpoint named", err)
	}
}

func TestReadOnlyMissingFileNotCreated(t *testing.T) {
	path := filepath.Join(t.TempDir(), "missing.db")
	db, err := Open(path, Options{ReadOnly: true})
	if err != nil {
		t.Fatal(err)
	}
	defer db.Close()
	if err := db.Ping(); err == nil {
		t.Fatal("read-only open of a missing file succeeded")
	}
	if _, err := os.Stat(path); err == nil {
		t.Fatal("read-only open created the file")
	}
}

func TestBadOptionsRefused(t *testing.T) {
	for _, c := range []struct {
		path string
		o    Options
		want string
	}{
		{"/tmp/a?b.db", Options{}, "must not contain ? or #"},
		{"", Options{}, "empty database path"},
		{"/tmp/a.db", Options{ReadOnly: true, WAL: true}, "ReadOnly"},
		{"/tmp/a.db", Options{Synchronous: "OFF"}, "not one of NORMAL, FULL"},
	} {
		if _, err := DSN(c.path, c.o); err == nil || !strings.Contains(err.Error(), c.want) {
			t.Errorf("DSN(%q, %+v) = %v, want %q", c.path, c.o, err, c.want)
		}
	}
}

// OpenSingle's pool holds one connection: a second caller waits for the
// first instead of opening another.
func TestOpenSingleKeepsOneConnection(t *testing.T) {
	ctx := context.Background()
	db, err := OpenSingle(filepath.Join(t.TempDir(), "x.db"), Options{BusyTimeout: time.Second, WAL: true})
	if err != nil {
		t.Fatal(err)
	}
	defer db.Close()
	c, err := db.Conn(ctx)
	if err != nil {
		t.Fatal(err)
	}
	wctx, cancel := context.WithTimeout(ctx, 50*time.Millisecond)
	defer cancel()
	if c2, err := db.Conn(wctx); err == nil {
		c2.Close()
		t.Fatal("a second connection opened while the first was held")
	}
	c.Close()
	if st := db.Stats(); st.MaxOpenConnections != 1 || st.OpenConnections != 1 {
		t.Fatalf("pool %+v: want one connection, kept", st)
	}
}
