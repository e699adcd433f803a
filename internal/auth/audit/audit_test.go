package audit

import (
	"context"
	"database/sql"
	"encoding/json"
	"errors"
	"fmt"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"
)

func open(t *testing.T, path string) *Log {
	t.Helper()
	l, err := Open(context.Background(), path, func() time.Time { return time.Date(2030, 1, 2, 3, 4, 5, 123456789, time.UTC) })
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { l.Close() })
	return l
}

func event(i int) Event {
	return Event{Node: "n1", Actor: Actor{Auth: "token", ID: "alice", Kind: "User", Name: "alice", Groups: []string{"ops"}},
		Decision: "binding", RequestID: fmt.Sprintf("req-%d", i), Method: "POST", Path: "/apply", Action: "apply",
		Kind: "DNSZone", Name: fmt.Sprintf("zone-%d", i), Status: 200, Result: "created"}
}

// raw opens a second handle on the file, as someone editing it would.
func raw(t *testing.T, path string) *sql.DB {
	t.Helper()
	db, err := sql.Open("sqlite", "file:"+path+"?_pragma=busy_timeout(5000)")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { db.Close() })
	return db
}

func TestAppendChainsAndVerifies(t *testing.T) {
	ctx := context.Background()
	l := open(t, filepath.Join(t.TempDir(), "audit.db"))
	if n, err := l.Verify(ctx); err != nil || n != 0 {
		t.Fatalf("empty log: %d %v", n, err)
	}
	var prev string
	for i := range 5 {
		e, err := l.Append(ctx, event(i))
		if err != nil {
			t.Fatal(err)
		}
		if e.Seq != int64(i+1) || e.PrevHash != prev || len(e.Hash) != 64 || e.Hash == prev {
			t.Fatalf("event %d: seq %d prev %q hash %q (want prev %q)", i, e.Seq, e.PrevHash, e.Hash, prev)
		}
		if !e.Time.Equal(time.Date(2030, 1, 2, 3, 4, 5, 123456000, time.UTC)) {
			t.Errorf("time not from the clock truncated to microseconds: %v", e.Time)
		}
		prev = e.Hash
	}
	if n, err := l.Verify(ctx); err != nil || n != 5 {
		t.Fatalf("verify: %d %v", n, err)
	}
	// A time given by the caller is kept.
	at := time.Date(2031, 5, 6, 7, 8, 9, 0, time.FixedZone("x", 3600))
	ev := event(9)
	ev.Time = at
	e, err := l.Append(ctx, ev)
	if err != nil || !e.Time.Equal(at) || e.Time.Location() != time.UTC {
		t.Fatalf("explicit time: %v %v", e.Time, err)
	}
	// List returns what Append stored, in both orders, paged.
	p, err := l.List(ctx, Query{Limit: 4})
	if err != nil || len(p.Items) != 4 || p.Continue == "" || p.Items[0].Seq != 1 {
		t.Fatalf("first page: %+v %v", p, err)
	}
	p2, err := l.List(ctx, Query{Limit: 4, Continue: p.Continue})
	if err != nil || len(p2.Items) != 2 || p2.Continue != "" || p2.Items[0].Seq != 5 {
		t.Fatalf("second page: %+v %v", p2, err)
	}
	d, err := l.List(ctx, Query{Desc: true, Limit: 1, Name: "zone-3", Actor: "alice", Kind: "DNSZone"})
	if err != nil || len(d.Items) != 1 || d.Items[0].Seq != 4 || d.Items[0].Hash == "" || d.Items[0].Actor.Groups[0] != "ops" {
		t.Fatalf("filtered: %+v %v", d, err)
	}
	if _, err := l.List(ctx, Query{Continue: "x"}); !errors.Is(err, ErrInvalid) {
		t.Errorf("bad continue: %v", err)
	}
}

