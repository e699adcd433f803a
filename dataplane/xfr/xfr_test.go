package xfr_test

import (
	"context"
	"encoding/base64"
	"fmt"
	"log/slog"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/miekg/dns"

	"github.com/svcdns/svc/api/v1alpha1"
	"github.com/svcdns/svc/dataplane"
	"github.com/svcdns/svc/dataplane/authority"
	"github.com/svcdns/svc/dataplane/xfr"
)

var secret = base64.StdEncoding.EncodeToString([]byte("0123456789abcdef0123456789abcdef"))

const keyName = "k1."

// zone compiles example.test with n A records and the transfer key; gen
// and rv make each version a distinct compile (as the store does).
func zone(t testing.TB, n int, gen int64, extra ...v1alpha1.Endpoint) *authority.Table {
	t.Helper()
	z := v1alpha1.DNSZone{}
	z.Name, z.UID, z.Generation, z.ResourceVersion = "example.test", "uid-z", gen, fmt.Sprint(gen)
	z.Spec.NameServers = []string{"ns1.example.test."}
	z.Spec.SOA = &v1alpha1.SOA{Serial: 1000 + gen}
	z.Spec.Policy = &v1alpha1.ZonePolicy{TransferTSIGKeyRefs: []string{"k1"}}
	rs := v1alpha1.DNSRecordSet{}
	rs.Namespace, rs.Name, rs.UID, rs.Generation = "default", "hosts", "uid-rs", gen
	rs.Spec.ZoneRef.Name = "example.test"
	for i := range n {
		rs.Spec.Endpoints = append(rs.Spec.Endpoints, v1alpha1.Endpoint{DNSName: fmt.Sprintf("h%d.example.test", i), RecordType: "A",
			Targets: []string{fmt.Sprintf("10.%d.%d.%d", i>>16&255, i>>8&255, i&255)}})
	}
	rs.Spec.Endpoints = append(rs.Spec.Endpoints, extra...)
	tab, problems := authority.Compile([]v1alpha1.DNSZone{z}, []v1alpha1.DNSRecordSet{rs}, time.Now())
	if len(problems) > 0 {
		t.Fatalf("compile: %v", problems)
	}
	return tab
}

// node is a data plane with the xfr handler on a real TCP listener.
type node struct {
	dp  *dataplane.Server
	srv *xfr.Server
	tcp string
	udp string
}

func startNode(t testing.TB, tab *authority.Table, msgSize int) *node {
	t.Helper()
	return startNodeOpts(t, tab, msgSize, dataplane.Options{})
}

// startNodeOpts is startNode with the data plane's options (a logger).
func startNodeOpts(t testing.TB, tab *authority.Table, msgSize int, opts dataplane.Options) *node {
	t.Helper()
	dp, err := dataplane.New(dataplane.Config{Listeners: []dataplane.ListenerConfig{{Address: "127.0.0.1:0", Protocols: []string{"udp", "tcp"}}}}, opts)
	if err != nil {
		t.Fatal(err)
	}
	srv := xfr.New(xfr.Config{Keys: xfr.Keyring{keyName: {Name: keyName, Algorithm: dns.HmacSHA256, Secret: secret}}, MessageSize: msgSize,
		Logger: slog.New(slog.DiscardHandler)})
	dp.SetTransfers(srv)
	n := &node{dp: dp, srv: srv}
	n.serve(tab)
	ctx, cancel := context.WithCancel(context.Background())
	if err := dp.Start(ctx); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		cancel()
		sctx, c := context.WithTimeout(context.Background(), 5*time.Second)
		defer c()
		_ = dp.Shutdown(sctx)
	})
	n.tcp = dp.TCPAddrs()[0].String()
	n.udp = dp.UDPAddrs()[0].String()
	return n
}

// serve publishes tab as the node does: swap, then record it in the journal.
func (n *node) serve(tab *authority.Table) {
	n.dp.Swap(dataplane.NewSnapshot(dataplane.SnapshotInput{Authority: tab, Version: time.Now().String()}))
	n.srv.Observe(tab)
}

