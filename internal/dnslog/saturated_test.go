package dnslog_test

import (
	"context"
	"errors"
	"os"
	"path/filepath"
	"runtime"
	"sync"
	"testing"
	"time"

	"github.com/svcdns/svc/internal/dnslog"
)

// On one core (GOMAXPROCS 1, a node pinned to a CPU or limited to one by
// its cgroup) a DNS goroutine that always finds packets waiting never
// blocks, and it used to hold the core until preempted every 10 ms while
// the converter's and the writer's buffers overflowed: make bench's
// saturated rows dropped up to 2.5% of their query-log rows. The hand-off
// now yields while the converter's buffer is more than half full or the
// writer is late, so a busy loop logging at full speed loses no row.
//
// The disk is kept busy meanwhile, as on a node where other programs
// write: SQLite's checkpoint used to run inside the writer's commit, its
// fsyncs then held the writer for 40-80 ms, and the buffer overflowed
// (CI dropped 4,144 rows). The query log now checkpoints from another
// connection (querylog.checkpointer).
func TestSaturatedLoopDropsNoRows(t *testing.T) {
	if testing.Short() {
		t.Skip("busy loop")
	}
	recs := authRecords(t)
	defer runtime.GOMAXPROCS(runtime.GOMAXPROCS(1))
	w := openWriter(t)
	stopDisk := busyDisk(t)
	defer stopDisk()
	lg := dnslog.New(w)
	defer lg.Close()
	const n = 150_000
	start := time.Now()
	done := make(chan struct{})
	go func() {
		defer close(done)
		for i := range n {
			// About the CPU an answer takes, without a blocking call.
			for t0 := time.Now(); time.Since(t0) < 2*time.Microsecond; {
			}
			rec := recs[i%len(recs)]
			rec.Time = start.Add(time.Duration(i) * time.Microsecond)
			lg.Log(rec)
		}
	}()
	<-done
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	if err := lg.Flush(ctx); err != nil {
		t.Fatal(err)
	}
	if d, wd := lg.Dropped(), w.Dropped(); d != 0 || wd != 0 {
		t.Fatalf("%d of %d records dropped at the hand-off, %v in all (writer's count)", d, n, wd)
	}
}

// busyDisk writes and fsyncs 64 MiB at a time to a file in a test directory
// (on the query log's file system) until the returned stop is called; the
// file never holds more than 64 MiB.
func busyDisk(t *testing.T) (stop func()) {
	f, err := os.Create(filepath.Join(t.TempDir(), "busy"))
	if err != nil {
		t.Fatal(err)
	}
	quit := make(chan struct{})
	var wg sync.WaitGroup
	wg.Go(func() {
		defer f.Close()
		chunk := make([]byte, 1<<20)
		for i := 0; ; i++ {
			select {
			case <-quit:
				return
			default:
			}
			if _, err := f.WriteAt(chunk, int64(i%64)<<20); err != nil {
				t.Error(err)
				return
			}
			if i%64 == 63 {
				// Fresh blocks each round, as a program writing new
				// files does: allocation goes through the journal.
				if err := errors.Join(f.Sync(), f.Truncate(0)); err != nil {
					t.Error(err)
					return
				}
			}
		}
	})
	return func() { close(quit); wg.Wait() }
}
