package api

import (
	"bufio"
	"context"
	"encoding/json"
	"errors"
	"io"
	"io/fs"
	"net"
	"net/http"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/svcdns/svc/internal/auth/audit"
)

// shortDir returns a temporary directory with a path short enough for a
// Unix socket (108 bytes), removed at the end of the test.
func shortDir(t testing.TB) string {
	t.Helper()
	d, err := os.MkdirTemp("", "sa")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { os.RemoveAll(d) })
	return d
}

// adminEnv is a test server with its admin socket served on a real Unix
// socket.
type adminEnv struct {
	*testEnv
	sock string
}

func newAdminEnv(t *testing.T, before func(*Server), mutate ...func(*Options, *Deps)) *adminEnv {
	t.Helper()
	sock := filepath.Join(shortDir(t), "run", "svc.sock")
	mutate = append([]func(*Options, *Deps){func(o *Options, _ *Deps) {
		o.AdminSocketPath, o.AdminSocketGroup = sock, -1
	}}, mutate...)
	e := newEnv(t, mutate...)
	if before != nil {
		before(e.srv)
	}
	ln, err := e.srv.ListenAdminSocket()
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() { done <- e.srv.ServeAdminListener(ctx, ln) }()
	t.Cleanup(func() {
		cancel()
		select {
		case err := <-done:
			if err != nil {
				t.Errorf("ServeAdminListener: %v", err)
			}
		case <-time.After(10 * time.Second):
			t.Error("admin socket did not stop")
		}
	})
	return &adminEnv{testEnv: e, sock: sock}
}

func (a *adminEnv) call(method, path string, body any) resp {
	a.t.Helper()
	hc := &http.Client{Timeout: 30 * time.Second, Transport: &http.Transport{
		DialContext: func(ctx context.Context, _, _ string) (net.Conn, error) {
			var d net.Dialer
			return d.DialContext(ctx, "unix", a.sock)
		}}}
	var rd io.Reader
	switch b := body.(type) {
	case nil:
	case string:
		rd = strings.NewReader(b)
	default:
		j, _ := json.Marshal(b)
		rd = strings.NewReader(string(j))
	}
	req, err := http.NewRequest(method, "http://ignored"+path, rd)
	if err != nil {
		a.t.Fatal(err)
	}
	if rd != nil {
		req.Header.Set("Content-Type", "application/json")
	}
	res, err := hc.Do(req)
	if err != nil {
		a.t.Fatal(err)
	}
	defer res.Body.Close()
	b, _ := io.ReadAll(res.Body)
	return resp{code: res.StatusCode, hdr: res.Header, body: b}
}

// ndjson sends lines on one connection and returns one answer per line.
func (a *adminEnv) ndjson(lines ...string) []map[string]any {
	a.t.Helper()
	c, err := net.Dial("unix", a.sock)
	if err != nil {
		a.t.Fatal(err)
	}
	defer c.Close()
	_ = c.SetDeadline(time.Now().Add(30 * time.Second))
	br := bufio.NewReader(c)
	var out []map[string]any
	for _, l := range lines {
		if _, err := io.WriteString(c, l+"\n"); err != nil {
			a.t.Fatal(err)
		}
		ans, err := br.ReadBytes('\n')
		if err != nil {
			a.t.Fatalf("answer to %s: %v (%q)", l, err, ans)
		}
		var m map[string]any
		if err := json.Unmarshal(ans, &m); err != nil {
			a.t.Fatalf("answer %q: %v", ans, err)
		}
		out = append(out, m)
	}
	return out
}

