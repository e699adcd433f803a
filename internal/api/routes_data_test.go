package api

import (
	"bufio"
	"context"
	"encoding/json"
	"fmt"
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/svcdns/svc/api/v1alpha1"
	"github.com/svcdns/svc/dataplane/blocklist"
	"github.com/svcdns/svc/dataplane/catalogue"
	"github.com/svcdns/svc/dataplane/policy"
	"github.com/svcdns/svc/internal/auth"
	"github.com/svcdns/svc/internal/querylog"
	"github.com/svcdns/svc/internal/store"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
)

// The adapters below are what the node wires (internal/api itself must not
// import the data plane; its tests may).

type catalogueAdapter struct{ c *catalogue.Catalogue }

func (a catalogueAdapter) CatalogueInfo(context.Context) (CatalogueInfo, error) {
	b, err := json.Marshal(a.c.Info())
	if err != nil {
		return CatalogueInfo{}, err
	}
	var out CatalogueInfo
	return out, json.Unmarshal(b, &out)
}

func (a catalogueAdapter) CatalogueCategories(context.Context) ([]CatalogueCategory, error) {
	cs := a.c.Categories()
	out := make([]CatalogueCategory, len(cs))
	for i, c := range cs {
		out[i] = CatalogueCategory(c)
	}
	return out, nil
}

func (a catalogueAdapter) CatalogueServices(context.Context) ([]CatalogueService, error) {
	ss := a.c.Services()
	out := make([]CatalogueService, len(ss))
	for i, s := range ss {
		out[i] = CatalogueService(s)
	}
	return out, nil
}

func (a catalogueAdapter) CatalogueIconSVG(_ context.Context, id string, onDark bool) ([]byte, bool) {
	return a.c.IconSVG(id, onDark)
}

type policyAdapter struct{ t *policy.Table }

func (a policyAdapter) PolicyState(_ context.Context, ns, name string) (PolicyState, bool, error) {
	st, ok := a.t.State(ns + "/" + name)
	if !ok {
		return PolicyState{}, false, nil
	}
	out := PolicyState{Policy: st.Policy, Priority: st.Priority, Active: st.Active, Scheduled: st.Scheduled,
		Effective: st.Effective, Groups: st.Groups, Problems: st.Problems, At: st.At, ShadowedBy: []PolicyShadow{}}
	for _, s := range st.ShadowedBy {
		out.ShadowedBy = append(out.ShadowedBy, PolicyShadow(s))
	}
	return out, true, nil
}

// inlineRules normalises inline sources; the node also reads the fetcher's
// cached bodies of url and configMapRef sources.
type inlineRules struct{}

func (inlineRules) SourceRules(_ context.Context, src BlockListSource) ([]string, bool, error) {
	if len(src.Inline) == 0 {
		return nil, false, nil
	}
	return blocklist.NormalizeRules(blocklist.Format(src.Format), src.Subdomains, strings.Join(src.Inline, "\n")), true, nil
}

type refresher struct{ got []string }

func (r *refresher) RefreshBlockList(_ context.Context, ns, name string) error {
	r.got = append(r.got, ns+"/"+name)
	return nil
}

type blockingState struct{}

func (blockingState) BlockingState(context.Context) (BlockingState, error) {
	return BlockingState{Blocking: true, Configured: true, Scope: "node"}, nil
}

// roleToken binds role to a new user and returns a bearer token of it.
func roleToken(t *testing.T, e *testEnv, user, role string) *client {
	t.Helper()
	e.addUser(user, "password-"+user, "g-"+role)
	c := e.login(user, "password-"+user)
	r := c.do("POST", "/auth/tokens", map[string]any{})
	if r.code != 201 {
		t.Fatalf("token: %d %s", r.code, r.body)
	}
	e.clock.add(2 * time.Minute)
	return e.withToken(r.json(t)["token"].(string))
}

func bindRoles(o *Options) {
	for _, r := range auth.Roles() {
		o.RBACBindings = append(o.RBACBindings, auth.Binding{Name: "b-" + r, Subject: auth.Subject{Kind: "Group", Name: "g-" + r}, Role: r, Scope: auth.ClusterScope})
	}
}

