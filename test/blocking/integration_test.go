package blocking_test

import (
	"bytes"
	"context"
	"crypto/tls"
	"crypto/x509"
	"io"
	"net"
	"net/http"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/miekg/dns"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/svcdns/svc/api/v1alpha1"
	"github.com/svcdns/svc/dataplane"
	"github.com/svcdns/svc/dataplane/cache"
	"github.com/svcdns/svc/dataplane/catalogue"
	"github.com/svcdns/svc/dataplane/policy"
	"github.com/svcdns/svc/dataplane/safesearch"
	"github.com/svcdns/svc/dataplane/transport"
	"github.com/svcdns/svc/dataplane/upstream"
	"github.com/svcdns/svc/test/testpki"
)

const safeSearchIP = "216.239.38.120"

// fakeUpstream is a miekg/dns server on loopback: forcesafesearch.google.com
// A 216.239.38.120 (AAAA: NODATA), fail.example SERVFAIL, any other A
// 198.51.100.7.
func fakeUpstream(t *testing.T) (string, *sync.Map) {
	t.Helper()
	pc, err := net.ListenPacket("udp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	var asked sync.Map // lower-case name -> *atomic.Int64
	srv := &dns.Server{PacketConn: pc, Handler: dns.HandlerFunc(func(w dns.ResponseWriter, r *dns.Msg) {
		q := r.Question[0]
		n, _ := asked.LoadOrStore(strings.ToLower(q.Name), new(atomic.Int64))
		n.(*atomic.Int64).Add(1)
		m := new(dns.Msg)
		m.SetReply(r)
		m.RecursionAvailable = true
		switch {
		case strings.EqualFold(q.Name, "fail.example."):
			m.Rcode = dns.RcodeServerFailure
		case strings.EqualFold(q.Name, "forcesafesearch.google.com.") && q.Qtype == dns.TypeA:
			rr, _ := dns.NewRR(q.Name + " 300 IN A " + safeSearchIP)
			m.Answer = []dns.RR{rr}
		case q.Qtype == dns.TypeA:
			rr, _ := dns.NewRR(q.Name + " 120 IN A 198.51.100.7")
			m.Answer = []dns.RR{rr}
		}
		_ = w.WriteMsg(m)
	})}
	go func() { _ = srv.ActivateAndServe() }()
	t.Cleanup(func() { _ = srv.Shutdown() })
	return pc.LocalAddr().String(), &asked
}

func askedCount(m *sync.Map, name string) int64 {
	if n, ok := m.Load(name); ok {
		return n.(*atomic.Int64).Load()
	}
	return 0
}

type recLog struct {
	mu   sync.Mutex
	recs []dataplane.QueryRecord
}

func (l *recLog) Log(r dataplane.QueryRecord) {
	l.mu.Lock()
	l.recs = append(l.recs, r)
	l.mu.Unlock()
}

// last returns the newest record for name, waiting briefly for it.
func (l *recLog) last(t *testing.T, name string, n int) dataplane.QueryRecord {
	t.Helper()
	deadline := time.Now().Add(2 * time.Second)
	for {
		l.mu.Lock()
		var found []dataplane.QueryRecord
		for _, r := range l.recs {
			if r.Name() == name {
				found = append(found, r)
			}
		}
		l.mu.Unlock()
		if len(found) >= n {
			return found[len(found)-1]
		}
		if time.Now().After(deadline) {
			t.Fatalf("no %d query log records for %s (have %d)", n, name, len(found))
		}
		time.Sleep(10 * time.Millisecond)
	}
}

func inlineList(t *testing.T, name, mode string, rules ...string) policy.List {
	t.Helper()
	bl := &v1alpha1.BlockList{ObjectMeta: metav1.ObjectMeta{Namespace: "default", Name: name}}
	bl.Spec.Mode = mode
	bl.Spec.Sources = []v1alpha1.BlockListSource{{Name: "s", Inline: rules}}
	src, err := policy.ListCompiler{}.CompileSource(context.Background(), bl.Spec.Sources[0], strings.NewReader(strings.Join(rules, "\n")))
	if err != nil {
		t.Fatal(err)
	}
	return policy.List{Object: bl, Compiled: policy.ListCompiler{}.NewList(bl, []policy.CompiledSource{src})}
}

// local marks a list spec.global false: it applies only to the policies
// that name it.
func local(l policy.List) policy.List {
	f := false
	l.Object.Spec.Global = &f
	return l
}

type rig struct {
	dp       *dataplane.Server
	tr       *transport.Server
	log      *recLog
	asked    *sync.Map
	pool     *x509.CertPool
	udp      string
	lanUDP   *dns.Client // from 127.0.0.2: client group default/lan
	otherUDP *dns.Client // from 127.0.0.1: no group, global lists
}

// newRig starts a real data plane (UDP) and DoT/DoH listeners on loopback
// over compiled policies:
//
//	kids (priority 10): client ID "kids"; ads list; safe search
//	lan: 127.0.0.2; ads list, allow list ok, blocked service tiktok,
//	     safe search, rewrite alias.lan -> target.example, broken.lan -> fail.example
//	ads and ok are global: false (the policies' own); malware is global:
//	every client gets it (unmatched ones through (global))
func newRig(t *testing.T) *rig {
	t.Helper()
	ctx := context.Background()
	upAddr, asked := fakeUpstream(t)
	ucfg := upstream.DefaultConfig()
	ucfg.Groups = map[string]upstream.GroupConfig{"default": {Servers: []string{upAddr}, Timeout: time.Second}}
	ucfg.Bootstrap = []string{upAddr}
	res, err := upstream.New(ucfg, nil, nil)
	if err != nil {
		t.Fatal(err)
	}
	cat, err := catalogue.Builtin(ctx, 2)
	if err != nil {
		t.Fatal(err)
	}
	in := policy.Input{
		Lists: []policy.List{
			local(inlineList(t, "ads", "", "||ads.example^")),
			local(inlineList(t, "ok", "allow", "||ok.ads.example^")),
			inlineList(t, "malware", "", "||malware.example^"),
		},
		Groups: []v1alpha1.ClientGroup{
			{ObjectMeta: metav1.ObjectMeta{Namespace: "default", Name: "kids"}, Spec: v1alpha1.ClientGroupSpec{ClientIDs: []string{"kids"}}},
			{ObjectMeta: metav1.ObjectMeta{Namespace: "default", Name: "lan"}, Spec: v1alpha1.ClientGroupSpec{Addresses: []string{"127.0.0.2"}}},
		},
		Policies: []v1alpha1.Policy{
			{ObjectMeta: metav1.ObjectMeta{Namespace: "default", Name: "kids"}, Spec: v1alpha1.PolicySpec{
				Priority: 10, ClientGroupRefs: []string{"kids"}, BlockListRefs: []string{"ads"}, SafeSearch: true}},
			{ObjectMeta: metav1.ObjectMeta{Namespace: "default", Name: "lan"}, Spec: v1alpha1.PolicySpec{
				ClientGroupRefs: []string{"lan"}, BlockListRefs: []string{"ads"}, AllowListRefs: []string{"ok"},
				BlockedServices: []string{"tiktok"}, SafeSearch: true,
				Rewrites: []v1alpha1.Rewrite{{Name: "alias.lan", CNAME: "target.example"}, {Name: "broken.lan", CNAME: "fail.example"}}}},
		},
		Catalogue: cat, SafeSearch: safesearch.New(),
		Settings: policy.Settings{DefaultResponse: "zeroIP", BlockTTL: time.Minute},
	}
	tab, problems := policy.Compile(ctx, in)
	if len(problems) != 0 {
		t.Fatalf("problems %v", problems)
	}
	r := &rig{log: &recLog{}, asked: asked}
	cc := cache.DefaultConfig()
	cc.MaxEntries = 1000
	dp, err := dataplane.New(dataplane.Config{Node: "node-a",
		Listeners: []dataplane.ListenerConfig{{Address: "127.0.0.1:0", Protocols: []string{"udp"}}}, Sockets: 1, Cache: cc},
		dataplane.Options{QueryLogger: r.log})
	if err != nil {
		t.Fatal(err)
	}
	dp.Swap(dataplane.NewSnapshot(dataplane.SnapshotInput{Identifier: tab.Groups(), Blocker: tab,
		Forwarder: res, Router: res, BlockingEnabled: true}))
	if err := dp.Start(ctx); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		sctx, cancel := context.WithTimeout(ctx, 5*time.Second)
		defer cancel()
		if err := dp.Shutdown(sctx); err != nil {
			t.Error(err)
		}
	})
	certs := testpki.New(t)
	l := transport.Listener{Address: "127.0.0.1:0", CertFile: certs.CertFile, KeyFile: certs.KeyFile}
	tr, err := transport.New(dp, transport.Config{DoT: []transport.Listener{l}, DoH: []transport.Listener{l}, ClientIDDomain: "dns.test"}, transport.Options{})
	if err != nil {
		t.Fatal(err)
	}
	if err := tr.Start(ctx); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		sctx, cancel := context.WithTimeout(ctx, 5*time.Second)
		defer cancel()
		if err := tr.Shutdown(sctx); err != nil {
			t.Error(err)
		}
	})
	r.dp, r.tr, r.pool, r.udp = dp, tr, certs.Pool, dp.UDPAddrs()[0].String()
	r.lanUDP = &dns.Client{Net: "udp", Timeout: 3 * time.Second,
		Dialer: &net.Dialer{LocalAddr: &net.UDPAddr{IP: net.IPv4(127, 0, 0, 2)}}}
	r.otherUDP = &dns.Client{Net: "udp", Timeout: 3 * time.Second}
	return r
}

