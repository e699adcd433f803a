// Package blocking_test runs blocking end to end: BlockList objects in a
// real sqlite store, list bodies served over HTTP on loopback, the
// BlockList reconciler fetching and compiling them, compiled policies and
// client groups, and a real data plane server answered over UDP.
package blocking_test

import (
	"context"
	"net/http"
	"net/http/httptest"
	"net/netip"
	"path/filepath"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/miekg/dns"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime"

	"github.com/svcdns/svc/api/v1alpha1"
	"github.com/svcdns/svc/controllers/blocklists"
	"github.com/svcdns/svc/dataplane"
	"github.com/svcdns/svc/dataplane/blocklist"
	"github.com/svcdns/svc/dataplane/catalogue"
	"github.com/svcdns/svc/dataplane/policy"
	"github.com/svcdns/svc/dataplane/policy/toggle"
	"github.com/svcdns/svc/dataplane/safesearch"
	"github.com/svcdns/svc/internal/listfetch"
	"github.com/svcdns/svc/internal/store"
	"github.com/svcdns/svc/internal/store/sqlite"
	"github.com/svcdns/svc/internal/validation"
)

func apply(t *testing.T, s store.Store, bl *v1alpha1.BlockList) {
	t.Helper()
	bl.APIVersion, bl.Kind = "service.io/v1alpha1", "BlockList"
	m, err := runtime.DefaultUnstructuredConverter.ToUnstructured(bl)
	if err != nil {
		t.Fatal(err)
	}
	delete(m, "status")
	if _, err := s.Apply(context.Background(), &unstructured.Unstructured{Object: m}, store.ApplyOptions{Manager: store.ManagerAPI}); err != nil {
		t.Fatalf("apply %s: %v", bl.Name, err)
	}
}

func getList(t *testing.T, s store.Store, name string) (v1alpha1.BlockList, string) {
	t.Helper()
	u, err := s.Get(context.Background(), "BlockList", "default", name)
	if err != nil {
		t.Fatal(err)
	}
	var bl v1alpha1.BlockList
	if err := runtime.DefaultUnstructuredConverter.FromUnstructured(u.Object, &bl); err != nil {
		t.Fatal(err)
	}
	return bl, u.GetResourceVersion()
}

func blockList(name, response string, srcs ...v1alpha1.BlockListSource) *v1alpha1.BlockList {
	bl := &v1alpha1.BlockList{ObjectMeta: metav1.ObjectMeta{Namespace: "default", Name: name}}
	bl.Spec.Response, bl.Spec.Sources = response, srcs
	if response == "customIP" {
		bl.Spec.CustomIP = &v1alpha1.CustomIP{V4: "192.0.2.99"}
	}
	return bl
}

type clock struct{ ns atomic.Int64 }

func (c *clock) now() time.Time  { return time.Unix(0, c.ns.Load()).UTC() }
func (c *clock) set(t time.Time) { c.ns.Store(t.UnixNano()) }