func TestQueryLogRoutes(t *testing.T) {
	ctx := context.Background()
	qdir := t.TempDir()
	cfg := querylog.DefaultConfig()
	cfg.DataDir, cfg.Node, cfg.ExcludeSUDN = qdir, "node-a", false
	w, err := querylog.Open(ctx, cfg, querylog.Options{MaintainEvery: -1})
	if err != nil {
		t.Fatal(err)
	}
	defer w.Close()
	now := time.Now().UTC()
	for i := range 30 {
		st, list := "answered", ""
		if i%3 == 0 {
			st, list = "blocked", "default/ads"
		}
		w.Enqueue(querylog.Row{Time: now.Add(time.Duration(i-30) * time.Second), Node: "node-a", Client: fmt.Sprintf("192.0.2.%d", i%2+1),
			Domain: fmt.Sprintf("host%d.example", i%5), QType: "A", Rcode: "NOERROR", Status: st, List: list, Policy: "default/kids",
			Upstream: "1.1.1.1", Duration: time.Millisecond})
	}
	if err := w.Flush(ctx); err != nil {
		t.Fatal(err)
	}
	e := newEnv(t, func(o *Options, d *Deps) { bindRoles(o); d.QueryLog = w })
	aud := roleToken(t, e, "aud", auth.RoleAuditor)
	adm := roleToken(t, e, "adm", auth.RoleAdmin) // the admin role, not the built-in administrator

	if r := adm.do("GET", "/queries", nil); r.code != 403 || r.errKey(t) != KeyForbidden {
		t.Fatalf("admin role without querylogs.read: %d %s", r.code, r.body)
	}
	r := aud.do("GET", "/queries?limit=4", nil)
	if r.code != 200 {
		t.Fatalf("queries: %d %s", r.code, r.body)
	}
	var page QueryPage
	_ = json.Unmarshal(r.body, &page)
	if len(page.Items) != 4 || page.Continue == "" || page.Items[0].ID <= page.Items[1].ID {
		t.Fatalf("page: %s", r.body)
	}
	r = aud.do("GET", "/queries?limit=50&continue="+page.Continue, nil)
	var page2 QueryPage
	_ = json.Unmarshal(r.body, &page2)
	if r.code != 200 || len(page2.Items) != 26 || page2.Continue != "" || !strings.Contains(string(r.body), `"continue":""`) {
		t.Fatalf("second page: %d %s", r.code, r.body)
	}
	r = aud.do("GET", "/queries?status_class=blocked&domain=HOST0.example.&policy=default/kids", nil)
	_ = json.Unmarshal(r.body, &page)
	for _, it := range page.Items {
		if it.Status != "blocked" || it.Domain != "host0.example" {
			t.Fatalf("filtered: %s", r.body)
		}
	}
	if len(page.Items) != 2 { // i = 0, 15
		t.Fatalf("filtered rows: %s", r.body)
	}
	for _, bad := range []string{"status=nope", "since=yesterday", "limit=5000", "continue=zzz", "domain_match=regex", "client=a&client=b"} {
		if r := aud.do("GET", "/queries?"+bad, nil); r.code != 400 || r.errKey(t) != KeyInvalid {
			t.Errorf("%s: %d %s", bad, r.code, r.body)
		}
	}
	r = aud.do("GET", "/queries/blocked?limit=100", nil)
	var bp BlockedPage
	_ = json.Unmarshal(r.body, &bp)
	if r.code != 200 || len(bp.Items) != 10 || bp.Items[0].List != "default/ads" {
		t.Fatalf("blocked: %d %s", r.code, r.body)
	}
	r = aud.do("GET", "/queries/clients?window=1h", nil)
	var cp ClientsPage
	_ = json.Unmarshal(r.body, &cp)
	if r.code != 200 || len(cp.Items) != 2 || cp.Items[0].Count != 15 || cp.Items[0].LastSeen == nil {
		t.Fatalf("clients: %d %s", r.code, r.body)
	}
	r = aud.do("GET", "/queries/clients/timeseries?step=5m&from="+now.Add(-time.Hour).Format(time.RFC3339), nil)
	if r.code != 200 || !strings.Contains(string(r.body), `"scope":"node"`) || !strings.Contains(string(r.body), "192.0.2.1") {
		t.Fatalf("timeseries: %d %s", r.code, r.body)
	}
	r = aud.do("GET", "/stats/summary?window=1h", nil)
	if r.code != 200 || r.json(t)["total"].(float64) != 30 || r.json(t)["blocked"].(float64) != 10 {
		t.Fatalf("summary: %d %s", r.code, r.body)
	}
	r = aud.do("GET", "/stats/top?dim=domains&top=2&blocked=true&window=7d", nil)
	var top querylog.TopBody
	_ = json.Unmarshal(r.body, &top)
	if r.code != 200 || len(top.Items) != 2 || top.Dim != "domains" || !top.Blocked {
		t.Fatalf("top: %d %s", r.code, r.body)
	}
	for _, bad := range []string{"/stats/top?top=101", "/stats/top?dim=nope", "/stats/summary?window=forever", "/queries/clients/timeseries?step=1s"} {
		if r := aud.do("GET", bad, nil); r.code != 400 || r.errKey(t) != KeyInvalid {
			t.Errorf("%s: %d %s", bad, r.code, r.body)
		}
	}

	// Stream: replay after Last-Event-ID, then live rows, unbuffered.
	if r := aud.do("GET", "/queries/stream?status=nope", nil, "Accept", "text/event-stream"); r.code != 400 || r.errKey(t) != KeyInvalid {
		t.Fatalf("stream bad filter: %d %s", r.code, r.body)
	}
	if r := adm.do("GET", "/queries/stream", nil); r.code != 403 {
		t.Fatalf("stream as admin: %d", r.code)
	}
	sctx, cancel := context.WithTimeout(ctx, 20*time.Second)
	defer cancel()
	req, _ := http.NewRequestWithContext(sctx, "GET", e.base+"/queries/stream?status=blocked", nil)
	req.Header.Set("Authorization", "Bearer "+aud.token)
	req.Header.Set("Last-Event-ID", "20")
	req.Header.Set("Accept", "text/event-stream") // as the CLI sends
	res, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer res.Body.Close()
	if res.StatusCode != 200 || !strings.HasPrefix(res.Header.Get("Content-Type"), "text/event-stream") {
		t.Fatalf("stream: %d %s", res.StatusCode, res.Header.Get("Content-Type"))
	}
	sc := bufio.NewScanner(res.Body)
	next := func() string {
		for sc.Scan() {
			if l := sc.Text(); strings.HasPrefix(l, "id: ") {
				return strings.TrimPrefix(l, "id: ")
			}
		}
		t.Fatalf("stream ended: %v", sc.Err())
		return ""
	}
	// Rows 21..30 hold blocked ids 22, 25, 28 (i = 21, 24, 27).
	for _, want := range []string{"22", "25", "28"} {
		if got := next(); got != want {
			t.Fatalf("replayed id %s, want %s", got, want)
		}
	}
	w.Enqueue(querylog.Row{Time: time.Now(), Node: "node-a", Client: "192.0.2.9", Domain: "live.example", QType: "A", Status: "blocked"})
	if got := next(); got != "31" {
		t.Fatalf("live id %s, want 31", got)
	}
}

