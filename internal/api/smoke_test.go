package api

import (
	"testing"
)

func TestLoginMeAndErrors(t *testing.T) {
	e := newEnv(t)
	a := e.anon()
	if r := a.do("GET", "/nope", nil); r.code != 404 || r.errKey(t) != KeyNotFound {
		t.Fatalf("unknown route: %d %s", r.code, r.body)
	}
	r := a.do("GET", "/auth/me", nil)
	if r.code != 401 || r.errKey(t) != KeyUnauthenticated || r.hdr.Get("WWW-Authenticate") == "" {
		t.Fatalf("anonymous me: %d %v %s", r.code, r.hdr, r.body)
	}
	r = a.do("POST", "/auth/login", map[string]any{"username": "admin"})
	if r.code != 400 || r.errKey(t) != KeyInvalid {
		t.Fatalf("login without password: %d %s", r.code, r.body)
	}
	c := e.login("admin", adminPW)
	r = c.do("GET", "/auth/me", nil)
	if r.code != 200 {
		t.Fatalf("me: %d %s", r.code, r.body)
	}
	t.Logf("%s", r.body)
}
