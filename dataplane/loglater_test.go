//go:build linux

package dataplane

import (
	"strings"
	"testing"
	"time"

	"github.com/miekg/dns"
)

// The UDP batch loop logs the queries of a batch together, with one
// clock read, once they are all answered. Every query must still be
// logged once, whoever answered it (the loop for authoritative and cached
// answers, the upstream's async lane, a worker for a slow upstream), and
// before its answer leaves: a client that has its answer finds the query
// in the log. The slow one's duration must cover the upstream's delay.
func TestUDPBatchLogsEveryQueryOnceBeforeItsAnswer(t *testing.T) {
	up := startUpstream(t)
	log := &recLogger{}
	cfg := testConfig()
	cfg.Sockets = 1
	res := resolverFor(t, up.addr)
	s := startServerWith(t, cfg, Options{QueryLogger: log}, NewSnapshot(SnapshotInput{Authority: testTable(t), Forwarder: res, Router: res}))
	names := []string{"www.example.com.", "a.example.net.", "a.example.net.", "nx.example.org.", "slow.example.net."}
	for i, n := range names {
		start := time.Now()
		exchange(t, s, "udp", query(n, dns.TypeA))
		if took := time.Since(start); strings.HasPrefix(n, "slow.") && took < 250*time.Millisecond {
			t.Fatalf("%s answered in %v: the upstream did not delay it", n, took)
		}
		log.mu.Lock()
		logged := len(log.recs)
		log.mu.Unlock()
		if logged != i+1 {
			t.Fatalf("%s answered with %d queries logged, want %d: the answer left before the record", n, logged, i+1)
		}
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