func TestBlockingEndToEnd(t *testing.T) {
	ctx := context.Background()
	// list server on loopback
	var hits atomic.Int64
	var failing atomic.Bool
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		hits.Add(1)
		if failing.Load() {
			http.Error(w, "down", http.StatusBadGateway)
			return
		}
		if r.Header.Get("If-None-Match") == `"v1"` {
			w.WriteHeader(http.StatusNotModified)
			return
		}
		w.Header().Set("ETag", `"v1"`)
		_, _ = w.Write([]byte("! ads\n||ads.example^\n||tracker.example^\nnot a rule!!\n||x.example^$important\n"))
	}))
	defer srv.Close()

	v, err := validation.New()
	if err != nil {
		t.Fatal(err)
	}
	st, err := sqlite.NewStore(ctx, filepath.Join(t.TempDir(), "state.db"), v, sqlite.Options{})
	if err != nil {
		t.Fatal(err)
	}
	defer st.Close()
	fetcher, err := listfetch.New(listfetch.Options{Dir: t.TempDir(), AllowLocal: true})
	if err != nil {
		t.Fatal(err)
	}
	off := false
	apply(t, st, blockList("ads", "", v1alpha1.BlockListSource{Name: "remote", URL: srv.URL + "/ads.txt"},
		v1alpha1.BlockListSource{Name: "local", Inline: []string{"||local-ads.example^", "||keep.example^"}, Exclude: []string{"||keep.example^", "||gone.example^"}},
		v1alpha1.BlockListSource{Name: "off", Inline: []string{"||off.example^"}, Enabled: &off}))
	apply(t, st, blockList("custom", "customIP", v1alpha1.BlockListSource{Name: "s", Inline: []string{"||custom.example^"}}))
	apply(t, st, blockList("nx", "nxdomain", v1alpha1.BlockListSource{Name: "s", Inline: []string{"||nx.example^"}}))
	apply(t, st, blockList("ref", "refused", v1alpha1.BlockListSource{Name: "s", Inline: []string{"||ref.example^"}}))
	apply(t, st, blockList("page", "blockPage", v1alpha1.BlockListSource{Name: "s", Inline: []string{"||page.example^"}}))

	clk := &clock{}
	clk.set(time.Date(2025, 6, 2, 12, 0, 0, 0, time.UTC))
	var mu sync.Mutex
	lists := map[string]*blocklist.List{}
	var fetches []string // OnFetch outcomes, "list result"
	rec := blocklists.New(blocklists.Options[policy.CompiledSource, *blocklist.List]{
		Store: st, Fetcher: fetcher, Compiler: policy.ListCompiler{}, AllowDegraded: true, Now: clk.now,
		OnFetch: func(list, result string) {
			mu.Lock()
			fetches = append(fetches, list+" "+result)
			mu.Unlock()
		},
		OnList: func(name string, l *blocklist.List, ok bool) {
			mu.Lock()
			defer mu.Unlock()
			if ok {
				lists[name] = l
			} else {
				delete(lists, name)
			}
		},
	})
	for _, n := range []string{"ads", "custom", "nx", "ref", "page"} {
		next, err := rec.Reconcile(ctx, "default", n)
		if err != nil {
			t.Fatalf("reconcile %s: %v", n, err)
		}
		if n == "ads" && next != 24*time.Hour {
			t.Fatalf("ads requeue after %s, want 24h", next)
		}
	}
	ads, rv := getList(t, st, "ads")
	s := ads.Status
	if s.Entries != 3 || s.Invalid != 1 || s.Unsupported != 1 || s.RuleCount != 3 || s.ObservedGeneration != ads.Generation || s.LastFetched == nil {
		t.Fatalf("ads status %+v", s)
	}
	if len(s.Sources) != 3 || s.Sources[2].Name != "remote" || len(s.Sources[2].Digest) != 64 || s.Sources[2].ETag != `"v1"` ||
		s.Sources[1].Enabled == nil || *s.Sources[1].Enabled || s.Sources[0].Excluded != 1 || strings.Join(s.Sources[0].StaleExcludes, ",") != "||gone.example^" {
		t.Fatalf("ads sources %+v", s.Sources)
	}
	if c := s.Conditions; len(c) != 2 || c[0].Type != "Ready" || c[0].Status != metav1.ConditionTrue || c[1].Type != "Degraded" || c[1].Status != metav1.ConditionFalse {
		t.Fatalf("conditions %+v", c)
	}
	// not due: no fetch, no status write
	clk.set(clk.now().Add(time.Hour))
	if _, err := rec.Reconcile(ctx, "default", "ads"); err != nil {
		t.Fatal(err)
	}
	if _, rv2 := getList(t, st, "ads"); rv2 != rv || hits.Load() != 1 {
		t.Fatalf("unchanged reconcile wrote status (rv %s -> %s) or fetched (%d)", rv, rv2, hits.Load())
	}
	// due after the refresh interval: a conditional GET (304) keeps the body
	clk.set(clk.now().Add(24 * time.Hour))
	if _, err := rec.Reconcile(ctx, "default", "ads"); err != nil {
		t.Fatal(err)
	}
	if ads2, _ := getList(t, st, "ads"); hits.Load() != 2 || ads2.Status.Sources[2].Digest != s.Sources[2].Digest || !ads2.Status.LastFetched.After(s.LastFetched.Time) {
		t.Fatalf("refresh: hits %d status %+v", hits.Load(), ads2.Status)
	}
	// the list server fails: the cached body keeps serving (degraded)
	failing.Store(true)
	clk.set(clk.now().Add(24 * time.Hour))
	if _, err := rec.Reconcile(ctx, "default", "ads"); err != nil {
		t.Fatal(err)
	}
	failing.Store(false)
	mu.Lock()
	if got := strings.Join(fetches, ","); got != "default/ads ok,default/ads not_modified,default/ads degraded" {
		t.Fatalf("fetch outcomes %q", got)
	}
	mu.Unlock()

	// policies over the compiled lists
	cat, err := catalogue.Builtin(ctx, 6)
	if err != nil {
		t.Fatal(err)
	}
	var in policy.Input
	mu.Lock()
	for _, n := range []string{"ads", "custom", "nx", "ref", "page"} {
		bl, _ := getList(t, st, n)
		// the policies' own lists (spec.global false): night names ads only
		f := false
		bl.Spec.Global = &f
		in.Lists = append(in.Lists, policy.List{Object: &bl, Compiled: lists["default/"+n]})
	}
	mu.Unlock()
	in.Groups = []v1alpha1.ClientGroup{{ObjectMeta: metav1.ObjectMeta{Namespace: "default", Name: "loopback"},
		Spec: v1alpha1.ClientGroupSpec{Addresses: []string{"127.0.0.0/8"}}}}
	in.Policies = []v1alpha1.Policy{
		{ObjectMeta: metav1.ObjectMeta{Namespace: "default", Name: "base"}, Spec: v1alpha1.PolicySpec{
			ClientGroupRefs: []string{"loopback"}, BlockListRefs: []string{"ads", "custom", "nx", "ref", "page"},
			BlockedServices: []string{"tiktok"}, SafeSearch: true, BlockTTL: "2m"}},
		{ObjectMeta: metav1.ObjectMeta{Namespace: "default", Name: "night"}, Spec: v1alpha1.PolicySpec{
			Priority: 10, BlockListRefs: []string{"ads"}, BlockMode: "nxdomain",
			Schedule: &v1alpha1.Schedule{Start: "22:00", End: "06:00"}}},
	}
	in.Catalogue, in.SafeSearch, in.Now = cat, safesearch.New(), clk.now
	in.Settings = policy.Settings{DefaultResponse: "zeroIP", BlockTTL: 10 * time.Minute,
		BlockPageIPv4: netip.MustParseAddr("192.0.2.80"), BlockPageIPv6: netip.MustParseAddr("2001:db8::80")}
	tab, problems := policy.Compile(ctx, in)
	if len(problems) != 0 {
		t.Fatalf("problems %v", problems)
	}

	s2, err := dataplane.New(dataplane.Config{Node: "node-a",
		Listeners: []dataplane.ListenerConfig{{Address: "127.0.0.1:0", Protocols: []string{"udp"}}}, Sockets: 1},
		dataplane.Options{})
	if err != nil {
		t.Fatal(err)
	}
	s2.Swap(dataplane.NewSnapshot(dataplane.SnapshotInput{Identifier: tab.Groups(), Blocker: tab, BlockingEnabled: true}))
	if err := s2.Start(ctx); err != nil {
		t.Fatal(err)
	}
	defer func() {
		sctx, cancel := context.WithTimeout(ctx, 5*time.Second)
		defer cancel()
		if err := s2.Shutdown(sctx); err != nil {
			t.Error(err)
		}
	}()
	addr := s2.UDPAddrs()[0].String()
	c := &dns.Client{Net: "udp", Timeout: 3 * time.Second}
	ask := func(t *testing.T, name string, qtype uint16) *dns.Msg {
		t.Helper()
		m := new(dns.Msg)
		m.SetQuestion(name, qtype)
		r, _, err := c.Exchange(m, addr)
		if err != nil {
			t.Fatal(err)
		}
		return r
	}
	type tc struct {
		name   string
		qtype  uint16
		rcode  int
		answer string // "" = no answer records
		ttl    uint32
	}
	check := func(t *testing.T, cases []tc) {
		for _, k := range cases {
			r := ask(t, k.name, k.qtype)
			got := ""
			if len(r.Answer) > 0 {
				got = strings.Join(strings.Fields(r.Answer[0].String())[3:], " ")
			}
			if r.Rcode != k.rcode || got != k.answer || (k.ttl != 0 && r.Answer[0].Header().Ttl != k.ttl) {
				t.Errorf("%s %s: rcode %s answer %q; want %s %q ttl %d\n%v", k.name, dns.TypeToString[k.qtype],
					dns.RcodeToString[r.Rcode], got, dns.RcodeToString[k.rcode], k.answer, k.ttl, r)
			}
		}
	}
	t.Run("block answers", func(t *testing.T) {
		check(t, []tc{
			{"www.ads.example.", dns.TypeA, dns.RcodeSuccess, "A 0.0.0.0", 120},   // zeroIP (default), policy TTL
			{"tracker.example.", dns.TypeAAAA, dns.RcodeSuccess, "AAAA ::", 120},  // from the URL source
			{"local-ads.example.", dns.TypeMX, dns.RcodeSuccess, "", 0},           // zeroIP, other type: NODATA
			{"keep.example.", dns.TypeA, dns.RcodeRefused, "", 0},                 // excluded rule: passes (no upstream: REFUSED)
			{"off.example.", dns.TypeA, dns.RcodeRefused, "", 0},                  // disabled source: passes
			{"custom.example.", dns.TypeA, dns.RcodeSuccess, "A 192.0.2.99", 120}, // list customIP
			{"custom.example.", dns.TypeAAAA, dns.RcodeSuccess, "", 0},            // no v6: NODATA
			{"nx.example.", dns.TypeA, dns.RcodeNameError, "", 0},                 // nxdomain
			{"ref.example.", dns.TypeA, dns.RcodeRefused, "", 0},                  // refused
			{"page.example.", dns.TypeA, dns.RcodeSuccess, "A 192.0.2.80", 120},   // block page
			{"page.example.", dns.TypeAAAA, dns.RcodeSuccess, "AAAA 2001:db8::80", 120},
			{"www.tiktok.com.", dns.TypeA, dns.RcodeSuccess, "A 0.0.0.0", 120}, // blocked service
			{"www.google.com.", dns.TypeA, dns.RcodeSuccess, "CNAME forcesafesearch.google.com.", 0},
		})
	})
	t.Run("schedule", func(t *testing.T) {
		clk.set(time.Date(2025, 6, 2, 23, 30, 0, 0, time.UTC))
		check(t, []tc{{"www.ads.example.", dns.TypeA, dns.RcodeNameError, "", 0}, {"nx.example.", dns.TypeA, dns.RcodeRefused, "", 0}})
		st, _ := tab.State("default/base")
		if st.Effective || len(st.ShadowedBy) != 1 || st.ShadowedBy[0].Policy != "default/night" {
			t.Fatalf("state of base at night: %+v", st)
		}
		clk.set(time.Date(2025, 6, 3, 6, 0, 0, 0, time.UTC))
		check(t, []tc{{"www.ads.example.", dns.TypeA, dns.RcodeSuccess, "A 0.0.0.0", 120}})
	})
	t.Run("toggle", func(t *testing.T) {
		tg := toggle.New(s2, toggle.RealClock(), "node-a", true)
		if _, err := tg.Disable(time.Hour, time.Time{}); err != nil {
			t.Fatal(err)
		}
		check(t, []tc{{"www.ads.example.", dns.TypeA, dns.RcodeRefused, "", 0}})
		if st := tg.Enable(); !st.Blocking {
			t.Fatalf("state %+v", st)
		}
		check(t, []tc{{"www.ads.example.", dns.TypeA, dns.RcodeSuccess, "A 0.0.0.0", 120}})
	})
}
