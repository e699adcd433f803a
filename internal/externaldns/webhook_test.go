package externaldns_test

import (
	"bytes"
	"encoding/json"
	"errors"
	"io"
	"net/http"
	"net/http/httptest"
	"path/filepath"
	"strings"
	"testing"

	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"sigs.k8s.io/yaml"

	"github.com/svcdns/svc/internal/externaldns"
	"github.com/svcdns/svc/internal/store"
	"github.com/svcdns/svc/internal/store/sqlite"
	"github.com/svcdns/svc/internal/validation"
)

const mt = externaldns.MediaType

// fixture is a provider over a real SQLite store with the zones
// example.test and other.test, serving example.test only.
type fixture struct {
	st  store.Store
	p   *externaldns.Provider
	srv *httptest.Server
}

func newFixture(t *testing.T, o externaldns.ServerOptions) *fixture {
	t.Helper()
	v, err := validation.New()
	if err != nil {
		t.Fatal(err)
	}
	st, err := sqlite.NewStore(t.Context(), filepath.Join(t.TempDir(), "state.db"), v, sqlite.Options{})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { st.Close() })
	for _, doc := range []string{
		`{apiVersion: service.io/v1alpha1, kind: DNSZone, metadata: {name: example.test}, spec: {defaultTTL: 60}}`,
		`{apiVersion: service.io/v1alpha1, kind: DNSZone, metadata: {name: other.test}, spec: {}}`,
		// Someone else's records in the same zone and namespace.
		`{apiVersion: service.io/v1alpha1, kind: DNSRecordSet, metadata: {name: manual, namespace: default}, spec: {zoneRef: {name: example.test}, endpoints: [{dnsName: manual.example.test, recordType: A, targets: [192.0.2.99]}, {dnsName: www.example.test, recordType: TXT, targets: [by-hand]}]}}`,
	} {
		apply(t, st, doc, store.ManagerAPI)
	}
	p, err := externaldns.New(externaldns.Options{Store: st, Namespace: "default", Zones: []string{"example.test"}})
	if err != nil {
		t.Fatal(err)
	}
	srv := httptest.NewServer(p.Handler(o))
	t.Cleanup(srv.Close)
	return &fixture{st: st, p: p, srv: srv}
}

func apply(t *testing.T, st store.Store, doc string, m store.Manager) {
	t.Helper()
	u := &unstructured.Unstructured{}
	if err := yaml.Unmarshal([]byte(doc), &u.Object); err != nil {
		t.Fatal(err)
	}
	if _, err := st.Apply(t.Context(), u, store.ApplyOptions{Manager: m}); err != nil {
		t.Fatalf("apply %s: %v", u.GetName(), err)
	}
}

type resp struct {
	code int
	hdr  http.Header
	body string
}

func (f *fixture) do(t *testing.T, method, path string, hdr map[string]string, body []byte) resp {
	t.Helper()
	req, err := http.NewRequestWithContext(t.Context(), method, f.srv.URL+path, bytes.NewReader(body))
	if err != nil {
		t.Fatal(err)
	}
	for k, v := range hdr {
		req.Header.Set(k, v)
	}
	r, err := f.srv.Client().Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer r.Body.Close()
	b, _ := io.ReadAll(r.Body)
	return resp{r.StatusCode, r.Header, string(b)}
}

var (
	accept = map[string]string{"Accept": mt}
	both   = map[string]string{"Accept": mt, "Content-Type": mt}
)

