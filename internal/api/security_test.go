package api

import (
	"bytes"
	"context"
	"io"
	"log/slog"
	"net/http"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/svcdns/svc/internal/auth"
	"github.com/svcdns/svc/internal/store"
)

func TestCookieFlagsAndCSRF(t *testing.T) {
	e := newEnv(t)
	c := e.anon()
	r := c.do("POST", "/auth/login", map[string]string{"username": "admin", "password": adminPW})
	sc := r.hdr.Get("Set-Cookie")
	for _, want := range []string{auth.CookieBaseName + "=", "HttpOnly", "SameSite=Lax", "Path=/"} {
		if !strings.Contains(sc, want) {
			t.Errorf("Set-Cookie %q lacks %q", sc, want)
		}
	}
	csrf, _ := r.json(t)["csrf"].(string)
	body := map[string]any{"description": "x"}
	if r := c.do("POST", "/auth/tokens", body); r.code != 403 || r.errKey(t) != KeyCSRF {
		t.Errorf("no CSRF header: %d %s", r.code, r.body)
	}
	if r := c.do("POST", "/auth/tokens", body, "X-Service-CSRF", "forged"); r.code != 403 || r.errKey(t) != KeyCSRF {
		t.Errorf("wrong CSRF header: %d %s", r.code, r.body)
	}
	if r := c.do("POST", "/auth/tokens", body, "X-Service-CSRF", csrf, "Sec-Fetch-Site", "cross-site"); r.code != 403 || r.errKey(t) != KeyCSRF {
		t.Errorf("cross-site: %d %s", r.code, r.body)
	}
	if r := c.do("POST", "/auth/tokens", body, "X-Service-CSRF", csrf); r.code != 201 {
		t.Errorf("valid CSRF: %d %s", r.code, r.body)
	}
	if r := c.do("POST", "/auth/logout", nil); r.code != 403 || r.errKey(t) != KeyCSRF {
		t.Errorf("logout without CSRF: %d %s", r.code, r.body)
	}
	if r := e.anon().do("POST", "/auth/login", map[string]string{"username": "admin", "password": adminPW}, "Sec-Fetch-Site", "cross-site"); r.code != 403 || r.errKey(t) != KeyCSRF {
		t.Errorf("cross-site login: %d %s", r.code, r.body)
	}
}

func TestSecureCookieHostPrefix(t *testing.T) {
	e := newEnv(t, func(o *Options, _ *Deps) { o.SessionSecure = "true" })
	r := e.anon().do("POST", "/auth/login", map[string]string{"username": "admin", "password": adminPW})
	if sc := r.hdr.Get("Set-Cookie"); !strings.HasPrefix(sc, "__Host-"+auth.CookieBaseName+"=") || !strings.Contains(sc, "Secure") {
		t.Errorf("Set-Cookie %q", sc)
	}
}

func TestLockouts(t *testing.T) {
	e := newEnv(t)
	e.addUser("bob", "bob-password")
	a := e.anon()
	for i := range 5 {
		if r := a.do("POST", "/auth/login", map[string]string{"username": "bob", "password": "wrong-password"}); r.code != 401 {
			t.Fatalf("failure %d: %d %s", i, r.code, r.body)
		}
	}
	r := a.do("POST", "/auth/login", map[string]string{"username": "bob", "password": "bob-password"})
	if r.code != 429 || r.errKey(t) != KeyRateLimited || r.hdr.Get("Retry-After") == "" {
		t.Fatalf("locked IP: %d %v %s", r.code, r.hdr, r.body)
	}
	e.clock.add(5*time.Minute + time.Second)
	if r := a.do("POST", "/auth/login", map[string]string{"username": "bob", "password": "bob-password"}); r.code != 200 {
		t.Fatalf("after the IP lock: %d %s", r.code, r.body)
	}
	// 10 failures per user lock the user (from several addresses).
	for i := range 10 {
		e.clock.add(10 * time.Second)
		e.srv.lockout.Fail("192.0.2."+string(rune('0'+i)), "bob")
	}
	if r := a.do("POST", "/auth/login", map[string]string{"username": "bob", "password": "bob-password"}); r.code != 429 {
		t.Fatalf("locked user: %d %s", r.code, r.body)
	}
	e.clock.add(15*time.Minute + time.Second)
	if r := a.do("POST", "/auth/login", map[string]string{"username": "bob", "password": "bob-password"}); r.code != 200 {
		t.Fatalf("after the user lock: %d %s", r.code, r.body)
	}
}

