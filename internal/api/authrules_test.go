package api

import (
	"bytes"
	"context"
	"encoding/json"
	"io"
	"log/slog"
	"net/http"
	"net/netip"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"

	"github.com/svcdns/svc/internal/auth"
	"github.com/svcdns/svc/internal/store"
	"github.com/svcdns/svc/internal/store/sqlite"
)

// Tests of the authentication rules of issue #23 item 5 and the chain
// (items 2 to 4). Each checks what a caller sees.

func envWith(kv ...string) optMutation {
	return func(o *Options, _ *Deps) {
		m := map[string]string{}
		for i := 0; i+1 < len(kv); i += 2 {
			m[kv[i]] = kv[i+1]
		}
		o.Env = func(k string) string { return m[k] }
	}
}

func loginAs(e *testEnv, user, pw string, hdr ...string) resp {
	e.t.Helper()
	return e.anon().do("POST", "/auth/login", map[string]string{"username": user, "password": pw}, hdr...)
}

// TestLocalLoginModes: auth.localLogin admins-only admits the built-in
// admin and holders of cluster admin (here through a group) and refuses
// others with local_login_admins_only, but only after their password is
// checked; disabled refuses everyone with local_login_disabled while tokens
// keep working.
func TestLocalLoginModes(t *testing.T) {
	e := newEnv(t, func(o *Options, _ *Deps) {
		o.LocalLogin = LocalLoginAdminsOnly
		o.RBACBindings = []auth.Binding{
			{Name: "admins", Subject: auth.Subject{Kind: "Group", Name: "admins"}, Role: auth.RoleAdmin, Scope: auth.ClusterScope},
			{Name: "viewers", Subject: auth.Subject{Kind: "Group", Name: "viewers"}, Role: auth.RoleViewer, Scope: auth.ClusterScope},
			{Name: "zoned", Subject: auth.Subject{Kind: "User", Name: "zed"}, Role: auth.RoleAdmin, Scope: auth.ClusterScope},
		}
	})
	e.addUser("root2", "root2-password", "admins")
	e.addUser("vic", "vic-password", "viewers")
	st := e.anon().do("GET", "/auth/status", nil).json(t)
	if st["localLogin"] != true || st["localLoginMode"] != "admins-only" {
		t.Fatalf("status: %v", st)
	}
	for _, u := range [][2]string{{"admin", adminPW}, {"root2", "root2-password"}} {
		if r := loginAs(e, u[0], u[1]); r.code != 200 {
			t.Errorf("admins-only, %s: %d %s", u[0], r.code, r.body)
		}
	}
	if r := loginAs(e, "vic", "vic-password"); r.code != 403 || r.errKey(t) != KeyLocalLoginAdminsOnly {
		t.Errorf("admins-only, viewer: %d %s", r.code, r.body)
	}
	// A wrong password says nothing about the account's standing.
	if r := loginAs(e, "vic", "wrong-password"); r.code != 401 || r.errKey(t) != KeyUnauthenticated {
		t.Errorf("admins-only, viewer with a wrong password: %d %s", r.code, r.body)
	}

	tok, _, _ := auth.NewToken()
	d := newEnv(t, envWith("SERVICE_ADMIN_PASSWORD", adminPW, "SERVICE_BOOTSTRAP_TOKEN", tok), func(o *Options, _ *Deps) { o.LocalLogin = LocalLoginDisabled })
	st = d.anon().do("GET", "/auth/status", nil).json(t)
	if st["localLogin"] != false || st["localLoginMode"] != "disabled" {
		t.Fatalf("status: %v", st)
	}
	for _, pw := range []string{adminPW, "wrong-password"} {
		if r := loginAs(d, "admin", pw); r.code != 403 || r.errKey(t) != KeyLocalLoginDisabled {
			t.Errorf("disabled: %d %s", r.code, r.body)
		}
	}
	if r := d.withToken(tok).do("GET", "/iam/users", nil); r.code != 200 {
		t.Errorf("token with local login disabled: %d %s", r.code, r.body)
	}
}

