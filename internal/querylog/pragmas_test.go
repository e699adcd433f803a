package querylog

import (
	"context"
	"testing"

	"github.com/svcdns/svc/internal/sqlitedb"
)

// querylog.db's writer and readers have the pragmas they ask for (WAL,
// synchronous NORMAL, cache, temp store, busy timeout), read back with PRAGMA.
func TestQueryLogPragmas(t *testing.T) {
	ctx := context.Background()
	cfg := DefaultConfig()
	cfg.DataDir = t.TempDir()
	w := openTest(t, cfg, Options{})
	if err := sqlitedb.Check(ctx, w.store.w, writerOptions); err != nil {
		t.Errorf("writer: %v", err)
	}
	if err := sqlitedb.Check(ctx, w.store.r, readerOptions); err != nil {
		t.Errorf("reader: %v", err)
	}
	if writerOptions.Synchronous != sqlitedb.SyncNormal || !writerOptions.WAL {
		t.Errorf("writer options %+v: want WAL, synchronous NORMAL", writerOptions)
	}
}
