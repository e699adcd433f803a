package api

import (
	"bytes"
	"encoding/json"
	"flag"
	"os"
	"path/filepath"
	"slices"
	"testing"

	"github.com/danielgtaylor/huma/v2"
	"github.com/svcdns/svc/internal/auth"
)

var update = flag.Bool("update", false, "rewrite the checked-in OpenAPI documents")

func operations(doc *huma.OpenAPI) map[string]*huma.Operation {
	out := map[string]*huma.Operation{}
	for path, item := range doc.Paths {
		for method, op := range map[string]*huma.Operation{"GET": item.Get, "PUT": item.Put, "POST": item.Post, "PATCH": item.Patch, "DELETE": item.Delete, "HEAD": item.Head, "OPTIONS": item.Options, "TRACE": item.Trace} {
			if op != nil {
				out[method+" "+path] = op
			}
		}
	}
	return out
}

// TestEveryOperationDeclaresOnePermission walks the OpenAPI document: an
// operation without exactly one known permission (or the public marker) fails.
func TestEveryOperationDeclaresOnePermission(t *testing.T) {
	e := newEnv(t)
	ops := operations(e.srv.API().OpenAPI())
	known := auth.AllPermissions()
	if len(ops) != len(e.srv.routes) || len(ops) < 40 {
		t.Fatalf("%d operations in the document, %d in the registry", len(ops), len(e.srv.routes))
	}
	for name, op := range ops {
		perm, ok := op.Extensions[extPermission].(string)
		if !ok || perm == "" {
			t.Errorf("%s: no %s", name, extPermission)
			continue
		}
		if perm != permPublic && !slices.Contains(known, perm) {
			t.Errorf("%s: permission %q is held by no role", name, perm)
		}
		if _, ok := op.Extensions[extScope].(string); !ok {
			t.Errorf("%s: no %s", name, extScope)
		}
	}
}

func docs(t *testing.T) (v31, v30 []byte) {
	e := newEnv(t)
	doc := e.srv.API().OpenAPI()
	b, err := json.MarshalIndent(doc, "", "  ")
	if err != nil {
		t.Fatal(err)
	}
	d, err := doc.Downgrade()
	if err != nil {
		t.Fatal(err)
	}
	var buf bytes.Buffer
	if err := json.Indent(&buf, d, "", "  "); err != nil {
		t.Fatal(err)
	}
	return append(b, '\n'), append(buf.Bytes(), '\n')
}

// TestOpenAPIDrift keeps openapi/*.json equal to the route registry; run
// with -update to regenerate them.
func TestOpenAPIDrift(t *testing.T) {
	v31, v30 := docs(t)
	for file, want := range map[string][]byte{"openapi.json": v31, "openapi-3.0.json": v30} {
		p := filepath.Join("..", "..", "openapi", file)
		if *update {
			if err := os.MkdirAll(filepath.Dir(p), 0o755); err != nil {
				t.Fatal(err)
			}
			if err := os.WriteFile(p, want, 0o644); err != nil {
				t.Fatal(err)
			}
			continue
		}
		got, err := os.ReadFile(p)
		if err != nil {
			t.Fatalf("%v (run go test ./internal/api -run TestOpenAPIDrift -update)", err)
		}
		if !bytes.Equal(got, want) {
			t.Errorf("%s drifted from the route registry; run go test ./internal/api -run TestOpenAPIDrift -update", p)
		}
	}
}

// TestServedOpenAPIDocuments checks the served 3.1 document and 3.0 copy.
func TestServedOpenAPIDocuments(t *testing.T) {
	e := newEnv(t)
	a := e.anon()
	for path, want := range map[string]string{"/openapi.json": "3.1", "/openapi-3.0.json": "3.0"} {
		r := a.do("GET", path, nil)
		if r.code != 200 {
			t.Fatalf("%s: %d", path, r.code)
		}
		v, _ := r.json(t)["openapi"].(string)
		if len(v) < 3 || v[:3] != want {
			t.Errorf("%s: openapi %q, want %s.x", path, v, want)
		}
	}
	if r := a.do("GET", "/docs", nil); r.code != 200 || !bytes.Contains(r.body, []byte("openapi.json")) {
		t.Errorf("/docs: %d", r.code)
	}
}