// TestTokenLastUsedOncePerMinute: lastUsedAt and lastUsedIP are written on
// first use and then at most once a minute however often the token is used.
func TestTokenLastUsedOncePerMinute(t *testing.T) {
	e := newEnv(t)
	tok := e.adminToken()
	id, _ := auth.ParseToken(tok)
	c := e.withToken(tok)
	lastUsed := func() time.Time {
		t.Helper()
		st, err := e.srv.dir.GetToken(context.Background(), id)
		if err != nil {
			t.Fatal(err)
		}
		if st.LastUsedAt == nil {
			return time.Time{}
		}
		if st.LastUsedIP != "127.0.0.1" {
			t.Errorf("lastUsedIP %q", st.LastUsedIP)
		}
		return *st.LastUsedAt
	}
	if !lastUsed().IsZero() {
		t.Fatal("used before any request")
	}
	start := e.clock.now().Truncate(time.Second)
	c.do("GET", "/auth/me", nil)
	if got := lastUsed(); !got.Equal(start) {
		t.Fatalf("first use: lastUsedAt %v, want %v", got, start)
	}
	for range 5 {
		e.clock.add(11 * time.Second)
		c.do("GET", "/auth/me", nil)
	}
	if got := lastUsed(); !got.Equal(start) {
		t.Fatalf("55s later: lastUsedAt %v rewritten, want %v", got, start)
	}
	e.clock.add(6 * time.Second)
	c.do("GET", "/auth/me", nil)
	if got := lastUsed(); !got.Equal(start.Add(61 * time.Second)) {
		t.Fatalf("61s later: lastUsedAt %v, want %v", got, start.Add(61*time.Second))
	}
}

func writeFile(t *testing.T, name, content string) string {
	t.Helper()
	p := filepath.Join(t.TempDir(), name)
	if err := os.WriteFile(p, []byte(content), 0o600); err != nil {
		t.Fatal(err)
	}
	return p
}

// TestAdminPasswordFiles: SERVICE_ADMIN_PASSWORD_FILE wins over
// auth.bootstrap.adminPasswordFile, which is used alone otherwise; a
// supplied password does not set mustChangePassword, a generated one does
// and is printed once; an unreadable file stops the start naming it.
func TestAdminPasswordFiles(t *testing.T) {
	envFile := writeFile(t, "env-pw", "from-the-env-file\n")
	setFile := writeFile(t, "setting-pw", "from-the-setting-file\r\n")

	e := newEnv(t, envWith("SERVICE_ADMIN_PASSWORD_FILE", envFile), func(o *Options, _ *Deps) { o.AdminPasswordFile = setFile })
	if r := loginAs(e, "admin", "from-the-setting-file"); r.code != 401 {
		t.Errorf("setting file used although the environment names one: %d", r.code)
	}
	r := loginAs(e, "admin", "from-the-env-file")
	if r.code != 200 || r.json(t)["mustChangePassword"] != false {
		t.Fatalf("SERVICE_ADMIN_PASSWORD_FILE: %d %s", r.code, r.body)
	}

	var out bytes.Buffer
	e = newEnv(t, envWith(), func(o *Options, _ *Deps) { o.AdminPasswordFile = setFile; o.Stdout = &out })
	if r := loginAs(e, "admin", "from-the-setting-file"); r.code != 200 || r.json(t)["mustChangePassword"] != false {
		t.Fatalf("auth.bootstrap.adminPasswordFile: %d %s", r.code, r.body)
	}
	if out.Len() != 0 || e.anon().do("GET", "/auth/status", nil).json(t)["hasDefaultCredentials"] != false {
		t.Errorf("supplied password reported as generated: %q", out.String())
	}

	out.Reset()
	e = newEnv(t, envWith(), func(o *Options, _ *Deps) { o.Stdout = &out })
	pw := strings.TrimSpace(strings.TrimPrefix(strings.SplitN(out.String(), "\n", 2)[0], `Generated password for user "admin": `))
	if len(pw) < 16 {
		t.Fatalf("generated password not printed: %q", out.String())
	}
	if r := loginAs(e, "admin", pw); r.code != 200 || r.json(t)["mustChangePassword"] != true {
		t.Fatalf("generated password: %d %s", r.code, r.body)
	}
	if e.anon().do("GET", "/auth/status", nil).json(t)["hasDefaultCredentials"] != true {
		t.Error("hasDefaultCredentials false with the generated password")
	}

	missing := filepath.Join(t.TempDir(), "absent")
	_, err := newServerErr(t, envWith("SERVICE_ADMIN_PASSWORD_FILE", missing))
	if err == nil || !strings.Contains(err.Error(), "bootstrap admin password file") || !strings.Contains(err.Error(), missing) {
		t.Fatalf("missing file: %v", err)
	}
}

// newServerErr builds a server that is expected to fail to start.
func newServerErr(t *testing.T, mutate ...func(*Options, *Deps)) (*Server, error) {
	t.Helper()
	dir := t.TempDir()
	ctx := context.Background()
	v := testValidator(t)
	st, err := sqlite.NewStore(ctx, filepath.Join(dir, "state.db"), v, sqlite.Options{})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { st.Close() })
	opts := Options{DataDir: dir, NodeName: "node-a", GenerateKey: true, TLSAuto: "off", Stdout: io.Discard}
	deps := Deps{Store: st, Kinds: v, Admitter: v}
	for _, m := range mutate {
		m(&opts, &deps)
	}
	srv, err := New(ctx, opts, deps)
	if err == nil {
		srv.Close()
	}
	return srv, err
}