func TestQueryLogNotStored(t *testing.T) {
	e := newEnv(t, func(o *Options, _ *Deps) { bindRoles(o) })
	aud := roleToken(t, e, "aud", auth.RoleAuditor)
	for _, p := range []string{"/queries", "/queries/stream", "/stats/summary"} {
		if r := aud.do("GET", p, nil); r.code != 501 || r.errKey(t) != KeyNotImplemented {
			t.Errorf("%s: %d %s", p, r.code, r.body)
		}
	}
}

func TestCataloguePolicyClusterRoutes(t *testing.T) {
	ctx := context.Background()
	cat, err := catalogue.Builtin(ctx, 6)
	if err != nil {
		t.Fatal(err)
	}
	pol := func(name string, prio int32, groups ...string) v1alpha1.Policy {
		p := v1alpha1.Policy{ObjectMeta: metav1.ObjectMeta{Namespace: "default", Name: name}}
		p.Spec.Priority, p.Spec.ClientGroupRefs = prio, groups
		return p
	}
	tab, _ := policy.Compile(ctx, policy.Input{Policies: []v1alpha1.Policy{pol("kids", 1), pol("strict", 10)}, Catalogue: cat})
	e := newEnv(t, func(o *Options, d *Deps) {
		bindRoles(o)
		d.Catalogue, d.Policies, d.Blocking = catalogueAdapter{cat}, policyAdapter{tab}, blockingState{}
	})
	view := roleToken(t, e, "view", auth.RoleViewer)
	adm := e.withToken(e.adminToken())

	r := view.do("GET", "/catalogue", nil)
	if r.code != 200 || r.json(t)["origin"] != "embedded" || r.json(t)["services"].(float64) < 10 {
		t.Fatalf("catalogue: %d %s", r.code, r.body)
	}
	r = view.do("GET", "/catalogue/categories", nil)
	if r.code != 200 || !strings.Contains(string(r.body), `"id":"video"`) {
		t.Fatalf("categories: %d %s", r.code, r.body)
	}
	r = view.do("GET", "/catalogue/services?category=video", nil)
	var svcs ListBody[CatalogueService]
	_ = json.Unmarshal(r.body, &svcs)
	if r.code != 200 || len(svcs.Items) == 0 {
		t.Fatalf("services: %d %s", r.code, r.body)
	}
	for _, s := range svcs.Items {
		if s.Category != "video" {
			t.Fatalf("service of %s in video", s.Category)
		}
	}
	icon := strings.TrimPrefix(svcs.Items[0].Icon, "/api/v1")
	anon := e.anon()
	for _, q := range []string{"", "?variant=onDark"} {
		r = anon.do("GET", icon+q, nil)
		if r.code != 200 || r.hdr.Get("Content-Type") != "image/svg+xml" || !strings.Contains(string(r.body), "<svg") ||
			!strings.Contains(r.hdr.Get("Cache-Control"), "max-age") || !strings.Contains(r.hdr.Get("Content-Security-Policy"), "style-src") {
			t.Fatalf("icon %s: %d %v %s", icon+q, r.code, r.hdr, r.body)
		}
	}
	if r := anon.do("GET", "/catalogue/icons/nope.svg", nil); r.code != 404 || r.errKey(t) != KeyNotFound {
		t.Fatalf("missing icon: %d %s", r.code, r.body)
	}
	if r := anon.do("GET", "/catalogue", nil); r.code != 401 {
		t.Fatalf("anonymous catalogue: %d", r.code)
	}

	for _, name := range []string{"kids", "strict", "ghost"} {
		r := adm.do("POST", "/apply", map[string]any{"apiVersion": "service.io/v1alpha1", "kind": "Policy",
			"metadata": map[string]any{"namespace": "default", "name": name}, "spec": map[string]any{}})
		if r.code != 200 {
			t.Fatalf("apply: %d %s", r.code, r.body)
		}
	}
	r = view.do("GET", "/policies/default/kids/state", nil)
	var ps PolicyState
	_ = json.Unmarshal(r.body, &ps)
	if r.code != 200 || !ps.Loaded || !ps.Active || ps.Effective || len(ps.ShadowedBy) != 1 || ps.ShadowedBy[0].Policy != "default/strict" {
		t.Fatalf("state: %d %s", r.code, r.body)
	}
	r = view.do("GET", "/policies/default/ghost/state", nil)
	if r.code != 200 || r.json(t)["loaded"] != false {
		t.Fatalf("unloaded state: %d %s", r.code, r.body)
	}
	if r := view.do("GET", "/policies/default/none/state", nil); r.code != 404 {
		t.Fatalf("missing policy: %d %s", r.code, r.body)
	}

	r = view.do("GET", "/dns/blocking", nil)
	if r.code != 200 || r.json(t)["node"] != "node-a" || r.json(t)["blocking"] != true {
		t.Fatalf("blocking: %d %s", r.code, r.body)
	}
	r = view.do("GET", "/nodes", nil)
	if r.code != 200 || !strings.Contains(string(r.body), `"name":"node-a"`) {
		t.Fatalf("nodes: %d %s", r.code, r.body)
	}
	if r := view.do("GET", "/cluster", nil); r.code != 501 {
		t.Fatalf("cluster without source: %d %s", r.code, r.body)
	}
	if r := adm.do("POST", "/zones/nope/notify", nil); r.code != 404 {
		t.Fatalf("notify missing zone: %d %s", r.code, r.body)
	}
	if _, err := e.st.Apply(ctx, &unstructured.Unstructured{Object: map[string]any{"apiVersion": "service.io/v1alpha1", "kind": "DNSZone",
		"metadata": map[string]any{"name": "example"}, "spec": map[string]any{"zoneName": "example.com"}}}, store.ApplyOptions{Manager: store.ManagerAPI}); err != nil {
		t.Fatal(err)
	}
	r = adm.do("POST", "/zones/example/notify", nil)
	if r.code != 202 || r.json(t)["queued"] != false {
		t.Fatalf("notify: %d %s", r.code, r.body)
	}
	if r := view.do("POST", "/zones/example/notify", nil); r.code != 403 {
		t.Fatalf("notify as viewer: %d", r.code)
	}
}