// The protocol table: what external-dns v0.21 sends and what a client that
// gets it wrong is told.
func TestConformance(t *testing.T) {
	f := newFixture(t, externaldns.ServerOptions{})
	big := append([]byte(`{"create":[`), bytes.Repeat([]byte(" "), externaldns.MaxBodyBytes)...)
	big = append(big, []byte(`]}`)...)
	for _, c := range []struct {
		name, method, path string
		hdr                map[string]string
		body               string
		raw                []byte
		code               int
		ctype, contains    string
	}{
		{name: "negotiation", method: "GET", path: "/", hdr: accept, code: 200, ctype: mt, contains: `{"include":["example.test"]}`},
		{name: "negotiation without Accept", method: "GET", path: "/", code: 200, ctype: mt},
		{name: "negotiation with */*", method: "GET", path: "/", hdr: map[string]string{"Accept": "*/*"}, code: 200, ctype: mt},
		{name: "negotiation asks application/json", method: "GET", path: "/", hdr: map[string]string{"Accept": "application/json"}, code: 406, contains: "does not admit"},
		{name: "negotiation asks version 2", method: "GET", path: "/", hdr: map[string]string{"Accept": "application/external.dns.webhook+json;version=2"}, code: 406},
		{name: "negotiation by POST", method: "POST", path: "/", hdr: accept, code: 405},
		{name: "unknown path", method: "GET", path: "/zones", hdr: accept, code: 404, contains: "/records"},
		{name: "records", method: "GET", path: "/records", hdr: accept, code: 200, ctype: mt, contains: "[]"},
		{name: "records by PUT", method: "PUT", path: "/records", hdr: both, code: 405},
		{name: "changes as application/json", method: "POST", path: "/records", hdr: map[string]string{"Content-Type": "application/json"}, body: `{}`, code: 415, contains: mt},
		{name: "changes without content type", method: "POST", path: "/records", body: `{}`, code: 415},
		{name: "changes oversize", method: "POST", path: "/records", hdr: both, raw: big, code: 413},
		{name: "changes not JSON", method: "POST", path: "/records", hdr: both, body: `{"create":`, code: 400},
		{name: "changes with trailing data", method: "POST", path: "/records", hdr: both, body: `{} {}`, code: 400},
		{name: "changes without targets", method: "POST", path: "/records", hdr: both, body: `{"create":[{"dnsName":"a.example.test","recordType":"A"}]}`, code: 400, contains: "no targets"},
		{name: "changes with a bad type", method: "POST", path: "/records", hdr: both, body: `{"create":[{"dnsName":"a.example.test","recordType":"a","targets":["192.0.2.1"]}]}`, code: 400, contains: "recordType"},
		{name: "changes unpaired update", method: "POST", path: "/records", hdr: both, body: `{"updateOld":[{"dnsName":"a.example.test","recordType":"A"}]}`, code: 400, contains: "pair"},
		// Skipped, as external-dns's own providers do (its txt registry
		// names apex ownership records outside the zone); nothing written.
		{name: "changes in an unknown zone", method: "POST", path: "/records", hdr: both, body: `{"create":[{"dnsName":"a.nowhere.test","recordType":"A","targets":["192.0.2.1"]}]}`, code: 204},
		{name: "changes in a zone outside the filter", method: "POST", path: "/records", hdr: both, body: `{"create":[{"dnsName":"a.other.test","recordType":"A","targets":["192.0.2.1"]}]}`, code: 204},
		{name: "changes with a bad target", method: "POST", path: "/records", hdr: both, body: `{"create":[{"dnsName":"a.example.test","recordType":"A","targets":["not-an-ip"]}]}`, code: 422, contains: "not-an-ip"},
		{name: "empty changes", method: "POST", path: "/records", hdr: both, body: `{}`, code: 204},
		{name: "adjust as text", method: "POST", path: "/adjustendpoints", hdr: map[string]string{"Content-Type": "text/plain"}, body: `[]`, code: 415},
		{name: "adjust not an array", method: "POST", path: "/adjustendpoints", hdr: both, body: `{}`, code: 400},
		{name: "adjust oversize", method: "POST", path: "/adjustendpoints", hdr: both, raw: append([]byte("["), bytes.Repeat([]byte(" "), externaldns.MaxBodyBytes)...), code: 413},
		{name: "adjust by GET", method: "GET", path: "/adjustendpoints", hdr: both, code: 405},
		{name: "adjust drops unknown zones and bad data", method: "POST", path: "/adjustendpoints", hdr: both,
			body: `[{"dnsName":"a.nowhere.test","recordType":"A","targets":["192.0.2.1"]},{"dnsName":"b.example.test","recordType":"A","targets":["nope"]},{"dnsName":"c.example.test","recordType":"A","targets":["192.0.2.3"],"recordTTL":30}]`,
			code: 200, ctype: mt, contains: `[{"dnsName":"c.example.test","targets":["192.0.2.3"],"recordType":"A","recordTTL":30}]`},
	} {
		t.Run(c.name, func(t *testing.T) {
			body := c.raw
			if body == nil {
				body = []byte(c.body)
			}
			r := f.do(t, c.method, c.path, c.hdr, body)
			if r.code != c.code {
				t.Fatalf("status %d, want %d: %s", r.code, c.code, r.body)
			}
			if c.ctype != "" && r.hdr.Get("Content-Type") != c.ctype {
				t.Errorf("Content-Type %q, want %q", r.hdr.Get("Content-Type"), c.ctype)
			}
			if r.hdr.Get("Vary") != "Content-Type" {
				t.Errorf("Vary %q, want Content-Type", r.hdr.Get("Vary"))
			}
			if !strings.Contains(r.body, c.contains) {
				t.Errorf("body %q lacks %q", r.body, c.contains)
			}
		})
	}
	// None of the refused changes wrote anything.
	if r := f.do(t, "GET", "/records", accept, nil); r.body != "[]\n" {
		t.Errorf("refused changes left records: %s", r.body)
	}
}