// transfer runs a transfer with miekg/dns's client, which verifies the
// TSIG of every message, and returns the envelopes.
func transfer(t testing.TB, addr string, m *dns.Msg) ([]*dns.Envelope, error) {
	t.Helper()
	m.SetTsig(keyName, dns.HmacSHA256, 300, time.Now().Unix())
	tr := &dns.Transfer{TsigSecret: map[string]string{keyName: secret}}
	ch, err := tr.In(m, addr)
	if err != nil {
		return nil, err
	}
	var out []*dns.Envelope
	for e := range ch {
		if e.Error != nil {
			return out, e.Error
		}
		out = append(out, e)
	}
	return out, nil
}

func count(envs []*dns.Envelope) (rrs int) {
	for _, e := range envs {
		rrs += len(e.RR)
	}
	return rrs
}

// TestAXFRManyMessagesEachSigned: a 5000-record zone leaves in many
// messages, each with a TSIG the client verifies (miekg/dns's Transfer
// fails on a bad or missing one), SOA first and last.
func TestAXFRManyMessagesEachSigned(t *testing.T) {
	n := startNode(t, zone(t, 5000, 1), 4096)
	m := new(dns.Msg)
	m.SetAxfr("example.test.")
	envs, err := transfer(t, n.tcp, m)
	if err != nil {
		t.Fatalf("AXFR: %v", err)
	}
	if len(envs) < 10 {
		t.Fatalf("%d messages, want many for 5000 records at 4 KiB each", len(envs))
	}
	first, last := envs[0].RR[0], envs[len(envs)-1].RR[len(envs[len(envs)-1].RR)-1]
	if first.Header().Rrtype != dns.TypeSOA || last.Header().Rrtype != dns.TypeSOA {
		t.Fatalf("AXFR must start and end with the SOA: %v ... %v", first, last)
	}
	// SOA twice, NS, the glue-less ns1 has no record: 5000 A + NS + 2 SOA
	if got := count(envs); got != 5003 {
		t.Fatalf("%d records, want 5003", got)
	}
	t.Logf("5000 records in %d messages, each signed and verified", len(envs))
}

// TestIXFRFromJournal: after two changes a client at the first serial gets
// the two diffs; a client at the current serial gets one SOA; a client at a
// serial the journal does not hold gets the whole zone.
func TestIXFRFromJournal(t *testing.T) {
	v1 := zone(t, 10, 1)
	n := startNode(t, v1, 0)
	n.serve(zone(t, 10, 2, v1alpha1.Endpoint{DNSName: "new.example.test", RecordType: "A", Targets: []string{"192.0.2.1"}}))
	n.serve(zone(t, 9, 3, v1alpha1.Endpoint{DNSName: "new.example.test", RecordType: "A", Targets: []string{"192.0.2.2"}}))

	ixfr := func(serial uint32) []dns.RR {
		m := new(dns.Msg)
		m.SetIxfr("example.test.", serial, "ns1.example.test.", "hostmaster.example.test.")
		envs, err := transfer(t, n.tcp, m)
		if err != nil {
			t.Fatalf("IXFR from %d: %v", serial, err)
		}
		var rrs []dns.RR
		for _, e := range envs {
			rrs = append(rrs, e.RR...)
		}
		return rrs
	}
	rrs := ixfr(1001)
	var text []string
	for _, rr := range rrs {
		text = append(text, rr.Header().Name+" "+dns.TypeToString[rr.Header().Rrtype]+" "+soaOrData(rr))
	}
	want := []string{
		"example.test. SOA 1003",
		"example.test. SOA 1001",
		"example.test. SOA 1002", "new.example.test. A 192.0.2.1",
		"example.test. SOA 1002", "h9.example.test. A 10.0.0.9", "new.example.test. A 192.0.2.1",
		"example.test. SOA 1003", "new.example.test. A 192.0.2.2",
		"example.test. SOA 1003",
	}
	if strings.Join(text, "\n") != strings.Join(want, "\n") {
		t.Fatalf("IXFR from 1001:\n%s\nwant:\n%s", strings.Join(text, "\n"), strings.Join(want, "\n"))
	}
	if rrs := ixfr(1003); len(rrs) != 1 {
		t.Fatalf("IXFR from the current serial: %d records, want the SOA alone", len(rrs))
	}
	if rrs := ixfr(900); len(rrs) != 9+1+1+2 { // AXFR-style: SOA, NS, 9 A, new, SOA
		t.Fatalf("IXFR from an unknown serial: %d records, want the whole zone (13)", len(rrs))
	}
}