func TestSessionExpiryAndDisabledUser(t *testing.T) {
	e := newEnv(t)
	e.addUser("carol", "carol-password")
	c := e.login("carol", "carol-password")
	if r := c.do("GET", "/auth/me", nil); r.code != 200 {
		t.Fatalf("me: %d", r.code)
	}
	e.clock.add(31 * time.Minute)
	if r := c.do("GET", "/auth/me", nil); r.code != 401 {
		t.Fatalf("idle session: %d", r.code)
	}
	c = e.login("carol", "carol-password")
	ctx := context.Background()
	u, err := e.srv.dir.GetUser(ctx, "carol")
	if err != nil {
		t.Fatal(err)
	}
	u.Disabled = true
	if _, err := e.srv.dir.SaveUser(ctx, u, store.ManagerAPI); err != nil {
		t.Fatal(err)
	}
	if r := c.do("GET", "/auth/me", nil); r.code != 401 {
		t.Fatalf("disabled user's live session: %d", r.code)
	}
	if r := e.anon().do("POST", "/auth/login", map[string]string{"username": "carol", "password": "carol-password"}); r.code != 403 || r.errKey(t) != KeyAccountDisabled {
		t.Fatalf("disabled login: %d %s", r.code, r.body)
	}
}

func TestPasswordChangeRevokesSessions(t *testing.T) {
	e := newEnv(t)
	e.addUser("dave", "dave-password")
	old := e.login("dave", "dave-password")
	c := e.login("dave", "dave-password")
	r := c.do("POST", "/auth/password", map[string]any{"currentPassword": "dave-password", "newPassword": "short"})
	if r.code != 400 || r.errKey(t) != KeyInvalid {
		t.Fatalf("short password: %d %s", r.code, r.body)
	}
	r = c.do("POST", "/auth/password", map[string]any{"currentPassword": "dave-password", "newPassword": "dave-new-password"})
	if r.code != 200 {
		t.Fatalf("change: %d %s", r.code, r.body)
	}
	c.csrf, _ = r.json(t)["csrf"].(string)
	if r := c.do("GET", "/auth/me", nil); r.code != 200 {
		t.Errorf("fresh cookie after change: %d %s", r.code, r.body)
	}
	if r := old.do("GET", "/auth/me", nil); r.code != 401 {
		t.Errorf("earlier session: %d", r.code)
	}
}

func TestMustChangePassword(t *testing.T) {
	e := newEnv(t, func(o *Options, _ *Deps) { o.Env = func(string) string { return "" } })
	ctx := context.Background()
	u, _ := e.srv.dir.GetUser(ctx, "admin")
	if !u.MustChangePassword {
		t.Fatal("generated admin password must be changed")
	}
	h, _ := e.srv.hasher.Hash(ctx, "known-password")
	u.PasswordHash = h
	if _, err := e.srv.dir.SaveUser(ctx, u, store.ManagerAPI); err != nil {
		t.Fatal(err)
	}
	c := e.login("admin", "known-password")
	if r := c.do("GET", "/iam/users", nil); r.code != 403 || r.errKey(t) != KeyPasswordChangeRequired {
		t.Errorf("before change: %d %s", r.code, r.body)
	}
	if r := c.do("GET", "/auth/me", nil); r.code != 200 {
		t.Errorf("me is self-service: %d", r.code)
	}
}

