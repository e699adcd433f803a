// Package sqlite is the store driver that keeps objects in one SQLite file
// (the node passes <dataDir>/state.db): WAL with synchronous=FULL so a commit
// survives a crash, one writer connection (writes are serialised) beside a
// pool of readers, and a change log that feeds watches.
package sqlite

import (
	"context"
	"database/sql"
	"encoding/base64"
	"encoding/json"
	"errors"
	"fmt"
	"log/slog"
	"strconv"
	"sync"
	"time"

	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/labels"

	"github.com/svcdns/svc/internal/sqlitedb"
	"github.com/svcdns/svc/internal/store"
)

// Options tune a Driver; the zero value is usable.
type Options struct {
	Logger *slog.Logger
	// ChangeLogRetain is how many changes the log keeps for watches from a
	// version (default 100000). A watch further behind ends with ErrExpired.
	ChangeLogRetain int64
	// WatchBuffer is the channel capacity of each watch (default 256).
	WatchBuffer int
	// Readers is the size of the read connection pool (default 4).
	Readers int
}

// Driver is the SQLite store.Driver.
type Driver struct {
	log     *slog.Logger
	w       *sql.DB // one connection: every write goes through it in turn
	r       *sql.DB
	retain  int64
	watchSz int

	wmu sync.Mutex // serialises write transactions and change notification

	nmu     sync.Mutex
	changed chan struct{} // closed and replaced after every commit
	closed  bool

	done chan struct{}
	wg   sync.WaitGroup
}

var _ store.Driver = (*Driver)(nil)

// The state database is the source of truth: a commit is on disk when
// it returns (synchronous FULL), and the schema's foreign keys hold.
var (
	writerOptions = sqlitedb.Options{BusyTimeout: 10 * time.Second, WAL: true, Synchronous: sqlitedb.SyncFull, ForeignKeys: true, ImmediateTx: true}
	readerOptions = sqlitedb.Options{BusyTimeout: 10 * time.Second, WAL: true, Synchronous: sqlitedb.SyncFull, ForeignKeys: true, QueryOnly: true}
)

// Open opens (creating and migrating when needed) the database at path.
func Open(ctx context.Context, path string, opts Options) (*Driver, error) {
	if opts.Logger == nil {
		opts.Logger = slog.New(slog.DiscardHandler)
	}
	if opts.ChangeLogRetain <= 0 {
		opts.ChangeLogRetain = 100000
	}
	if opts.WatchBuffer <= 0 {
		opts.WatchBuffer = 256
	}
	if opts.Readers <= 0 {
		opts.Readers = 4
	}
	w, err := sqlitedb.OpenSingle(path, writerOptions)
	if err != nil {
		return nil, fmt.Errorf("open sqlite store %s: %w", path, err)
	}
	if err := migrate(ctx, w); err != nil {
		w.Close()
		return nil, fmt.Errorf("open sqlite store %s: %w", path, err)
	}
	r, err := sqlitedb.Open(path, readerOptions)
	if err != nil {
		w.Close()
		return nil, fmt.Errorf("open sqlite store %s: %w", path, err)
	}
	r.SetMaxOpenConns(opts.Readers)
	r.SetMaxIdleConns(opts.Readers)
	d := &Driver{
		log: opts.Logger, w: w, r: r,
		retain: opts.ChangeLogRetain, watchSz: opts.WatchBuffer,
		changed: make(chan struct{}), done: make(chan struct{}),
	}
	return d, nil
}

// NewStore opens the database at path and returns the Store over it.
func NewStore(ctx context.Context, path string, admit store.Admitter, opts Options) (store.Store, error) {
	d, err := Open(ctx, path, opts)
	if err != nil {
		return nil, err
	}
	return store.New(d, admit), nil
}

// Close stops every watch and closes the database.
func (d *Driver) Close() error {
	d.nmu.Lock()
	if d.closed {
		d.nmu.Unlock()
		return nil
	}
	d.closed = true
	close(d.done)
	d.nmu.Unlock()
	d.wg.Wait()
	d.wmu.Lock()
	defer d.wmu.Unlock()
	return errors.Join(d.r.Close(), d.w.Close())
}

// closedErr turns the error of a call that raced Close (it passed the
// isClosed check, then found the database closed under it) into ErrClosed, so
// followers stop quietly instead of reporting "sql: database is closed".
func (d *Driver) closedErr(err *error) {
	if *err != nil && !errors.Is(*err, store.ErrClosed) && d.isClosed() {
		*err = fmt.Errorf("%w (%v)", store.ErrClosed, *err)
	}
}

func (d *Driver) isClosed() bool {
	d.nmu.Lock()
	defer d.nmu.Unlock()
	return d.closed
}

