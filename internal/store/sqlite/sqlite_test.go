package sqlite_test

import (
	"bufio"
	"context"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"

	"github.com/svcdns/svc/internal/store"
	"github.com/svcdns/svc/internal/store/sqlite"
	"github.com/svcdns/svc/internal/store/storetest"
)

func open(t *testing.T, path string, opts sqlite.Options) store.Store {
	t.Helper()
	s, err := sqlite.NewStore(t.Context(), path, storetest.SchemaLite{}, opts)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		if err := s.Close(); err != nil {
			t.Errorf("close: %v", err)
		}
	})
	return s
}

func TestConformance(t *testing.T) {
	storetest.Run(t, func(t *testing.T) store.Store {
		return open(t, filepath.Join(t.TempDir(), "state.db"), sqlite.Options{})
	})
}

func TestReopenKeepsObjectsAndVersions(t *testing.T) {
	ctx := t.Context()
	path := filepath.Join(t.TempDir(), "state.db")
	s, err := sqlite.NewStore(ctx, path, storetest.SchemaLite{}, sqlite.Options{})
	if err != nil {
		t.Fatal(err)
	}
	r, err := s.Apply(ctx, storetest.RecordSet("ns", "a", "z", "192.0.2.1"), store.ApplyOptions{Manager: store.ManagerAPI})
	if err != nil {
		t.Fatal(err)
	}
	if err := s.Close(); err != nil {
		t.Fatal(err)
	}
	if _, err := s.Get(ctx, store.KindDNSRecordSet, "ns", "a"); !errors.Is(err, store.ErrClosed) {
		t.Fatalf("get after close: %v, want ErrClosed", err)
	}
	s2 := open(t, path, sqlite.Options{})
	got, err := s2.Get(ctx, store.KindDNSRecordSet, "ns", "a")
	if err != nil || got.GetResourceVersion() != r.ResourceVersion {
		t.Fatalf("after reopen: %v %v", got, err)
	}
	r2, err := s2.Apply(ctx, storetest.RecordSet("ns", "b", "z", "192.0.2.1"), store.ApplyOptions{Manager: store.ManagerAPI})
	if err != nil {
		t.Fatal(err)
	}
	a, _ := strconv.Atoi(r.ResourceVersion)
	b, _ := strconv.Atoi(r2.ResourceVersion)
	if b <= a {
		t.Fatalf("version went back after reopen: %d then %d", a, b)
	}
}

func TestWatchTooOldVersion(t *testing.T) {
	ctx := t.Context()
	s := open(t, filepath.Join(t.TempDir(), "state.db"), sqlite.Options{ChangeLogRetain: 100})
	first, err := s.Apply(ctx, storetest.RecordSet("ns", "first", "z", "192.0.2.1"), store.ApplyOptions{Manager: store.ManagerAPI})
	if err != nil {
		t.Fatal(err)
	}
	// A watch that nobody reads while the log moves on.
	wctx, cancel := context.WithCancel(ctx)
	defer cancel()
	lagging, err := s.Watch(wctx, store.WatchOptions{ResourceVersion: first.ResourceVersion})
	if err != nil {
		t.Fatal(err)
	}
	for i := range 600 {
		if _, err := s.Apply(ctx, storetest.RecordSet("ns", fmt.Sprintf("o%d", i), "z", "192.0.2.1"), store.ApplyOptions{Manager: store.ManagerAPI}); err != nil {
			t.Fatal(err)
		}
	}
	if _, err := s.Watch(ctx, store.WatchOptions{ResourceVersion: first.ResourceVersion}); !errors.Is(err, store.ErrExpired) {
		t.Fatalf("watch from a compacted version: %v, want ErrExpired", err)
	}
	// The lagging watch, once read, either caught up before compaction or ends
	// with ErrExpired; it never skips changes silently.
	var last int64
	timeout := time.After(20 * time.Second)
	for {
		select {
		case ev, ok := <-lagging:
			if !ok {
				t.Fatal("closed without an error event")
			}
			if ev.Type == store.Error {
				if !errors.Is(ev.Err, store.ErrExpired) {
					t.Fatalf("error event %v, want ErrExpired", ev.Err)
				}
				if _, ok := <-lagging; ok {
					t.Fatal("channel not closed after the error event")
				}
				return
			}
			v, _ := strconv.ParseInt(ev.Object.GetResourceVersion(), 10, 64)
			if last != 0 && v != last+1 {
				t.Fatalf("gap: %d after %d", v, last)
			}
			last = v
		case <-timeout:
			t.Fatalf("lagging watch neither delivered nor failed (last %d)", last)
		}
	}
}

func TestSchemaVersionNewerRefused(t *testing.T) {
	path := filepath.Join(t.TempDir(), "state.db")
	d, err := sqlite.Open(t.Context(), path, sqlite.Options{})
	if err != nil {
		t.Fatal(err)
	}
	d.Close()
	if err := sqlite.SetSchemaVersionForTest(path, 99); err != nil {
		t.Fatal(err)
	}
	if _, err := sqlite.Open(t.Context(), path, sqlite.Options{}); err == nil || !strings.Contains(err.Error(), "newer") {
		t.Fatalf("open of a newer schema: %v", err)
	}
}

const crashEnv = "SVC_STORE_CRASH_CHILD"

