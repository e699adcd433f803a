package querylog

import (
	"bufio"
	"context"
	"database/sql"
	"fmt"
	"os"
	"os/exec"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"syscall"
	"testing"
	"time"
)

// deferredRow is row i of the deferred-postings tests: 97 domains, 13
// clients, every tenth blocked.
func deferredRow(base time.Time, i int) Row {
	st := "answered"
	if i%10 == 0 {
		st = "blocked"
	}
	return row(base.Add(time.Duration(i)*time.Millisecond), fmt.Sprintf("d%d.example", i%97),
		fmt.Sprintf("192.0.2.%d", i%13), st)
}

// wantDeferred is how many of the rows 0..n-1 match each filter of
// checkDeferred.
func wantDeferred(n int) (domain, client, blocked, both int) {
	for i := range n {
		if i%97 == 5 {
			domain++
		}
		if i%13 == 7 {
			client++
		}
		if i%10 == 0 {
			blocked++
		}
		if i%97 == 5 && i%13 == 7 {
			both++
		}
	}
	return
}

// countRows pages through every row the filter matches.
func countRows(t testing.TB, w *Writer, f Filter) int {
	t.Helper()
	f.Limit = maxLimit
	n := 0
	for {
		rows, next, err := w.Rows(context.Background(), f)
		if err != nil {
			t.Fatal(err)
		}
		n += len(rows)
		if next == "" {
			return n
		}
		f.Continue = next
	}
}

// checkDeferred checks the filtered reads (each answered by postings) of
// the first n rows.
func checkDeferred(t testing.TB, w *Writer, n int) {
	t.Helper()
	d, c, b, both := wantDeferred(n)
	for _, tc := range []struct {
		f    Filter
		want int
	}{
		{Filter{Domain: "d5.example"}, d},
		{Filter{Client: "192.0.2.7"}, c},
		{Filter{Status: "blocked"}, b},
		{Filter{StatusClass: ClassBlocked}, b},
		{Filter{Domain: "d5.example", Client: "192.0.2.7"}, both},
	} {
		if got := countRows(t, w, tc.f); got != tc.want {
			t.Fatalf("%d rows: filter %+v found %d rows, want %d", n, tc.f, got, tc.want)
		}
	}
}

func deferredConfig(dir string) Config {
	cfg := DefaultConfig()
	cfg.DataDir = dir
	return cfg
}

func postingRows(t testing.TB, w *Writer) (n int, maxBucket int64) {
	t.Helper()
	var mb sql.NullInt64
	if err := w.store.w.QueryRow("SELECT count(*), max(k >> 34) FROM postings").Scan(&n, &mb); err != nil {
		t.Fatal(err)
	}
	return n, mb.Int64
}

func postingsThrough(t testing.TB, w *Writer) int64 {
	t.Helper()
	var v int64
	if err := w.store.w.QueryRow("SELECT v FROM meta WHERE k = 'postings_through'").Scan(&v); err != nil {
		t.Fatal(err)
	}
	return v
}

// The writer keeps a bucket's postings in memory until the bucket is
// complete: filtered reads find the rows of the open bucket from what it
// publishes, the table gets each bucket's postings once, and a restart
// writes what was pending.
func TestDeferredPostingsAreReadBeforeTheyAreWritten(t *testing.T) {
	dir := t.TempDir()
	w := openTest(t, deferredConfig(dir), Options{})
	base := time.Now().Add(-time.Hour)
	n := 0
	add := func(k int) {
		for range k {
			w.Enqueue(deferredRow(base, n))
			n++
		}
		flush(t, w)
	}
	add(3000)
	if rows, _ := postingRows(t, w); rows != 0 {
		t.Fatalf("%d posting rows written before the first bucket is complete", rows)
	}
	checkDeferred(t, w, n)

	// Past the first bucket (ids 1..16383 are bucket 0): its postings are
	// written, the second bucket's are pending.
	for n < 1<<bucketBits+2000 {
		add(4000)
	}
	rows, mb := postingRows(t, w)
	if rows == 0 || mb != 0 {
		t.Fatalf("after %d rows: %d posting rows up to bucket %d, want bucket 0's", n, rows, mb)
	}
	if got := postingsThrough(t, w); got != 1<<bucketBits-1 {
		t.Fatalf("postings_through %d, want %d", got, 1<<bucketBits-1)
	}
	// Each key of bucket 0 was written once: 97 domains, 13 clients and
	// 2 statuses fall in at most that many groups.
	if rows > 64+13+2 {
		t.Fatalf("%d posting rows for one bucket", rows)
	}
	checkDeferred(t, w, n)

	// Close writes what is pending; the reopened writer reads it all from
	// the table.
	if err := w.Close(); err != nil {
		t.Fatal(err)
	}
	w2 := openTest(t, deferredConfig(dir), Options{})
	if _, mb := postingRows(t, w2); mb != 1 {
		t.Fatalf("after close: postings up to bucket %d, want 1", mb)
	}
	if got := postingsThrough(t, w2); got != int64(n) {
		t.Fatalf("after close: postings_through %d, want %d", got, n)
	}
	if w2.store.pend.Load() != nil {
		t.Fatal("a reopened writer has pending postings")
	}
	checkDeferred(t, w2, n)
}

