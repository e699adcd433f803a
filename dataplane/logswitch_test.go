package dataplane

import (
	"sync/atomic"
	"testing"

	"github.com/miekg/dns"
)

// switchLogger is a recLogger that can be switched off, as the query log's
// querylog.enabled switches dnslog.Logger.
type switchLogger struct {
	recLogger
	on atomic.Bool
}

func (l *switchLogger) Enabled() bool { return l.on.Load() }

func (l *switchLogger) Log(r QueryRecord) {
	if !l.on.Load() {
		panic("Log called while the logger is off: the record was built for nothing")
	}
	l.recLogger.Log(r)
}

// While the query logger reports itself off, queries are answered and no
// record is built or handed over, on the fast path and the full parser;
// switched on again, the next query is logged. (The user's story, a real
// query log switched by querylog.enabled and a UDP client: dnslog's
// TestQueryLogSwitchedOffAndOn.)
func TestLoggerOffBuildsNoRecord(t *testing.T) {
	log := &switchLogger{}
	s, err := New(testConfig(), Options{QueryLogger: log})
	if err != nil {
		t.Fatal(err)
	}
	s.Swap(NewSnapshot(SnapshotInput{Authority: testTable(t)}))
	startAndStop(t, s)
	nsid := &dns.EDNS0_NSID{Code: dns.EDNS0NSID} // the full parser
	for _, opts := range [][]dns.EDNS0{nil, {nsid}} {
		for _, proto := range []string{"udp", "tcp"} {
			if r := exchange(t, s, proto, ecsQuery("www.example.com.", opts...)); r.Rcode != dns.RcodeSuccess || len(r.Answer) != 2 {
				t.Fatalf("%s, logger off: answer %v", proto, r)
			}
		}
	}
	log.mu.Lock()
	n := len(log.recs)
	log.mu.Unlock()
	if n != 0 {
		t.Fatalf("%d records while off", n)
	}
	log.on.Store(true)
	if r := exchange(t, s, "udp", ecsQuery("www.example.com.")); r.Rcode != dns.RcodeSuccess {
		t.Fatalf("logger on: answer %v", r)
	}
	if rec := log.last(t); rec.Name() != "www.example.com." {
		t.Fatalf("logged %q, want www.example.com.", rec.Name())
	}
}