// schema lists the migrations; schema_version holds how many have run.
var schema = []string{
	`CREATE TABLE objects (
		kind TEXT NOT NULL,
		namespace TEXT NOT NULL,
		name TEXT NOT NULL,
		resource_version INTEGER NOT NULL,
		object BLOB NOT NULL,
		PRIMARY KEY (kind, namespace, name)
	) WITHOUT ROWID;
	CREATE TABLE changes (
		rv INTEGER PRIMARY KEY,
		kind TEXT NOT NULL,
		namespace TEXT NOT NULL,
		name TEXT NOT NULL,
		type TEXT NOT NULL,
		object BLOB NOT NULL
	);
	CREATE INDEX changes_kind_rv ON changes (kind, rv);
	CREATE TABLE meta (key TEXT PRIMARY KEY, value INTEGER NOT NULL) WITHOUT ROWID;
	INSERT INTO meta (key, value) VALUES ('rv', 0), ('compacted', 0);`,
}

func migrate(ctx context.Context, db *sql.DB) error {
	tx, err := db.BeginTx(ctx, nil)
	if err != nil {
		return fmt.Errorf("migrate: %w", err)
	}
	defer tx.Rollback()
	if _, err := tx.ExecContext(ctx, `CREATE TABLE IF NOT EXISTS schema_version (version INTEGER NOT NULL)`); err != nil {
		return fmt.Errorf("migrate: %w", err)
	}
	var v int
	switch err := tx.QueryRowContext(ctx, `SELECT version FROM schema_version`).Scan(&v); {
	case errors.Is(err, sql.ErrNoRows):
		if _, err := tx.ExecContext(ctx, `INSERT INTO schema_version (version) VALUES (0)`); err != nil {
			return fmt.Errorf("migrate: %w", err)
		}
	case err != nil:
		return fmt.Errorf("migrate: read schema version: %w", err)
	}
	if v > len(schema) {
		return fmt.Errorf("migrate: database schema version %d is newer than this program's %d", v, len(schema))
	}
	for i := v; i < len(schema); i++ {
		if _, err := tx.ExecContext(ctx, schema[i]); err != nil {
			return fmt.Errorf("migrate to schema version %d: %w", i+1, err)
		}
	}
	if _, err := tx.ExecContext(ctx, `UPDATE schema_version SET version = ?`, len(schema)); err != nil {
		return fmt.Errorf("migrate: %w", err)
	}
	return tx.Commit()
}

func decode(b []byte) (*unstructured.Unstructured, error) {
	u := &unstructured.Unstructured{}
	if err := u.UnmarshalJSON(b); err != nil {
		return nil, fmt.Errorf("decode stored object: %w", err)
	}
	return u, nil
}

// Get returns the stored object.
func (d *Driver) Get(ctx context.Context, key store.Key) (_ *unstructured.Unstructured, err error) {
	defer d.closedErr(&err)
	if d.isClosed() {
		return nil, store.ErrClosed
	}
	var b []byte
	err = d.r.QueryRowContext(ctx, `SELECT object FROM objects WHERE kind = ? AND namespace = ? AND name = ?`,
		key.Kind, key.Namespace, key.Name).Scan(&b)
	if errors.Is(err, sql.ErrNoRows) {
		return nil, fmt.Errorf("%s: %w", key, store.ErrNotFound)
	}
	if err != nil {
		return nil, fmt.Errorf("get %s: %w", key, err)
	}
	return decode(b)
}

// cursor is the decoded continue token: the last key of the previous page.
type cursor struct {
	Namespace string `json:"ns"`
	Name      string `json:"n"`
}

func encodeCursor(c cursor) string {
	b, _ := json.Marshal(c)
	return base64.RawURLEncoding.EncodeToString(b)
}

func decodeCursor(s string) (cursor, error) {
	var c cursor
	b, err := base64.RawURLEncoding.DecodeString(s)
	if err != nil || json.Unmarshal(b, &c) != nil || c.Name == "" {
		return c, fmt.Errorf("%w: malformed continue token", store.ErrInvalid)
	}
	return c, nil
}