// staleStore answers the first Get of the admin account with not found,
// as a replica that read before another replica's write does.
type staleStore struct {
	store.Store
	mu    sync.Mutex
	stale bool
}

func (s *staleStore) Get(ctx context.Context, kind, ns, name string) (*unstructured.Unstructured, error) {
	s.mu.Lock()
	stale := s.stale
	s.stale = false
	s.mu.Unlock()
	if stale && kind == auth.KindLocalUser {
		return nil, store.ErrNotFound
	}
	return s.Store.Get(ctx, kind, ns, name)
}

// TestBootstrapRaceLoser: a replica that saw no administrator but lost the
// race to create it reports the loss and leaves the winner's password; of
// replicas racing for real, exactly one creates the account.
func TestBootstrapRaceLoser(t *testing.T) {
	e := newEnv(t)
	ctx := context.Background()
	h := auth.NewHasher(2)
	loser := auth.NewDirectory(&staleStore{Store: e.st, stale: true}, DefaultNamespace)
	res, err := auth.EnsureAdmin(ctx, loser, h, envWith("SERVICE_ADMIN_PASSWORD", "the-losers-password").envFunc(), "", "node-b", e.clock.now())
	if err != nil || !res.Lost || res.Created {
		t.Fatalf("loser: %+v %v", res, err)
	}
	if r := loginAs(e, "admin", adminPW); r.code != 200 {
		t.Fatalf("winner's password after the race: %d %s", r.code, r.body)
	}
	if r := loginAs(e, "admin", "the-losers-password"); r.code != 401 {
		t.Fatalf("loser overwrote the account: %d", r.code)
	}

	// Real concurrency on one SQLite file: one winner, nobody overwrites.
	dir := t.TempDir()
	st, err := sqlite.NewStore(ctx, filepath.Join(dir, "state.db"), testValidator(t), sqlite.Options{})
	if err != nil {
		t.Fatal(err)
	}
	defer st.Close()
	const n = 4
	results := make([]auth.BootstrapResult, n)
	errs := make([]error, n)
	var wg sync.WaitGroup
	for i := range n {
		wg.Add(1)
		go func() {
			defer wg.Done()
			pw := "password-of-node-" + string(rune('a'+i))
			results[i], errs[i] = auth.EnsureAdmin(ctx, auth.NewDirectory(st, DefaultNamespace), h,
				func(k string) string { return map[string]string{"SERVICE_ADMIN_PASSWORD": pw}[k] }, "", "node-"+string(rune('a'+i)), time.Now())
		}()
	}
	wg.Wait()
	winner := -1
	for i := range n {
		if errs[i] != nil {
			t.Fatalf("replica %d: %v", i, errs[i])
		}
		if results[i].Created {
			if winner >= 0 {
				t.Fatalf("replicas %d and %d both created the account", winner, i)
			}
			winner = i
		}
	}
	if winner < 0 {
		t.Fatal("no replica created the account")
	}
	u, err := auth.NewDirectory(st, DefaultNamespace).GetUser(ctx, auth.AdminUsername)
	if err != nil {
		t.Fatal(err)
	}
	if ok, _ := h.Verify(ctx, "password-of-node-"+string(rune('a'+winner)), u.PasswordHash); !ok {
		t.Fatal("the stored password is not the winner's")
	}
}

// envFunc returns the environment an envWith mutation installs.
func (f optMutation) envFunc() auth.Env {
	var o Options
	f(&o, nil)
	return o.Env
}

type optMutation func(*Options, *Deps)

// TestBootstrapTokenFile: SERVICE_BOOTSTRAP_TOKEN_FILE installs the token of
// service account bootstrap; a file holding no token stops the start with
// an error that names the variable and not the content.
func TestBootstrapTokenFile(t *testing.T) {
	tok, _, _ := auth.NewToken()
	f := writeFile(t, "bootstrap.token", tok+"\n")
	e := newEnv(t, envWith("SERVICE_ADMIN_PASSWORD", adminPW, "SERVICE_BOOTSTRAP_TOKEN_FILE", f))
	r := e.withToken(tok).do("GET", "/auth/me", nil)
	if r.code != 200 {
		t.Fatalf("bootstrap token from file: %d %s", r.code, r.body)
	}
	if p := r.json(t)["principal"].(map[string]any); p["kind"] != "ServiceAccount" || p["name"] != auth.BootstrapServiceAccount {
		t.Fatalf("principal %v", p)
	}
	if r := e.withToken(tok).do("GET", "/iam/users", nil); r.code != 200 {
		t.Fatalf("bootstrap token acts as the administrator: %d", r.code)
	}
	bad := writeFile(t, "bad.token", "hunter2-not-a-token\n")
	_, err := newServerErr(t, envWith("SERVICE_ADMIN_PASSWORD", adminPW, "SERVICE_BOOTSTRAP_TOKEN_FILE", bad))
	if err == nil || !strings.Contains(err.Error(), "SERVICE_BOOTSTRAP_TOKEN_FILE") || strings.Contains(err.Error(), "hunter2") {
		t.Fatalf("bad token file: %v", err)
	}
}