func TestTokens(t *testing.T) {
	e := newEnv(t, func(o *Options, _ *Deps) { o.TokenMaxLifetime = 48 * time.Hour })
	admin := e.login("admin", adminPW)
	r := admin.do("POST", "/auth/tokens", map[string]any{"expiresIn": "100h"})
	if r.code != 400 || r.errKey(t) != KeyInvalid {
		t.Fatalf("over maxLifetime: %d %s", r.code, r.body)
	}
	r = admin.do("POST", "/auth/tokens", map[string]any{"expiresIn": "1h", "scopes": []string{"viewer"}})
	if r.code != 201 {
		t.Fatalf("create: %d %s", r.code, r.body)
	}
	tok := r.json(t)["token"].(string)
	id, err := auth.ParseToken(tok)
	if err != nil {
		t.Fatal(err)
	}
	stored, _ := e.srv.dir.GetToken(context.Background(), id)
	if stored.Hash != auth.HashToken(tok) || strings.Contains(stored.Hash, tok) {
		t.Fatal("only the hash is stored")
	}
	tc := e.withToken(tok)
	if r := tc.do("GET", "/objects/dnszones", nil); r.code != 200 {
		t.Errorf("viewer scope reads: %d", r.code)
	}
	if r := tc.do("GET", "/iam/users", nil); r.code != 403 {
		t.Errorf("viewer scope narrows admin: %d", r.code)
	}
	if r := tc.do("POST", "/auth/tokens", map[string]any{"scopes": []string{"admin"}}); r.code != 403 {
		t.Errorf("widening refused: %d %s", r.code, r.body)
	}
	if r := tc.do("POST", "/auth/tokens", map[string]any{}); r.code != 201 || r.json(t)["expiresAt"] == nil {
		t.Errorf("default lifetime cut to the creator's: %d %s", r.code, r.body)
	}
	if r := tc.do("POST", "/auth/tokens", map[string]any{"expiresIn": "2h"}); r.code != 400 {
		t.Errorf("outliving refused: %d %s", r.code, r.body)
	}
	// Every failure is the same 401.
	forged := tok[:len(tok)-1] + string("AB"[strings.IndexByte("AB", tok[len(tok)-1])+1&1])
	var bodies []string
	for _, bad := range []string{forged, "svc_aaaaaaaaaaaa_" + strings.Repeat("A", 43), "svc_short", "not-a-token"} {
		r := e.withToken(bad).do("GET", "/version", nil)
		if r.code != 401 || r.errKey(t) != KeyUnauthenticated {
			t.Errorf("bad token %q: %d", bad, r.code)
		}
		m := r.json(t)["error"].(map[string]any)
		bodies = append(bodies, m["message"].(string)+m["hint"].(string))
	}
	for _, b := range bodies[1:] {
		if b != bodies[0] {
			t.Errorf("401 bodies differ: %q vs %q", b, bodies[0])
		}
	}
	e.clock.add(time.Hour)
	if r := tc.do("GET", "/auth/me", nil); r.code != 401 {
		t.Errorf("expired token: %d", r.code)
	}
	// A wrong token secret is 401 even with a valid cookie.
	admin.token = forged
	if r := admin.do("GET", "/auth/me", nil); r.code != 401 {
		t.Errorf("bad token with a cookie: %d", r.code)
	}
}

func TestBootstrapToken(t *testing.T) {
	tok, _, _ := auth.NewToken()
	e := newEnv(t, func(o *Options, _ *Deps) {
		o.Env = func(k string) string {
			return map[string]string{"SERVICE_ADMIN_PASSWORD": adminPW, "SERVICE_BOOTSTRAP_TOKEN": tok}[k]
		}
	})
	r := e.withToken(tok).do("GET", "/iam/users", nil)
	if r.code != 200 {
		t.Fatalf("bootstrap token: %d %s", r.code, r.body)
	}
	r = e.withToken(tok).do("GET", "/auth/me", nil)
	if p := r.json(t)["principal"].(map[string]any); p["kind"] != "ServiceAccount" || p["name"] != auth.BootstrapServiceAccount {
		t.Errorf("principal %v", p)
	}
}

