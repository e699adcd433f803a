package dnslog_test

import (
	"context"
	"runtime"
	"testing"
	"time"

	"github.com/svcdns/svc/internal/dnslog"
	"github.com/svcdns/svc/internal/querylog"
)

// On one core (GOMAXPROCS 1, a node pinned to a CPU or limited to one by
// its cgroup) a DNS goroutine that always finds packets waiting never
// blocks, and it used to hold the core until preempted every 10 ms while
// the converter's and the writer's buffers overflowed: make bench's
// saturated rows dropped up to 2.5% of their query-log rows. The hand-off
// now yields while a buffer is more than half full, so a busy loop logging
// at full speed loses no row.
func TestSaturatedLoopDropsNoRows(t *testing.T) {
	if testing.Short() {
		t.Skip("busy loop")
	}
	recs := authRecords(t)
	defer runtime.GOMAXPROCS(runtime.GOMAXPROCS(1))
	cfg := querylog.DefaultConfig()
	cfg.DataDir = t.TempDir()
	w, err := querylog.Open(context.Background(), cfg, querylog.Options{MaintainEvery: -1})
	if err != nil {
		t.Fatal(err)
	}
	defer w.Close()
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
