package adminops_test

import (
	"bytes"
	"encoding/json"
	"fmt"
	"net/http"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/miekg/dns"
)

// TestWriteThenQuery is the README's story, `svc records add` then a
// query, 50 times with a real DNS client: every query must see the record
// its write just added (before, 5 of 5 answered NXDOMAIN; the record
// appeared 65-95 ms later), and then gone again after `svc records rm`.
func TestWriteThenQuery(t *testing.T) {
	s := startServer(t, serverOpt{objects: map[string]string{"home-lan.yaml": homeLan}})
	a := newAdmin(t, s)
	misses := 0
	for i := 1; i <= 50; i++ {
		host, ip := fmt.Sprintf("printer%d", i), fmt.Sprintf("192.0.2.%d", 100+i)
		a.ok("records", "add", "home.lan", host, "A", ip)
		if got, status := dig(t, s.DNS, host+".home.lan", "A"); got != ip {
			misses++
			// Says whether the answer was late or wrong, for whoever reads a failure.
			time.Sleep(200 * time.Millisecond)
			later, lstatus := dig(t, s.DNS, host+".home.lan", "A")
			t.Errorf("round %d: dig %s.home.lan right after records add: %q (%s), want %s; 200 ms later: %q (%s)", i, host, got, status, ip, later, lstatus)
		}
	}
	// The CLI's own query goes through the same pipeline.
	a.ok("records", "add", "home.lan", "printer", "A", "192.0.2.30")
	if out := a.ok("query", "printer.home.lan"); !strings.Contains(out, "192.0.2.30") {
		t.Errorf("svc query printer.home.lan right after records add:\n%s", out)
	}
	for i := 1; i <= 10; i++ {
		host := fmt.Sprintf("printer%d", i)
		a.ok("records", "rm", "home.lan", host, "A")
		if got, status := dig(t, s.DNS, host+".home.lan", "A"); got != "" || status != "NXDOMAIN" {
			misses++
			t.Errorf("round %d: dig %s.home.lan right after records rm: %q (%s), want NXDOMAIN", i, host, got, status)
		}
	}
	t.Logf("%d misses in 60 write-then-query rounds", misses)
}

// TestWriteRoutesAnswerVisible: every route that changes answers (objects,
// apply, a list's entries, settings) returns once this node answers with
// the change, says so in X-Service-Visible and carries the served
// snapshot's revision in X-Service-Revision; X-Service-Wait: 0 skips the
// wait. It also measures what the wait adds to a write.
func TestWriteRoutesAnswerVisible(t *testing.T) {
	s := startServer(t, serverOpt{objects: map[string]string{"home-lan.yaml": homeLan}})
	a := newAdmin(t, s)
	c := &apiClient{t: t, base: s.URL + "/api/v1", token: s.Token}

	// apply: a new record set
	h := c.do(http.MethodPost, "/apply", []any{recordSet("apply-set", "applied", "192.0.2.201")}, nil)
	checkVisible(t, "POST /apply", h)
	if got, _ := dig(t, s.DNS, "applied.home.lan", "A"); got != "192.0.2.201" {
		t.Errorf("after POST /apply: dig applied.home.lan = %q", got)
	}
	// objects: replace it, then delete it
	h = c.do(http.MethodPut, "/objects/dnsrecordsets/default/apply-set", recordSet("apply-set", "applied", "192.0.2.202"), nil)
	checkVisible(t, "PUT /objects", h)
	if got, _ := dig(t, s.DNS, "applied.home.lan", "A"); got != "192.0.2.202" {
		t.Errorf("after PUT /objects: dig applied.home.lan = %q", got)
	}
	h = c.do(http.MethodDelete, "/objects/dnsrecordsets/default/apply-set", nil, nil)
	checkVisible(t, "DELETE /objects", h)
	if got, status := dig(t, s.DNS, "applied.home.lan", "A"); status != "NXDOMAIN" {
		t.Errorf("after DELETE /objects: dig applied.home.lan = %q %s, want NXDOMAIN", got, status)
	}

	// a deny entry blocks the very next query (the list's rules are
	// compiled apart from its object: the wait covers both)
	a.ok("lists", "deny", "ads.example.net")
	if got, status := dig(t, s.DNS, "ads.example.net", "A"); got != "0.0.0.0" {
		t.Errorf("after lists deny: dig ads.example.net = %q (%s), want the block answer 0.0.0.0", got, status)
	}

	// pausing blocking on this node (and resuming it) is answered at once
	a.ok("blocking", "disable", "5m")
	if got, _ := dig(t, s.DNS, "ads.example.net", "A"); got == "0.0.0.0" {
		t.Errorf("after blocking disable: ads.example.net still blocked")
	}
	a.ok("blocking", "enable")
	if got, _ := dig(t, s.DNS, "ads.example.net", "A"); got != "0.0.0.0" {
		t.Errorf("after blocking enable: dig ads.example.net = %q, want blocked", got)
	}

	// a setting that changes answers: blocking off cluster-wide
	h = c.do(http.MethodPatch, "/settings", map[string]any{"blocking": map[string]any{"enabled": false}}, nil)
	checkVisible(t, "PATCH /settings", h)
	if got, _ := dig(t, s.DNS, "ads.example.net", "A"); got == "0.0.0.0" {
		t.Errorf("after PATCH /settings blocking.enabled=false: still blocked")
	}
	h = c.do(http.MethodPatch, "/settings", map[string]any{"blocking": map[string]any{"enabled": true}}, nil)
	checkVisible(t, "PATCH /settings", h)

	// X-Service-Wait: 0 does not wait, and the answer still says where the node is.
	h = c.doWait(http.MethodPost, "/zones/home.lan/records", map[string]any{"name": "nowait", "type": "A", "targets": []string{"192.0.2.9"}}, "0")
	if h.Get("X-Service-Revision") == "" {
		t.Errorf("X-Service-Wait: 0: no X-Service-Revision")
	}
	if r := c.raw(http.MethodPost, "/zones/home.lan/records", map[string]any{"name": "bad", "type": "A", "targets": []string{"192.0.2.9"}}, "soon"); r.StatusCode != http.StatusBadRequest {
		t.Errorf("X-Service-Wait: soon answered %d, want 400", r.StatusCode)
	}

	// Without a process start between write and query (the CLI's and
	// dig's hide part of the gap), the very next packet must see it.
	for i := range 50 {
		host, ip := fmt.Sprintf("tight%d", i), fmt.Sprintf("192.0.2.%d", 150+i)
		c.do(http.MethodPost, "/zones/home.lan/records", map[string]any{"name": host, "type": "A", "targets": []string{ip}}, nil)
		if got := exchangeA(t, s.DNS, host+".home.lan"); got != ip {
			t.Errorf("round %d: %s.home.lan right after POST /zones/home.lan/records: %q, want %s", i, host, got, ip)
		}
	}

	// What the wait costs: a records add with and without it.
	with, without := make([]time.Duration, 0, 40), make([]time.Duration, 0, 40)
	for i := range 40 {
		body := map[string]any{"name": fmt.Sprintf("m%d", i), "type": "A", "targets": []string{"192.0.2.8"}}
		start := time.Now()
		c.doWait(http.MethodPost, "/zones/home.lan/records", body, "0")
		without = append(without, time.Since(start))
		body["name"] = fmt.Sprintf("w%d", i)
		start = time.Now()
		h := c.doWait(http.MethodPost, "/zones/home.lan/records", body, "")
		with = append(with, time.Since(start))
		if h.Get("X-Service-Visible") != "true" {
			t.Errorf("records add %d: X-Service-Visible %q", i, h.Get("X-Service-Visible"))
		}
	}
	t.Logf("records add latency without the wait: median %v p99 %v; with it: median %v p99 %v",
		pct(without, 50), pct(without, 99), pct(with, 50), pct(with, 99))
}