func TestAdminSocketResetPassword(t *testing.T) {
	a := newAdminEnv(t, nil)
	old := a.login("admin", adminPW)

	r := a.call("POST", "/admin/v1/reset-password", map[string]any{})
	m := r.json(t)
	pw, _ := m["password"].(string)
	if r.code != 200 || m["username"] != "admin" || m["mustChangePassword"] != true || m["created"] != false || len(pw) < 16 {
		t.Fatalf("reset admin: %d %s", r.code, r.body)
	}
	// Every earlier session is revoked; the old password is gone.
	if r := old.do("GET", "/auth/me", nil); r.code != 401 {
		t.Errorf("session from before the reset: %d %s", r.code, r.body)
	}
	if r := a.anon().do("POST", "/auth/login", map[string]string{"username": "admin", "password": adminPW}); r.code != 401 {
		t.Errorf("old password: %d", r.code)
	}
	c := a.login("admin", pw)
	if r := c.do("GET", "/auth/me", nil); r.code != 200 || r.json(t)["mustChangePassword"] != true {
		t.Errorf("me after reset: %d %s", r.code, r.body)
	}
	if r := c.do("GET", "/objects/dnszones", nil); r.code != 403 || r.errKey(t) != KeyPasswordChangeRequired {
		t.Errorf("must change password: %d %s", r.code, r.body)
	}

	// Password bounds, missing users, unknown fields.
	for _, bad := range []map[string]any{
		{"password": "short"},
		{"password": strings.Repeat("x", 1025)},
		{"username": "a b", "password": "long enough"},
		{"password": "long enough", "bogus": true},
		{"create": "yes"},
	} {
		if r := a.call("POST", "/admin/v1/reset-password", bad); r.code != 400 || r.errKey(t) != KeyInvalid {
			t.Errorf("%v: %d %s", bad, r.code, r.body)
		}
	}
	if r := a.call("POST", "/admin/v1/reset-password", `{"username":"admin"} {}`); r.code != 400 || r.errKey(t) != KeyInvalid {
		t.Errorf("trailing data: %d %s", r.code, r.body)
	}
	if r := a.call("POST", "/admin/v1/reset-password", map[string]any{"username": "bob", "password": "bobs password"}); r.code != 404 || r.errKey(t) != KeyNotFound {
		t.Errorf("missing user: %d %s", r.code, r.body)
	}
	r = a.call("POST", "/admin/v1/reset-password", map[string]any{"username": "bob", "password": strings.Repeat("é", 8), "create": true})
	if m := r.json(t); r.code != 200 || m["created"] != true || m["password"] != nil || m["username"] != "bob" {
		t.Fatalf("create bob: %d %s", r.code, r.body)
	}
	if r := a.anon().do("POST", "/auth/login", map[string]string{"username": "bob", "password": strings.Repeat("é", 8)}); r.code != 200 {
		t.Errorf("bob login: %d %s", r.code, r.body)
	}

	r = a.call("GET", "/admin/v1/list-users", nil)
	var list AdminUserList
	if err := json.Unmarshal(r.body, &list); r.code != 200 || err != nil || len(list.Users) != 2 {
		t.Fatalf("list-users: %d %s", r.code, r.body)
	}
	for _, u := range list.Users {
		switch u.Name {
		case "admin":
			if !u.BuiltinAdmin || !u.MustChangePassword || u.LastLoginAt == nil || u.PasswordChangedAt == nil || u.Groups == nil {
				t.Errorf("admin row: %+v", u)
			}
		case "bob":
			if u.BuiltinAdmin || !u.MustChangePassword {
				t.Errorf("bob row: %+v", u)
			}
		default:
			t.Errorf("unexpected user %q", u.Name)
		}
	}
	if strings.Contains(string(r.body), "argon2") || strings.Contains(string(r.body), "passwordHash") {
		t.Errorf("list-users leaks hashes: %s", r.body)
	}

	// Wrong method, unknown route.
	if r := a.call("GET", "/admin/v1/reset-password", nil); r.code != 405 || r.errKey(t) != KeyInvalid {
		t.Errorf("GET reset-password: %d %s", r.code, r.body)
	}
	if r := a.call("POST", "/admin/v1/nope", nil); r.code != 404 || r.errKey(t) != KeyNotFound {
		t.Errorf("unknown admin route: %d %s", r.code, r.body)
	}

	// Audit events name the local administrator with decision path local.
	page, err := a.srv.audit.List(context.Background(), audit.Query{Actor: "local-root", Limit: 1000})
	if err != nil {
		t.Fatal(err)
	}
	var resets int
	for _, ev := range page.Items {
		if ev.Action == "reset-password" {
			resets++
			if ev.Decision != "local" || ev.Actor.Auth != "socket" || ev.Path == "" {
				t.Errorf("audit event: %+v", ev)
			}
		}
	}
	if resets < 9 {
		t.Errorf("audit events of reset-password: %d, want every write (%+v)", resets, page.Items)
	}
	if n, err := a.srv.audit.Verify(context.Background()); err != nil || n == 0 {
		t.Errorf("audit chain: %d %v", n, err)
	}
}

