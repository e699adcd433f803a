package dashboard_test

import (
	"bytes"
	"encoding/json"
	"net/http"
	"net/http/cookiejar"
	"strings"
	"testing"
	"time"

	"github.com/chromedp/chromedp"
	"github.com/miekg/dns"

	"github.com/svcdns/svc/test/nodetest"
)

// apiClient is a signed-in REST client (cookie session and CSRF header),
// for the setup a test needs beside the browser.
type apiClient struct {
	t    testing.TB
	base string
	c    *http.Client
	csrf string
}

func signIn(t testing.TB, s *server, user, password string) *apiClient {
	t.Helper()
	jar, _ := cookiejar.New(nil)
	a := &apiClient{t: t, base: s.URL + "/api/v1", c: &http.Client{Jar: jar, Timeout: 20 * time.Second}}
	var me struct{ CSRF string }
	a.do(http.MethodPost, "/auth/login", map[string]string{"username": user, "password": password}, &me)
	a.csrf = me.CSRF
	return a
}

func (a *apiClient) do(method, path string, body, out any) {
	a.t.Helper()
	b, _ := json.Marshal(body)
	req, err := http.NewRequest(method, a.base+path, bytes.NewReader(b))
	if err != nil {
		a.t.Fatal(err)
	}
	req.Header.Set("Content-Type", "application/json")
	req.Header.Set("X-Service-CSRF", a.csrf)
	resp, err := a.c.Do(req)
	if err != nil {
		a.t.Fatal(err)
	}
	defer resp.Body.Close()
	var raw json.RawMessage
	_ = json.NewDecoder(resp.Body).Decode(&raw)
	if resp.StatusCode >= 300 {
		a.t.Fatalf("%s %s: %d %s", method, path, resp.StatusCode, raw)
	}
	if out != nil {
		if err := json.Unmarshal(raw, out); err != nil {
			a.t.Fatalf("%s %s: %v", method, path, err)
		}
	}
}

// TestBlockedServiceSwitch: a service switched on in the grid is blocked for
// the policy's clients at the next query, and switched off it passes again.
func TestBlockedServiceSwitch(t *testing.T) {
	s := startServer(t, nodetest.Env("SERVICE_ADMIN_PASSWORD="+adminPassword))
	api := signIn(t, s, "admin", adminPassword)
	api.do(http.MethodPut, "/objects/policies/default/family", map[string]any{
		"apiVersion": "service.io/v1alpha1", "kind": "Policy",
		"metadata": map[string]any{"name": "family", "namespace": "default"},
		"spec":     map[string]any{"priority": 10},
	}, nil)

	b := newBrowser(t, s.URL, 1280, 900)
	b.open(s.URL + "/services?policy=default/family&category=video")
	b.waitText("h1", "Sign in")
	b.login("admin", adminPassword)
	b.waitText("h1", "Services")
	b.waitJS("the YouTube tile, off", `document.querySelector('li[data-service=youtube] button[role=switch]')?.getAttribute('aria-checked') === 'false'`)
	b.checkA11y("services")
	b.screenshot("services")

	answer := func() int {
		r, err := s.Exchange("udp", 2*time.Second, "www.youtube.com", dns.TypeA)
		if err != nil {
			return -1
		}
		return r.Rcode
	}
	if rc := answer(); rc != dns.RcodeServerFailure {
		t.Fatalf("www.youtube.com before: rcode %d, want SERVFAIL (the test's upstream is dead)", rc)
	}
	b.click(`li[data-service=youtube] button[role=switch]`)
	b.waitText(".msg.ok", "YouTube blocked")
	b.waitJS("switch on", `document.querySelector('li[data-service=youtube] button[role=switch]').getAttribute('aria-checked') === 'true'`)
	nodetest.Eventually(t, 15*time.Second, "www.youtube.com blocked", func() bool {
		rc := answer()
		return rc != -1 && rc != dns.RcodeServerFailure
	})

	b.click(`li[data-service=youtube] button[role=switch]`)
	b.waitText(".msg.ok", "YouTube unblocked")
	nodetest.Eventually(t, 15*time.Second, "www.youtube.com passes again", func() bool {
		return answer() == dns.RcodeServerFailure
	})
	var pol struct {
		Spec map[string]any `json:"spec"`
	}
	api.do(http.MethodGet, "/objects/policies/default/family", nil, &pol)
	if _, ok := pol.Spec["blockedServices"]; ok {
		t.Errorf("blockedServices left in the policy: %v", pol.Spec)
	}
}