func soaOrData(rr dns.RR) string {
	if s, ok := rr.(*dns.SOA); ok {
		return fmt.Sprint(s.Serial)
	}
	f := strings.Fields(rr.String())
	return f[len(f)-1]
}

// TestTSIGRefusals: a request signed too long ago is NOTAUTH/BADTIME with
// a signed answer telling the server's time; an unknown key BADKEY; a bad
// MAC BADSIG; a key the zone does not name REFUSED.
func TestTSIGRefusals(t *testing.T) {
	n := startNode(t, zone(t, 3, 1), 0)
	ask := func(key, sec string, at time.Time) *dns.Msg {
		m := new(dns.Msg)
		m.SetAxfr("example.test.")
		m.SetTsig(key, dns.HmacSHA256, 300, at.Unix())
		c := &dns.Client{Net: "tcp", TsigSecret: map[string]string{key: sec}, Timeout: 2 * time.Second}
		r, _, err := c.Exchange(m, n.tcp)
		if r == nil {
			t.Fatalf("no answer (%v)", err)
		}
		return r
	}
	tsigErr := func(r *dns.Msg) string {
		if ts := r.IsTsig(); ts != nil {
			return dns.RcodeToString[r.Rcode] + "/" + dns.RcodeToString[int(ts.Error)]
		}
		return dns.RcodeToString[r.Rcode]
	}
	if got := tsigErr(ask(keyName, secret, time.Now().Add(-time.Hour))); got != "NOTAUTH/BADTIME" {
		t.Errorf("signed an hour ago: %s, want NOTAUTH/BADTIME", got)
	}
	if got := tsigErr(ask("k2.", secret, time.Now())); got != "NOTAUTH/BADKEY" {
		t.Errorf("unknown key: %s, want NOTAUTH/BADKEY", got)
	}
	other := base64.StdEncoding.EncodeToString([]byte("another secret of 32 bytes......"))
	if got := tsigErr(ask(keyName, other, time.Now())); got != "NOTAUTH/BADSIG" {
		t.Errorf("wrong secret: %s, want NOTAUTH/BADSIG", got)
	}
}

// TestNotifyAnswered: a NOTIFY for a zone the node is primary of is
// NOERROR with AA; for any other zone NOTAUTH; never NOTIMP.
func TestNotifyAnswered(t *testing.T) {
	n := startNode(t, zone(t, 1, 1), 0)
	for _, tc := range []struct {
		zone  string
		rcode int
	}{{"example.test.", dns.RcodeSuccess}, {"other.test.", dns.RcodeNotAuth}} {
		m := new(dns.Msg)
		m.SetNotify(tc.zone)
		c := &dns.Client{Net: "tcp", Timeout: 2 * time.Second}
		r, _, err := c.Exchange(m, n.tcp)
		if err != nil {
			t.Fatal(err)
		}
		if r.Rcode != tc.rcode || r.Opcode != dns.OpcodeNotify || (tc.rcode == dns.RcodeSuccess && !r.Authoritative) {
			t.Errorf("NOTIFY %s: %s opcode %d aa=%v, want %s", tc.zone, dns.RcodeToString[r.Rcode], r.Opcode, r.Authoritative, dns.RcodeToString[tc.rcode])
		}
	}
}