func TestAdminSocketCreateToken(t *testing.T) {
	a := newAdminEnv(t, nil)
	now := a.clock.now()

	r := a.call("POST", "/admin/v1/create-token", map[string]any{"description": "emergency"})
	var tok AdminCreatedToken
	if err := json.Unmarshal(r.body, &tok); r.code != 201 || err != nil {
		t.Fatalf("break-glass token: %d %s", r.code, r.body)
	}
	want := AdminTokenOwner{Kind: "ServiceAccount", Name: "break-glass", Namespace: DefaultNamespace, ID: "serviceaccount:service-system:break-glass", Provider: "local"}
	if tok.Owner != want || tok.ExpiresAt == nil || !tok.ExpiresAt.Equal(now.Add(24*time.Hour)) || !strings.HasPrefix(tok.Token, "svc_") {
		t.Fatalf("break-glass token: %s", r.body)
	}
	for _, k := range []string{`"namespace"`, `"id"`, `"provider"`, `"expiresAt"`} {
		if !strings.Contains(string(r.body), k) {
			t.Errorf("answer lacks %s: %s", k, r.body)
		}
	}
	// The token authenticates to the REST API as a built-in administrator.
	bg := a.withToken(tok.Token)
	if r := bg.do("GET", "/auth/me", nil); r.code != 200 || !strings.Contains(string(r.body), `"break-glass"`) {
		t.Fatalf("me with break-glass token: %d %s", r.code, r.body)
	}
	if r := bg.do("GET", "/iam/users", nil); r.code != 200 {
		t.Errorf("admin route with break-glass token: %d %s", r.code, r.body)
	}

	// A user's personal token; the default lifetime is maxLifetime (0: never).
	a.addUser("carol", "carols password", "ops")
	r = a.call("POST", "/admin/v1/create-token", map[string]any{"user": "carol"})
	var ct AdminCreatedToken
	if err := json.Unmarshal(r.body, &ct); r.code != 201 || err != nil || ct.ExpiresAt != nil || ct.Owner.Kind != "User" || ct.Owner.Name != "carol" {
		t.Fatalf("carol's token: %d %s", r.code, r.body)
	}
	if !strings.Contains(string(r.body), `"expiresAt":null`) {
		t.Errorf("expiresAt not null: %s", r.body)
	}
	if r := a.withToken(ct.Token).do("GET", "/auth/me", nil); r.code != 200 || !strings.Contains(string(r.body), `"carol"`) {
		t.Errorf("me with carol's token: %d %s", r.code, r.body)
	}
	r = a.call("POST", "/admin/v1/create-token", map[string]any{"user": "carol", "expiresIn": "2h"})
	if m := r.json(t); r.code != 201 || m["expiresAt"] != now.Add(2*time.Hour).Format(time.RFC3339) {
		t.Errorf("expiresIn 2h: %d %s", r.code, r.body)
	}

	if r := a.call("POST", "/admin/v1/create-token", map[string]any{"user": "nobody"}); r.code != 404 || r.errKey(t) != KeyNotFound {
		t.Errorf("unknown user: %d %s", r.code, r.body)
	}
	for _, bad := range []map[string]any{
		{"expiresIn": "banana"},
		{"expiresIn": "-1h"},
		{"expiresIn": strings.Repeat("1", 40) + "h"},
		{"user": "carol", "expiresIn": "0s"},
		{"scopes": []string{"viewer"}},
	} {
		if r := a.call("POST", "/admin/v1/create-token", bad); r.code != 400 || r.errKey(t) != KeyInvalid {
			t.Errorf("%v: %d %s", bad, r.code, r.body)
		}
	}
	page, err := a.srv.audit.List(context.Background(), audit.Query{Kind: "APIToken", Limit: 100})
	if err != nil || len(page.Items) != 3 || page.Items[0].Actor.Name != "local-root" || page.Items[0].Decision != "local" {
		t.Errorf("create-token audit: %v %+v", err, page.Items)
	}
}

func TestAdminSocketTokenLifetimeCap(t *testing.T) {
	a := newAdminEnv(t, nil, func(o *Options, _ *Deps) { o.TokenMaxLifetime = time.Hour })
	now := a.clock.now()
	r := a.call("POST", "/admin/v1/create-token", nil)
	if m := r.json(t); r.code != 201 || m["expiresAt"] != now.Add(time.Hour).Format(time.RFC3339) {
		t.Errorf("break-glass default capped at maxLifetime: %d %s", r.code, r.body)
	}
	if r := a.call("POST", "/admin/v1/create-token", map[string]any{"expiresIn": "2h"}); r.code != 400 || r.errKey(t) != KeyInvalid {
		t.Errorf("beyond maxLifetime: %d %s", r.code, r.body)
	}
	r = a.call("POST", "/admin/v1/create-token", map[string]any{"user": "admin"})
	if m := r.json(t); r.code != 201 || m["expiresAt"] != now.Add(time.Hour).Format(time.RFC3339) {
		t.Errorf("user token default maxLifetime: %d %s", r.code, r.body)
	}
}

