package querylog

import (
	"context"
	"os"
	"testing"
	"time"

	"github.com/svcdns/svc/internal/sqlitedb"
)

// dbFileBytes is the size of the database file itself (not its WAL) and
// the bytes its pages take once the WAL is copied back.
func dbFileBytes(t *testing.T, w *Writer) (file, pages int64) {
	t.Helper()
	fi, err := os.Stat(w.store.path)
	if err != nil {
		t.Fatal(err)
	}
	var pc, ps int64
	if err := w.store.r.QueryRow("PRAGMA page_count").Scan(&pc); err != nil {
		t.Fatal(err)
	}
	if err := w.store.r.QueryRow("PRAGMA page_size").Scan(&ps); err != nil {
		t.Fatal(err)
	}
	return fi.Size(), pc * ps
}

// Rows committed are copied from the WAL into the database file by the
// checkpointer, without the writer's commit doing it: a batch far below
// the writer's own checkpoint threshold is in the file within a second.
func TestCheckpointerCopiesWAL(t *testing.T) {
	w := openTest(t, DefaultConfig(), Options{})
	if err := sqlitedb.Check(context.Background(), w.store.ckpt.db, checkpointOptions); err != nil {
		t.Fatalf("checkpointer connection: %v", err)
	}
	ctx := context.Background()
	for i := range 4 {
		if err := w.write(ctx, benchRowsSpread(5000, time.Now(), 5000, i*5000)); err != nil {
			t.Fatal(err)
		}
	}
	file, pages := dbFileBytes(t, w)
	if file >= pages {
		t.Fatalf("database file %d bytes before any checkpoint, pages %d: the writer checkpointed", file, pages)
	}
	if pages >= writerAutoCheckpoint*4096 { // 4 KiB pages (docs/querylog.md)
		t.Fatalf("%d bytes of pages reach the writer's own checkpoint at %d pages: write less", pages, writerAutoCheckpoint)
	}
	deadline := time.Now().Add(5 * time.Second)
	for file < pages {
		if time.Now().After(deadline) {
			t.Fatalf("database file %d bytes, its pages %d: the WAL was not copied back in 5 s", file, pages)
		}
		time.Sleep(20 * time.Millisecond)
		file, pages = dbFileBytes(t, w)
	}
}

// Under writes without a pause the checkpointer never finds the WAL wholly
// copied back between two commits, so the WAL would not restart; the
// writer's own checkpoint at writerAutoCheckpoint pages bounds it.
func TestWALBoundedUnderSustainedWrites(t *testing.T) {
	if testing.Short() {
		t.Skip("writes about 100 MiB")
	}
	w := openTest(t, DefaultConfig(), Options{})
	ctx := context.Background()
	walPath := w.store.path + "-wal"
	const bound = (writerAutoCheckpoint + 2048) * 4096 // the backstop and one batch's pages
	var maxWAL int64
	start := time.Now()
	for i := 0; ; i++ {
		if err := w.write(ctx, benchRowsSpread(5000, start.Add(time.Duration(i)*5*time.Second), 100000, i*5000)); err != nil {
			t.Fatal(err)
		}
		fi, err := os.Stat(walPath)
		if err != nil {
			t.Fatal(err)
		}
		maxWAL = max(maxWAL, fi.Size())
		if maxWAL > bound {
			t.Fatalf("WAL %d MiB after %d batches, bound %d MiB", maxWAL>>20, i+1, bound>>20)
		}
		if _, pages := dbFileBytes(t, w); pages > 2*bound {
			break // the WAL has been through a full cycle
		}
	}
}

// The writer prepares its statements once per connection, not per batch:
// a second batch reuses every statement the first prepared.
func TestWriterStatementsReused(t *testing.T) {
	w := openTest(t, DefaultConfig(), Options{})
	ctx := context.Background()
	start := time.Now()
	if err := w.write(ctx, benchRowsSpread(5000, start, 5000, 0)); err != nil {
		t.Fatal(err)
	}
	first := map[string]any{}
	for q, st := range w.store.wstmts.m {
		first[q] = st
	}
	if len(first) == 0 {
		t.Fatal("no statement kept after a batch")
	}
	if err := w.write(ctx, benchRowsSpread(5000, start.Add(10*time.Second), 5000, 5000)); err != nil {
		t.Fatal(err)
	}
	for q, st := range first {
		if w.store.wstmts.m[q] != st {
			t.Errorf("statement %.40q prepared again", q)
		}
	}
	var n int64
	if err := w.store.r.QueryRow("SELECT coalesce(sum(last - first + 1), 0) FROM blocks").Scan(&n); err != nil || n != 10000 {
		t.Fatalf("rows stored = %d, %v; want 10000", n, err)
	}
}