// TestCrashChild is the child of TestKillDuringApplies: it applies objects in
// a loop and prints each committed version until it is killed.
func TestCrashChild(t *testing.T) {
	path := os.Getenv(crashEnv)
	if path == "" {
		t.Skip("runs only as the child of TestKillDuringApplies")
	}
	ctx := context.Background()
	s, err := sqlite.NewStore(ctx, path, storetest.SchemaLite{}, sqlite.Options{})
	if err != nil {
		fmt.Println("ERR", err)
		os.Exit(2)
	}
	for i := 0; i < 1_000_000; i++ {
		rs := storetest.RecordSet("ns", fmt.Sprintf("c%d", i%50), "z", fmt.Sprintf("10.0.%d.%d", i/256%256, i%256))
		rs.SetAnnotations(map[string]string{"seq": strconv.Itoa(i), "pad": strings.Repeat("p", i%4000)})
		r, err := s.Apply(ctx, rs, store.ApplyOptions{Manager: store.ManagerAPI})
		if err != nil {
			fmt.Println("ERR", err)
			os.Exit(2)
		}
		fmt.Printf("OK %d %s\n", i, r.ResourceVersion)
	}
}

func TestKillDuringApplies(t *testing.T) {
	if testing.Short() {
		t.Skip("spawns a child process")
	}
	path := filepath.Join(t.TempDir(), "state.db")
	cmd := exec.Command(os.Args[0], "-test.run=^TestCrashChild$", "-test.count=1")
	cmd.Env = append(os.Environ(), crashEnv+"="+path)
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
	// committed[name] is the last sequence number the child printed, that is
	// committed, for that name.
	committed := map[string]int{}
	lastSeq := -1
	sc := bufio.NewScanner(out)
	for sc.Scan() { // ends at EOF once the child is dead: every printed line is read
		f := strings.Fields(sc.Text())
		if len(f) > 0 && f[0] == "ERR" {
			t.Fatalf("child: %s", sc.Text())
		}
		if len(f) != 3 || f[0] != "OK" {
			continue
		}
		seq, _ := strconv.Atoi(f[1])
		committed[fmt.Sprintf("c%d", seq%50)] = seq
		lastSeq = seq
		if seq == 300 && !killed {
			// The child is somewhere in a later apply when the signal lands.
			if err := cmd.Process.Signal(syscall.SIGKILL); err != nil {
				t.Fatal(err)
			}
			killed = true
		}
	}
	if !killed {
		t.Fatalf("child ended before 300 applies (last %d)", lastSeq)
	}
	_ = cmd.Wait()
	t.Logf("killed after %d printed commits", lastSeq+1)

	s := open(t, path, sqlite.Options{})
	ctx := t.Context()
	res, err := s.List(ctx, store.ListOptions{Kind: store.KindDNSRecordSet})
	if err != nil {
		t.Fatal(err)
	}
	if len(res.Items) != 50 {
		t.Fatalf("%d objects after the crash, want 50", len(res.Items))
	}
	for _, it := range res.Items {
		seq, err := strconv.Atoi(it.GetAnnotations()["seq"])
		if err != nil {
			t.Fatalf("%s: bad seq annotation", it.GetName())
		}
		// The one apply in flight when killed may or may not have committed.
		if want := committed[it.GetName()]; seq != want && seq != lastSeq+1 {
			t.Fatalf("%s: seq %d, want committed %d (or %d in flight)", it.GetName(), seq, want, lastSeq+1)
		}
		if pad := it.GetAnnotations()["pad"]; len(pad) != seq%4000 {
			t.Fatalf("%s: partial object: pad %d bytes, want %d", it.GetName(), len(pad), seq%4000)
		}
		eps, _, _ := unstructured.NestedSlice(it.Object, "spec", "endpoints")
		want := fmt.Sprintf("10.0.%d.%d", seq/256%256, seq%256)
		if len(eps) != 1 || eps[0].(map[string]any)["targets"].([]any)[0] != want {
			t.Fatalf("%s: endpoints %v, want target %s", it.GetName(), eps, want)
		}
	}
}

// Calls that race Close (a follower listing again while a refused start
// closes the store) report ErrClosed, never database/sql's "database is
// closed", so Follow stops quietly instead of logging a warning.
func TestCallsRacingCloseReportClosed(t *testing.T) {
	for round := range 20 {
		ctx := t.Context()
		s, err := sqlite.NewStore(ctx, filepath.Join(t.TempDir(), "state.db"), storetest.SchemaLite{}, sqlite.Options{})
		if err != nil {
			t.Fatal(err)
		}
		calls := []func(int) error{
			func(int) error { _, err := s.List(ctx, store.ListOptions{Kind: store.KindDNSRecordSet}); return err },
			func(int) error { _, err := s.Get(ctx, store.KindDNSRecordSet, "ns", "a"); return err },
			func(i int) error {
				_, err := s.Apply(ctx, storetest.RecordSet("ns", fmt.Sprintf("r%d", i), "z", "192.0.2.1"), store.ApplyOptions{Manager: store.ManagerAPI})
				return err
			},
			func(int) error { _, err := s.Watch(ctx, store.WatchOptions{Kind: store.KindDNSRecordSet}); return err },
		}
		errs := make(chan error, len(calls))
		start := make(chan struct{})
		for _, call := range calls {
			go func() {
				<-start
				for i := 0; ; i++ {
					if err := call(i); err != nil && !errors.Is(err, store.ErrNotFound) {
						errs <- err
						return
					}
				}
			}()
		}
		close(start)
		time.Sleep(time.Duration(round%5) * time.Millisecond)
		if err := s.Close(); err != nil {
			t.Fatal(err)
		}
		for range calls {
			if err := <-errs; !errors.Is(err, store.ErrClosed) {
				t.Fatalf("round %d: a call racing Close returned %v, want ErrClosed", round, err)
			}
		}
	}
}