func TestTamperedRowsAreDetected(t *testing.T) {
	ctx := context.Background()
	edits := []struct {
		name string
		sql  string
		at   int64
	}{
		{"edited body", `UPDATE audit_events SET body = replace(body, '"status":200', '"status":201') WHERE seq = 3`, 3},
		{"edited body and stored hash", `UPDATE audit_events SET body = replace(body, 'zone-2', 'zone-X') WHERE seq = 3`, 3},
		{"edited hash column", `UPDATE audit_events SET hash = replace(hash, substr(hash, 1, 1), 'f') WHERE seq = 2 AND substr(hash,1,1) != 'f'`, 2},
		{"deleted row", `DELETE FROM audit_events WHERE seq = 2`, 3},
		{"deleted first row", `DELETE FROM audit_events WHERE seq = 1`, 2},
		{"garbage body", `UPDATE audit_events SET body = 'not json' WHERE seq = 4`, 4},
		{"prev_hash column", `UPDATE audit_events SET prev_hash = '' WHERE seq = 5`, 5},
	}
	for _, ed := range edits {
		t.Run(ed.name, func(t *testing.T) {
			path := filepath.Join(t.TempDir(), "audit.db")
			l := open(t, path)
			for i := range 5 {
				if _, err := l.Append(ctx, event(i)); err != nil {
					t.Fatal(err)
				}
			}
			res, err := raw(t, path).ExecContext(ctx, ed.sql)
			if err != nil {
				t.Fatal(err)
			}
			if n, _ := res.RowsAffected(); n != 1 {
				t.Skipf("edit touched %d rows", n)
			}
			n, err := l.Verify(ctx)
			if !errors.Is(err, ErrBroken) || !strings.Contains(err.Error(), fmt.Sprintf(" %d", ed.at)) {
				t.Fatalf("verify after %s: %d %v (want broken at %d)", ed.name, n, err, ed.at)
			}
			if n != ed.at-1 && !(ed.name == "deleted row" && n == 1) && !(ed.name == "deleted first row" && n == 0) {
				t.Errorf("verified %d events before the break", n)
			}
		})
	}
	// Rewriting a row with a hash recomputed over the edit still breaks the
	// link from the next event.
	t.Run("recomputed hash", func(t *testing.T) {
		path := filepath.Join(t.TempDir(), "audit.db")
		l := open(t, path)
		for i := range 3 {
			if _, err := l.Append(ctx, event(i)); err != nil {
				t.Fatal(err)
			}
		}
		p, _ := l.List(ctx, Query{})
		e := p.Items[1]
		e.Result = "forged"
		h, err := hashOf(e)
		if err != nil {
			t.Fatal(err)
		}
		e.Hash = h
		b, err := json.Marshal(e)
		if err != nil {
			t.Fatal(err)
		}
		body := string(b)
		if _, err := raw(t, path).ExecContext(ctx, `UPDATE audit_events SET body = ?, hash = ? WHERE seq = 2`, body, h); err != nil {
			t.Fatal(err)
		}
		if n, err := l.Verify(ctx); !errors.Is(err, ErrBroken) || n != 2 {
			t.Fatalf("verify: %d %v (want a break at event 3)", n, err)
		}
	})
}

func TestConcurrentAppendsStayChained(t *testing.T) {
	ctx := context.Background()
	path := filepath.Join(t.TempDir(), "audit.db")
	l := open(t, path)
	const writers, each = 8, 25
	var wg sync.WaitGroup
	errs := make(chan error, writers*each)
	for w := range writers {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for i := range each {
				if _, err := l.Append(ctx, event(w*1000+i)); err != nil {
					errs <- err
				}
			}
		}()
	}
	// A second handle on the same file appends too, as another process would.
	l2 := open(t, path)
	for i := range each {
		wg.Add(1)
		go func() {
			defer wg.Done()
			if _, err := l2.Append(ctx, event(-i)); err != nil {
				errs <- err
			}
		}()
	}
	wg.Wait()
	close(errs)
	for err := range errs {
		t.Error(err)
	}
	n, err := l.Verify(ctx)
	if err != nil || n != writers*each+each {
		t.Fatalf("verify: %d %v", n, err)
	}
	// Every sequence number is used once.
	seen := map[int64]bool{}
	cont := ""
	for {
		p, err := l.List(ctx, Query{Limit: 1000, Continue: cont})
		if err != nil {
			t.Fatal(err)
		}
		for _, e := range p.Items {
			if seen[e.Seq] {
				t.Fatalf("sequence %d twice", e.Seq)
			}
			seen[e.Seq] = true
		}
		if cont = p.Continue; cont == "" {
			break
		}
	}
	if len(seen) != int(n) {
		t.Errorf("listed %d events, verified %d", len(seen), n)
	}
}

func TestReopenContinuesTheChain(t *testing.T) {
	ctx := context.Background()
	path := filepath.Join(t.TempDir(), "audit.db")
	l, err := Open(ctx, path, nil)
	if err != nil {
		t.Fatal(err)
	}
	var last Event
	for i := range 3 {
		if last, err = l.Append(ctx, event(i)); err != nil {
			t.Fatal(err)
		}
	}
	if err := l.Close(); err != nil {
		t.Fatal(err)
	}
	l = open(t, path)
	e, err := l.Append(ctx, event(3))
	if err != nil {
		t.Fatal(err)
	}
	if e.Seq != 4 || e.PrevHash != last.Hash {
		t.Fatalf("after reopen: seq %d prev %q, want 4 and %q", e.Seq, e.PrevHash, last.Hash)
	}
	if n, err := l.Verify(ctx); err != nil || n != 4 {
		t.Fatalf("verify: %d %v", n, err)
	}
}