func tokenID(t *testing.T, tok string) string {
	t.Helper()
	id, err := auth.ParseToken(tok)
	if err != nil {
		t.Fatal(err)
	}
	return id
}

func listedIDs(t *testing.T, r resp) []string {
	t.Helper()
	if r.code != 200 {
		t.Fatalf("list: %d %s", r.code, r.body)
	}
	var ids []string
	for _, it := range r.json(t)["items"].([]any) {
		ids = append(ids, it.(map[string]any)["id"].(string))
	}
	slices.Sort(ids)
	return ids
}

// TestOtherPeoplesTokens: without tokens.delete (tokens.read) another
// person's token is 404, as an unknown one; ?all=true needs tokens.read and
// lists every owner's tokens.
func TestOtherPeoplesTokens(t *testing.T) {
	e := newEnv(t, func(o *Options, _ *Deps) {
		o.RBACBindings = []auth.Binding{{Name: "v", Subject: auth.Subject{Kind: "Group", Name: "viewers"}, Role: auth.RoleViewer, Scope: auth.ClusterScope}}
	})
	e.addUser("alice", "alice-password", "viewers")
	e.addUser("bob", "bob-password", "viewers")
	aliceTok, bobTok, adminTok := e.tokenFor("alice", "alice-password"), e.tokenFor("bob", "bob-password"), e.adminToken()
	alice, bob, admin := e.withToken(aliceTok), e.withToken(bobTok), e.withToken(adminTok)
	bobID := tokenID(t, bobTok)

	for _, m := range []string{"GET", "DELETE"} {
		r := alice.do(m, "/auth/tokens/"+bobID, nil)
		if r.code != 404 || r.errKey(t) != KeyNotFound {
			t.Errorf("%s another person's token: %d %s", m, r.code, r.body)
		}
		// The same answer as for an id nobody has: the id is not confirmed.
		unknown := alice.do(m, "/auth/tokens/zzzzzzzzzzzz", nil).json(t)["error"].(map[string]any)
		if got := r.json(t)["error"].(map[string]any); strings.ReplaceAll(got["message"].(string), bobID, "zzzzzzzzzzzz") != unknown["message"] {
			t.Errorf("%s: %v differs from an unknown id's %v", m, got, unknown)
		}
	}
	if r := bob.do("GET", "/auth/me", nil); r.code != 200 {
		t.Fatalf("bob's token after alice's delete: %d", r.code)
	}
	if got := listedIDs(t, alice.do("GET", "/auth/tokens", nil)); !slices.Equal(got, []string{tokenID(t, aliceTok)}) {
		t.Errorf("alice lists %v", got)
	}
	if r := alice.do("GET", "/auth/tokens?all=true", nil); r.code != 403 || r.errKey(t) != KeyForbidden || r.json(t)["error"].(map[string]any)["missing"] != "tokens.read" {
		t.Errorf("all=true without tokens.read: %d %s", r.code, r.body)
	}
	want := []string{tokenID(t, aliceTok), bobID, tokenID(t, adminTok)}
	slices.Sort(want)
	if got := listedIDs(t, admin.do("GET", "/auth/tokens?all=true", nil)); !slices.Equal(got, want) {
		t.Errorf("all=true lists %v, want %v", got, want)
	}
	if got := listedIDs(t, admin.do("GET", "/auth/tokens", nil)); !slices.Equal(got, []string{tokenID(t, adminTok)}) {
		t.Errorf("admin without all lists %v", got)
	}
	if r := admin.do("DELETE", "/auth/tokens/"+bobID, nil); r.code != 204 {
		t.Fatalf("admin deletes bob's token: %d %s", r.code, r.body)
	}
	if r := bob.do("GET", "/auth/me", nil); r.code != 401 {
		t.Errorf("bob's deleted token: %d", r.code)
	}
}