func TestAuditTrail(t *testing.T) {
	e := newEnv(t)
	tok := e.adminToken()
	c := e.withToken(tok)
	zone := map[string]any{"apiVersion": "service.io/v1alpha1", "kind": "DNSZone", "metadata": map[string]any{"name": "example"}, "spec": map[string]any{"zoneName": "example.com"}}
	if r := c.do("POST", "/apply", zone); r.code != 200 {
		t.Fatalf("apply: %d %s", r.code, r.body)
	}
	r := c.do("GET", "/audit?order=desc&kind=DNSZone", nil)
	items, _ := r.json(t)["items"].([]any)
	if r.code != 200 || len(items) != 1 {
		t.Fatalf("audit: %d %s", r.code, r.body)
	}
	ev := items[0].(map[string]any)
	if ev["name"] != "example" || ev["decision"] != auth.PathLocal || ev["requestID"] == "" || ev["actor"].(map[string]any)["name"] != "admin" {
		t.Errorf("event %v", ev)
	}
	if n, err := e.srv.audit.Verify(context.Background()); err != nil || n < 2 {
		t.Errorf("verify: %d %v", n, err)
	}
	if r := c.do("GET", "/audit?order=sideways", nil); r.code != http.StatusBadRequest {
		t.Errorf("bad order: %d", r.code)
	}
}

// A password typed into the username field never reaches the log or the
// audit trail: a name that is no account is shown as a keyed hash, the
// same for every attempt; a real account's name is shown as is.
func TestFailedLoginNameNotLogged(t *testing.T) {
	var logs bytes.Buffer
	var mu sync.Mutex
	e := newEnv(t, func(_ *Options, d *Deps) {
		d.Logger = slog.New(slog.NewTextHandler(lockedWriter{&mu, &logs}, nil))
	})
	const secret = "Tr0ub4dor&3-typed-as-name"
	for range 2 {
		r := e.anon().do("POST", "/auth/login", map[string]any{"username": secret, "password": "whatever123"})
		if r.code != http.StatusUnauthorized {
			t.Fatalf("login: %d %s", r.code, r.body)
		}
	}
	if r := e.anon().do("POST", "/auth/login", map[string]any{"username": "admin", "password": "not the password"}); r.code != http.StatusUnauthorized {
		t.Fatalf("admin login: %d %s", r.code, r.body)
	}
	c := e.withToken(e.adminToken())
	r := c.do("GET", "/audit?order=desc&limit=50", nil)
	if r.code != 200 {
		t.Fatalf("audit: %d %s", r.code, r.body)
	}
	mu.Lock()
	logText := logs.String()
	mu.Unlock()
	for what, text := range map[string]string{"log": logText, "audit": string(r.body)} {
		if strings.Contains(text, secret) || strings.Contains(text, "Tr0ub4dor") {
			t.Errorf("%s carries the typed name:\n%s", what, text)
		}
	}
	if n := strings.Count(logText, "unknown:"); n < 2 {
		t.Errorf("failed logins of an unknown name logged %d times with a hash, want 2:\n%s", n, logText)
	}
	if !strings.Contains(logText, `user="\"admin\""`) && !strings.Contains(logText, `user=admin`) && !strings.Contains(logText, `"admin"`) {
		t.Errorf("failed login of a real account does not name it:\n%s", logText)
	}
	if !strings.Contains(string(r.body), `"unknown:`) {
		t.Errorf("audit has no hashed name for the unknown login:\n%s", r.body)
	}
}

type lockedWriter struct {
	mu *sync.Mutex
	w  io.Writer
}

func (l lockedWriter) Write(p []byte) (int, error) {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.w.Write(p)
}
