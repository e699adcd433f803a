package sqlite

import (
	"context"
	"database/sql"
	"errors"
	"fmt"

	"github.com/svcdns/svc/internal/store"
)

// Marked reports whether Mark recorded key in this database: one-time
// upgrade steps of the node (a later start must not run them again, and
// they travel with the file, not with the binary).
func (d *Driver) Marked(ctx context.Context, key string) (_ bool, err error) {
	defer d.closedErr(&err)
	if d.isClosed() {
		return false, store.ErrClosed
	}
	var v int64
	err = d.r.QueryRowContext(ctx, `SELECT value FROM meta WHERE key = ?`, "mark:"+key).Scan(&v)
	if errors.Is(err, sql.ErrNoRows) {
		return false, nil
	}
	if err != nil {
		return false, fmt.Errorf("read mark %s: %w", key, err)
	}
	return v != 0, nil
}

// Mark records key (see Marked).
func (d *Driver) Mark(ctx context.Context, key string) (err error) {
	defer d.closedErr(&err)
	if d.isClosed() {
		return store.ErrClosed
	}
	d.wmu.Lock()
	defer d.wmu.Unlock()
	if _, err := d.w.ExecContext(ctx, `INSERT INTO meta (key, value) VALUES (?, 1) ON CONFLICT (key) DO UPDATE SET value = 1`, "mark:"+key); err != nil {
		return fmt.Errorf("write mark %s: %w", key, err)
	}
	return nil
}