func TestAdminSocketWholeAPI(t *testing.T) {
	a := newAdminEnv(t, nil)
	r := a.call("GET", "/api/v1/auth/me", nil)
	if r.code != 200 || !strings.Contains(string(r.body), `"local-root"`) || !strings.Contains(string(r.body), `"socket"`) {
		t.Fatalf("me over the socket: %d %s", r.code, r.body)
	}
	if r := a.call("GET", "/api/v1/iam/users", nil); r.code != 200 {
		t.Errorf("admin route over the socket: %d %s", r.code, r.body)
	}
}

func TestAdminSocketNDJSON(t *testing.T) {
	a := newAdminEnv(t, nil)
	ans := a.ndjson(
		`{"method":"POST","path":"/admin/v1/reset-password","body":{"username":"admin","password":"a fresh password"}}`,
		`{"op":"list-users","id":7}`,
		`{"op":"create-token","body":{"expiresIn":"1h"}}`,
		`{"op":"reset-password","body":{"password":"short"}}`,
		`{"op":"list-users","extra":1}`,
		`not json`,
		`{"method":"GET","path":"/api/v1/auth/me"}`,
		`{"op":"reset-password","body":{"username":"ghost","password":"long enough"}}`,
	)
	status := func(i int) int { f, _ := ans[i]["status"].(float64); return int(f) }
	errKey := func(i int) string {
		b, _ := ans[i]["body"].(map[string]any)
		e, _ := b["error"].(map[string]any)
		k, _ := e["key"].(string)
		return k
	}
	body := func(i int) map[string]any { b, _ := ans[i]["body"].(map[string]any); return b }
	if status(0) != 200 || body(0)["mustChangePassword"] != true || body(0)["password"] != nil {
		t.Errorf("reset over ndjson: %v", ans[0])
	}
	if status(1) != 200 || ans[1]["id"] != float64(7) || len(body(1)["users"].([]any)) != 1 {
		t.Errorf("list-users over ndjson: %v", ans[1])
	}
	tok, _ := body(2)["token"].(string)
	if status(2) != 201 || tok == "" {
		t.Errorf("create-token over ndjson: %v", ans[2])
	}
	if r := a.withToken(tok).do("GET", "/auth/me", nil); r.code != 200 {
		t.Errorf("ndjson token on the REST API: %d %s", r.code, r.body)
	}
	for i, want := range map[int]int{3: 400, 4: 400, 5: 400, 6: 404, 7: 404} {
		if status(i) != want || (want == 400 && errKey(i) != KeyInvalid) {
			t.Errorf("line %d: %v, want %d", i, ans[i], want)
		}
	}
	if r := a.anon().do("POST", "/auth/login", map[string]string{"username": "admin", "password": "a fresh password"}); r.code != 200 {
		t.Errorf("login with the ndjson-set password: %d", r.code)
	}
}

func TestAdmitPeer(t *testing.T) {
	groups := func(pid int32) []int {
		if pid == 42 {
			return []int{10, 2000}
		}
		return nil
	}
	cases := []struct {
		name  string
		c     peerCred
		group int
		want  bool
	}{
		{"root", peerCred{UID: 0, GID: 0, Known: true}, -1, true},
		{"own uid", peerCred{UID: 1000, GID: 5, Known: true}, -1, true},
		{"stranger", peerCred{UID: 1001, GID: 1001, Known: true}, -1, false},
		{"stranger in primary group", peerCred{UID: 1001, GID: 2000, Known: true}, 2000, true},
		{"stranger in supplementary group", peerCred{PID: 42, UID: 1001, GID: 1001, Known: true}, 2000, true},
		{"stranger, other group", peerCred{PID: 43, UID: 1001, GID: 1001, Known: true}, 2000, false},
		{"group -1 admits no gid", peerCred{UID: 1001, GID: 0, Known: true}, -1, false},
		{"unknown credentials", peerCred{UID: 0}, 0, false},
	}
	for _, c := range cases {
		if got := admitPeer(c.c, 1000, c.group, groups); got != c.want {
			t.Errorf("%s: admitted %v, want %v", c.name, got, c.want)
		}
	}
	if g := procGroups(int32(os.Getpid())); g == nil && fileExists("/proc/self/status") {
		t.Log("no supplementary groups listed for this process")
	}
}

func fileExists(p string) bool { _, err := os.Stat(p); return err == nil }