// List returns one page ordered by (namespace, name). The continue token is
// the last key returned, so each object that exists for the whole paging is
// returned exactly once even while others are added or removed.
func (d *Driver) List(ctx context.Context, opts store.ListOptions) (_ store.ListResult, err error) {
	defer d.closedErr(&err)
	if d.isClosed() {
		return store.ListResult{}, store.ErrClosed
	}
	var after cursor
	if opts.Continue != "" {
		c, err := decodeCursor(opts.Continue)
		if err != nil {
			return store.ListResult{}, err
		}
		after = c
	}
	sel := opts.Selector
	if sel == nil {
		sel = labels.Everything()
	}
	// One read transaction: every batch and the version see one snapshot.
	tx, err := d.r.BeginTx(ctx, &sql.TxOptions{ReadOnly: true})
	if err != nil {
		return store.ListResult{}, fmt.Errorf("list %s: %w", opts.Kind, err)
	}
	defer tx.Rollback()
	var rv int64
	if err := tx.QueryRowContext(ctx, `SELECT value FROM meta WHERE key = 'rv'`).Scan(&rv); err != nil {
		return store.ListResult{}, fmt.Errorf("list %s: %w", opts.Kind, err)
	}
	res := store.ListResult{ResourceVersion: strconv.FormatInt(rv, 10)}
	batch := 500
	if opts.Limit > 0 && opts.Limit+1 < batch {
		batch = opts.Limit + 1
	}
	first := opts.Continue == ""
	for {
		q := `SELECT namespace, name, object FROM objects WHERE kind = ?`
		args := []any{opts.Kind}
		if opts.Namespace != "" {
			q += ` AND namespace = ?`
			args = append(args, opts.Namespace)
		}
		if !first {
			q += ` AND (namespace, name) > (?, ?)`
			args = append(args, after.Namespace, after.Name)
		}
		q += ` ORDER BY namespace, name LIMIT ?`
		args = append(args, batch)
		rows, err := tx.QueryContext(ctx, q, args...)
		if err != nil {
			return store.ListResult{}, fmt.Errorf("list %s: %w", opts.Kind, err)
		}
		n := 0
		full := false
		for rows.Next() {
			n++
			var ns, name string
			var b []byte
			if err := rows.Scan(&ns, &name, &b); err != nil {
				rows.Close()
				return store.ListResult{}, fmt.Errorf("list %s: %w", opts.Kind, err)
			}
			if opts.Limit > 0 && len(res.Items) == opts.Limit {
				// A further row exists; whether it matches or not, the next
				// page starts after the last item returned.
				full = true
				break
			}
			first = false
			after = cursor{Namespace: ns, Name: name}
			obj, err := decode(b)
			if err != nil {
				rows.Close()
				return store.ListResult{}, fmt.Errorf("list %s %s/%s: %w", opts.Kind, ns, name, err)
			}
			if sel.Matches(labels.Set(obj.GetLabels())) {
				res.Items = append(res.Items, obj)
			}
		}
		err = rows.Err()
		rows.Close()
		if err != nil {
			return store.ListResult{}, fmt.Errorf("list %s: %w", opts.Kind, err)
		}
		if full {
			last := res.Items[len(res.Items)-1]
			res.Continue = encodeCursor(cursor{Namespace: last.GetNamespace(), Name: last.GetName()})
			return res, nil
		}
		if n < batch {
			return res, nil
		}
	}
}

// Write commits writes in one transaction. Each write gets the next version.
func (d *Driver) Write(ctx context.Context, writes []store.Write) (_ []*unstructured.Unstructured, err error) {
	defer d.closedErr(&err)
	if d.isClosed() {
		return nil, store.ErrClosed
	}
	d.wmu.Lock()
	defer d.wmu.Unlock()
	out, rv, err := d.write(ctx, writes)
	if err != nil {
		return nil, err
	}
	d.notify()
	if err := d.compact(ctx, rv); err != nil {
		// The write is committed; a failed compaction only keeps more log.
		d.log.Warn("compact sqlite change log", "err", err)
	}
	return out, nil
}