// TestRevokeTokensOnPasswordChangeAndReset: revokeTokens deletes the
// user's tokens (and nobody else's) on a password change and on an
// admin-socket reset; without it tokens keep working.
func TestRevokeTokensOnPasswordChangeAndReset(t *testing.T) {
	a := newAdminEnv(t, nil)
	a.addUser("dave", "dave-password")
	a.addUser("erin", "erin-password")
	d1, erin := a.withToken(a.tokenFor("dave", "dave-password")), a.withToken(a.tokenFor("erin", "erin-password"))
	alive := func(c *client) bool { return c.do("GET", "/auth/me", nil).code == 200 }

	change := func(cur, next string, revoke bool) {
		t.Helper()
		a.clock.add(2 * time.Minute) // clear of the auth route rate limit
		c := a.login("dave", cur)
		if r := c.do("POST", "/auth/password", map[string]any{"currentPassword": cur, "newPassword": next, "revokeTokens": revoke}); r.code != 200 {
			t.Fatalf("change: %d %s", r.code, r.body)
		}
	}
	change("dave-password", "dave-password-2", false)
	if !alive(d1) {
		t.Fatal("token revoked by a change without revokeTokens")
	}
	d2 := a.withToken(a.tokenFor("dave", "dave-password-2"))
	change("dave-password-2", "dave-password-3", true)
	if alive(d1) || alive(d2) {
		t.Fatal("dave's tokens survive a change with revokeTokens")
	}
	if !alive(erin) {
		t.Fatal("erin's token revoked by dave's change")
	}

	d3 := a.withToken(a.tokenFor("dave", "dave-password-3"))
	if r := a.call("POST", "/admin/v1/reset-password", map[string]any{"username": "dave"}); r.code != 200 {
		t.Fatalf("reset: %d %s", r.code, r.body)
	}
	if !alive(d3) {
		t.Fatal("token revoked by a reset without revokeTokens")
	}
	if r := a.call("POST", "/admin/v1/reset-password", map[string]any{"username": "dave", "password": "dave-password-4", "revokeTokens": true}); r.code != 200 {
		t.Fatalf("reset with revokeTokens: %d %s", r.code, r.body)
	}
	if alive(d3) {
		t.Fatal("dave's token survives a reset with revokeTokens")
	}
	if !alive(erin) {
		t.Fatal("erin's token revoked by dave's reset")
	}
}

// syncBuffer is a log sink safe for the server's goroutines.
type syncBuffer struct {
	mu sync.Mutex
	b  bytes.Buffer
}

func (s *syncBuffer) Write(p []byte) (int, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.b.Write(p)
}

func (s *syncBuffer) lines(t *testing.T) []map[string]any {
	s.mu.Lock()
	defer s.mu.Unlock()
	var out []map[string]any
	for _, l := range strings.Split(strings.TrimSpace(s.b.String()), "\n") {
		var m map[string]any
		if json.Unmarshal([]byte(l), &m) == nil {
			out = append(out, m)
		}
	}
	return out
}

