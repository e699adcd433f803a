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

// EnqueueRows takes rows under one lock as far as the buffer reaches and
// counts the rest dropped; a chunk that crosses a full batch wakes the
// writer, and one that crosses the backlog mark (a batch and an eighth)
// reports it.
func TestEnqueueRowsTakesWhatFits(t *testing.T) {
	q := rowQueue{max: 1000, full: 100, ready: make(chan struct{}, 1)}
	chunk := make([]Row, 90)
	if n := q.pushAll(chunk); n != 90 {
		t.Fatalf("took %d of 90", n)
	}
	select {
	case <-q.ready:
		t.Fatal("woken before a full batch waited")
	default:
	}
	if q.behind.Load() {
		t.Fatal("behind at 90 rows, batches of 100")
	}
	if n := q.pushAll(chunk); n != 90 {
		t.Fatalf("took %d of 90", n)
	}
	select {
	case <-q.ready:
	default:
		t.Fatal("180 rows wait, batches of 100: the writer was not woken")
	}
	if !q.behind.Load() {
		t.Fatal("not behind at 180 rows, batches of 100")
	}
	for len(q.rows) < 990 {
		q.pushAll(chunk[:10])
	}
	if n := q.pushAll(chunk); n != 10 || len(q.rows) != 1000 || cap(q.rows) > 1000 {
		t.Fatalf("took %d at 990 of 1000 (now %d, capacity %d)", n, len(q.rows), cap(q.rows))
	}
	if n := q.pushAll(chunk); n != 0 {
		t.Fatalf("took %d into a full buffer", n)
	}

	w := openTest(t, DefaultConfig(), Options{BufferRows: 100, BatchRows: 100, FlushInterval: time.Hour})
	rows := make([]Row, 150)
	for i := range rows {
		rows[i] = row(time.Now(), "x.example", "10.0.0.1", "answered")
	}
	if n := w.EnqueueRows(rows); n != 100 {
		t.Fatalf("took %d of 150 into an empty buffer of 100", n)
	}
	flush(t, w)
	if d := w.Dropped(); d != 50 {
		t.Fatalf("%v rows counted dropped, want 50", d)
	}
}

// Under load, full batches between small flush-tick takes keep the
// buffers; only letGoAfter small takes in a row let one go.
func TestBufferKeptUnderLoadLetGoAtRest(t *testing.T) {
	var k bufferKeeper
	big := make([]Row, 5000, 8192)
	small := make([]Row, 10, 8192)
	for round := range 5 {
		if got := k.reuse(big); cap(got) != 8192 || len(got) != 0 {
			t.Fatalf("round %d: a full batch's buffer was not kept", round)
		}
		for i := range letGoAfter - 1 {
			if got := k.reuse(small); cap(got) != 8192 {
				t.Fatalf("round %d: small take %d let the buffer go", round, i)
			}
		}
	}
	if got := k.reuse(small); got != nil {
		t.Fatalf("%d small takes in a row kept the buffer", letGoAfter)
	}
	if got := k.reuse(make([]Row, 3, 200)); cap(got) != 200 {
		t.Fatal("a buffer of at most 256 rows was let go")
	}
}

// A writer at rest after a burst lets its queue's buffers go.
func TestQueueLetGoAtRest(t *testing.T) {
	w := openTest(t, DefaultConfig(), Options{BufferRows: 20000, BatchRows: 5000, FlushInterval: 5 * time.Millisecond})
	now := time.Now()
	for range 12000 {
		w.Enqueue(row(now, "x.example", "10.0.0.1", "answered"))
	}
	flush(t, w)
	deadline := time.Now().Add(20 * time.Second)
	for {
		w.queue.mu.Lock()
		c := cap(w.queue.rows)
		w.queue.mu.Unlock()
		if c <= 256 {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("queue capacity %d rows 20 s after a burst", c)
		}
		time.Sleep(10 * time.Millisecond)
	}
}