func query(name string, qtype uint16, edns bool) *dns.Msg {
	m := new(dns.Msg)
	m.SetQuestion(name, qtype)
	if edns {
		m.SetEdns0(1232, false)
	}
	return m
}

func (r *rig) exchange(t *testing.T, c *dns.Client, m *dns.Msg) *dns.Msg {
	t.Helper()
	resp, _, err := c.Exchange(m, r.udp)
	if err != nil {
		t.Fatalf("%s: %v", m.Question[0].Name, err)
	}
	return resp
}

// doh posts a query to /dns-query/<id> over HTTPS.
func (r *rig) doh(t *testing.T, id string, m *dns.Msg) *dns.Msg {
	t.Helper()
	b, err := m.Pack()
	if err != nil {
		t.Fatal(err)
	}
	hc := &http.Client{Timeout: 3 * time.Second, Transport: &http.Transport{TLSClientConfig: &tls.Config{RootCAs: r.pool, ServerName: "dns.test"}}}
	defer hc.CloseIdleConnections()
	u := "https://" + r.tr.Addrs("doh")[0].String() + "/dns-query/" + id
	resp, err := hc.Post(u, "application/dns-message", bytes.NewReader(b))
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	body, err := io.ReadAll(resp.Body)
	if err != nil || resp.StatusCode != http.StatusOK {
		t.Fatalf("DoH %s: %d %v %q", u, resp.StatusCode, err, body)
	}
	out := new(dns.Msg)
	if err := out.Unpack(body); err != nil {
		t.Fatal(err)
	}
	return out
}