// TestTrustedProxiesAndMiddlewareOrder: X-Forwarded-For and
// X-Forwarded-Proto count only from listeners.api.trustedProxies; the real
// client address is settled before the access log, the auth rate limit and
// the lockouts use it; the rate limit answers before authentication; every
// answer carries the request id and the security headers.
func TestTrustedProxiesAndMiddlewareOrder(t *testing.T) {
	logs := &syncBuffer{}
	e := newEnv(t, func(o *Options, d *Deps) {
		o.TrustedProxies = []netip.Prefix{netip.MustParsePrefix("127.0.0.0/8")}
		d.Logger = slog.New(slog.NewJSONHandler(logs, nil))
	})
	e.addUser("bob", "bob-password")
	xff := func(v string) []string { return []string{"X-Forwarded-For", v} }

	// Lockout by the forwarded address; a spoofed left-most hop is ignored.
	for range 5 {
		loginAs(e, "bob", "wrong-password", xff("198.51.100.9, 203.0.113.7")...)
	}
	if r := loginAs(e, "bob", "bob-password", xff("203.0.113.7")...); r.code != 429 {
		t.Fatalf("locked forwarded client: %d %s", r.code, r.body)
	}
	if r := loginAs(e, "bob", "bob-password", xff("203.0.113.8")...); r.code != 200 {
		t.Fatalf("another forwarded client: %d %s", r.code, r.body)
	}
	// X-Forwarded-Proto https from the proxy: Secure __Host- cookie and HSTS.
	r := loginAs(e, "bob", "bob-password", "X-Forwarded-For", "203.0.113.8", "X-Forwarded-Proto", "https")
	if sc := r.hdr.Get("Set-Cookie"); r.code != 200 || !strings.HasPrefix(sc, "__Host-"+auth.CookieBaseName+"=") || !strings.Contains(sc, "; Secure") {
		t.Fatalf("https through the proxy: %d %q", r.code, sc)
	}
	if r.hdr.Get("Strict-Transport-Security") == "" {
		t.Error("no HSTS behind a TLS-terminating proxy")
	}

	// Auth rate limit: 30 a minute per real client, answered before
	// authentication (a bad bearer still gets 429), with request id and
	// security headers, and logged with the forwarded address.
	e.clock.add(2 * time.Minute)
	for i := range 30 {
		if r := e.anon().do("POST", "/auth/login", map[string]string{}, xff("203.0.113.50")...); r.code == 429 {
			t.Fatalf("limited after %d requests", i)
		}
	}
	r = e.anon().do("POST", "/auth/login", map[string]string{}, "X-Forwarded-For", "203.0.113.50", "Authorization", "Bearer svc_bad", "X-Request-ID", "req-limit-1")
	if r.code != 429 || r.errKey(t) != KeyRateLimited {
		t.Fatalf("31st request: %d %s", r.code, r.body)
	}
	if r.hdr.Get("X-Request-ID") != "req-limit-1" || r.hdr.Get("X-Content-Type-Options") != "nosniff" || r.hdr.Get("Content-Security-Policy") == "" {
		t.Errorf("429 headers: %v", r.hdr)
	}
	if r := e.anon().do("POST", "/auth/login", map[string]string{}, xff("203.0.113.51")...); r.code == 429 {
		t.Error("another forwarded client is limited too")
	}
	// A rejected bearer (authentication, inside the access log) is logged too.
	e.withToken("svc_bad").do("GET", "/auth/me", nil, "X-Request-ID", "req-401-1", "X-Forwarded-For", "203.0.113.60")
	seen := map[string]map[string]any{}
	for _, l := range logs.lines(t) {
		if l["msg"] == "api request" {
			if id, _ := l["request_id"].(string); id != "" {
				seen[id] = l
			}
		}
	}
	if l := seen["req-limit-1"]; l == nil || l["status"] != float64(429) || l["client"] != "203.0.113.50" {
		t.Errorf("access log of the limited request: %v", l)
	}
	if l := seen["req-401-1"]; l == nil || l["status"] != float64(401) || l["client"] != "203.0.113.60" {
		t.Errorf("access log of the rejected bearer: %v", l)
	}

	// Without trusted proxies the headers are ignored.
	u := newEnv(t)
	u.addUser("bob", "bob-password")
	for range 5 {
		loginAs(u, "bob", "wrong-password", xff("203.0.113.7")...)
	}
	if r := loginAs(u, "bob", "bob-password", xff("203.0.113.8")...); r.code != 429 {
		t.Fatalf("untrusted X-Forwarded-For changed the client: %d", r.code)
	}
	u.clock.add(6 * time.Minute)
	r = loginAs(u, "bob", "bob-password", "X-Forwarded-Proto", "https")
	if sc := r.hdr.Get("Set-Cookie"); r.code != 200 || strings.Contains(sc, "Secure") || r.hdr.Get("Strict-Transport-Security") != "" {
		t.Fatalf("untrusted X-Forwarded-Proto honoured: %d %q", r.code, sc)
	}
}

// TestPathPrefix: with listeners.api.pathPrefix the API, its cookie path,
// the auth rate limit and the OpenAPI servers live under the prefix only.
func TestPathPrefix(t *testing.T) {
	e := newEnv(t, func(o *Options, _ *Deps) {
		o.PathPrefix = "/dns/"
		o.TrustedProxies = []netip.Prefix{netip.MustParsePrefix("127.0.0.1/32")}
	})
	if !strings.HasSuffix(e.base, "/dns/api/v1") {
		t.Fatalf("base %s", e.base)
	}
	root := strings.TrimSuffix(e.base, "/dns/api/v1")
	res, err := http.Get(root + "/api/v1/auth/status")
	if err != nil {
		t.Fatal(err)
	}
	b, _ := io.ReadAll(res.Body)
	res.Body.Close()
	if res.StatusCode != 404 || !strings.Contains(string(b), "/dns/api/v1") {
		t.Fatalf("unprefixed route: %d %s", res.StatusCode, b)
	}
	r := loginAs(e, "admin", adminPW, "X-Forwarded-Proto", "https")
	sc := r.hdr.Get("Set-Cookie")
	// The __Host- prefix needs Path=/; under a prefix the cookie is plain.
	if r.code != 200 || !strings.HasPrefix(sc, auth.CookieBaseName+"=") || !strings.Contains(sc, "Path=/dns/") || !strings.Contains(sc, "Secure") {
		t.Fatalf("login under the prefix: %d %q", r.code, sc)
	}
	c := e.login("admin", adminPW)
	if r := c.do("GET", "/auth/me", nil); r.code != 200 {
		t.Fatalf("session under the prefix: %d", r.code)
	}
	doc := e.anon().do("GET", "/openapi.json", nil).json(t)
	if u := doc["servers"].([]any)[0].(map[string]any)["url"]; u != "/dns/api/v1" {
		t.Errorf("openapi servers url %v", u)
	}
	e.clock.add(2 * time.Minute)
	limited := false
	for range 31 {
		if e.anon().do("POST", "/auth/login", map[string]string{}).code == 429 {
			limited = true
		}
	}
	if !limited {
		t.Error("auth rate limit does not apply under the prefix")
	}
}

