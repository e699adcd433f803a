// Package dataplane_test runs the data plane end to end: compiled zones, the
// real upstream resolver, a blocker and a query logger, over real UDP and
// TCP sockets on loopback.
package dataplane_test

import (
	"context"
	"net"
	"net/netip"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/miekg/dns"

	"github.com/svcdns/svc/api/v1alpha1"
	"github.com/svcdns/svc/dataplane"
	"github.com/svcdns/svc/dataplane/authority"
	"github.com/svcdns/svc/dataplane/cache"
	"github.com/svcdns/svc/dataplane/upstream"
)

// upstreamDNS is a miekg/dns server on loopback that knows one name per group.
func upstreamDNS(t *testing.T, ip string) (string, *atomic.Int64) {
	t.Helper()
	pc, err := net.ListenPacket("udp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	var n atomic.Int64
	srv := &dns.Server{PacketConn: pc, Handler: dns.HandlerFunc(func(w dns.ResponseWriter, r *dns.Msg) {
		n.Add(1)
		m := new(dns.Msg)
		m.SetReply(r)
		m.RecursionAvailable = true
		if r.Question[0].Qtype == dns.TypeA {
			rr, _ := dns.NewRR(r.Question[0].Name + " 120 IN A " + ip)
			m.Answer = []dns.RR{rr}
		}
		_ = w.WriteMsg(m)
	})}
	go func() { _ = srv.ActivateAndServe() }()
	t.Cleanup(func() { _ = srv.Shutdown() })
	return pc.LocalAddr().String(), &n
}

type blocker struct{}

func (blocker) DecideInto(qname []byte, qtype uint16, _ dataplane.ClientInfo, d *dataplane.Decision) {
	*d = dataplane.Decision{}
	if string(qname) == "\x03ads\x07example\x03org\x00" {
		*d = dataplane.Decision{Verdict: dataplane.VerdictBlock, Mode: dataplane.BlockZeroIP, List: "ads", Rule: "ads.example.org"}
	}
}

type memLog struct {
	mu   sync.Mutex
	recs []dataplane.QueryRecord
}

func (l *memLog) Log(r dataplane.QueryRecord) {
	l.mu.Lock()
	l.recs = append(l.recs, r)
	l.mu.Unlock()
}

func (l *memLog) find(name string, status dataplane.Status) bool {
	l.mu.Lock()
	defer l.mu.Unlock()
	for _, r := range l.recs {
		if r.Name() == name && r.Status == status {
			return true
		}
	}
	return false
}

// zoneOf returns the Zone of the first record for name with status.
func (l *memLog) zoneOf(name string, status dataplane.Status) (string, bool) {
	l.mu.Lock()
	defer l.mu.Unlock()
	for _, r := range l.recs {
		if r.Name() == name && r.Status == status {
			return r.Zone, true
		}
	}
	return "", false
}

func TestEndToEnd(t *testing.T) {
	defAddr, defQueries := upstreamDNS(t, "198.51.100.1")
	corpAddr, _ := upstreamDNS(t, "10.0.0.1")
	ucfg := upstream.DefaultConfig()
	ucfg.Groups = map[string]upstream.GroupConfig{
		"default": {Servers: []string{defAddr}},
		"corp":    {Servers: []string{corpAddr}},
	}
	ucfg.Bootstrap = []string{defAddr}
	ucfg.Conditional = map[string]string{"corp.example.": "corp"}
	res, err := upstream.New(ucfg, nil, nil)
	if err != nil {
		t.Fatal(err)
	}

	z := v1alpha1.DNSZone{}
	z.Name, z.Spec.ZoneName = "example-com", "example.com"
	rs := v1alpha1.DNSRecordSet{}
	rs.Namespace, rs.Name = "default", "www"
	rs.Spec.ZoneRef.Name = "example-com"
	rs.Spec.Endpoints = []v1alpha1.Endpoint{{DNSName: "www", RecordType: "A", Targets: []string{"192.0.2.1"}}}
	tab, problems := authority.Compile([]v1alpha1.DNSZone{z}, []v1alpha1.DNSRecordSet{rs}, time.Now())
	if len(problems) > 0 {
		t.Fatal(problems)
	}

	log := &memLog{}
	cc := cache.DefaultConfig()
	cc.MaxEntries = 1000
	s, err := dataplane.New(dataplane.Config{
		Node:      "node-a",
		Listeners: []dataplane.ListenerConfig{{Address: "127.0.0.1:0", Protocols: []string{"udp", "tcp"}}},
		Sockets:   2,
		Cache:     cc,
	}, dataplane.Options{QueryLogger: log})
	if err != nil {
		t.Fatal(err)
	}
	s.Swap(dataplane.NewSnapshot(dataplane.SnapshotInput{
		Authority: tab, Forwarder: res, Router: res, Blocker: blocker{}, BlockingEnabled: true,
	}))
	if err := s.Start(context.Background()); err != nil {
		t.Fatal(err)
	}
	defer func() {
		ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
		defer cancel()
		if err := s.Shutdown(ctx); err != nil {
			t.Error(err)
		}
	}()

	cases := []struct {
		name, qname string
		answer      string
		aa          bool
	}{
		{"authoritative", "www.example.com.", "192.0.2.1", true},
		{"forwarded", "host.example.net.", "198.51.100.1", false},
		{"conditional", "db.corp.example.", "10.0.0.1", false},
		{"blocked", "ads.example.org.", "0.0.0.0", false},
	}
	for _, proto := range []string{"udp", "tcp"} {
		addr := s.UDPAddrs()[0].String()
		if proto == "tcp" {
			addr = s.TCPAddrs()[0].String()
		}
		c := &dns.Client{Net: proto, Timeout: 3 * time.Second}
		for _, tc := range cases {
			t.Run(proto+"/"+tc.name, func(t *testing.T) {
				m := new(dns.Msg)
				m.SetQuestion(tc.qname, dns.TypeA)
				r, _, err := c.Exchange(m, addr)
				if err != nil {
					t.Fatal(err)
				}
				if len(r.Answer) != 1 || !strings.HasSuffix(r.Answer[0].String(), tc.answer) || r.Authoritative != tc.aa {
					t.Fatalf("answer %v", r)
				}
			})
		}
	}
	// host.example.net was asked twice (udp, tcp) and reached the upstream once.
	if n := defQueries.Load(); n != 1 {
		t.Fatalf("default upstream saw %d queries, want 1 (second from cache)", n)
	}
	if !log.find("ads.example.org.", dataplane.StatusBlocked) || !log.find("host.example.net.", dataplane.StatusCached) || !log.find("www.example.com.", dataplane.StatusAuthoritative) {
		t.Fatalf("query log misses records: %d records", len(log.recs))
	}
	// The authoritative answer names its zone; others name none.
	if z, _ := log.zoneOf("www.example.com.", dataplane.StatusAuthoritative); z != "example.com." {
		t.Fatalf("authoritative record zone %q, want example.com.", z)
	}
	if z, _ := log.zoneOf("host.example.net.", dataplane.StatusCached); z != "" {
		t.Fatalf("cached record zone %q, want none", z)
	}

	// The API route's view of a query.
	qr, err := s.Query(context.Background(), dataplane.QueryRequest{Name: "ads.example.org", Client: netip.MustParseAddr("192.0.2.9"), Transport: dataplane.TransportUDP})
	if err != nil || qr.Status != dataplane.StatusBlocked || qr.List != "ads" || qr.Rule != "ads.example.org" {
		t.Fatalf("Query: %+v %v", qr, err)
	}
	// The per-node toggle turns blocking off.
	s.SetBlocking(false)
	if qr, err = s.Query(context.Background(), dataplane.QueryRequest{Name: "ads.example.org", Transport: dataplane.TransportTCP}); err != nil || qr.Status != dataplane.StatusAnswered {
		t.Fatalf("blocking off: %+v %v", qr, err)
	}
}