// exchangeA asks addr over UDP for name's A records (the first, or the rcode).
func exchangeA(t *testing.T, addr, name string) string {
	t.Helper()
	m := new(dns.Msg)
	m.SetQuestion(dns.Fqdn(name), dns.TypeA)
	r, _, err := (&dns.Client{Timeout: 2 * time.Second}).Exchange(m, addr)
	if err != nil {
		t.Fatalf("query %s: %v", name, err)
	}
	for _, rr := range r.Answer {
		if a, ok := rr.(*dns.A); ok {
			return a.A.String()
		}
	}
	return dns.RcodeToString[r.Rcode]
}

func checkVisible(t *testing.T, what string, h http.Header) {
	t.Helper()
	if h.Get("X-Service-Visible") != "true" || h.Get("X-Service-Revision") == "" {
		t.Errorf("%s: X-Service-Visible %q, X-Service-Revision %q; want true and a revision", what, h.Get("X-Service-Visible"), h.Get("X-Service-Revision"))
	}
}

func recordSet(name, host, ip string) map[string]any {
	return map[string]any{"apiVersion": "service.io/v1alpha1", "kind": "DNSRecordSet",
		"metadata": map[string]any{"name": name, "namespace": "default"},
		"spec": map[string]any{"zoneRef": map[string]any{"name": "home.lan"},
			"endpoints": []any{map[string]any{"dnsName": host, "recordType": "A", "targets": []string{ip}}}}}
}

func pct(ds []time.Duration, p int) time.Duration {
	s := slices.Clone(ds)
	slices.Sort(s)
	return s[min(len(s)-1, len(s)*p/100)].Round(100 * time.Microsecond)
}

// apiClient calls the REST API with the bootstrap token.
type apiClient struct {
	t           *testing.T
	base, token string
}

func (c *apiClient) raw(method, path string, body any, wait string) *http.Response {
	c.t.Helper()
	var rd *bytes.Reader
	if body != nil {
		b, err := json.Marshal(body)
		if err != nil {
			c.t.Fatal(err)
		}
		rd = bytes.NewReader(b)
	} else {
		rd = bytes.NewReader(nil)
	}
	req, err := http.NewRequest(method, c.base+path, rd)
	if err != nil {
		c.t.Fatal(err)
	}
	req.Header.Set("Authorization", "Bearer "+c.token)
	if method == http.MethodPatch {
		req.Header.Set("Content-Type", "application/merge-patch+json")
	} else {
		req.Header.Set("Content-Type", "application/json")
	}
	if wait != "" {
		req.Header.Set("X-Service-Wait", wait)
	}
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		c.t.Fatalf("%s %s: %v", method, path, err)
	}
	return resp
}

func (c *apiClient) doWait(method, path string, body any, wait string) http.Header {
	c.t.Helper()
	resp := c.raw(method, path, body, wait)
	defer resp.Body.Close()
	var out bytes.Buffer
	_, _ = out.ReadFrom(resp.Body)
	if resp.StatusCode >= 300 {
		c.t.Fatalf("%s %s: %d %s", method, path, resp.StatusCode, out.String())
	}
	return resp.Header
}

func (c *apiClient) do(method, path string, body any, _ any) http.Header {
	c.t.Helper()
	return c.doWait(method, path, body, "")
}