// TestScopedTokenNarrowsImplicitGrants: a token with scopes keeps /auth/me
// and tokens no wider than itself; it cannot change the owner's password
// nor see or revoke the owner's wider tokens.
func TestScopedTokenNarrowsImplicitGrants(t *testing.T) {
	e := newEnv(t)
	full := e.adminToken()
	r := e.login("admin", adminPW).do("POST", "/auth/tokens", map[string]any{"scopes": []string{"viewer"}})
	if r.code != 201 {
		t.Fatalf("scoped: %d %s", r.code, r.body)
	}
	scopedTok := r.json(t)["token"].(string)
	sc := e.withToken(scopedTok)
	me := sc.do("GET", "/auth/me", nil)
	if me.code != 200 {
		t.Fatalf("me with a scoped token: %d", me.code)
	}
	if perms := me.json(t)["permissions"].(map[string]any); perms["self"] == nil || slices.Contains(toStrings(perms["self"]), "write") {
		t.Errorf("scoped token's self permissions: %v", perms["self"])
	}
	r = sc.do("POST", "/auth/password", map[string]any{"currentPassword": adminPW, "newPassword": "another-admin-password"})
	if r.code != 403 || r.errKey(t) != KeyForbidden || r.json(t)["error"].(map[string]any)["missing"] != "self.write" {
		t.Fatalf("password change with a scoped token: %d %s", r.code, r.body)
	}
	child := sc.do("POST", "/auth/tokens", map[string]any{"scopes": []string{"viewer"}})
	if child.code != 201 {
		t.Fatalf("narrower token from a scoped one: %d %s", child.code, child.body)
	}
	childID := child.json(t)["id"].(string)
	want := []string{tokenID(t, scopedTok), childID}
	slices.Sort(want)
	if got := listedIDs(t, sc.do("GET", "/auth/tokens", nil)); !slices.Equal(got, want) {
		t.Errorf("scoped token lists %v, want %v (not the unscoped one)", got, want)
	}
	if r := sc.do("DELETE", "/auth/tokens/"+tokenID(t, full), nil); r.code != 404 {
		t.Errorf("scoped token revokes a wider token: %d %s", r.code, r.body)
	}
	if r := e.withToken(full).do("GET", "/auth/me", nil); r.code != 200 {
		t.Fatal("the unscoped token was revoked")
	}
	if r := sc.do("DELETE", "/auth/tokens/"+childID, nil); r.code != 204 {
		t.Errorf("scoped token revokes its narrower child: %d %s", r.code, r.body)
	}
	// The unscoped token keeps every implicit grant.
	if got := listedIDs(t, e.withToken(full).do("GET", "/auth/tokens", nil)); len(got) != 2 {
		t.Errorf("unscoped token lists %v", got)
	}
}

// TestInternalTokenInTheChain: the internal token is the chain's last step:
// a Node principal with viewer and auditor grants (decision path local),
// refused everything else; a wrong one is 401; a server without one
// configured does not accept it.
func TestInternalTokenInTheChain(t *testing.T) {
	e := newEnv(t, func(o *Options, _ *Deps) { o.InternalToken = internalTokenForTest })
	n := e.withToken(internalTokenForTest)
	me := n.do("GET", "/auth/me", nil)
	if me.code != 200 {
		t.Fatalf("me: %d %s", me.code, me.body)
	}
	if p := me.json(t)["principal"].(map[string]any); p["kind"] != "Node" || p["authMethod"] != "internal-token" {
		t.Errorf("principal %v", p)
	}
	if got := roles(t, me); !slices.Equal(got, []string{"auditor", "viewer"}) {
		t.Errorf("roles %v", got)
	}
	for _, p := range []string{"/objects/dnszones", "/audit", "/info/messages"} {
		if r := n.do("GET", p, nil); r.code != 200 {
			t.Errorf("GET %s: %d %s", p, r.code, r.body)
		}
	}
	for _, c := range []struct{ method, path, missing string }{
		{"POST", "/cache/flush", "cache.flush"}, {"GET", "/iam/users", "users.read"}, {"POST", "/iam/users", "users.write"},
	} {
		r := n.do(c.method, c.path, map[string]any{})
		if r.code != 403 || r.json(t)["error"].(map[string]any)["missing"] != c.missing {
			t.Errorf("%s %s: %d %s", c.method, c.path, r.code, r.body)
		}
	}
	if r := n.do("POST", "/auth/tokens", map[string]any{}); r.code != 400 {
		t.Errorf("a node owning a token: %d %s", r.code, r.body)
	}
	wrong := strings.Repeat("f", len(internalTokenForTest))
	if r := e.withToken(wrong).do("GET", "/objects/dnszones", nil); r.code != 401 || r.errKey(t) != KeyUnauthenticated {
		t.Errorf("wrong internal token: %d %s", r.code, r.body)
	}
	// A valid cookie decides before the internal token (chain order).
	c := e.login("admin", adminPW)
	c.token = internalTokenForTest
	if r := c.do("GET", "/auth/me", nil); r.json(t)["principal"].(map[string]any)["name"] != "admin" {
		t.Errorf("cookie with the internal token: %s", r.body)
	}
	other := newEnv(t)
	if r := other.withToken(internalTokenForTest).do("GET", "/objects/dnszones", nil); r.code != 401 {
		t.Errorf("internal token on a server without one: %d", r.code)
	}
}