// dot asks over DNS over TLS with server name <id>.dns.test.
func (r *rig) dot(t *testing.T, id string, m *dns.Msg) *dns.Msg {
	t.Helper()
	c := &dns.Client{Net: "tcp-tls", Timeout: 3 * time.Second, TLSConfig: &tls.Config{RootCAs: r.pool, ServerName: id + ".dns.test"}}
	resp, _, err := c.Exchange(m, r.tr.Addrs("dot")[0].String())
	if err != nil {
		t.Fatal(err)
	}
	return resp
}

func answers(m *dns.Msg) string {
	var parts []string
	for _, rr := range m.Answer {
		f := strings.Fields(rr.String())
		parts = append(parts, strings.Join(append([]string{f[0]}, f[3:]...), " "))
	}
	return strings.Join(parts, "; ")
}

func ede(m *dns.Msg) *dns.EDNS0_EDE {
	opt := m.IsEdns0()
	if opt == nil {
		return nil
	}
	for _, o := range opt.Option {
		if e, ok := o.(*dns.EDNS0_EDE); ok {
			return e
		}
	}
	return nil
}

// A client ID from DoH or DoT puts the client in the ClientGroup that lists
// it and under that group's policy; the log record keeps the ID.
func TestClientIDSelectsPolicy(t *testing.T) {
	r := newRig(t)
	for _, tc := range []struct {
		transport string
		ask       func(*testing.T, string, *dns.Msg) *dns.Msg
		name      string
	}{{"doh", r.doh, "www.ads.example."}, {"dot", r.dot, "cdn.ads.example."}} {
		t.Run(tc.transport, func(t *testing.T) {
			resp := tc.ask(t, "kids", query(tc.name, dns.TypeA, false))
			if got := answers(resp); got != tc.name+" A 0.0.0.0" {
				t.Fatalf("kids %s: %q\n%v", tc.name, got, resp)
			}
			rec := r.log.last(t, tc.name, 1)
			if rec.ClientID != "kids" || rec.Policy != "default/kids" || rec.Status != dataplane.StatusBlocked ||
				rec.List != "default/ads" || strings.Join(rec.Groups, ",") != "default/kids" || rec.Transport.String() != tc.transport {
				t.Fatalf("record %+v", rec)
			}
			// the global malware list applies through the kids policy too
			if got := answers(tc.ask(t, "kids", query("malware.example.", dns.TypeA, false))); got != "malware.example. A 0.0.0.0" {
				t.Fatalf("kids malware.example: %q", got)
			}
			// another ID is in no group: global lists only, ads pass
			if got := answers(tc.ask(t, "adult", query(tc.name, dns.TypeA, false))); got != tc.name+" A 198.51.100.7" {
				t.Fatalf("adult %s: %q", tc.name, got)
			}
			if rec := r.log.last(t, tc.name, 2); rec.ClientID != "adult" || len(rec.Groups) != 0 || rec.Policy != policy.GlobalPolicy {
				t.Fatalf("adult record %+v", rec)
			}
		})
	}
	// safe search for the kids ID over DoH, chased to the vendor's address
	resp := r.doh(t, "kids", query("www.google.com.", dns.TypeA, false))
	if got := answers(resp); got != "www.google.com. CNAME forcesafesearch.google.com.; forcesafesearch.google.com. A "+safeSearchIP {
		t.Fatalf("kids www.google.com: %q", got)
	}
}