// TestNotifyTSIGVerified: a signed NOTIFY is verified before it is
// answered (RFC 8945 5.2): the right key gets NOERROR signed (the client
// verifies the answer's MAC), a wrong secret NOTAUTH/BADSIG, an unknown key
// NOTAUTH/BADKEY, a stale time NOTAUTH/BADTIME, over UDP and TCP; each
// failure is logged with the client, zone, key and error.
func TestNotifyTSIGVerified(t *testing.T) {
	var logs syncBuffer
	n := startNodeOpts(t, zone(t, 1, 1), 0, dataplane.Options{Logger: slog.New(slog.NewTextHandler(&logs, nil))})
	other := base64.StdEncoding.EncodeToString([]byte("another secret of 32 bytes......"))
	for _, proto := range []string{"udp", "tcp"} {
		addr := map[string]string{"udp": n.udp, "tcp": n.tcp}[proto]
		for _, tc := range []struct {
			name, key, secret string
			at                time.Time
			want              string
		}{
			{"right key", keyName, secret, time.Now(), "NOERROR"},
			{"wrong secret", keyName, other, time.Now(), "NOTAUTH/BADSIG"},
			{"unknown key", "k2.", secret, time.Now(), "NOTAUTH/BADKEY"},
			{"an hour old", keyName, secret, time.Now().Add(-time.Hour), "NOTAUTH/BADTIME"},
		} {
			m := new(dns.Msg)
			m.SetNotify("example.test.")
			m.SetTsig(tc.key, dns.HmacSHA256, 300, tc.at.Unix())
			c := &dns.Client{Net: proto, TsigSecret: map[string]string{tc.key: tc.secret}, Timeout: 2 * time.Second}
			r, _, err := c.Exchange(m, addr)
			if r == nil {
				t.Fatalf("%s %s: no answer (%v)", proto, tc.name, err)
			}
			got := dns.RcodeToString[r.Rcode]
			ts := r.IsTsig()
			if ts != nil && ts.Error != 0 {
				got += "/" + dns.RcodeToString[int(ts.Error)]
			}
			if got != tc.want || r.Opcode != dns.OpcodeNotify {
				t.Errorf("%s NOTIFY, %s: %s (opcode %d), want %s", proto, tc.name, got, r.Opcode, tc.want)
			}
			if tc.want == "NOERROR" && (ts == nil || err != nil) {
				t.Errorf("%s NOTIFY, %s: answer not signed or its MAC does not verify (%v)", proto, tc.name, err)
			}
		}
	}
	for _, e := range []string{"BADSIG", "BADKEY", "BADTIME"} {
		if !strings.Contains(logs.String(), `msg="NOTIFY refused: TSIG check failed" client=127.0.0.1:`) || !strings.Contains(logs.String(), "error="+e) {
			t.Errorf("no log line for %s:\n%s", e, logs.String())
		}
	}
}

// syncBuffer is a bytes buffer the server's goroutines may log into.
type syncBuffer struct {
	mu sync.Mutex
	b  strings.Builder
}

func (s *syncBuffer) Write(p []byte) (int, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.b.Write(p)
}

func (s *syncBuffer) String() string {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.b.String()
}

// BenchmarkAXFR transfers a 100,000-record zone over a real TCP socket,
// TSIG on every message (miekg/dns's client verifying).
func BenchmarkAXFR(b *testing.B) {
	n := startNode(b, zone(b, 100_000, 1), 0)
	b.ReportAllocs()
	b.ResetTimer()
	for range b.N {
		m := new(dns.Msg)
		m.SetAxfr("example.test.")
		envs, err := transfer(b, n.tcp, m)
		if err != nil {
			b.Fatal(err)
		}
		if c := count(envs); c != 100_003 {
			b.Fatalf("%d records", c)
		}
	}
	b.ReportMetric(100_000, "records/op")
}