// TestOIDCOwnerTokens: an OIDC user (bearer ID token or browser session)
// owns API tokens whose grants are frozen at issue: a binding added later
// gives the token nothing, removing the binding that gave a grant takes it
// away, scopes narrow it like any token.
func TestOIDCOwnerTokens(t *testing.T) {
	e := newOIDCEnv(t)
	e.applyBinding("dev-viewers", "Group", "corp:dev", auth.RoleViewer)
	bearer := e.withToken(e.ip.IDToken(map[string]any{"sub": "alice", "groups": []any{"dev"}}))
	r := bearer.do("POST", "/auth/tokens", map[string]any{"description": "ci"})
	if r.code != 201 {
		t.Fatalf("token of an OIDC user: %d %s", r.code, r.body)
	}
	m := r.json(t)
	if o := m["owner"].(map[string]any); o["kind"] != "User" || o["name"] != "corp:alice" || o["provider"] != "corp" || o["id"] != "alice" {
		t.Fatalf("owner %v", o)
	}
	if fg := toStrings(m["frozenGrants"]); !slices.Equal(fg, []string{"viewer"}) {
		t.Fatalf("frozen grants %v", fg)
	}
	tc := e.withToken(m["token"].(string))
	me := tc.do("GET", "/auth/me", nil)
	if p := me.json(t)["principal"].(map[string]any); p["name"] != "corp:alice" || p["provider"] != "corp" || p["authMethod"] != "token" || len(p["groups"].([]any)) != 0 {
		t.Fatalf("principal %v", p)
	}
	if r := tc.do("GET", "/objects/dnszones", nil); r.code != 200 {
		t.Fatalf("viewer read: %d %s", r.code, r.body)
	}
	if got := listedIDs(t, tc.do("GET", "/auth/tokens", nil)); !slices.Equal(got, []string{m["id"].(string)}) {
		t.Errorf("own tokens %v", got)
	}
	// Frozen: the live bearer gains operator, the token does not.
	e.applyBinding("dev-operators", "Group", "corp:dev", auth.RoleOperator)
	if got := roles(t, tc.do("GET", "/auth/me", nil)); !slices.Equal(got, []string{"viewer"}) {
		t.Errorf("roles after a new binding: %v", got)
	}
	if r := tc.do("POST", "/cache/flush", map[string]any{}); r.code != 403 {
		t.Errorf("operator write with a frozen viewer token: %d", r.code)
	}
	// Scopes narrow as for any token: wider is refused.
	if r := tc.do("POST", "/auth/tokens", map[string]any{"scopes": []string{"operator"}}); r.code != 403 {
		t.Errorf("widening from a frozen token: %d %s", r.code, r.body)
	}
	// A browser session's token freezes the session's grants.
	c := e.browser().login()
	r = c.do("POST", "/auth/tokens", map[string]any{})
	if r.code != 201 || !slices.Equal(toStrings(r.json(t)["frozenGrants"]), []string{"operator", "viewer"}) {
		t.Fatalf("token from an OIDC session: %d %s", r.code, r.body)
	}
	// Removing the binding takes the grant away from the token.
	e.deleteBinding("dev-viewers")
	if got := roles(t, tc.do("GET", "/auth/me", nil)); len(got) != 0 {
		t.Errorf("roles after the binding was removed: %v", got)
	}
	if r := tc.do("GET", "/objects/dnszones", nil); r.code != 403 {
		t.Errorf("read after the binding was removed: %d", r.code)
	}
}