// Block answers carry an Extended DNS Error naming policy, list and rule
// when the query had EDNS; without EDNS there is no OPT at all.
func TestBlockEDE(t *testing.T) {
	r := newRig(t)
	cases := []struct {
		client *dns.Client
		name   string
		code   uint16
		text   string
	}{
		{r.lanUDP, "www.ads.example.", dns.ExtendedErrorCodeBlocked, "policy default/lan list default/ads rule ||ads.example^"},
		// the rule's name is the name asked: its text comes from the
		// question (Decision.RuleIsName), in lower case
		{r.lanUDP, "ads.example.", dns.ExtendedErrorCodeBlocked, "policy default/lan list default/ads rule ||ads.example^"},
		{r.lanUDP, "ADS.Example.", dns.ExtendedErrorCodeBlocked, "policy default/lan list default/ads rule ||ads.example^"},
		{r.lanUDP, "www.tiktok.com.", dns.ExtendedErrorCodeFiltered, "policy default/lan list service:tiktok rule ||tiktok.com^"},
		{r.otherUDP, "x.malware.example.", dns.ExtendedErrorCodeBlocked, "policy (global) list default/malware rule ||malware.example^"},
	}
	for _, k := range cases {
		resp := r.exchange(t, k.client, query(k.name, dns.TypeA, true))
		e := ede(resp)
		if e == nil || e.InfoCode != k.code || e.ExtraText != k.text {
			t.Errorf("%s: EDE %v, want %d %q\n%v", k.name, e, k.code, k.text, resp)
		}
		if got := answers(resp); got != k.name+" A 0.0.0.0" {
			t.Errorf("%s: answer %q", k.name, got)
		}
		plain := r.exchange(t, k.client, query(k.name, dns.TypeA, false))
		if plain.IsEdns0() != nil || answers(plain) != k.name+" A 0.0.0.0" {
			t.Errorf("%s without EDNS: %v", k.name, plain)
		}
	}
	// answers that are not blocks carry no EDE
	if resp := r.exchange(t, r.lanUDP, query("www.example.org.", dns.TypeA, true)); ede(resp) != nil || resp.IsEdns0() == nil {
		t.Errorf("forwarded answer: %v", resp)
	}
}

