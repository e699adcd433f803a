// Package audit keeps the hash-chained audit trail of API writes in a SQLite
// file: each event carries the hash of the one before it, so that a removed
// or edited event breaks the chain and Verify finds it.
package audit

import (
	"context"
	"crypto/sha256"
	"database/sql"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"strconv"
	"sync"
	"time"

	"github.com/svcdns/svc/internal/sqlitedb"
)

// Actor is who did something (the spec's Actor shape).
type Actor struct {
	Auth   string   `json:"auth"`
	Groups []string `json:"groups"`
	ID     string   `json:"id"`
	Kind   string   `json:"kind"`
	Name   string   `json:"name"`
}

// Event is one audited write.
type Event struct {
	Seq       int64     `json:"seq"`
	Time      time.Time `json:"time"`
	Node      string    `json:"node,omitempty"`
	Actor     Actor     `json:"actor"`
	Decision  string    `json:"decision"` // local, binding, sar, none
	RequestID string    `json:"requestID"`
	Method    string    `json:"method"`
	Path      string    `json:"path"`
	Action    string    `json:"action"` // e.g. apply, delete, login
	Kind      string    `json:"kind,omitempty"`
	Namespace string    `json:"namespace,omitempty"`
	Name      string    `json:"name,omitempty"`
	Status    int       `json:"status"`
	Result    string    `json:"result,omitempty"`
	PrevHash  string    `json:"prevHash"`
	Hash      string    `json:"hash"`
}

// Log is the audit trail.
type Log struct {
	db    *sql.DB
	mu    sync.Mutex // serialises appends so that the chain stays linear
	clock func() time.Time
}

// dbOptions: an appended event is on disk when Append returns (synchronous
// FULL): the audit trail must not lose what it acknowledged.
var dbOptions = sqlitedb.Options{BusyTimeout: 5 * time.Second, WAL: true, Synchronous: sqlitedb.SyncFull, ImmediateTx: true}

// Open opens (creating if needed) the audit database at path.
func Open(ctx context.Context, path string, clock func() time.Time) (*Log, error) {
	if clock == nil {
		clock = time.Now
	}
	db, err := sqlitedb.Open(path, dbOptions)
	if err != nil {
		return nil, fmt.Errorf("open audit log: %w", err)
	}
	db.SetMaxOpenConns(1)
	if _, err := db.ExecContext(ctx, `CREATE TABLE IF NOT EXISTS audit_events (
		seq INTEGER PRIMARY KEY,
		ts TEXT NOT NULL,
		actor_name TEXT NOT NULL,
		kind TEXT NOT NULL,
		name TEXT NOT NULL,
		body TEXT NOT NULL,
		prev_hash TEXT NOT NULL,
		hash TEXT NOT NULL)`); err != nil {
		db.Close()
		return nil, fmt.Errorf("create audit table: %w", err)
	}
	return &Log{db: db, clock: clock}, nil
}

// Close closes the database.
func (l *Log) Close() error { return l.db.Close() }

func hashOf(e Event) (string, error) {
	e.Hash = ""
	b, err := json.Marshal(e)
	if err != nil {
		return "", err
	}
	sum := sha256.Sum256(b)
	return hex.EncodeToString(sum[:]), nil
}

// Append records e, filling its sequence, time and hashes.
func (l *Log) Append(ctx context.Context, e Event) (Event, error) {
	l.mu.Lock()
	defer l.mu.Unlock()
	tx, err := l.db.BeginTx(ctx, nil)
	if err != nil {
		return Event{}, fmt.Errorf("audit append: %w", err)
	}
	defer tx.Rollback()
	var prev string
	var seq int64
	err = tx.QueryRowContext(ctx, `SELECT seq, hash FROM audit_events ORDER BY seq DESC LIMIT 1`).Scan(&seq, &prev)
	if err != nil && !errors.Is(err, sql.ErrNoRows) {
		return Event{}, fmt.Errorf("audit append: %w", err)
	}
	e.Seq = seq + 1
	if e.Time.IsZero() {
		e.Time = l.clock().UTC()
	}
	e.Time = e.Time.UTC().Truncate(time.Microsecond)
	e.PrevHash = prev
	if e.Hash, err = hashOf(e); err != nil {
		return Event{}, fmt.Errorf("audit append: %w", err)
	}
	body, err := json.Marshal(e)
	if err != nil {
		return Event{}, fmt.Errorf("audit append: %w", err)
	}
	if _, err := tx.ExecContext(ctx, `INSERT INTO audit_events (seq, ts, actor_name, kind, name, body, prev_hash, hash) VALUES (?,?,?,?,?,?,?,?)`,
		e.Seq, e.Time.Format(time.RFC3339Nano), e.Actor.Name, e.Kind, e.Name, string(body), e.PrevHash, e.Hash); err != nil {
		return Event{}, fmt.Errorf("audit append: %w", err)
	}
	if err := tx.Commit(); err != nil {
		return Event{}, fmt.Errorf("audit append: %w", err)
	}
	return e, nil
}

