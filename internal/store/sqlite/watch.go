package sqlite

import (
	"context"
	"database/sql"
	"fmt"
	"strconv"

	"github.com/svcdns/svc/internal/store"
)

// logBatch is how many change rows a watch reads at a time.
const logBatch = 256

// Watch follows the change log. Each watch reads committed rows after its own
// cursor, so a writer never waits for a watcher: it only wakes them. A watcher
// whose reader falls behind the retained log ends with ErrExpired.
func (d *Driver) Watch(ctx context.Context, opts store.WatchOptions) (_ <-chan store.Event, err error) {
	defer d.closedErr(&err)
	if d.isClosed() {
		return nil, store.ErrClosed
	}
	var initial []store.Event
	var from int64
	if opts.ResourceVersion == "" {
		evs, rv, err := d.snapshot(ctx, opts.Kind)
		if err != nil {
			return nil, err
		}
		initial, from = evs, rv
	} else {
		v, err := store.ParseVersion(opts.ResourceVersion)
		if err != nil {
			return nil, err
		}
		from = v
		var compacted int64
		if err := d.r.QueryRowContext(ctx, `SELECT value FROM meta WHERE key = 'compacted'`).Scan(&compacted); err != nil {
			return nil, fmt.Errorf("watch: %w", err)
		}
		if from < compacted {
			return nil, fmt.Errorf("watch from %d: %w (log starts after %d)", from, store.ErrExpired, compacted)
		}
	}
	ch := make(chan store.Event, d.watchSz)
	// Added under nmu, and only while open: an Add racing Close's Wait
	// panics ("WaitGroup is reused before previous Wait has returned").
	d.nmu.Lock()
	if d.closed {
		d.nmu.Unlock()
		return nil, store.ErrClosed
	}
	d.wg.Add(1)
	d.nmu.Unlock()
	go func() {
		defer d.wg.Done()
		defer close(ch)
		d.follow(ctx, opts.Kind, from, initial, ch)
	}()
	return ch, nil
}

// snapshot reads the current objects and the version they were read at.
func (d *Driver) snapshot(ctx context.Context, kind string) ([]store.Event, int64, error) {
	tx, err := d.r.BeginTx(ctx, &sql.TxOptions{ReadOnly: true})
	if err != nil {
		return nil, 0, fmt.Errorf("watch: %w", err)
	}
	defer tx.Rollback()
	var rv int64
	if err := tx.QueryRowContext(ctx, `SELECT value FROM meta WHERE key = 'rv'`).Scan(&rv); err != nil {
		return nil, 0, fmt.Errorf("watch: %w", err)
	}
	q, args := `SELECT object FROM objects ORDER BY kind, namespace, name`, []any{}
	if kind != "" {
		q, args = `SELECT object FROM objects WHERE kind = ? ORDER BY namespace, name`, []any{kind}
	}
	rows, err := tx.QueryContext(ctx, q, args...)
	if err != nil {
		return nil, 0, fmt.Errorf("watch: %w", err)
	}
	defer rows.Close()
	var evs []store.Event
	for rows.Next() {
		var b []byte
		if err := rows.Scan(&b); err != nil {
			return nil, 0, fmt.Errorf("watch: %w", err)
		}
		obj, err := decode(b)
		if err != nil {
			return nil, 0, err
		}
		evs = append(evs, store.Event{Type: store.Added, Object: obj})
	}
	if err := rows.Err(); err != nil {
		return nil, 0, fmt.Errorf("watch: %w", err)
	}
	return evs, rv, nil
}

func (d *Driver) follow(ctx context.Context, kind string, cursor int64, initial []store.Event, ch chan<- store.Event) {
	send := func(ev store.Event) bool {
		select {
		case ch <- ev:
			return true
		case <-ctx.Done():
			return false
		case <-d.done:
			return false
		}
	}
	fail := func(err error) {
		// Best effort: a reader that never reads again still gets its channel closed.
		select {
		case ch <- store.Event{Type: store.Error, Err: err}:
		case <-ctx.Done():
		case <-d.done:
		}
	}
	for _, ev := range initial {
		if !send(ev) {
			return
		}
	}
	for {
		wake := d.changedChan()
		evs, last, err := d.readLog(ctx, kind, cursor)
		if err != nil {
			if ctx.Err() == nil && !d.isClosed() {
				fail(err)
			}
			return
		}
		for _, ev := range evs {
			if !send(ev) {
				return
			}
		}
		if last > cursor {
			cursor = last
		}
		if len(evs) == logBatch {
			continue
		}
		select {
		case <-wake:
		case <-ctx.Done():
			return
		case <-d.done:
			return
		}
	}
}

// readLog returns the next changes after cursor and the version of the last.
func (d *Driver) readLog(ctx context.Context, kind string, cursor int64) ([]store.Event, int64, error) {
	tx, err := d.r.BeginTx(ctx, &sql.TxOptions{ReadOnly: true})
	if err != nil {
		return nil, 0, fmt.Errorf("watch: %w", err)
	}
	defer tx.Rollback()
	var compacted, head int64
	if err := tx.QueryRowContext(ctx, `SELECT (SELECT value FROM meta WHERE key = 'compacted'), (SELECT value FROM meta WHERE key = 'rv')`).Scan(&compacted, &head); err != nil {
		return nil, 0, fmt.Errorf("watch: %w", err)
	}
	if cursor < compacted {
		return nil, 0, fmt.Errorf("watch at %d: %w: the watcher fell behind the change log (starts after %d)", cursor, store.ErrExpired, compacted)
	}
	q, args := `SELECT rv, type, object FROM changes WHERE rv > ? ORDER BY rv LIMIT ?`, []any{cursor, logBatch}
	if kind != "" {
		q, args = `SELECT rv, type, object FROM changes WHERE kind = ? AND rv > ? ORDER BY rv LIMIT ?`, []any{kind, cursor, logBatch}
	}
	rows, err := tx.QueryContext(ctx, q, args...)
	if err != nil {
		return nil, 0, fmt.Errorf("watch: %w", err)
	}
	defer rows.Close()
	var evs []store.Event
	last := cursor
	for rows.Next() {
		var rv int64
		var typ string
		var b []byte
		if err := rows.Scan(&rv, &typ, &b); err != nil {
			return nil, 0, fmt.Errorf("watch: %w", err)
		}
		obj, err := decode(b)
		if err != nil {
			return nil, 0, fmt.Errorf("watch change %s: %w", strconv.FormatInt(rv, 10), err)
		}
		evs = append(evs, store.Event{Type: store.EventType(typ), Object: obj})
		last = rv
	}
	if err := rows.Err(); err != nil {
		return nil, 0, fmt.Errorf("watch: %w", err)
	}
	if len(evs) < logBatch {
		// Everything up to head was read (other kinds' changes need not be
		// seen), so a quiet kind's watch does not fall behind compaction.
		last = head
	}
	return evs, last, nil
}
