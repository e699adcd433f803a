package auth

import (
	"context"
	"path/filepath"
	"testing"

	"github.com/svcdns/svc/internal/sqlitedb"
)

// The session revocations database has the pragmas it asks for, read back
// with PRAGMA.
func TestRevocationsPragmas(t *testing.T) {
	ctx := context.Background()
	s := NewSessions(testKeys(1), nil)
	if err := s.Persist(ctx, filepath.Join(t.TempDir(), "sessions.db")); err != nil {
		t.Fatal(err)
	}
	defer s.Close()
	if err := sqlitedb.Check(ctx, s.db, revocationsDBOptions); err != nil {
		t.Error(err)
	}
}
