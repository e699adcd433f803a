package api

import (
	"context"
	"io"
	"net/http"
	"net/http/httptest"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/svcdns/svc/internal/auth"
	"github.com/svcdns/svc/internal/store/sqlite"
)

// node is one life of a server on a data directory: store, API server and
// HTTP listener, closed by stop (a node restart closes everything).
type node struct {
	srv  *Server
	hs   *httptest.Server
	stop func()
}

func startNode(t *testing.T, dir string, env map[string]string) *node {
	t.Helper()
	ctx := context.Background()
	v := testValidator(t)
	st, err := sqlite.NewStore(ctx, filepath.Join(dir, "state.db"), v, sqlite.Options{})
	if err != nil {
		t.Fatal(err)
	}
	clock := func() time.Time { return time.Date(2030, 1, 2, 3, 4, 5, 0, time.UTC) }
	srv, err := New(ctx, Options{DataDir: dir, NodeName: "node-a", GenerateKey: true, TLSAuto: "off", Clock: clock,
		Env: func(k string) string { return env[k] }, Stdout: io.Discard}, Deps{Store: st, Kinds: v, Admitter: v})
	if err != nil {
		st.Close()
		t.Fatal(err)
	}
	hs := httptest.NewServer(srv.Handler())
	n := &node{srv: srv, hs: hs}
	stopped := false
	n.stop = func() {
		if !stopped {
			stopped = true
			hs.Close()
			srv.Close()
			st.Close()
		}
	}
	t.Cleanup(n.stop)
	return n
}

type cookieSession struct{ cookie, csrf string }

func (n *node) login(t *testing.T) cookieSession {
	t.Helper()
	res, err := http.Post(n.hs.URL+n.srv.BasePath()+"/auth/login", "application/json",
		strings.NewReader(`{"username":"admin","password":"`+adminPW+`"}`))
	if err != nil {
		t.Fatal(err)
	}
	defer res.Body.Close()
	b, _ := io.ReadAll(res.Body)
	if res.StatusCode != 200 {
		t.Fatalf("login: %d %s", res.StatusCode, b)
	}
	for _, c := range res.Cookies() {
		if c.Name == auth.CookieBaseName {
			r := resp{code: res.StatusCode, body: b}
			return cookieSession{cookie: c.Value, csrf: r.json(t)["csrf"].(string)}
		}
	}
	t.Fatalf("no session cookie in %v", res.Header)
	return cookieSession{}
}

func (n *node) do(t *testing.T, method, path string, s cookieSession) int {
	t.Helper()
	req, _ := http.NewRequest(method, n.hs.URL+n.srv.BasePath()+path, nil)
	req.AddCookie(&http.Cookie{Name: auth.CookieBaseName, Value: s.cookie})
	if method != http.MethodGet {
		req.Header.Set("X-Service-CSRF", s.csrf)
	}
	res, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	res.Body.Close()
	return res.StatusCode
}

// TestSessionsAcrossRestart: the cookie MAC key derives from the encryption
// key (generated into the data directory, or from the environment), so
// sessions survive a restart; a logged-out cookie stays dead after one.
func TestSessionsAcrossRestart(t *testing.T) {
	for name, env := range map[string]map[string]string{
		"generated key": {"SERVICE_ADMIN_PASSWORD": adminPW},
		"key from env":  {"SERVICE_ADMIN_PASSWORD": adminPW, "SERVICE_ENCRYPTION_KEY": strings.Repeat("ab", 32)},
	} {
		t.Run(name, func(t *testing.T) {
			dir := t.TempDir()
			a := startNode(t, dir, env)
			kept, out := a.login(t), a.login(t)
			if code := a.do(t, "POST", "/auth/logout", out); code != 204 {
				t.Fatalf("logout: %d", code)
			}
			if code := a.do(t, "GET", "/auth/me", out); code != 401 {
				t.Fatalf("logged-out cookie before restart: %d", code)
			}
			a.stop()

			b := startNode(t, dir, env)
			if code := b.do(t, "GET", "/auth/me", kept); code != 200 {
				t.Errorf("live session after restart: %d", code)
			}
			if code := b.do(t, "GET", "/auth/me", out); code != 401 {
				t.Errorf("logged-out session after restart: %d", code)
			}
			b.stop()

			// Another key: every cookie is dead.
			other := map[string]string{"SERVICE_ADMIN_PASSWORD": adminPW, "SERVICE_ENCRYPTION_KEY": strings.Repeat("cd", 32)}
			c := startNode(t, dir, other)
			if code := c.do(t, "GET", "/auth/me", kept); code != 401 {
				t.Errorf("cookie under another key: %d", code)
			}
		})
	}
}
