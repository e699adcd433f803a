package dnslog_test

import (
	"context"
	"net/netip"
	"sync"
	"testing"
	"time"
	"unsafe"

	"github.com/miekg/dns"

	"github.com/svcdns/svc/api/v1alpha1"
	"github.com/svcdns/svc/dataplane"
	"github.com/svcdns/svc/dataplane/authority"
	"github.com/svcdns/svc/internal/dnslog"
	"github.com/svcdns/svc/internal/querylog"
)

type sink struct {
	mu   sync.Mutex
	rows []querylog.Row
}

func (s *sink) Enqueue(r querylog.Row) bool {
	s.mu.Lock()
	s.rows = append(s.rows, r)
	s.mu.Unlock()
	return true
}

// wwwZone is an authority table of one zone named zoneName with one
// record, www A 192.0.2.1.
func wwwZone(t testing.TB, zoneName string) *authority.Table {
	t.Helper()
	z := v1alpha1.DNSZone{}
	z.Name, z.Spec.ZoneName = "example-com", zoneName
	rs := v1alpha1.DNSRecordSet{}
	rs.Namespace, rs.Name = "default", "www"
	rs.Spec.ZoneRef.Name = "example-com"
	rs.Spec.Endpoints = []v1alpha1.Endpoint{{DNSName: "www", RecordType: "A", Targets: []string{"192.0.2.1"}}}
	tab, problems := authority.Compile([]v1alpha1.DNSZone{z}, []v1alpha1.DNSRecordSet{rs}, time.Now())
	if len(problems) > 0 {
		t.Fatal(problems)
	}
	return tab
}

// An authoritative answer's row names the zone that answered.
func TestAuthoritativeRowNamesZone(t *testing.T) {
	tab := wwwZone(t, "Example.COM")
	rows := logRows(t, dataplane.SnapshotInput{Authority: tab}, "www.example.com.", "other.example.org.")
	if r := rows[0]; r.Status != "authoritative" || r.Zone != "example.com." {
		t.Fatalf("authoritative row: status %q zone %q, want zone example.com.", r.Status, r.Zone)
	}
	if r := rows[1]; r.Zone != "" {
		t.Fatalf("refused row: zone %q, want none", r.Zone)
	}
}

// logRows asks a data plane of in each name (type A) through a Logger and
// returns the rows it wrote, one per name.
func logRows(t *testing.T, in dataplane.SnapshotInput, names ...string) []querylog.Row {
	t.Helper()
	out, lg, s := loggedServer(t, in)
	for _, name := range names {
		ask(t, s, name)
	}
	if err := lg.Flush(context.Background()); err != nil {
		t.Fatal(err)
	}
	if len(out.rows) != len(names) {
		t.Fatalf("%d rows, want %d", len(out.rows), len(names))
	}
	return out.rows
}

// ask sends s a type A query for name in process.
func ask(t *testing.T, s *dataplane.Server, name string) {
	t.Helper()
	m := new(dns.Msg)
	m.SetQuestion(name, dns.TypeA)
	pkt, err := m.Pack()
	if err != nil {
		t.Fatal(err)
	}
	if _, ok := s.ServeWire(pkt, netip.MustParseAddrPort("192.0.2.9:5353"), dataplane.TransportUDP, nil); !ok {
		t.Fatalf("%s: no answer", name)
	}
}

// blockingSink holds the converter in Enqueue until released.
type blockingSink struct {
	release chan struct{}
	mu      sync.Mutex
	rows    int
	drops   int
}

func (s *blockingSink) Enqueue(querylog.Row) bool {
	<-s.release
	s.mu.Lock()
	s.rows++
	s.mu.Unlock()
	return true
}

func (s *blockingSink) CountDropped() {
	s.mu.Lock()
	s.drops++
	s.mu.Unlock()
}