// What external-dns writes comes back byte for byte (TTL, target order and
// case, trailing dots, set identifiers, labels, provider properties), other
// managers' records are neither returned nor touched, and the API may not
// edit the provider's record sets.
func TestRoundTripAndOwnership(t *testing.T) {
	f := newFixture(t, externaldns.ServerOptions{})
	eps := `[{"dnsName":"www.example.test","targets":["192.0.2.2","192.0.2.1"],"recordType":"A","recordTTL":300},` +
		`{"dnsName":"www.example.test","targets":["2001:db8::1"],"recordType":"AAAA","setIdentifier":"eu","labels":{"owner":"default"},"providerSpecific":[{"name":"alias","value":"false"}]},` +
		`{"dnsName":"alias.example.test","targets":["Target.Elsewhere.test."],"recordType":"CNAME"},` +
		`{"dnsName":"a-www.example.test","targets":["heritage=external-dns,external-dns/owner=default,external-dns/resource=service/default/www"],"recordType":"TXT"},` +
		`{"dnsName":"example.test","targets":["10 mx1.example.test","20 mx2.example.test"],"recordType":"MX"},` +
		`{"dnsName":"_sip._tcp.example.test","targets":["10 60 5060 sip.example.test"],"recordType":"SRV"},` +
		`{"dnsName":"sub.example.test","targets":["ns1.elsewhere.test"],"recordType":"NS"},` +
		`{"dnsName":"example.test","targets":["0 issue \"letsencrypt.org\""],"recordType":"CAA"},` +
		`{"dnsName":"*.apps.example.test","targets":["192.0.2.7"],"recordType":"A"}]`
	if r := f.do(t, "POST", "/records", both, []byte(`{"create":`+eps+`}`)); r.code != 204 {
		t.Fatalf("create: %d %s", r.code, r.body)
	}
	r := f.do(t, "GET", "/records", accept, nil)
	var got, want []json.RawMessage
	if err := json.Unmarshal([]byte(r.body), &got); err != nil {
		t.Fatal(err)
	}
	_ = json.Unmarshal([]byte(eps), &want)
	if len(got) != len(want) {
		t.Fatalf("GET /records: %d endpoints, want %d:\n%s", len(got), len(want), r.body)
	}
	seen := map[string]bool{}
	for _, g := range got {
		seen[string(g)] = true
	}
	for _, w := range want {
		if !seen[string(w)] {
			t.Errorf("written endpoint not returned exactly:\n%s\nreturned:\n%s", w, r.body)
		}
	}
	if strings.Contains(r.body, "manual") || strings.Contains(r.body, "by-hand") {
		t.Errorf("GET /records returned another manager's records: %s", r.body)
	}

	// Update and delete: the other manager's www TXT survives.
	ch := `{"updateOld":[{"dnsName":"www.example.test","targets":["192.0.2.2","192.0.2.1"],"recordType":"A","recordTTL":300}],` +
		`"updateNew":[{"dnsName":"www.example.test","targets":["192.0.2.5"],"recordType":"A","recordTTL":60}],` +
		`"delete":[{"dnsName":"www.example.test","targets":["2001:db8::1"],"recordType":"AAAA","setIdentifier":"eu"},{"dnsName":"www.example.test","targets":["by-hand"],"recordType":"TXT"}]}`
	if r := f.do(t, "POST", "/records", both, []byte(ch)); r.code != 204 {
		t.Fatalf("update: %d %s", r.code, r.body)
	}
	r = f.do(t, "GET", "/records", accept, nil)
	if !strings.Contains(r.body, `{"dnsName":"www.example.test","targets":["192.0.2.5"],"recordType":"A","recordTTL":60}`) || strings.Contains(r.body, "2001:db8::1") {
		t.Errorf("after update and delete: %s", r.body)
	}
	manual, err := f.st.Get(t.Context(), store.KindDNSRecordSet, "default", "manual")
	if err != nil {
		t.Fatal(err)
	}
	if b, _ := json.Marshal(manual.Object["spec"]); !strings.Contains(string(b), "by-hand") {
		t.Errorf("deleting www TXT touched the other manager's record: %s", b)
	}

	// The provider's record sets are managed: the API's manager is refused.
	res, err := f.st.List(t.Context(), store.ListOptions{Kind: store.KindDNSRecordSet, Namespace: "default"})
	if err != nil {
		t.Fatal(err)
	}
	n := 0
	for _, u := range res.Items {
		if store.OwnerOf(u) != externaldns.Manager {
			continue
		}
		n++
		_, err := f.st.Apply(t.Context(), u, store.ApplyOptions{Manager: store.ManagerAPI})
		var mb *store.ManagedByError
		if !errors.As(err, &mb) || mb.Owner != "integration:external-dns" {
			t.Errorf("API apply of %s: %v, want managed by integration:external-dns", u.GetName(), err)
		}
	}
	if n == 0 {
		t.Fatal("no record set owned by integration:external-dns")
	}

	// Deleting everything leaves no record set of the provider behind.
	r = f.do(t, "GET", "/records", accept, nil)
	if r := f.do(t, "POST", "/records", both, []byte(`{"delete":`+r.body+`}`)); r.code != 204 {
		t.Fatalf("delete all: %d %s", r.code, r.body)
	}
	res, _ = f.st.List(t.Context(), store.ListOptions{Kind: store.KindDNSRecordSet, Namespace: "default"})
	if len(res.Items) != 1 || res.Items[0].GetName() != "manual" {
		var names []string
		for _, u := range res.Items {
			names = append(names, u.GetName())
		}
		t.Errorf("after deleting every record: record sets %v, want [manual]", names)
	}
}