func (d *Driver) write(ctx context.Context, writes []store.Write) ([]*unstructured.Unstructured, int64, error) {
	tx, err := d.w.BeginTx(ctx, nil)
	if err != nil {
		return nil, 0, fmt.Errorf("write: begin: %w", err)
	}
	defer tx.Rollback()
	var rv int64
	if err := tx.QueryRowContext(ctx, `SELECT value FROM meta WHERE key = 'rv'`).Scan(&rv); err != nil {
		return nil, 0, fmt.Errorf("write: read version: %w", err)
	}
	out := make([]*unstructured.Unstructured, len(writes))
	for i, w := range writes {
		rv++
		k := w.Key
		var event store.EventType
		var b []byte
		switch w.Op {
		case store.OpCreate, store.OpUpdate:
			if w.Object == nil {
				return nil, 0, fmt.Errorf("write %s: %w: no object", k, store.ErrInvalid)
			}
			obj := w.Object.DeepCopy()
			obj.SetResourceVersion(strconv.FormatInt(rv, 10))
			if b, err = obj.MarshalJSON(); err != nil {
				return nil, 0, fmt.Errorf("write %s: encode: %w", k, err)
			}
			if len(b) > store.MaxObjectBytes {
				return nil, 0, fmt.Errorf("write %s: %w: %d bytes", k, store.ErrTooLarge, len(b))
			}
			out[i] = obj
		}
		var res sql.Result
		switch w.Op {
		case store.OpCreate:
			event = store.Added
			res, err = tx.ExecContext(ctx, `INSERT INTO objects (kind, namespace, name, resource_version, object)
				VALUES (?, ?, ?, ?, ?) ON CONFLICT DO NOTHING`, k.Kind, k.Namespace, k.Name, rv, b)
		case store.OpUpdate:
			event = store.Modified
			res, err = tx.ExecContext(ctx, `UPDATE objects SET resource_version = ?, object = ?
				WHERE kind = ? AND namespace = ? AND name = ? AND resource_version = ?`,
				rv, b, k.Kind, k.Namespace, k.Name, w.ResourceVersion)
		case store.OpDelete:
			event = store.Deleted
			// The deleted object, stamped with the deleting version, is what
			// watchers receive.
			var old []byte
			err = tx.QueryRowContext(ctx, `DELETE FROM objects WHERE kind = ? AND namespace = ? AND name = ?
				AND resource_version = ? RETURNING object`, k.Kind, k.Namespace, k.Name, w.ResourceVersion).Scan(&old)
			if errors.Is(err, sql.ErrNoRows) {
				return nil, 0, d.conflict(ctx, tx, w)
			}
			if err != nil {
				return nil, 0, fmt.Errorf("write %s: %w", k, err)
			}
			obj, err := decode(old)
			if err != nil {
				return nil, 0, err
			}
			obj.SetResourceVersion(strconv.FormatInt(rv, 10))
			if b, err = obj.MarshalJSON(); err != nil {
				return nil, 0, fmt.Errorf("write %s: encode: %w", k, err)
			}
		default:
			return nil, 0, fmt.Errorf("write %s: unknown op %d", k, w.Op)
		}
		if err != nil {
			return nil, 0, fmt.Errorf("write %s: %w", k, err)
		}
		if res != nil {
			if n, err := res.RowsAffected(); err != nil {
				return nil, 0, fmt.Errorf("write %s: %w", k, err)
			} else if n != 1 {
				return nil, 0, d.conflict(ctx, tx, w)
			}
		}
		if _, err := tx.ExecContext(ctx, `INSERT INTO changes (rv, kind, namespace, name, type, object) VALUES (?, ?, ?, ?, ?, ?)`,
			rv, k.Kind, k.Namespace, k.Name, string(event), b); err != nil {
			return nil, 0, fmt.Errorf("write %s: log change: %w", k, err)
		}
	}
	if _, err := tx.ExecContext(ctx, `UPDATE meta SET value = ? WHERE key = 'rv'`, rv); err != nil {
		return nil, 0, fmt.Errorf("write: store version: %w", err)
	}
	if err := tx.Commit(); err != nil {
		return nil, 0, fmt.Errorf("write: commit: %w", err)
	}
	return out, rv, nil
}

// conflict explains why a write's precondition failed.
func (d *Driver) conflict(ctx context.Context, tx *sql.Tx, w store.Write) error {
	var cur int64
	err := tx.QueryRowContext(ctx, `SELECT resource_version FROM objects WHERE kind = ? AND namespace = ? AND name = ?`,
		w.Key.Kind, w.Key.Namespace, w.Key.Name).Scan(&cur)
	switch {
	case errors.Is(err, sql.ErrNoRows):
		if w.Op == store.OpCreate {
			return fmt.Errorf("write %s: %w", w.Key, store.ErrConflict)
		}
		return fmt.Errorf("write %s: %w: object was deleted", w.Key, store.ErrConflict)
	case err != nil:
		return fmt.Errorf("write %s: %w", w.Key, err)
	case w.Op == store.OpCreate:
		return fmt.Errorf("write %s: %w: object exists", w.Key, store.ErrConflict)
	default:
		return fmt.Errorf("write %s: %w: expected version %s, stored %d", w.Key, store.ErrConflict, w.ResourceVersion, cur)
	}
}

// compact trims the change log to the newest d.retain changes; it runs in
// steps so that one write never pays for a large delete.
func (d *Driver) compact(ctx context.Context, rv int64) error {
	floor := rv - d.retain
	if floor <= 0 || rv%128 != 0 {
		return nil
	}
	tx, err := d.w.BeginTx(ctx, nil)
	if err != nil {
		return err
	}
	defer tx.Rollback()
	if _, err := tx.ExecContext(ctx, `DELETE FROM changes WHERE rv <= ?`, floor); err != nil {
		return err
	}
	if _, err := tx.ExecContext(ctx, `UPDATE meta SET value = ? WHERE key = 'compacted' AND value < ?`, floor, floor); err != nil {
		return err
	}
	return tx.Commit()
}

func (d *Driver) notify() {
	d.nmu.Lock()
	close(d.changed)
	d.changed = make(chan struct{})
	d.nmu.Unlock()
}

func (d *Driver) changedChan() chan struct{} {
	d.nmu.Lock()
	defer d.nmu.Unlock()
	return d.changed
}
