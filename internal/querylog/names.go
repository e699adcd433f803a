package querylog

import (
	"context"
	"database/sql"
	"fmt"
	"sync"
)

// Dictionary-encoded columns of queries: each holds the id of its value in
// the names table, NULL for "", or the text itself once the kind's
// dictionary is full (the columns have no type affinity, so an integer id
// and a text value cannot be confused).
const (
	kStatus = iota
	kQType
	kRcode
	kNode
	kClientName
	kReason
	kList
	kRule
	kPolicy
	kUpstream
	kZone
	kTransport
	kClientID // added in block version 2: kinds are appended, never renumbered (names.kind)
	nKinds
)

// kindCols are the queries columns of the kinds, in kind order.
var kindCols = [nKinds]string{"status", "qtype", "rcode", "node", "client_name", "reason", "list", "rule", "policy", "upstream", "zone", "transport", "client_id"}

// kindCap bounds how many names of a kind are kept in the dictionary (and
// in memory); values past it are stored as text. Rules and client names can
// be many, client IDs as many as client names; the others are
// enumerations or configuration names.
var kindCap = [nKinds]int{kRule: 20000, kClientName: 20000, kClientID: 20000}

const defaultKindCap = 4096

func capOf(k int) int {
	if c := kindCap[k]; c > 0 {
		return c
	}
	return defaultKindCap
}

// rowField is the column of kind k in a row: the one place that maps the
// dictionary kinds to Row fields (encoding reads it, decoding writes it).
func rowField(r *Row, k int) *string {
	switch k {
	case kStatus:
		return &r.Status
	case kQType:
		return &r.QType
	case kRcode:
		return &r.Rcode
	case kNode:
		return &r.Node
	case kClientName:
		return &r.ClientName
	case kReason:
		return &r.Reason
	case kList:
		return &r.List
	case kRule:
		return &r.Rule
	case kPolicy:
		return &r.Policy
	case kUpstream:
		return &r.Upstream
	case kZone:
		return &r.Zone
	case kClientID:
		return &r.ClientID
	default:
		return &r.Transport
	}
}

// names is the in-memory copy of the names table. The writer adds names
// (before the rows that use them are committed); readers decode ids.
type names struct {
	mu     sync.RWMutex
	ids    [nKinds]map[string]int64
	byID   map[int64]string
	next   int64
	hwm    int64 // ids below hwm are committed
	staged []nameEntry
}

type nameEntry struct {
	id   int64
	kind int
	name string
}

func newNames() *names {
	n := &names{byID: map[int64]string{}, next: 1, hwm: 1}
	for k := range n.ids {
		n.ids[k] = map[string]int64{}
	}
	return n
}

// load reads the names table (db: a *sql.DB or *sql.Tx).
func (n *names) load(ctx context.Context, db interface {
	QueryContext(ctx context.Context, query string, args ...any) (*sql.Rows, error)
}) error {
	rs, err := db.QueryContext(ctx, "SELECT id, kind, name FROM names")
	if err != nil {
		return fmt.Errorf("load names: %w", err)
	}
	defer rs.Close()
	n.mu.Lock()
	defer n.mu.Unlock()
	for k := range n.ids {
		n.ids[k] = map[string]int64{}
	}
	clear(n.byID)
	n.next, n.staged = 1, nil
	for rs.Next() {
		var id int64
		var k int
		var s string
		if err := rs.Scan(&id, &k, &s); err != nil {
			return fmt.Errorf("load names: %w", err)
		}
		if k < 0 || k >= nKinds {
			continue
		}
		n.ids[k][s] = id
		n.byID[id] = s
		n.next = max(n.next, id+1)
	}
	n.hwm = n.next
	return rs.Err()
}

// encode returns the value to store for s of kind k: nil for "", the
// name's id, or s itself when the kind's dictionary is full. New names are
// staged for insertion with the batch. Writer goroutine only.
func (n *names) encode(k int, s string) any {
	if s == "" {
		return nil
	}
	// The writer is the only goroutine that changes the maps: it reads them
	// without the lock.
	if id, ok := n.ids[k][s]; ok {
		return id
	}
	if len(n.ids[k]) >= capOf(k) {
		return s
	}
	n.mu.Lock()
	id := n.next
	n.next++
	n.ids[k][s] = id
	n.byID[id] = s
	n.mu.Unlock()
	n.staged = append(n.staged, nameEntry{id, k, s})
	return id
}

// lookup returns the id of a name already known (for filters).
func (n *names) lookup(k int, s string) (int64, bool) {
	n.mu.RLock()
	defer n.mu.RUnlock()
	id, ok := n.ids[k][s]
	return id, ok
}

// decode turns a stored value back into its text.
func (n *names) decode(v any) string {
	switch x := v.(type) {
	case nil:
		return ""
	case int64:
		n.mu.RLock()
		s := n.byID[x]
		n.mu.RUnlock()
		return s
	case string:
		return x
	case []byte:
		return string(x)
	}
	return fmt.Sprint(v)
}

// committed marks the staged names written.
func (n *names) committed() {
	n.staged = n.staged[:0]
	n.hwm = n.next
}

// rollback forgets the staged names (their batch was not written).
func (n *names) rollback() {
	n.mu.Lock()
	defer n.mu.Unlock()
	for _, e := range n.staged {
		delete(n.ids[e.kind], e.name)
		delete(n.byID, e.id)
	}
	n.staged = n.staged[:0]
	n.next = n.hwm
}