// A full hand-off buffer drops records (counted, also in the sink) and
// never blocks the caller; Flush then delivers everything that was kept.
func TestFullBufferDropsWithoutBlocking(t *testing.T) {
	out := &blockingSink{release: make(chan struct{})}
	lg := dnslog.NewBuffered(out, 4)
	defer lg.Close()
	done := make(chan struct{})
	go func() {
		defer close(done)
		for range 100 {
			lg.Log(dataplane.QueryRecord{Time: time.Now()})
		}
	}()
	select {
	case <-done:
	case <-time.After(5 * time.Second):
		t.Fatal("Log blocked on a stuck sink")
	}
	if lg.Dropped() == 0 {
		t.Fatal("no record dropped with a buffer of 4 and a stuck sink")
	}
	close(out.release)
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	if err := lg.Flush(ctx); err != nil {
		t.Fatal(err)
	}
	out.mu.Lock()
	defer out.mu.Unlock()
	if int64(out.rows)+lg.Dropped() != 100 || int64(out.drops) != lg.Dropped() {
		t.Fatalf("rows %d + dropped %d != 100, sink counted %d drops", out.rows, lg.Dropped(), out.drops)
	}
}

// The client ID the transport found (DoT SNI label, DoH path segment)
// reaches the query-log row; a query without one has none.
func TestRowCarriesClientID(t *testing.T) {
	out, lg, s := loggedServer(t, dataplane.SnapshotInput{})
	client := netip.MustParseAddrPort("[::ffff:192.0.2.9]:5353")
	m := new(dns.Msg)
	m.SetQuestion("www.example.org.", dns.TypeA)
	pkt, err := m.Pack()
	if err != nil {
		t.Fatal(err)
	}
	s.ServeWireID(pkt, client, dataplane.TransportDoT, "kids", nil)
	s.ServeWire(pkt, client, dataplane.TransportDoH, nil)
	if err := lg.Flush(context.Background()); err != nil {
		t.Fatal(err)
	}
	out.mu.Lock()
	defer out.mu.Unlock()
	if len(out.rows) != 2 {
		t.Fatalf("%d rows, want 2", len(out.rows))
	}
	if r := out.rows[0]; r.ClientID != "kids" || r.Client != "192.0.2.9" || r.Transport != "dot" {
		t.Fatalf("DoT row: client %q client ID %q transport %q, want 192.0.2.9, kids, dot", r.Client, r.ClientID, r.Transport)
	}
	if r := out.rows[1]; r.ClientID != "" {
		t.Fatalf("row without a client ID: %q", r.ClientID)
	}
}

// Rows carry the name as querylog.NormalizeDomain gives it (lower case, no
// trailing dot, escapes kept) and the client's address, the first time and
// when the converter already knows them.
func TestRowNamesAndClients(t *testing.T) {
	out, lg, s := loggedServer(t, dataplane.SnapshotInput{})
	type ask struct{ name, client, wantDomain, wantClient string }
	asks := []ask{
		{"WWW.Example.COM.", "192.0.2.9:53", "www.example.com", "192.0.2.9"},
		{"a\\.b.example.", "[2001:db8::1]:53", "a\\.b.example", "2001:db8::1"},
		{"\\000x.example.", "[::ffff:192.0.2.7]:53", "\\000x.example", "192.0.2.7"},
		{".", "192.0.2.9:53", ".", "192.0.2.9"},
	}
	for round := range 2 {
		out.rows = nil
		for _, a := range asks {
			m := new(dns.Msg)
			m.SetQuestion(a.name, dns.TypeA)
			pkt, err := m.Pack()
			if err != nil {
				t.Fatal(err)
			}
			s.ServeWire(pkt, netip.MustParseAddrPort(a.client), dataplane.TransportUDP, nil)
		}
		if err := lg.Flush(context.Background()); err != nil {
			t.Fatal(err)
		}
		if len(out.rows) != len(asks) {
			t.Fatalf("round %d: %d rows, want %d", round, len(out.rows), len(asks))
		}
		for i, a := range asks {
			if r := out.rows[i]; r.Domain != a.wantDomain || r.Client != a.wantClient {
				t.Errorf("round %d, %s from %s: domain %q client %q, want %q %q", round, a.name, a.client, r.Domain, r.Client, a.wantDomain, a.wantClient)
			}
		}
	}
}

// loggedServer is a server of in (empty: it refuses every query) whose
// records reach out through a Logger, closed by the test.
func loggedServer(t *testing.T, in dataplane.SnapshotInput) (*sink, *dnslog.Logger, *dataplane.Server) {
	t.Helper()
	out := &sink{}
	lg := dnslog.New(out)
	t.Cleanup(func() { lg.Close() })
	s, err := dataplane.New(dataplane.Config{Node: "n"}, dataplane.Options{QueryLogger: lg})
	if err != nil {
		t.Fatal(err)
	}
	s.Swap(dataplane.NewSnapshot(in))
	return out, lg, s
}