// Safe search and CNAME rewrites resolve the CNAME target through the
// upstream (cached by the target name); an upstream failure is SERVFAIL.
func TestCNAMEChase(t *testing.T) {
	r := newRig(t)
	want := "www.google.com. CNAME forcesafesearch.google.com.; forcesafesearch.google.com. A " + safeSearchIP
	for i := range 2 {
		resp := r.exchange(t, r.lanUDP, query("www.google.com.", dns.TypeA, i == 1))
		if got := answers(resp); got != want || resp.Rcode != dns.RcodeSuccess {
			t.Fatalf("try %d: %q %s", i, got, dns.RcodeToString[resp.Rcode])
		}
	}
	if n := askedCount(r.asked, "forcesafesearch.google.com."); n != 1 {
		t.Fatalf("upstream asked %d times for the target, want 1 (second answer from the cache)", n)
	}
	if n := askedCount(r.asked, "www.google.com."); n != 0 {
		t.Fatalf("upstream asked for www.google.com %d times", n)
	}
	if rec := r.log.last(t, "www.google.com.", 2); rec.Status != dataplane.StatusRewritten || rec.List != policy.ListSafeSearch || rec.Policy != "default/lan" {
		t.Fatalf("record %+v", rec)
	}
	// the target has no AAAA: CNAME and NODATA
	resp := r.exchange(t, r.lanUDP, query("www.google.com.", dns.TypeAAAA, false))
	if got := answers(resp); got != "www.google.com. CNAME forcesafesearch.google.com." || resp.Rcode != dns.RcodeSuccess {
		t.Fatalf("AAAA: %q %s", got, dns.RcodeToString[resp.Rcode])
	}
	// a CNAME query gets the CNAME only, nothing forwarded
	resp = r.exchange(t, r.lanUDP, query("www.google.com.", dns.TypeCNAME, false))
	if got := answers(resp); got != "www.google.com. CNAME forcesafesearch.google.com." {
		t.Fatalf("CNAME: %q", got)
	}
	// CNAME rewrite
	resp = r.exchange(t, r.lanUDP, query("alias.lan.", dns.TypeA, true))
	if got := answers(resp); got != "alias.lan. CNAME target.example.; target.example. A 198.51.100.7" {
		t.Fatalf("rewrite: %q", got)
	}
	// upstream failure for the target
	resp = r.exchange(t, r.lanUDP, query("broken.lan.", dns.TypeA, false))
	if resp.Rcode != dns.RcodeServerFailure || len(resp.Answer) != 0 {
		t.Fatalf("broken target: %v", resp)
	}
	// a client without safe search gets the upstream's answer for the name itself
	if got := answers(r.exchange(t, r.otherUDP, query("www.google.com.", dns.TypeA, false))); got != "www.google.com. A 198.51.100.7" {
		t.Fatalf("no safe search: %q", got)
	}
}

