package querylog

import (
	"testing"
	"time"
)

// The queue holds nothing up front and grows with the rows enqueued; a
// full batch is written without waiting for the flush tick, and a flush
// writes what is left.
func TestQueueGrowsWithUseAndWritesFullBatches(t *testing.T) {
	w := openTest(t, DefaultConfig(), Options{BufferRows: 1000, BatchRows: 100, FlushInterval: time.Hour})
	queued := func() (n, c int) {
		w.queue.mu.Lock()
		defer w.queue.mu.Unlock()
		return len(w.queue.rows), cap(w.queue.rows)
	}
	if _, c := queued(); c != 0 {
		t.Fatalf("queue capacity %d before any row, want 0", c)
	}
	stored := func() int {
		var n int
		if err := w.store.r.QueryRow("SELECT coalesce(sum(last - first + 1), 0) FROM blocks").Scan(&n); err != nil {
			t.Fatal(err)
		}
		return n
	}
	now := time.Now()
	for range 250 {
		if !w.Enqueue(row(now, "x.example", "10.0.0.1", "answered")) {
			t.Fatal("row dropped with the queue far from full")
		}
	}
	// The flush tick is an hour away: only the full-batch signal writes.
	deadline := time.Now().Add(20 * time.Second)
	for stored() < 100 {
		if time.Now().After(deadline) {
			t.Fatalf("%d rows stored 20 s after 250 were enqueued with batches of 100, want at least 100", stored())
		}
		time.Sleep(20 * time.Millisecond)
	}
	if _, c := queued(); c > 1000 {
		t.Fatalf("queue capacity %d, above BufferRows 1000", c)
	}
	flush(t, w)
	if n := stored(); n != 250 {
		t.Fatalf("%d rows stored after the flush, want 250", n)
	}
	if n, _ := queued(); n != 0 {
		t.Fatalf("%d rows still queued after the flush", n)
	}
}