// Query selects events.
type Query struct {
	Desc     bool
	Actor    string
	Kind     string
	Name     string
	Since    time.Time
	Limit    int    // 0: 100; at most 1000
	Continue string // opaque cursor from the previous page
}

// Page is one page of events.
type Page struct {
	Items    []Event
	Continue string
}

// List returns a page of events.
func (l *Log) List(ctx context.Context, q Query) (Page, error) {
	limit := q.Limit
	if limit <= 0 {
		limit = 100
	}
	limit = min(limit, 1000)
	where, args := "1=1", []any{}
	if q.Actor != "" {
		where += " AND actor_name = ?"
		args = append(args, q.Actor)
	}
	if q.Kind != "" {
		where += " AND kind = ?"
		args = append(args, q.Kind)
	}
	if q.Name != "" {
		where += " AND name = ?"
		args = append(args, q.Name)
	}
	if !q.Since.IsZero() {
		where += " AND ts >= ?"
		args = append(args, q.Since.UTC().Format(time.RFC3339Nano))
	}
	if q.Continue != "" {
		after, err := strconv.ParseInt(q.Continue, 10, 64)
		if err != nil || after < 0 {
			return Page{}, fmt.Errorf("%w: bad continue token", ErrInvalid)
		}
		if q.Desc {
			where += " AND seq < ?"
		} else {
			where += " AND seq > ?"
		}
		args = append(args, after)
	}
	order := "ASC"
	if q.Desc {
		order = "DESC"
	}
	rows, err := l.db.QueryContext(ctx, `SELECT body FROM audit_events WHERE `+where+` ORDER BY seq `+order+` LIMIT ?`, append(args, limit+1)...)
	if err != nil {
		return Page{}, fmt.Errorf("audit list: %w", err)
	}
	defer rows.Close()
	var p Page
	for rows.Next() {
		var body string
		if err := rows.Scan(&body); err != nil {
			return Page{}, fmt.Errorf("audit list: %w", err)
		}
		var e Event
		if err := json.Unmarshal([]byte(body), &e); err != nil {
			return Page{}, fmt.Errorf("audit list: %w", err)
		}
		p.Items = append(p.Items, e)
	}
	if err := rows.Err(); err != nil {
		return Page{}, fmt.Errorf("audit list: %w", err)
	}
	if len(p.Items) > limit {
		p.Items = p.Items[:limit]
		p.Continue = strconv.FormatInt(p.Items[limit-1].Seq, 10)
	}
	return p, nil
}

// ErrInvalid reports a bad query.
var ErrInvalid = errors.New("invalid audit query")

// ErrBroken reports a broken hash chain.
var ErrBroken = errors.New("audit chain broken")

// Verify walks the whole chain and reports the first broken link.
func (l *Log) Verify(ctx context.Context) (int64, error) {
	rows, err := l.db.QueryContext(ctx, `SELECT seq, body, prev_hash, hash FROM audit_events ORDER BY seq ASC`)
	if err != nil {
		return 0, fmt.Errorf("audit verify: %w", err)
	}
	defer rows.Close()
	var prev string
	var n, want int64
	for rows.Next() {
		var seq int64
		var body, ph, h string
		if err := rows.Scan(&seq, &body, &ph, &h); err != nil {
			return n, fmt.Errorf("audit verify: %w", err)
		}
		want++
		var e Event
		if err := json.Unmarshal([]byte(body), &e); err != nil {
			return n, fmt.Errorf("%w at %d: %v", ErrBroken, seq, err)
		}
		got, err := hashOf(e)
		if err != nil {
			return n, fmt.Errorf("audit verify: %w", err)
		}
		if seq != want || e.Seq != seq || ph != prev || e.PrevHash != prev || e.Hash != h || got != h {
			return n, fmt.Errorf("%w at event %d", ErrBroken, seq)
		}
		prev = h
		n++
	}
	return n, rows.Err()
}
