package dnslog_test

import (
	"net/netip"
	"sync"
	"testing"
	"time"

	"github.com/miekg/dns"

	"github.com/svcdns/svc/api/v1alpha1"
	"github.com/svcdns/svc/dataplane"
	"github.com/svcdns/svc/dataplane/authority"
	"github.com/svcdns/svc/internal/querylog"
	"github.com/svcdns/svc/internal/querylog/dnslog"
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

// An authoritative answer's row names the zone that answered.
func TestAuthoritativeRowNamesZone(t *testing.T) {
	z := v1alpha1.DNSZone{}
	z.Name, z.Spec.ZoneName = "example-com", "Example.COM"
	rs := v1alpha1.DNSRecordSet{}
	rs.Namespace, rs.Name = "default", "www"
	rs.Spec.ZoneRef.Name = "example-com"
	rs.Spec.Endpoints = []v1alpha1.Endpoint{{DNSName: "www", RecordType: "A", Targets: []string{"192.0.2.1"}}}
	tab, problems := authority.Compile([]v1alpha1.DNSZone{z}, []v1alpha1.DNSRecordSet{rs}, time.Now())
	if len(problems) > 0 {
		t.Fatal(problems)
	}
	out := &sink{}
	s, err := dataplane.New(dataplane.Config{Node: "n"}, dataplane.Options{QueryLogger: dnslog.New(out)})
	if err != nil {
		t.Fatal(err)
	}
	s.Swap(dataplane.NewSnapshot(dataplane.SnapshotInput{Authority: tab}))
	client := netip.MustParseAddrPort("192.0.2.9:5353")
	for _, name := range []string{"www.example.com.", "other.example.org."} {
		m := new(dns.Msg)
		m.SetQuestion(name, dns.TypeA)
		pkt, err := m.Pack()
		if err != nil {
			t.Fatal(err)
		}
		if _, ok := s.ServeWire(pkt, client, dataplane.TransportUDP, nil); !ok {
			t.Fatalf("%s: no answer", name)
		}
	}
	if len(out.rows) != 2 {
		t.Fatalf("%d rows, want 2", len(out.rows))
	}
	if r := out.rows[0]; r.Status != "authoritative" || r.Zone != "example.com." {
		t.Fatalf("authoritative row: status %q zone %q, want zone example.com.", r.Status, r.Zone)
	}
	if r := out.rows[1]; r.Zone != "" {
		t.Fatalf("refused row: zone %q, want none", r.Zone)
	}
}