// ruleBlocker blocks every name with the rule its table gives it.
type ruleBlocker map[string]string

func (b ruleBlocker) DecideInto(qname []byte, qtype uint16, client dataplane.ClientInfo, d *dataplane.Decision) {
	*d = dataplane.Decision{}
	name := "" // qname is lower-case wire form
	for off := 0; off < len(qname) && qname[off] != 0; off += 1 + int(qname[off]) {
		name += string(qname[off+1:off+1+int(qname[off])]) + "."
	}
	if rule, ok := b[name]; ok {
		*d = dataplane.Decision{Verdict: dataplane.VerdictBlock, List: "ads", Rule: rule}
		// "||^" and "": a rule that is the name itself, left to the
		// caller (Decision.RuleIsName), with and without adblock's text
		if rule == "||^" || rule == "" {
			d.Rule, d.RuleIsName = "", true
			if rule != "" {
				d.RulePre, d.RulePost = "||", "^"
			}
		}
	}
}

// A blocked row's rule is the list entry as matched: when it is the
// question's name itself (an exact-domain entry), the row carries the
// row's own domain string, which the block encoder stores as "the same
// as the domain" without reading the rule's bytes.
func TestBlockedRowRule(t *testing.T) {
	bl := ruleBlocker{"ads.example.com.": "ads.example.com", "x.example.org.": "example.org", "ads.example.net.": "ads.example.net.",
		"name.example.": "", "adblock.example.": "||^"}
	rows := logRows(t, dataplane.SnapshotInput{Blocker: bl, BlockingEnabled: true}, "ADS.example.com.", "x.example.org.", "ads.example.net.",
		"Name.Example.", "adblock.example.")
	for i, want := range []struct {
		domain, rule string
		same         bool
	}{{"ads.example.com", "ads.example.com", true}, {"x.example.org", "example.org", false}, {"ads.example.net", "ads.example.net.", false},
		{"name.example", "name.example", true}, {"adblock.example", "||adblock.example^", false}} {
		r := rows[i]
		if r.Status != "blocked" || r.Domain != want.domain || r.Rule != want.rule {
			t.Fatalf("row %d: status %q domain %q rule %q, want blocked %q %q", i, r.Status, r.Domain, r.Rule, want.domain, want.rule)
		}
		if same := unsafe.StringData(r.Rule) == unsafe.StringData(r.Domain); same != want.same {
			t.Errorf("row %d: the rule shares the domain's bytes: %v, want %v", i, same, want.same)
		}
	}
}

// The data plane writes each record straight into the Logger's buffer
// (LogFrom), and the buffers are reused after each hand-off: a record must
// carry nothing of the one that held its slot before, here a blocked
// query's list, rule and policy under an unblocked one's row.
func TestInPlaceRecordsCarryNothingStale(t *testing.T) {
	out, lg, s := loggedServer(t, dataplane.SnapshotInput{Blocker: ruleBlocker{"ads.example.com.": "ads.example.com"}, BlockingEnabled: true})
	ask := func(name string) { ask(t, s, name) }
	names := []string{"ads.example.com.", "www.example.org.", "ads.example.com.", "ads.example.com.", "a.b.example.org.", "www.example.org."}
	for round := range 4 {
		// Each round fills a buffer with blocked and unblocked queries in
		// a different order, then hands it over.
		for i := range names {
			ask(names[(i+round)%len(names)])
		}
		if err := lg.Flush(context.Background()); err != nil {
			t.Fatal(err)
		}
	}
	if len(out.rows) != 4*len(names) {
		t.Fatalf("%d rows, want %d", len(out.rows), 4*len(names))
	}
	for i, r := range out.rows {
		blocked := r.Domain == "ads.example.com"
		if want := names[(i%len(names)+i/len(names))%len(names)]; r.Domain+"." != want {
			t.Fatalf("row %d is %q, want %q", i, r.Domain, want)
		}
		if blocked != (r.Status == "blocked") || blocked != (r.Rule == "ads.example.com") || blocked != (r.List == "ads") {
			t.Errorf("row %d (%s): status %q list %q rule %q", i, r.Domain, r.Status, r.List, r.Rule)
		}
	}
}
