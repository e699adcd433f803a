// Package querylog_test drives the query log end to end: real DNS queries
// into a real dataplane.Server on loopback whose QueryLogger is the query
// log writer, rows in a real querylog.db, the SSE stream over a real HTTP
// server.
package querylog_test

import (
	"context"
	"errors"
	"net/netip"
	"sync/atomic"
	"testing"
	"time"

	"github.com/miekg/dns"

	"github.com/svcdns/svc/api/v1alpha1"
	"github.com/svcdns/svc/dataplane"
	"github.com/svcdns/svc/dataplane/authority"
	"github.com/svcdns/svc/dataplane/cache"
	"github.com/svcdns/svc/internal/dnslog"
	"github.com/svcdns/svc/internal/querylog"
)

// forwarder answers every A question with 198.51.100.1 and fails names
// under fail.example.net, and under stale.example.net once down is set.
type forwarder struct{ down atomic.Bool }

func (f *forwarder) Forward(_ context.Context, _ string, req *dns.Msg, _ netip.Addr) (*dns.Msg, string, error) {
	q := req.Question[0]
	if dns.IsSubDomain("fail.example.net.", q.Name) || (f.down.Load() && dns.IsSubDomain("stale.example.net.", q.Name)) {
		return nil, "", errors.New("upstream unreachable")
	}
	m := new(dns.Msg)
	m.SetReply(req)
	m.RecursionAvailable = true
	if q.Qtype == dns.TypeA {
		rr, _ := dns.NewRR(q.Name + " 120 IN A 198.51.100.1")
		m.Answer = []dns.RR{rr}
	}
	return m, "192.0.2.53:53", nil
}

type blocker struct{}

func (blocker) DecideInto(qname []byte, _ uint16, _ dataplane.ClientInfo, d *dataplane.Decision) {
	*d = dataplane.Decision{}
	switch string(qname) {
	case "\x03ads\x07example\x03org\x00":
		*d = dataplane.Decision{Verdict: dataplane.VerdictBlock, Mode: dataplane.BlockZeroIP, List: "ads", Rule: "ads.example.org", Policy: "default/kids"}
	case "\x07rewrite\x07example\x03org\x00":
		rr, _ := dns.NewRR("rewrite.example.org. 60 IN A 192.0.2.80")
		*d = dataplane.Decision{Verdict: dataplane.VerdictRewrite, Answer: []dns.RR{rr}, Policy: "default/kids"}
	case "\x05nolog\x07example\x03org\x00":
		*d = dataplane.Decision{NoLog: true, Policy: "default/private"}
	}
}

type identifier struct{}

func (identifier) Identify(addr netip.Addr, _ string) dataplane.ClientInfo {
	if addr.IsLoopback() {
		return dataplane.ClientInfo{Name: "laptop", Groups: []string{"kids"}}
	}
	return dataplane.ClientInfo{}
}

// env is a query log writer behind a running data plane.
type env struct {
	fwd  *forwarder
	skew atomic.Int64 // added to the cache's clock
	w    *querylog.Writer
	lg   *dnslog.Logger
	s    *dataplane.Server
	addr string
	dir  string
}

func newEnv(t *testing.T, cfg querylog.Config, opts querylog.Options) *env {
	t.Helper()
	dir := t.TempDir()
	cfg.DataDir, cfg.Node = dir, "node-a"
	if opts.MaintainEvery == 0 {
		opts.MaintainEvery = -1
	}
	w, err := querylog.Open(context.Background(), cfg, opts)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		if err := w.Close(); err != nil {
			t.Error(err)
		}
	})

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
	e := &env{fwd: &forwarder{}, dir: dir, w: w, lg: dnslog.New(w)}
	t.Cleanup(func() { _ = e.lg.Close() })
	cc := cache.DefaultConfig()
	cc.MaxEntries = 1000
	cc.StaleMaxWait = 100 * time.Millisecond
	cc.Now = func() time.Time { return time.Now().Add(time.Duration(e.skew.Load())) }
	s, err := dataplane.New(dataplane.Config{
		Node:      "node-a",
		Listeners: []dataplane.ListenerConfig{{Address: "127.0.0.1:0", Protocols: []string{"udp", "tcp"}}},
		Sockets:   1,
		Cache:     cc,
	}, dataplane.Options{QueryLogger: e.lg})
	if err != nil {
		t.Fatal(err)
	}
	s.Swap(dataplane.NewSnapshot(dataplane.SnapshotInput{
		Authority: tab, Forwarder: e.fwd, Blocker: blocker{}, Identifier: identifier{}, BlockingEnabled: true,
	}))
	if err := s.Start(context.Background()); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
		defer cancel()
		if err := s.Shutdown(ctx); err != nil {
			t.Error(err)
		}
	})
	e.s, e.addr = s, s.UDPAddrs()[0].String()
	return e
}

// ask sends one question over UDP and returns the rcode.
func (e *env) ask(t *testing.T, name string, qtype, class uint16) int {
	t.Helper()
	m := new(dns.Msg)
	m.SetQuestion(name, qtype)
	m.Question[0].Qclass = class
	c := &dns.Client{Net: "udp", Timeout: 3 * time.Second}
	r, _, err := c.Exchange(m, e.addr)
	if err != nil {
		t.Fatalf("%s: %v", name, err)
	}
	return r.Rcode
}

func (e *env) flush(t *testing.T) {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	if err := e.lg.Flush(ctx); err != nil {
		t.Fatal(err)
	}
}

// all returns every row, newest first, following continue tokens.
func (e *env) all(t *testing.T, f querylog.Filter) []querylog.Row {
	t.Helper()
	var out []querylog.Row
	for range 1000 {
		rows, next, err := e.w.Rows(context.Background(), f)
		if err != nil {
			t.Fatal(err)
		}
		out = append(out, rows...)
		if next == "" {
			return out
		}
		f.Continue = next
	}
	t.Fatal("too many pages")
	return nil
}
