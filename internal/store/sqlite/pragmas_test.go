package sqlite

import (
	"context"
	"path/filepath"
	"testing"

	"github.com/svcdns/svc/internal/sqlitedb"
)

// The state database's writer and readers have the pragmas they ask for
// (WAL, synchronous FULL, foreign keys, busy timeout), read back with PRAGMA.
func TestStatePragmas(t *testing.T) {
	ctx := context.Background()
	d, err := Open(ctx, filepath.Join(t.TempDir(), "state.db"), Options{})
	if err != nil {
		t.Fatal(err)
	}
	defer d.Close()
	if err := sqlitedb.Check(ctx, d.w, writerOptions); err != nil {
		t.Errorf("writer: %v", err)
	}
	if err := sqlitedb.Check(ctx, d.r, readerOptions); err != nil {
		t.Errorf("reader: %v", err)
	}
	if writerOptions.Synchronous != sqlitedb.SyncFull || !writerOptions.ForeignKeys || !writerOptions.WAL {
		t.Errorf("state writer options %+v: want WAL, synchronous FULL, foreign keys", writerOptions)
	}
}