func TestBlockListEntries(t *testing.T) {
	ctx := context.Background()
	ref := &refresher{}
	e := newEnv(t, func(o *Options, d *Deps) {
		bindRoles(o)
		d.BlockListRules, d.BlockListRefresher = inlineRules{}, ref
	})
	op := roleToken(t, e, "op", auth.RoleOperator)
	view := roleToken(t, e, "view", auth.RoleViewer)
	list := func(name string, manager store.Manager) {
		obj := &unstructured.Unstructured{Object: map[string]any{"apiVersion": "service.io/v1alpha1", "kind": "BlockList",
			"metadata": map[string]any{"namespace": "default", "name": name},
			"spec": map[string]any{"sources": []any{map[string]any{"name": "main", "format": "hosts",
				"inline":  []any{"0.0.0.0 ads.example tracker.example", "0.0.0.0 ADS.example"},
				"exclude": []any{"gone.example"},
				"entries": []any{map[string]any{"value": "manual.example", "comment": "by hand"}}}}}}}
		if _, err := e.st.Apply(ctx, obj, store.ApplyOptions{Manager: manager}); err != nil {
			t.Fatal(err)
		}
	}
	list("ads-api", store.ManagerAPI)
	list("ads-file", "file:objects.d/lists.yaml")
	path := "/blocklists/default/ads-api/sources/main/entries"

	r := view.do("GET", path, nil)
	var de DomainEntries
	_ = json.Unmarshal(r.body, &de)
	if r.code != 200 || de.Total != 4 || len(de.Items) != 4 || !de.RulesKnown || de.Lists[0].List != "default/ads-api" {
		t.Fatalf("entries: %d %s", r.code, r.body)
	}
	byValue := map[string]DomainEntry{}
	for _, d := range de.Items {
		byValue[d.Value] = d
	}
	if d := byValue["manual.example"]; d.Kind != "entry" || !d.Enabled || d.Comment != "by hand" {
		t.Fatalf("entry: %+v", d)
	}
	if d := byValue["gone.example"]; d.Kind != "rule" || d.Enabled || !d.Stale {
		t.Fatalf("stale exclude: %+v", d)
	}
	r = view.do("GET", path+"?kind=rule&enabled=true&limit=1", nil)
	_ = json.Unmarshal(r.body, &de)
	if de.Matched != 2 || len(de.Items) != 1 || de.Continue == "" {
		t.Fatalf("filtered: %s", r.body)
	}
	if r := view.do("PATCH", path, map[string]any{"ids": []string{byValue["ads.example"].ID}, "op": "disable"}); r.code != 403 {
		t.Fatalf("viewer patch: %d", r.code)
	}

	// Disable a rule (-> exclude), disable the entry, drop the stale exclude.
	r = op.do("PATCH", path, map[string]any{"ids": []string{byValue["ads.example"].ID, byValue["manual.example"].ID}, "op": "disable"})
	if r.code != 200 {
		t.Fatalf("disable: %d %s", r.code, r.body)
	}
	r = op.do("PATCH", path, map[string]any{"ids": []string{byValue["gone.example"].ID}, "op": "delete"})
	if r.code != 200 {
		t.Fatalf("delete stale: %d %s", r.code, r.body)
	}
	obj, err := e.st.Get(ctx, "BlockList", "default", "ads-api")
	if err != nil {
		t.Fatal(err)
	}
	srcs, _, _ := unstructured.NestedSlice(obj.Object, "spec", "sources")
	src := srcs[0].(map[string]any)
	if ex := strList(src["exclude"]); len(ex) != 1 || ex[0] != "ads.example" {
		t.Fatalf("exclude: %v", src["exclude"])
	}
	if en := src["entries"].([]any)[0].(map[string]any); en["enabled"] != false || en["modified"] == nil {
		t.Fatalf("entry: %v", en)
	}
	for _, tc := range []struct {
		body any
		code int
	}{
		{map[string]any{"ids": []string{byValue["tracker.example"].ID}, "op": "delete"}, 422},
		{map[string]any{"ids": []string{"r-0000000000000000"}, "op": "enable"}, 404},
		{map[string]any{"ids": []string{}, "op": "enable"}, 400},
		{map[string]any{"ids": []string{"x"}, "op": "explode"}, 400},
	} {
		if r := op.do("PATCH", path, tc.body); r.code != tc.code {
			t.Errorf("%v: %d %s", tc.body, r.code, r.body)
		}
	}
	if r := op.do("PATCH", path, map[string]any{"ids": []string{byValue["ads.example"].ID}, "op": "enable"}, "If-Match", "1"); r.code != 412 {
		t.Errorf("stale If-Match: %d %s", r.code, r.body)
	}

	// Add entries.
	r = op.do("POST", path, map[string]any{"values": []string{"New.Example.", "manual.example"}, "comment": "added"})
	if r.code != 201 {
		t.Fatalf("create: %d %s", r.code, r.body)
	}
	_ = json.Unmarshal(r.body, &de)
	found := false
	for _, d := range de.Items {
		if d.Value == "new.example" {
			found = d.Origin == "api" && d.CreatedBy == "op" && d.Enabled && d.Comment == "added"
		}
	}
	if !found || de.Total != 4 {
		t.Fatalf("created: %s", r.body)
	}
	if r := op.do("POST", path, map[string]any{"values": []string{"x.example"}, "groups": []string{"kids"}}); r.code != 400 {
		t.Errorf("groups: %d %s", r.code, r.body)
	}
	if r := op.do("POST", path, map[string]any{"values": []string{"x.example"}, "type": "regex", "comment": strings.Repeat("c", 501)}); r.code != 400 {
		t.Errorf("long comment: %d %s", r.code, r.body)
	}
	// Managed objects refuse.
	r = op.do("POST", "/blocklists/default/ads-file/sources/main/entries", map[string]any{"values": []string{"x.example"}})
	if r.code != 409 || r.errKey(t) != KeyManagedBy {
		t.Fatalf("managed: %d %s", r.code, r.body)
	}
	if r := view.do("GET", "/blocklists/default/ads-api/sources/other/entries", nil); r.code != 404 {
		t.Errorf("missing source: %d %s", r.code, r.body)
	}

	// Refresh.
	if r := op.do("POST", "/blocklists/default/ads-api/refresh", nil); r.code != 202 || len(ref.got) != 1 || ref.got[0] != "default/ads-api" {
		t.Fatalf("refresh: %d %s %v", r.code, r.body, ref.got)
	}
	if r := op.do("POST", "/blocklists/default/none/refresh", nil); r.code != 404 {
		t.Fatalf("refresh missing: %d %s", r.code, r.body)
	}
}