func TestAccessControl(t *testing.T) {
	f := newFixture(t, externaldns.ServerOptions{Token: "s3cret-token"})
	for _, c := range []struct {
		name string
		hdr  map[string]string
		code int
	}{
		{"no token", accept, 401},
		{"wrong bearer", map[string]string{"Accept": mt, "Authorization": "Bearer nope"}, 401},
		{"bearer", map[string]string{"Accept": mt, "Authorization": "Bearer s3cret-token"}, 200},
		// external-dns sends the token as the password of its URL.
		{"basic", map[string]string{"Accept": mt, "Authorization": "Basic ZXh0ZXJuYWwtZG5zOnMzY3JldC10b2tlbg=="}, 200},
	} {
		if r := f.do(t, "GET", "/records", c.hdr, nil); r.code != c.code {
			t.Errorf("%s: status %d, want %d (%s)", c.name, r.code, c.code, r.body)
		}
	}
	h := f.p.Handler(externaldns.ServerOptions{LoopbackOnly: true})
	for remote, code := range map[string]int{"192.0.2.1:4000": 403, "127.0.0.1:4000": 200, "[::1]:4000": 200} {
		req := httptest.NewRequest("GET", "/", nil)
		req.RemoteAddr = remote
		w := httptest.NewRecorder()
		h.ServeHTTP(w, req)
		if w.Code != code {
			t.Errorf("loopback-only, peer %s: status %d, want %d", remote, w.Code, code)
		}
	}
}

// A subzone created after a record was written moves where new records of
// the name go; the old record can still be updated away and deleted.
func TestSubzoneCreatedLater(t *testing.T) {
	f := newFixture(t, externaldns.ServerOptions{})
	old := `{"dnsName":"app.sub.example.test","targets":["192.0.2.1"],"recordType":"A"}`
	if r := f.do(t, "POST", "/records", both, []byte(`{"create":[`+old+`]}`)); r.code != 204 {
		t.Fatalf("create: %d %s", r.code, r.body)
	}
	apply(t, f.st, `{apiVersion: service.io/v1alpha1, kind: DNSZone, metadata: {name: sub.example.test}, spec: {}}`, store.ManagerAPI)
	if r := f.do(t, "GET", "/records", accept, nil); r.body != "["+old+"]\n" {
		t.Fatalf("GET /records after the subzone: %s", r.body)
	}
	if r := f.do(t, "POST", "/records", both, []byte(`{"delete":[`+old+`]}`)); r.code != 204 {
		t.Fatalf("delete: %d %s", r.code, r.body)
	}
	if r := f.do(t, "GET", "/records", accept, nil); r.body != "[]\n" {
		t.Errorf("after deleting the record written before the subzone: %s", r.body)
	}
}
