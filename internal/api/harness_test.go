package api

import (
	"bytes"
	"context"
	"encoding/json"
	"io"
	"net/http"
	"net/http/cookiejar"
	"net/http/httptest"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/svcdns/svc/internal/auth"
	"github.com/svcdns/svc/internal/store"
	"github.com/svcdns/svc/internal/store/sqlite"
	"github.com/svcdns/svc/internal/validation"
)

const adminPW = "correct horse battery"

// fakeClock is a settable clock for lockout and expiry tests.
type fakeClock struct {
	mu sync.Mutex
	t  time.Time
}

func (c *fakeClock) now() time.Time { c.mu.Lock(); defer c.mu.Unlock(); return c.t }
func (c *fakeClock) add(d time.Duration) {
	c.mu.Lock()
	c.t = c.t.Add(d)
	c.mu.Unlock()
}

type testEnv struct {
	t     testing.TB
	srv   *Server
	http  *httptest.Server
	st    store.Store
	clock *fakeClock
	base  string
	dir   string
}

var (
	validatorOnce   sync.Once
	sharedValidator *validation.Validator
)

func testValidator(t testing.TB) *validation.Validator {
	validatorOnce.Do(func() {
		v, err := validation.New()
		if err != nil {
			t.Fatalf("validator: %v", err)
		}
		sharedValidator = v
	})
	return sharedValidator
}

func newEnv(t testing.TB, mutate ...func(*Options, *Deps)) *testEnv {
	t.Helper()
	dir := t.TempDir()
	ctx := context.Background()
	v := testValidator(t)
	st, err := sqlite.NewStore(ctx, filepath.Join(dir, "state.db"), v, sqlite.Options{})
	if err != nil {
		t.Fatal(err)
	}
	clock := &fakeClock{t: time.Date(2030, 1, 2, 3, 4, 5, 0, time.UTC)}
	env := map[string]string{"SERVICE_ADMIN_PASSWORD": adminPW}
	opts := Options{DataDir: dir, NodeName: "node-a", GenerateKey: true, TLSAuto: "off", Clock: clock.now,
		Env: func(k string) string { return env[k] }, Stdout: io.Discard}
	deps := Deps{Store: st, Kinds: v, Admitter: v}
	for _, m := range mutate {
		m(&opts, &deps)
	}
	srv, err := New(ctx, opts, deps)
	if err != nil {
		st.Close()
		t.Fatal(err)
	}
	hs := httptest.NewServer(srv.Handler())
	t.Cleanup(func() {
		hs.Close()
		srv.Close()
		st.Close()
	})
	return &testEnv{t: t, srv: srv, http: hs, st: st, clock: clock, base: hs.URL + srv.BasePath(), dir: dir}
}

// client is a caller: a cookie session, a bearer token, or anonymous.
type client struct {
	e     *testEnv
	hc    *http.Client
	token string
	csrf  string
}

func (e *testEnv) anon() *client {
	jar, _ := cookiejar.New(nil)
	return &client{e: e, hc: &http.Client{Jar: jar, Timeout: 30 * time.Second}}
}

func (e *testEnv) withToken(tok string) *client {
	c := e.anon()
	c.token = tok
	return c
}

type resp struct {
	code int
	hdr  http.Header
	body []byte
}

func (r resp) json(t testing.TB) map[string]any {
	t.Helper()
	var m map[string]any
	if err := json.Unmarshal(r.body, &m); err != nil {
		t.Fatalf("status %d body %q: %v", r.code, r.body, err)
	}
	return m
}

func (r resp) errKey(t testing.TB) string {
	t.Helper()
	m := r.json(t)
	e, _ := m["error"].(map[string]any)
	if e == nil {
		t.Fatalf("status %d: no error member in %s", r.code, r.body)
	}
	if _, ok := m["took_ms"]; !ok {
		t.Fatalf("error body without took_ms: %s", r.body)
	}
	k, _ := e["key"].(string)
	return k
}

func (c *client) do(method, path string, body any, hdr ...string) resp {
	c.e.t.Helper()
	var rd io.Reader
	ct := "application/json"
	switch b := body.(type) {
	case nil:
	case []byte:
		rd = bytes.NewReader(b)
	case string:
		rd = strings.NewReader(b)
	default:
		j, _ := json.Marshal(b)
		rd = bytes.NewReader(j)
	}
	req, err := http.NewRequest(method, c.e.base+path, rd)
	if err != nil {
		c.e.t.Fatal(err)
	}
	if rd != nil {
		req.Header.Set("Content-Type", ct)
	}
	if c.token != "" {
		req.Header.Set("Authorization", "Bearer "+c.token)
	}
	if c.csrf != "" && method != http.MethodGet {
		req.Header.Set("X-Service-CSRF", c.csrf)
	}
	for i := 0; i+1 < len(hdr); i += 2 {
		req.Header.Set(hdr[i], hdr[i+1])
	}
	res, err := c.hc.Do(req)
	if err != nil {
		c.e.t.Fatal(err)
	}
	defer res.Body.Close()
	b, _ := io.ReadAll(res.Body)
	return resp{code: res.StatusCode, hdr: res.Header, body: b}
}

// login logs in and returns a cookie client carrying its CSRF token.
func (e *testEnv) login(user, pw string) *client {
	e.t.Helper()
	c := e.anon()
	r := c.do("POST", "/auth/login", map[string]string{"username": user, "password": pw})
	if r.code != 200 {
		e.t.Fatalf("login %s: %d %s", user, r.code, r.body)
	}
	c.csrf, _ = r.json(e.t)["csrf"].(string)
	return c
}

// apply stores objects through the admin's token.
func (e *testEnv) adminToken() string {
	e.t.Helper()
	c := e.login("admin", adminPW)
	r := c.do("POST", "/auth/tokens", map[string]any{"description": "test"})
	if r.code != 201 {
		e.t.Fatalf("create token: %d %s", r.code, r.body)
	}
	return r.json(e.t)["token"].(string)
}

// addUser stores a local user with a password through the directory.
func (e *testEnv) addUser(name, pw string, groups ...string) {
	e.t.Helper()
	ctx := context.Background()
	h, err := e.srv.hasher.Hash(ctx, pw)
	if err != nil {
		e.t.Fatal(err)
	}
	if _, err := e.srv.dir.SaveUser(ctx, &auth.LocalUser{Username: name, PasswordHash: h, Groups: groups}, store.ManagerAPI); err != nil {
		e.t.Fatal(err)
	}
}
