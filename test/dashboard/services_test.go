package dashboard_test

import (
	"bytes"
	"encoding/json"
	"net/http"
	"net/http/cookiejar"
	"testing"
	"time"

	"github.com/miekg/dns"

	"github.com/svcdns/svc/test/nodetest"
)

// apiClient is a signed-in REST client (cookie session and CSRF header),
// for the setup a test needs beside the browser.
type apiClient struct {
	t    *testing.T
	base string
	c    *http.Client
	csrf string
}

func signIn(t *testing.T, s *server, user, password string) *apiClient {
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
