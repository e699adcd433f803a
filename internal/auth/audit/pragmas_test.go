package audit

import (
	"context"
	"path/filepath"
	"testing"

	"github.com/svcdns/svc/internal/sqlitedb"
)

// The audit database has the pragmas it asks for, read back with PRAGMA.
func TestAuditPragmas(t *testing.T) {
	ctx := context.Background()
	l, err := Open(ctx, filepath.Join(t.TempDir(), "audit.db"), nil)
	if err != nil {
		t.Fatal(err)
	}
	defer l.Close()
	if err := sqlitedb.Check(ctx, l.db, dbOptions); err != nil {
		t.Error(err)
	}
	if dbOptions.Synchronous != sqlitedb.SyncFull || !dbOptions.WAL {
		t.Errorf("audit options %+v: want WAL, synchronous FULL", dbOptions)
	}
}