// TestBlockingPause: the header pauses blocking for a while with a
// countdown (the blocked name passes meanwhile) and resumes it; a viewer
// sees the state but no control.
func TestBlockingPause(t *testing.T) {
	s := startServer(t, nodetest.Env("SERVICE_ADMIN_PASSWORD="+adminPassword), nodetest.ExtraYAML(viewerBindings))
	api := signIn(t, s, "admin", adminPassword)
	api.do(http.MethodPut, "/objects/blocklists/default/ui-deny", map[string]any{
		"apiVersion": "service.io/v1alpha1", "kind": "BlockList",
		"metadata": map[string]any{"name": "ui-deny", "namespace": "default"},
		"spec": map[string]any{"mode": "block", "sources": []any{map[string]any{"name": "manual",
			"entries": []any{map[string]any{"value": "paused.example", "type": "exact", "origin": "api"}}}}},
	}, nil)
	blocked := func() bool {
		r, err := s.Exchange("udp", 2*time.Second, "paused.example", dns.TypeA)
		return err == nil && r.Rcode != dns.RcodeServerFailure
	}
	nodetest.Eventually(t, 15*time.Second, "paused.example blocked", blocked)

	b := newBrowser(t, s.URL, 1280, 900)
	b.open(s.URL + "/overview")
	b.waitText("h1", "Sign in")
	b.login("admin", adminPassword)
	b.waitText("h1", "Overview")
	b.waitJS("the pause control", `!!document.querySelector('[data-testid=blocking] button')`)
	b.click(`[data-testid=blocking] button`)
	b.waitText("[data-testid=blocking]", "Blocking paused")
	b.waitJS("a countdown", `/[0-9]+:[0-9]{2} left/.test(document.querySelector('[data-testid=blocking]').innerText)`)
	nodetest.Eventually(t, 10*time.Second, "paused.example passes during the pause", func() bool { return !blocked() })
	b.checkA11y("overview, blocking paused")

	addUser(t, s, "viewer", "viewer password 1")
	v := newBrowser(t, s.URL, 1280, 900)
	v.open(s.URL + "/overview")
	v.waitText("h1", "Sign in")
	v.login("viewer", "viewer password 1")
	v.waitText("[data-testid=blocking]", "Blocking paused")
	if n := evalAs[int](v, `document.querySelectorAll('[data-testid=blocking] button').length`); n != 0 {
		t.Errorf("a viewer has %d blocking buttons", n)
	}

	b.click(`[data-testid=blocking] button`)
	b.waitJS("resumed", `!document.querySelector('[data-testid=blocking]') || !document.querySelector('[data-testid=blocking]').innerText.includes('paused')`)
	nodetest.Eventually(t, 10*time.Second, "paused.example blocked again", blocked)
}

// TestPolicyPage: policies by priority, and the chosen one's state on the
// node and its schedule as a week grid (Monday to Friday, 9 to 17: 40 hours).
func TestPolicyPage(t *testing.T) {
	s := startServer(t, nodetest.Env("SERVICE_ADMIN_PASSWORD="+adminPassword))
	api := signIn(t, s, "admin", adminPassword)
	api.do(http.MethodPut, "/objects/policies/default/work", map[string]any{
		"apiVersion": "service.io/v1alpha1", "kind": "Policy",
		"metadata": map[string]any{"name": "work", "namespace": "default"},
		"spec": map[string]any{"priority": 5, "blockedServices": []any{"youtube"},
			"schedule": map[string]any{"start": "09:00", "end": "17:00", "weekdays": []any{"mon", "tue", "wed", "thu", "fri"}}},
	}, nil)
	b := newBrowser(t, s.URL, 1280, 900)
	b.open(s.URL + "/policies?policy=default/work")
	b.waitText("h1", "Sign in")
	b.login("admin", adminPassword)
	b.waitText("h1", "Policies")
	b.waitJS("the week grid", `document.querySelectorAll('[data-testid=policy] table.week td.on').length === 40`)
	b.waitJS("the state from the node", `/active|inactive now|shadowed|not loaded/.test(document.querySelector('[data-testid=policy] h2 .badge').innerText)`)
	b.waitText("[data-testid=policy]", "youtube")
	b.checkA11y("policies")
	b.screenshot("policies")

	// The editor: Friday off on the grid, a higher priority, another block
	// mode; a time zone the API refuses is shown at the field.
	form := `form[aria-label="Edit policy default/work"]`
	b.waitJS("the editor's grid", `document.querySelectorAll('`+form+` table.week td.on').length === 40`)
	b.click(form + ` table.week tbody tr:nth-child(5) button.day`) // fri
	b.waitJS("Friday off in the editor", `document.querySelectorAll('`+form+` table.week td.on').length === 32`)
	b.typeInto("#pe-priority", "9")
	evalAs[chromedp.Void](b, `(e => { e.value = "refused"; e.dispatchEvent(new Event("change", {bubbles: true})); })(document.querySelector("#pe-blockMode"))`)
	b.typeInto("#pe-tz", "Mars/Olympus")
	b.click(form + ` button[type=submit]`)
	b.waitJS("the refusal at the time zone", `!!document.querySelector('#pe-err-tz')`)
	if msg := evalAs[string](b, `document.querySelector('#pe-err-tz').innerText`); !strings.Contains(msg, "Mars/Olympus") && !strings.Contains(strings.ToLower(msg), "time zone") {
		t.Errorf("refusal of a bad time zone: %q", msg)
	}
	b.checkA11y("policy editor with an error")
	b.typeInto("#pe-tz", "Europe/Berlin")
	b.click(form + ` button[type=submit]`)
	b.waitText(form+` .msg.ok`, "Saved default/work")
	var got struct {
		Spec struct {
			Priority  int
			BlockMode string
			Schedule  struct {
				TZ       string
				Weekdays []string
			}
			BlockedServices []string
		}
	}
	api.do(http.MethodGet, "/objects/policies/default/work", nil, &got)
	if got.Spec.Priority != 9 || got.Spec.BlockMode != "refused" || got.Spec.Schedule.TZ != "Europe/Berlin" ||
		strings.Join(got.Spec.Schedule.Weekdays, ",") != "mon,tue,wed,thu" || strings.Join(got.Spec.BlockedServices, ",") != "youtube" {
		t.Errorf("policy after the edit: %+v", got.Spec)
	}
	// The page shows the saved policy: its grid has no Friday.
	b.waitJS("the saved grid", `document.querySelectorAll('[data-testid=policy] table.week td.on').length === 32`)
	b.waitText("tr[data-policy='default/work']", "9")
}