func TestAdminSocketRefusesPeer(t *testing.T) {
	if os.Getuid() == 0 {
		t.Skip("root is always admitted")
	}
	// The server pretends to run as another uid, so this test's process is
	// a stranger (tests run as one user).
	a := newAdminEnv(t, func(s *Server) { s.adminSelfUID = os.Getuid() + 1; s.adminGroups = nil })
	for _, c := range []struct{ method, path string }{
		{"GET", "/admin/v1/list-users"}, {"POST", "/admin/v1/reset-password"}, {"POST", "/admin/v1/create-token"}, {"GET", "/api/v1/auth/me"},
	} {
		if r := a.call(c.method, c.path, nil); r.code != 403 || r.errKey(t) != KeyForbidden {
			t.Errorf("%s %s: %d %s", c.method, c.path, r.code, r.body)
		}
	}
	ans := a.ndjson(`{"op":"list-users"}`)
	if ans[0]["status"] != float64(403) {
		t.Errorf("ndjson stranger: %v", ans[0])
	}
	// Refused writes are audited too, with the stranger's uid.
	page, err := a.srv.audit.List(context.Background(), audit.Query{Limit: 100})
	if err != nil || len(page.Items) != 2 || page.Items[0].Decision != "none" || page.Items[0].Status != 403 || page.Items[0].Actor.Name != "unix-peer" {
		t.Errorf("refusals audited: %v %+v", err, page.Items)
	}
	// Nothing changed.
	if r := a.anon().do("POST", "/auth/login", map[string]string{"username": "admin", "password": adminPW}); r.code != 200 {
		t.Errorf("admin login after refused reset: %d", r.code)
	}
}

func TestListenAdminSocket(t *testing.T) {
	e := newEnv(t)
	dir := shortDir(t)
	srvAt := func(p string) *Server {
		s := *e.srv
		s.opts.AdminSocketPath, s.opts.AdminSocketGroup = p, -1
		return &s
	}
	// The parent directory is created 0750; the socket is 0660.
	p := filepath.Join(dir, "new", "a.sock")
	ln, err := srvAt(p).ListenAdminSocket()
	if err != nil {
		t.Fatal(err)
	}
	if fi, err := os.Stat(filepath.Dir(p)); err != nil || fi.Mode().Perm() != 0o750 {
		t.Errorf("parent directory: %v %v", fi.Mode(), err)
	}
	if fi, err := os.Lstat(p); err != nil || fi.Mode().Type() != fs.ModeSocket || fi.Mode().Perm() != 0o660 {
		t.Errorf("socket mode: %v %v", fi.Mode(), err)
	}
	// A live socket is not taken over.
	if _, err := srvAt(p).ListenAdminSocket(); err == nil || !strings.Contains(err.Error(), "in use") {
		t.Errorf("second listener on a live socket: %v", err)
	}
	// A stale socket file (no listener) is replaced.
	stale := filepath.Join(dir, "stale.sock")
	l2, err := net.ListenUnix("unix", &net.UnixAddr{Name: stale, Net: "unix"})
	if err != nil {
		t.Fatal(err)
	}
	l2.SetUnlinkOnClose(false)
	l2.Close()
	if _, err := os.Lstat(stale); err != nil {
		t.Fatalf("stale socket file missing: %v", err)
	}
	ln3, err := srvAt(stale).ListenAdminSocket()
	if err != nil {
		t.Errorf("stale socket: %v", err)
	} else {
		ln3.Close()
	}
	// A path that is not a socket is refused and left alone.
	file := filepath.Join(dir, "file")
	if err := os.WriteFile(file, []byte("keep"), 0o600); err != nil {
		t.Fatal(err)
	}
	if _, err := srvAt(file).ListenAdminSocket(); err == nil || !strings.Contains(err.Error(), "not a socket") {
		t.Errorf("regular file: %v", err)
	}
	if b, _ := os.ReadFile(file); string(b) != "keep" {
		t.Errorf("regular file changed: %q", b)
	}
	// Serving stops with the context and removes the socket.
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() { done <- srvAt(p).ServeAdminListener(ctx, ln) }()
	cancel()
	if err := <-done; err != nil {
		t.Errorf("serve: %v", err)
	}
	if _, err := os.Lstat(p); !errors.Is(err, fs.ErrNotExist) {
		t.Errorf("socket left behind: %v", err)
	}
	// An empty path turns the socket off.
	if err := srvAt("").ServeAdminSocket(context.Background()); err != nil {
		t.Errorf("empty path: %v", err)
	}
}
