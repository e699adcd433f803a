package api

import (
	"context"
	"io"
	"net/http"
	"net/http/cookiejar"
	"net/url"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"

	"github.com/svcdns/svc/internal/auth"
	"github.com/svcdns/svc/internal/oidc"
	"github.com/svcdns/svc/internal/oidc/oidctest"
	"github.com/svcdns/svc/internal/store"
)

// oidcEnv is an API server with provider "corp" served by an in-process
// identity provider.
type oidcEnv struct {
	*testEnv
	ip         *oidctest.Provider
	secretFile string
}

func newOIDCEnv(t *testing.T, mutate ...func(*oidc.Spec)) *oidcEnv {
	t.Helper()
	ip := oidctest.New(t, "svc", "s3cret")
	secretFile := filepath.Join(t.TempDir(), "client-secret")
	if err := os.WriteFile(secretFile, []byte("s3cret\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	sp := oidc.Spec{ID: "corp", DisplayName: "Corp SSO", IssuerURL: ip.Issuer, ClientID: "svc", ClientSecretFile: secretFile, Audiences: []string{"svc-cli"}}
	for _, m := range mutate {
		m(&sp)
	}
	e := newEnv(t, func(o *Options, d *Deps) {
		set, err := oidc.NewSet([]oidc.Spec{sp}, oidc.Options{Now: o.Clock, HTTPClient: ip.Client()})
		if err != nil {
			t.Fatal(err)
		}
		d.OIDC = set
		o.RBACBindings = append(o.RBACBindings, auth.Binding{Name: "corp-admins", Subject: auth.Subject{Kind: "Group", Name: "corp:admins"}, Role: auth.RoleAdmin, Scope: auth.ClusterScope})
	})
	ip.Now = e.clock.now
	ip.Set(func(p *oidctest.Provider) { p.Claims = map[string]any{"groups": []any{"dev"}} })
	return &oidcEnv{testEnv: e, ip: ip, secretFile: secretFile}
}

// browser is a cookie jar client that does not follow redirects, so each
// hop of the login is checked; it trusts the provider's certificate.
type browser struct {
	e  *oidcEnv
	hc *http.Client
}

func (e *oidcEnv) browser() *browser {
	jar, _ := cookiejar.New(nil)
	return &browser{e: e, hc: &http.Client{Jar: jar, Transport: e.ip.Client().Transport, Timeout: 30 * time.Second,
		CheckRedirect: func(*http.Request, []*http.Request) error { return http.ErrUseLastResponse }}}
}

func (b *browser) get(u string) resp {
	b.e.t.Helper()
	res, err := b.hc.Get(u)
	if err != nil {
		b.e.t.Fatal(err)
	}
	defer res.Body.Close()
	body, _ := io.ReadAll(res.Body)
	return resp{code: res.StatusCode, hdr: res.Header, body: body}
}

// start begins a login and follows the provider's redirect; it returns the
// callback URL the provider sent the browser to.
func (b *browser) start(query string) string {
	b.e.t.Helper()
	r := b.get(b.e.base + "/auth/oidc/corp/start" + query)
	if r.code != http.StatusFound {
		b.e.t.Fatalf("start: %d %s", r.code, r.body)
	}
	loc := r.hdr.Get("Location")
	if !strings.HasPrefix(loc, b.e.ip.Issuer+"/authorize?") {
		b.e.t.Fatalf("start redirects to %q", loc)
	}
	r = b.get(loc)
	if r.code != http.StatusFound {
		b.e.t.Fatalf("authorize: %d %s", r.code, r.body)
	}
	return r.hdr.Get("Location")
}

// login runs the whole flow and returns a cookie client with its CSRF token.
func (b *browser) login() *client {
	b.e.t.Helper()
	cb := b.start("")
	r := b.get(cb)
	if r.code != http.StatusFound || r.hdr.Get("Location") != "/" {
		b.e.t.Fatalf("callback: %d %q %s", r.code, r.hdr.Get("Location"), r.body)
	}
	c := &client{e: b.e.testEnv, hc: &http.Client{Jar: b.hc.Jar, Timeout: 30 * time.Second}}
	me := c.do("GET", "/auth/me", nil)
	if me.code != 200 {
		b.e.t.Fatalf("me: %d %s", me.code, me.body)
	}
	c.csrf, _ = me.json(b.e.t)["csrf"].(string)
	return c
}

func (e *oidcEnv) applyBinding(name, subjectKind, subject, role string) {
	e.t.Helper()
	o := &unstructured.Unstructured{Object: map[string]any{"apiVersion": auth.APIVersion, "kind": auth.KindRoleBinding,
		"metadata": map[string]any{"name": name},
		"spec":     map[string]any{"subject": map[string]any{"kind": subjectKind, "name": subject}, "role": role, "scope": map[string]any{"kind": "cluster"}}}}
	if _, err := e.st.Apply(context.Background(), o, store.ApplyOptions{Manager: store.ManagerAPI}); err != nil {
		e.t.Fatal(err)
	}
	e.srv.bindings.invalidate()
}

func (e *oidcEnv) deleteBinding(name string) {
	e.t.Helper()
	if err := e.st.Delete(context.Background(), auth.KindRoleBinding, "", name, store.DeleteOptions{Manager: store.ManagerAPI}); err != nil {
		e.t.Fatal(err)
	}
	e.srv.bindings.invalidate()
}

func roles(t *testing.T, r resp) []string {
	t.Helper()
	var out []string
	for _, v := range r.json(t)["roles"].([]any) {
		out = append(out, v.(string))
	}
	slices.Sort(out)
	return out
}

func TestOIDCBrowserLogin(t *testing.T) {
	e := newOIDCEnv(t)
	e.applyBinding("dev-viewers", "Group", "corp:dev", auth.RoleViewer)
	b := e.browser()
	cb := b.start("?redirect=/zones?x=1")
	u, _ := url.Parse(cb)
	if want := e.base + "/auth/oidc/corp/callback"; !strings.HasPrefix(cb, want+"?") || u.Query().Get("code") == "" {
		t.Fatalf("provider redirects to %q", cb)
	}
	r := b.get(cb)
	if r.code != http.StatusFound || r.hdr.Get("Location") != "/zones?x=1" {
		t.Fatalf("callback: %d %q %s", r.code, r.hdr.Get("Location"), r.body)
	}
	// The browser holds only the session cookie.
	apiURL, _ := url.Parse(e.base + "/")
	var names []string
	for _, c := range b.hc.Jar.Cookies(apiURL) {
		names = append(names, c.Name)
	}
	if !slices.Equal(names, []string{auth.CookieBaseName}) {
		t.Fatalf("cookies after login: %v", names)
	}
	c := &client{e: e.testEnv, hc: &http.Client{Jar: b.hc.Jar, Timeout: 30 * time.Second}}
	me := c.do("GET", "/auth/me", nil)
	if me.code != 200 {
		t.Fatalf("me: %d %s", me.code, me.body)
	}
	p := me.json(t)["principal"].(map[string]any)
	if p["name"] != "corp:alice" || p["provider"] != "corp" || p["authMethod"] != "session" || p["id"] != "alice" || len(p["groups"].([]any)) != 0 {
		t.Fatalf("principal %v", p)
	}
	if got := roles(t, me); !slices.Equal(got, []string{"viewer"}) {
		t.Fatalf("roles %v", got)
	}
	if r := c.do("GET", "/objects/dnszones", nil); r.code != 200 {
		t.Fatalf("viewer read: %d %s", r.code, r.body)
	}
	// Frozen: a binding added after login gives the session nothing.
	e.applyBinding("dev-operators", "Group", "corp:dev", auth.RoleOperator)
	if got := roles(t, c.do("GET", "/auth/me", nil)); !slices.Equal(got, []string{"viewer"}) {
		t.Fatalf("roles after a new binding: %v", got)
	}
	// A bearer ID token of the same person is evaluated live.
	bearer := e.withToken(e.ip.IDToken(map[string]any{"sub": "alice", "groups": []any{"dev"}}))
	if got := roles(t, bearer.do("GET", "/auth/me", nil)); !slices.Equal(got, []string{"operator", "viewer"}) {
		t.Fatalf("bearer roles %v", got)
	}
	// Removing the binding stops the session's grant; re-creating it does
	// not bring it back (the binding changed after the session's iat).
	e.deleteBinding("dev-viewers")
	if got := roles(t, c.do("GET", "/auth/me", nil)); len(got) != 0 {
		t.Fatalf("roles after the binding was removed: %v", got)
	}
	if r := c.do("GET", "/objects/dnszones", nil); r.code != 403 || r.errKey(t) != KeyForbidden {
		t.Fatalf("read after the binding was removed: %d %s", r.code, r.body)
	}
	e.applyBinding("dev-viewers", "Group", "corp:dev", auth.RoleViewer)
	if got := roles(t, c.do("GET", "/auth/me", nil)); len(got) != 0 {
		t.Fatalf("roles after the binding was re-created: %v", got)
	}
	// A new login freezes the current grants.
	c2 := e.browser().login()
	if got := roles(t, c2.do("GET", "/auth/me", nil)); !slices.Equal(got, []string{"operator", "viewer"}) {
		t.Fatalf("roles of a new login: %v", got)
	}
	// OIDC users have no password; they own tokens with frozen grants
	// (TestOIDCOwnerTokens); logout works.
	if r := c2.do("POST", "/auth/password", map[string]any{"currentPassword": "x", "newPassword": "yyyyyyyyyy"}); r.code != 400 {
		t.Fatalf("password: %d %s", r.code, r.body)
	}
	if r := c2.do("POST", "/auth/tokens", map[string]any{}); r.code != 201 || !slices.Equal(toStrings(r.json(t)["frozenGrants"]), []string{"operator", "viewer"}) {
		t.Fatalf("token: %d %s", r.code, r.body)
	}
	if r := c2.do("POST", "/auth/logout", nil); r.code != 204 {
		t.Fatalf("logout: %d %s", r.code, r.body)
	}
	if r := c2.do("GET", "/auth/me", nil); r.code != 401 {
		t.Fatalf("me after logout: %d", r.code)
	}
}

// TestOIDCGroupAdmin: a group binding to admin is frozen at login too.
func TestOIDCGroupAdmin(t *testing.T) {
	e := newOIDCEnv(t)
	e.ip.Set(func(p *oidctest.Provider) { p.Claims = map[string]any{"sub": "root-1", "groups": []any{"admins"}} })
	c := e.browser().login()
	if got := roles(t, c.do("GET", "/auth/me", nil)); !slices.Equal(got, []string{"admin"}) {
		t.Fatalf("roles %v", got)
	}
	if r := c.do("GET", "/iam/users", nil); r.code != 200 {
		t.Fatalf("admin read: %d %s", r.code, r.body)
	}
	// Unsafe methods need the CSRF header like every cookie session.
	noCSRF := *c
	noCSRF.csrf = ""
	if r := noCSRF.do("POST", "/cache/flush", map[string]any{}); r.code != 403 || r.errKey(t) != KeyCSRF {
		t.Fatalf("without csrf: %d %s", r.code, r.body)
	}
}

func TestOIDCLoginFailures(t *testing.T) {
	e := newOIDCEnv(t)
	t.Run("unknown provider", func(t *testing.T) {
		for _, p := range []string{"/auth/oidc/nope/start", "/auth/oidc/nope/callback?code=a&state=b"} {
			if r := e.anon().do("GET", p, nil); r.code != 404 || r.errKey(t) != KeyNotFound {
				t.Fatalf("%s: %d %s", p, r.code, r.body)
			}
		}
	})
	t.Run("redirect elsewhere", func(t *testing.T) {
		for _, v := range []string{"//evil.example/", "https://evil.example/", "/\\evil.example", "zones"} {
			if r := e.browser().get(e.base + "/auth/oidc/corp/start?redirect=" + url.QueryEscape(v)); r.code != 400 || r.errKey(t) != KeyInvalid {
				t.Fatalf("%q: %d %s", v, r.code, r.body)
			}
		}
	})
	t.Run("no login state", func(t *testing.T) {
		cb := e.browser().start("")
		if r := e.browser().get(cb); r.code != 400 || r.errKey(t) != KeyInvalid {
			t.Fatalf("%d %s", r.code, r.body)
		}
	})
	t.Run("wrong state", func(t *testing.T) {
		b := e.browser()
		cb, _ := url.Parse(b.start(""))
		q := cb.Query()
		q.Set("state", "forged")
		cb.RawQuery = q.Encode()
		r := b.get(cb.String())
		if r.code != 400 || r.errKey(t) != KeyInvalid {
			t.Fatalf("%d %s", r.code, r.body)
		}
		if !strings.Contains(strings.Join(r.hdr.Values("Set-Cookie"), "\n"), loginCookieBase+"=;") {
			t.Fatalf("login cookie not cleared: %q", r.hdr.Values("Set-Cookie"))
		}
	})
	t.Run("expired login state", func(t *testing.T) {
		b := e.browser()
		cb := b.start("")
		e.clock.add(oidc.LoginTTL + time.Second)
		if r := b.get(cb); r.code != 400 || r.errKey(t) != KeyInvalid {
			t.Fatalf("%d %s", r.code, r.body)
		}
	})
	t.Run("provider refuses", func(t *testing.T) {
		e.ip.Set(func(p *oidctest.Provider) { p.AuthorizeError = "access_denied" })
		defer e.ip.Set(func(p *oidctest.Provider) { p.AuthorizeError = "" })
		b := e.browser()
		r := b.get(b.start(""))
		if r.code != 401 || r.errKey(t) != KeyUnauthenticated || !strings.Contains(string(r.body), "access_denied") {
			t.Fatalf("%d %s", r.code, r.body)
		}
	})
	t.Run("nonce mismatch", func(t *testing.T) {
		e.ip.Set(func(p *oidctest.Provider) { p.TokenNonce = "replayed" })
		defer e.ip.Set(func(p *oidctest.Provider) { p.TokenNonce = "" })
		b := e.browser()
		if r := b.get(b.start("")); r.code != 401 || r.errKey(t) != KeyUnauthenticated {
			t.Fatalf("%d %s", r.code, r.body)
		}
	})
	t.Run("code of another login (PKCE)", func(t *testing.T) {
		b := e.browser()
		first, _ := url.Parse(b.start(""))
		second, _ := url.Parse(b.start("")) // replaces the login cookie
		q := second.Query()
		q.Set("code", first.Query().Get("code"))
		second.RawQuery = q.Encode()
		if r := b.get(second.String()); r.code != 401 || r.errKey(t) != KeyUnauthenticated {
			t.Fatalf("%d %s", r.code, r.body)
		}
	})
	t.Run("code reused", func(t *testing.T) {
		b := e.browser()
		cb := b.start("")
		if r := b.get(cb); r.code != 302 {
			t.Fatalf("first: %d %s", r.code, r.body)
		}
		if r := b.get(cb); r.code != 400 || r.errKey(t) != KeyInvalid {
			t.Fatalf("second (login cookie gone): %d %s", r.code, r.body)
		}
	})
	t.Run("wrong client secret", func(t *testing.T) {
		if err := os.WriteFile(e.secretFile, []byte("wrong"), 0o600); err != nil {
			t.Fatal(err)
		}
		defer os.WriteFile(e.secretFile, []byte("s3cret"), 0o600)
		b := e.browser()
		r := b.get(b.start(""))
		if r.code != 401 || r.errKey(t) != KeyUnauthenticated || strings.Contains(string(r.body), "s3cret") {
			t.Fatalf("%d %s", r.code, r.body)
		}
	})
	t.Run("provider unreachable", func(t *testing.T) {
		b := e.browser()
		cb := b.start("")
		e.ip.Set(func(p *oidctest.Provider) { p.TokenStatus = http.StatusBadGateway })
		defer e.ip.Set(func(p *oidctest.Provider) { p.TokenStatus = 0 })
		if r := b.get(cb); r.code != 503 || r.errKey(t) != KeyUnavailable {
			t.Fatalf("%d %s", r.code, r.body)
		}
	})
}

func TestOIDCBearer(t *testing.T) {
	e := newOIDCEnv(t)
	admin := e.withToken(e.ip.IDToken(map[string]any{"sub": "root-1", "groups": []any{"admins"}}))
	me := admin.do("GET", "/auth/me", nil)
	if me.code != 200 {
		t.Fatalf("me: %d %s", me.code, me.body)
	}
	p := me.json(t)["principal"].(map[string]any)
	if p["name"] != "corp:root-1" || p["authMethod"] != "token" || p["provider"] != "corp" {
		t.Fatalf("principal %v", p)
	}
	if r := admin.do("GET", "/iam/users", nil); r.code != 200 {
		t.Fatalf("admin read: %d %s", r.code, r.body)
	}
	// Bearer requests need no CSRF header.
	if r := admin.do("POST", "/cache/flush", map[string]any{}); r.code == 401 || r.code == 403 {
		t.Fatalf("bearer write: %d %s", r.code, r.body)
	}
	for name, tok := range map[string]string{
		"wrong audience": e.ip.IDToken(map[string]any{"sub": "a", "aud": "other"}),
		"access token":   e.ip.Sign(map[string]any{"sub": "a", "iss": e.ip.Issuer, "aud": "svc", "exp": e.clock.now().Add(time.Hour).Unix()}, map[string]any{"typ": "at+jwt"}),
		"unknown issuer": e.ip.IDToken(map[string]any{"sub": "a", "iss": "https://elsewhere.example"}),
		"expired":        e.ip.IDToken(map[string]any{"sub": "a", "exp": e.clock.now().Add(-time.Second).Unix()}),
	} {
		r := e.withToken(tok).do("GET", "/auth/me", nil)
		if r.code != 401 || r.errKey(t) != KeyUnauthenticated || r.hdr.Get("WWW-Authenticate") == "" {
			t.Errorf("%s: %d %s", name, r.code, r.body)
		}
		if msg := r.json(t)["error"].(map[string]any)["message"].(string); msg != "authentication required" {
			t.Errorf("%s: message %q says more than needed", name, msg)
		}
	}
	// A rejected bearer credential is 401 even with a valid cookie.
	c := e.browser().login()
	c.token = e.ip.IDToken(map[string]any{"sub": "a", "aud": "other"})
	if r := c.do("GET", "/auth/me", nil); r.code != 401 {
		t.Fatalf("bad bearer with cookie: %d", r.code)
	}
}

func TestOIDCProviderLists(t *testing.T) {
	e := newOIDCEnv(t)
	st := e.anon().do("GET", "/auth/status", nil)
	ps := st.json(t)["providers"].([]any)
	if len(ps) != 1 {
		t.Fatalf("providers %v", ps)
	}
	p := ps[0].(map[string]any)
	if p["id"] != "corp" || p["displayName"] != "Corp SSO" || p["startURL"] != "/api/v1/auth/oidc/corp/start" {
		t.Fatalf("provider %v", p)
	}
	// An IdentityProvider object joins the configured one.
	o := &unstructured.Unstructured{Object: map[string]any{"apiVersion": auth.APIVersion, "kind": auth.KindIdentityProv,
		"metadata": map[string]any{"name": "partner"},
		"spec":     map[string]any{"id": "partner", "issuerURL": "https://127.0.0.1:1/partner", "clientID": "svc-partner"}}}
	if _, err := e.st.Apply(context.Background(), o, store.ApplyOptions{Manager: store.ManagerAPI}); err != nil {
		t.Fatal(err)
	}
	e.clock.add(11 * time.Second)
	if err := os.Remove(e.secretFile); err != nil {
		t.Fatal(err)
	}
	admin := e.withToken(e.adminToken())
	r := admin.do("GET", "/iam/identityproviders", nil)
	if r.code != 200 {
		t.Fatalf("%d %s", r.code, r.body)
	}
	if strings.Contains(string(r.body), "s3cret") {
		t.Fatal("the list shows the client secret")
	}
	body := r.json(t)
	items := body["items"].([]any)
	if len(items) != 2 || items[0].(map[string]any)["id"] != "corp" || items[0].(map[string]any)["source"] != "config" ||
		items[1].(map[string]any)["id"] != "partner" || items[1].(map[string]any)["source"] != "object" {
		t.Fatalf("items %v", items)
	}
	diag := strings.Join(toStrings(body["diagnoses"]), "\n")
	if !strings.Contains(diag, "identity provider corp: client secret file") || !strings.Contains(diag, "identity provider partner: ") || !strings.Contains(diag, "discovery") {
		t.Fatalf("diagnoses %q", diag)
	}
	msgs := admin.do("GET", "/info/messages", nil)
	if !strings.Contains(string(msgs.body), "IdentityProviderBroken") {
		t.Fatalf("messages %s", msgs.body)
	}
	if got := len(e.anon().do("GET", "/auth/status", nil).json(t)["providers"].([]any)); got != 2 {
		t.Fatalf("%d providers in AuthStatus", got)
	}
}

func toStrings(v any) []string {
	var out []string
	l, _ := v.([]any)
	for _, s := range l {
		out = append(out, s.(string))
	}
	return out
}
