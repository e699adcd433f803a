package api

import (
	"bytes"
	"context"
	"net/http"
	"testing"

	"github.com/svcdns/svc/internal/store"
)

// TestMalformedBodiesEverywhere sends malformed, wrong-typed and oversize
// bodies to every route as the administrator: never 5xx, always the error
// body, and nothing stored changes.
func TestMalformedBodiesEverywhere(t *testing.T) {
	e := newEnv(t)
	c := e.withToken(e.adminToken())
	ctx := context.Background()
	count := func() int {
		n := 0
		for _, ki := range kindsServed(e.srv.kinds) {
			res, err := e.st.List(ctx, store.ListOptions{Kind: ki.Kind})
			if err != nil {
				t.Fatal(err)
			}
			n += len(res.Items)
		}
		return n
	}
	before := count()
	bodies := []any{`{"`, `[1,2`, `"just a string"`, `12`, `{"metadata":"x","spec":[]}`, `{"names":[1,2],"name":{"a":1}}`,
		bytes.Repeat([]byte("a"), maxBulkBody+10)}
	for _, r := range e.srv.routes {
		if r.Method == http.MethodGet || r.Method == http.MethodDelete || r.Path == "/auth/logout" {
			continue
		}
		for i, b := range bodies {
			res := c.do(r.Method, fillPath(r.Path), b)
			if res.code >= 500 && res.code != http.StatusNotImplemented {
				t.Errorf("%s %s body %d: %d %s", r.Method, r.Path, i, res.code, res.body)
				continue
			}
			if res.code < 400 {
				t.Errorf("%s %s body %d: accepted with %d", r.Method, r.Path, i, res.code)
				continue
			}
			res.errKey(t)
		}
	}
	if after := count(); after != before {
		t.Errorf("stored objects changed: %d -> %d", before, after)
	}
}
