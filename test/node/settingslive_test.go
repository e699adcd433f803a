package node_test

import (
	"crypto/tls"
	"encoding/json"
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/svcdns/svc/test/nodetest"
)

// TestAuthSettingsApplyLive: auth.session.idleTimeout, .lifetime, .secure
// and auth.tokens.maxLifetime changed through the API take effect on the
// running node (issue #23 item 6): /auth/status, the login cookie and token
// creation show the new values, and nothing is reported as restart pending.
func TestAuthSettingsApplyLive(t *testing.T) {
	tn := startNode(t, nodetest.SettingsFile(),
		nodetest.Env("SERVICE_BOOTSTRAP_TOKEN="+bootstrapToken, "SERVICE_ADMIN_PASSWORD=live settings password"))

	session := func() (idle, life string) {
		code, body := apiCall(t, tn, "GET", "/auth/status", "")
		var st struct {
			Session struct{ IdleTimeout, Lifetime string }
		}
		if code != 200 || json.Unmarshal([]byte(body), &st) != nil {
			t.Fatalf("GET /auth/status = %d %s", code, body)
		}
		return st.Session.IdleTimeout, st.Session.Lifetime
	}
	if idle, life := session(); idle != "30m0s" || life != "12h0m0s" {
		t.Fatalf("defaults: idleTimeout %s lifetime %s, want 30m0s and 12h0m0s", idle, life)
	}
	loginCookie := func() *http.Cookie {
		t.Helper()
		client := &http.Client{Timeout: 10 * time.Second, Transport: &http.Transport{TLSClientConfig: &tls.Config{InsecureSkipVerify: true}}}
		req, _ := http.NewRequest("POST", "https://"+tn.Addrs.API+"/api/v1/auth/login",
			strings.NewReader(`{"username":"admin","password":"live settings password"}`))
		req.Header.Set("Content-Type", "application/json")
		resp, err := client.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		defer resp.Body.Close()
		if resp.StatusCode != 200 || len(resp.Cookies()) == 0 {
			t.Fatalf("login = %d, cookies %v", resp.StatusCode, resp.Cookies())
		}
		return resp.Cookies()[0]
	}
	// expiresAt of /auth/me with the session cookie: login time + lifetime.
	expires := func(c *http.Cookie) time.Duration {
		t.Helper()
		client := &http.Client{Timeout: 10 * time.Second, Transport: &http.Transport{TLSClientConfig: &tls.Config{InsecureSkipVerify: true}}}
		req, _ := http.NewRequest("GET", "https://"+tn.Addrs.API+"/api/v1/auth/me", nil)
		req.AddCookie(c)
		resp, err := client.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		defer resp.Body.Close()
		var me struct{ ExpiresAt time.Time }
		if err := json.NewDecoder(resp.Body).Decode(&me); err != nil || resp.StatusCode != 200 {
			t.Fatalf("GET /auth/me with the cookie = %d %v", resp.StatusCode, err)
		}
		return time.Until(me.ExpiresAt)
	}
	if c := loginCookie(); !c.Secure || expires(c) < 11*time.Hour {
		t.Fatalf("session before the change: Secure=%v expires in %s, want Secure over TLS and 12h", c.Secure, expires(c))
	}

	code, body := apiCall(t, tn, "PATCH", "/settings", `{"auth":{"session":{"idleTimeout":"1m","lifetime":"2h","secure":"false"}}}`)
	if code != 200 {
		t.Fatalf("PATCH /settings = %d %s", code, body)
	}
	if strings.Contains(body, "auth.session") {
		t.Errorf("PATCH /settings reports auth.session as restart pending: %s", body)
	}
	if idle, life := session(); idle != "1m0s" || life != "2h0m0s" {
		t.Errorf("after PATCH: /auth/status idleTimeout %s lifetime %s, want 1m0s and 2h0m0s without a restart", idle, life)
	}
	c := loginCookie()
	if c.Secure || strings.HasPrefix(c.Name, "__Host-") {
		t.Errorf("after auth.session.secure=false the login cookie is %s Secure=%v, want a plain cookie", c.Name, c.Secure)
	}
	if left := expires(c); left > 2*time.Hour || left < time.Hour {
		t.Errorf("after lifetime=2h a new session expires in %s, want 2h", left)
	}

	// auth.tokens.maxLifetime is node scope: PATCH /node/config.
	if code, body := apiCall(t, tn, "POST", "/auth/tokens", `{"expiresIn":"48h"}`); code != 201 {
		t.Fatalf("token of 48h before the cap = %d %s", code, body)
	}
	if code, body := apiCall(t, tn, "PATCH", "/node/config", `{"auth":{"tokens":{"maxLifetime":"24h"}}}`); code != 200 {
		t.Fatalf("PATCH /node/config = %d %s", code, body)
	}
	code, body = apiCall(t, tn, "POST", "/auth/tokens", `{"expiresIn":"48h"}`)
	if code != 400 || !strings.Contains(body, "auth.tokens.maxLifetime") {
		t.Errorf("token of 48h after maxLifetime=24h = %d %s, want 400 naming auth.tokens.maxLifetime", code, body)
	}
	code, body = apiCall(t, tn, "GET", "/settings", "")
	if code != 200 || strings.Contains(body, `"restartPending":["auth`) {
		t.Errorf("GET /settings = %d, restart pending names an auth key: %s", code, body)
	}
}