// A global BlockList applies to every client: as policy "(global)" to
// clients no policy matches, through their policy to the others; a
// global: false list only to the policies that name it.
func TestGlobalLists(t *testing.T) {
	r := newRig(t)
	if got := answers(r.exchange(t, r.otherUDP, query("malware.example.", dns.TypeA, false))); got != "malware.example. A 0.0.0.0" {
		t.Fatalf("unmatched client: %q", got)
	}
	rec := r.log.last(t, "malware.example.", 1)
	if rec.Status != dataplane.StatusBlocked || rec.Reason != dataplane.ReasonBlockList || rec.Policy != policy.GlobalPolicy ||
		rec.List != "default/malware" || rec.RuleText() != "||malware.example^" {
		t.Fatalf("record %+v", rec)
	}
	// ads is global: false, named by policies: not for the others
	if got := answers(r.exchange(t, r.otherUDP, query("ads.example.", dns.TypeA, false))); got != "ads.example. A 198.51.100.7" {
		t.Fatalf("unmatched client, local list: %q", got)
	}
	// lan's policy does not name malware: it applies to lan all the same
	if got := answers(r.exchange(t, r.lanUDP, query("malware.example.", dns.TypeA, false))); got != "malware.example. A 0.0.0.0" {
		t.Fatalf("lan client: %q", got)
	}
	if rec := r.log.last(t, "malware.example.", 2); rec.Policy != "default/lan" || rec.List != "default/malware" {
		t.Fatalf("lan record %+v", rec)
	}
}

// Allowed queries are logged as answered (then cached) with reason allowed
// and the allowing list; blocks as blocked with list and rule.
func TestLogAllowVsBlock(t *testing.T) {
	r := newRig(t)
	for i, st := range []dataplane.Status{dataplane.StatusAnswered, dataplane.StatusCached} {
		resp := r.exchange(t, r.lanUDP, query("ok.ads.example.", dns.TypeA, false))
		if got := answers(resp); got != "ok.ads.example. A 198.51.100.7" {
			t.Fatalf("allowed: %q", got)
		}
		rec := r.log.last(t, "ok.ads.example.", i+1)
		if rec.Status != st || rec.Reason != dataplane.ReasonAllowed || rec.List != "default/ok" || rec.Policy != "default/lan" ||
			rec.Rule != "" || rec.Upstream == "" && st == dataplane.StatusAnswered {
			t.Fatalf("allowed record %d: %+v (reason %s)", i, rec, rec.Reason)
		}
	}
	r.exchange(t, r.lanUDP, query("www.ads.example.", dns.TypeA, false))
	rec := r.log.last(t, "www.ads.example.", 1)
	if rec.Status != dataplane.StatusBlocked || rec.Reason != dataplane.ReasonBlockList || rec.List != "default/ads" ||
		rec.RuleText() != "||ads.example^" || rec.Policy != "default/lan" || rec.Upstream != "" {
		t.Fatalf("blocked record: %+v", rec)
	}
	for i, n := range []string{"ads.example.", "ADS.Example."} {
		r.exchange(t, r.lanUDP, query(n, dns.TypeA, false))
		rec = r.log.last(t, "ads.example.", i+1)
		if rec.Status != dataplane.StatusBlocked || rec.List != "default/ads" || rec.RuleText() != "||ads.example^" {
			t.Fatalf("blocked record of %s, the rule its name: %+v, rule %q", n, rec, rec.RuleText())
		}
	}
	// passing through a policy with no match: answered, no list
	r.exchange(t, r.lanUDP, query("plain.example.", dns.TypeA, false))
	rec = r.log.last(t, "plain.example.", 1)
	if rec.Status != dataplane.StatusAnswered || rec.Reason != dataplane.ReasonNone || rec.List != "" || rec.Rule != "" || rec.Policy != "default/lan" {
		t.Fatalf("passed record: %+v (reason %q)", rec, rec.Reason)
	}
}