// Readers running while the writer crosses bucket boundaries find every
// row flushed before they started, never a row twice: the pending
// postings are published before a batch commits and dropped only after
// the bucket's postings commit.
func TestDeferredPostingsConcurrentReads(t *testing.T) {
	w := openTest(t, deferredConfig(t.TempDir()), Options{BatchRows: 700})
	base := time.Now().Add(-time.Hour)
	var flushed atomic.Int64
	total := 2*(1<<bucketBits) + 3000
	done := make(chan struct{})
	var wg sync.WaitGroup
	errs := make(chan error, 4)
	for r := range 3 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for k := 0; ; k++ {
				select {
				case <-done:
					return
				default:
				}
				n := int(flushed.Load())
				d, c, _, _ := wantDeferred(n)
				f := Filter{Domain: "d5.example"}
				want := d
				if (r+k)%2 == 1 {
					f, want = Filter{Client: "192.0.2.7"}, c
				}
				// Rows flushed after n was read may be found too: count
				// only ids up to n (ids start at 1).
				f.Limit = maxLimit
				got, seen := 0, map[int64]bool{}
				for {
					rows, next, err := w.Rows(context.Background(), f)
					if err != nil {
						errs <- err
						return
					}
					for _, row := range rows {
						if seen[row.ID] {
							errs <- fmt.Errorf("row %d read twice", row.ID)
							return
						}
						seen[row.ID] = true
						if row.ID <= int64(n) {
							got++
						}
					}
					if next == "" {
						break
					}
					f.Continue = next
				}
				if got != want {
					errs <- fmt.Errorf("after %d flushed rows: %+v found %d of them, want %d", n, f, got, want)
					return
				}
			}
		}()
	}
	for i := range total {
		w.Enqueue(deferredRow(base, i))
		if i%500 == 499 || i == total-1 {
			flush(t, w)
			flushed.Store(int64(i + 1))
		}
	}
	close(done)
	wg.Wait()
	close(errs)
	for err := range errs {
		t.Fatal(err)
	}
	checkDeferred(t, w, total)
}

const deferredCrashEnv = "SVC_QUERYLOG_CRASH_CHILD"

// TestDeferredPostingsCrashChild is the child of
// TestDeferredPostingsRebuiltAfterKill: it logs rows in flushed batches
// and prints how many are stored after each, until it is killed.
func TestDeferredPostingsCrashChild(t *testing.T) {
	dir := os.Getenv(deferredCrashEnv)
	if dir == "" {
		t.Skip("runs only as the child of TestDeferredPostingsRebuiltAfterKill")
	}
	w, err := Open(context.Background(), deferredConfig(dir), Options{MaintainEvery: -1})
	if err != nil {
		fmt.Println("ERR", err)
		os.Exit(2)
	}
	base := time.Now().Add(-time.Hour)
	for i := 0; i < 1_000_000; i++ {
		w.Enqueue(deferredRow(base, i))
		if i%1000 == 999 {
			if err := w.Flush(context.Background()); err != nil {
				fmt.Println("ERR", err)
				os.Exit(2)
			}
			fmt.Println("OK", i+1)
		}
	}
}

// A writer killed with rows of an open bucket whose postings were only in
// memory: the next open rebuilds them from the blocks, and every stored
// row is found by filter again.
func TestDeferredPostingsRebuiltAfterKill(t *testing.T) {
	if testing.Short() {
		t.Skip("spawns a child process")
	}
	dir := t.TempDir()
	cmd := exec.Command(os.Args[0], "-test.run=^TestDeferredPostingsCrashChild$", "-test.count=1")
	cmd.Env = append(os.Environ(), deferredCrashEnv+"="+dir)
	out, err := cmd.StdoutPipe()
	if err != nil {
		t.Fatal(err)
	}
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	killed := false
	t.Cleanup(func() {
		if !killed {
			_ = cmd.Process.Kill()
		}
		_ = cmd.Wait()
	})
	// Killed in the second bucket: the first's postings are written, the
	// second's were pending.
	stored := 0
	sc := bufio.NewScanner(out)
	for sc.Scan() {
		f := strings.Fields(sc.Text())
		if len(f) > 0 && f[0] == "ERR" {
			t.Fatalf("child: %s", sc.Text())
		}
		if len(f) != 2 || f[0] != "OK" {
			continue
		}
		stored, _ = strconv.Atoi(f[1])
		if stored >= 1<<bucketBits+5000 && !killed {
			if err := cmd.Process.Signal(syscall.SIGKILL); err != nil {
				t.Fatal(err)
			}
			killed = true
		}
	}
	if !killed {
		t.Fatalf("child ended after %d rows", stored)
	}
	_ = cmd.Wait()

	w := openTest(t, deferredConfig(dir), Options{})
	maxID, err := w.store.maxID(context.Background())
	if err != nil {
		t.Fatal(err)
	}
	// Flushed rows are stored; a batch in flight when the signal landed
	// may be too.
	if maxID < int64(stored) {
		t.Fatalf("%d rows after the kill, %d were flushed", maxID, stored)
	}
	if got := postingsThrough(t, w); got != maxID {
		t.Fatalf("postings_through %d after the rebuild, want %d", got, maxID)
	}
	if _, mb := postingRows(t, w); mb != 1 {
		t.Fatalf("postings up to bucket %d after the rebuild, want 1", mb)
	}
	checkDeferred(t, w, int(maxID))
	t.Logf("killed after %d flushed rows, %d stored", stored, maxID)

	// Reopened again: nothing to rebuild, no posting written twice.
	before, _ := postingRows(t, w)
	if err := w.Close(); err != nil {
		t.Fatal(err)
	}
	w2 := openTest(t, deferredConfig(dir), Options{})
	if after, _ := postingRows(t, w2); after != before {
		t.Fatalf("%d posting rows after a clean reopen, %d before", after, before)
	}
	checkDeferred(t, w2, int(maxID))
}
