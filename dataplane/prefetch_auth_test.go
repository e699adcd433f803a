//go:build linux

package dataplane

import (
	"fmt"
	"strings"
	"sync"
	"testing"

	"github.com/miekg/dns"

	"github.com/svcdns/svc/api/v1alpha1"
	"github.com/svcdns/svc/dataplane/authority"
	"github.com/svcdns/svc/dataplane/cache"
	"github.com/svcdns/svc/dataplane/prefetch"
)

// watchedZones is the snapshot's zone table as a Prefetcher, noting the
// names and stages the UDP loop runs.
type watchedZones struct {
	*authority.Table
	mu     sync.Mutex
	names  map[string]int
	stages map[int]int
}

func (w *watchedZones) PrefetchStart(qname []byte, qtype uint16, st *prefetch.State) {
	w.mu.Lock()
	w.names[string(qname)]++
	w.mu.Unlock()
	w.Table.PrefetchStart(qname, qtype, st)
}

func (w *watchedZones) PrefetchStage(stage int, st *prefetch.State) {
	w.mu.Lock()
	w.stages[stage]++
	w.mu.Unlock()
	w.Table.PrefetchStage(stage, st)
}

// TestUDPBatchPrefetchesZonesAndAnswersAlike sends bursts of queries for a
// zone large enough to be prefetched, in mixed case, names present and
// absent, types held and not, with a malformed datagram among them, to the
// batched UDP loop: every query gets the answer it gets one at a time, and
// every well-formed question went through every prefetch stage.
func TestUDPBatchPrefetchesZonesAndAnswersAlike(t *testing.T) {
	var extra []v1alpha1.Endpoint
	for i := range 6000 {
		extra = append(extra, ep(fmt.Sprintf("h%d", i), "A", fmt.Sprintf("10.0.%d.%d", i>>8, i&255)))
	}
	tab := testTable(t, extra...)
	if tab.PrefetchStages() == 0 {
		t.Fatal("the zone is too small to be prefetched; the test would not exercise the prefetch")
	}
	snap := NewSnapshot(SnapshotInput{Authority: tab})
	if len(snap.prefetchers) != 1 {
		t.Fatalf("the snapshot prefetches %d tables, want the zones", len(snap.prefetchers))
	}
	watched := &watchedZones{Table: tab, names: map[string]int{}, stages: map[int]int{}}
	snap.prefetchers[0] = watched
	s := startServer(t, Config{Node: "t", Listeners: []ListenerConfig{{Address: "127.0.0.1:0", Protocols: []string{"udp", "tcp"}}}, Sockets: 1, Cache: cache.DefaultConfig()}, snap)

	type want struct {
		name    string
		qtype   uint16
		rcode   int
		answers int
	}
	wants := map[uint16]want{}
	var burst [][]byte
	for i := range 60 {
		w := want{fmt.Sprintf("h%d.example.com.", i*97), dns.TypeA, dns.RcodeSuccess, 1}
		switch i % 5 {
		case 1:
			w.name = strings.ToUpper(w.name)
		case 2:
			w.qtype, w.answers = dns.TypeAAAA, 0 // NODATA
		case 3:
			w.name, w.rcode, w.answers = fmt.Sprintf("absent%d.example.com.", i), dns.RcodeNameError, 0
		case 4:
			w.name, w.answers = "WWW.Example.COM.", 2
		}
		m := new(dns.Msg)
		m.SetQuestion(w.name, w.qtype)
		m.Id = uint16(2000 + i)
		b, err := m.Pack()
		if err != nil {
			t.Fatal(err)
		}
		wants[m.Id] = w
		burst = append(burst, b)
		if i == 30 {
			burst = append(burst, []byte{0xde, 0xad, 0, 0, 0, 1, 0, 0, 0, 0, 0, 0, 0x05, 'x'}) // cut short
		}
	}
	ids := map[uint16]bool{}
	for id := range wants {
		ids[id] = true
	}
	for id, m := range SendBurst(t, s.UDPAddrs()[0], burst, ids) {
		w := wants[id]
		if m.Rcode != w.rcode || len(m.Answer) != w.answers || !m.Authoritative || len(m.Question) != 1 || m.Question[0].Name != w.name {
			t.Errorf("%s %s: answer %s aa=%v %v, want %s with %d records", w.name, dns.TypeToString[w.qtype],
				dns.RcodeToString[m.Rcode], m.Authoritative, m.Answer, dns.RcodeToString[w.rcode], w.answers)
		}
		// The same question alone, through the one-at-a-time path.
		q := new(dns.Msg)
		q.SetQuestion(w.name, w.qtype)
		alone := exchange(t, s, "tcp", q)
		if fmt.Sprint(alone.Answer, alone.Ns, alone.Rcode) != fmt.Sprint(m.Answer, m.Ns, m.Rcode) {
			t.Errorf("%s %s: batched answer %v %v, alone %v %v", w.name, dns.TypeToString[w.qtype], m.Answer, m.Ns, alone.Answer, alone.Ns)
		}
	}

	watched.mu.Lock()
	defer watched.mu.Unlock()
	for _, n := range NotPrefetched(burst, watched.names) {
		t.Errorf("%s was not prefetched", n)
	}
	// Batches of one run stage 0 only: a burst of 61 datagrams read in
	// batches reaches the later stages.
	for stage := 1; stage < tab.PrefetchStages(); stage++ {
		if watched.stages[stage] == 0 {
			t.Errorf("stage %d never ran", stage)
		}
	}
}
