//go:build linux

package dataplane

import (
	"context"
	"strings"
	"testing"
	"time"

	"github.com/miekg/dns"
)

// The UDP batch loop logs a query after sending its answer, with one clock
// read per batch. Every query must still be logged once: answered in the
// loop (authoritative, cached), handed to the upstream's async lane or to a
// worker (a slow upstream), and its duration must cover its answer.
func TestUDPBatchLogsEveryQueryOnceAfterItsAnswer(t *testing.T) {
	up := startUpstream(t)
	log := &recLogger{}
	cfg := testConfig()
	cfg.Sockets = 1
	s, err := New(cfg, Options{QueryLogger: log})
	if err != nil {
		t.Fatal(err)
	}
	res := resolverFor(t, up.addr)
	s.Swap(NewSnapshot(SnapshotInput{Authority: testTable(t), Forwarder: res, Router: res}))
	if err := s.Start(context.Background()); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
		defer cancel()
		_ = s.Shutdown(ctx)
	})
	names := []string{"www.example.com.", "a.example.net.", "a.example.net.", "nx.example.org.", "slow.example.net."}
	for _, n := range names {
		start := time.Now()
		r := exchange(t, s, "udp", query(n, dns.TypeA))
		took := time.Since(start)
		if strings.HasPrefix(n, "slow.") && took < 250*time.Millisecond {
			t.Fatalf("%s answered in %v: the upstream did not delay it", n, took)
		}
		_ = r
	}
	deadline := time.Now().Add(3 * time.Second)
	for {
		log.mu.Lock()
		n := len(log.recs)
		log.mu.Unlock()
		if n >= len(names) || time.Now().After(deadline) {
			break
		}
		time.Sleep(10 * time.Millisecond)
	}
	time.Sleep(50 * time.Millisecond) // a second record of any query would be here by now
	log.mu.Lock()
	defer log.mu.Unlock()
	if len(log.recs) != len(names) {
		var got []string
		for _, r := range log.recs {
			got = append(got, r.Name())
		}
		t.Fatalf("%d records %q for %d queries %q", len(log.recs), got, len(names), names)
	}
	for i, r := range log.recs {
		if want := names[i]; r.Name() != want {
			t.Errorf("record %d is %s, want %s", i, r.Name(), want)
		}
		if r.Duration <= 0 {
			t.Errorf("%s: duration %v", r.Name(), r.Duration)
		}
	}
	if d := log.recs[len(log.recs)-1].Duration; d < 250*time.Millisecond {
		t.Errorf("the slow upstream's query logged %v, less than the upstream took", d)
	}
}
