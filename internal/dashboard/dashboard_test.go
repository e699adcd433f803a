package dashboard

import (
	"bytes"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/svcdns/svc/internal/dashboard/apigen"
)

const root = "../.."

// TestAPIModuleMatchesOpenAPI: web/static/api.gen.js is what the generator
// writes from openapi/openapi.json; regenerate with
// `go generate ./internal/dashboard` after the API changes.
func TestAPIModuleMatchesOpenAPI(t *testing.T) {
	doc, err := os.ReadFile(filepath.Join(root, "openapi", "openapi.json"))
	if err != nil {
		t.Fatal(err)
	}
	want, err := apigen.Generate(doc)
	if err != nil {
		t.Fatal(err)
	}
	got, err := os.ReadFile(filepath.Join(root, "web", "static", "api.gen.js"))
	if err != nil {
		t.Fatal(err)
	}
	if !bytes.Equal(got, want) {
		t.Fatal("web/static/api.gen.js differs from what openapi/openapi.json gives: run `go generate ./internal/dashboard` and commit the result")
	}
}

// TestDashboardCallsOnlyDeclaredRoutes: every operation id the modules name
// in call(), url(), can() or route() is in the generated table, so a route
// renamed on the server fails here rather than in a user's browser.
func TestDashboardCallsOnlyDeclaredRoutes(t *testing.T) {
	gen, err := os.ReadFile(filepath.Join(root, "web", "static", "api.gen.js"))
	if err != nil {
		t.Fatal(err)
	}
	n := 0
	err = filepath.WalkDir(filepath.Join(root, "web", "static"), func(p string, d os.DirEntry, err error) error {
		if err != nil || d.IsDir() || !strings.HasSuffix(p, ".js") || strings.Contains(p, "vendor") || strings.HasSuffix(p, ".gen.js") {
			return err
		}
		b, err := os.ReadFile(p)
		if err != nil {
			return err
		}
		for _, id := range operationRefs(string(b)) {
			n++
			if !bytes.Contains(gen, []byte("\n  \""+id+"\": {")) {
				t.Errorf("%s names operation %q, which openapi/openapi.json does not declare", p, id)
			}
		}
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	if n < 10 {
		t.Fatalf("found only %d operation references; the pattern is broken", n)
	}
}

// operationRefs finds the first string argument of call(, url(, can(me, ,
// route( and needs: in JavaScript source.
func operationRefs(src string) []string {
	var out []string
	for _, prefix := range []string{"call('", "url('", "can(me, '", "route('", "route_('", "needs: '", "apiRoute('"} {
		rest := src
		for {
			i := strings.Index(rest, prefix)
			if i < 0 {
				break
			}
			rest = rest[i+len(prefix):]
			if j := strings.IndexByte(rest, '\''); j > 0 {
				out = append(out, rest[:j])
			}
		}
	}
	return out
}

// TestVendoredPreactMatchesLockfile: the committed Preact + htm build is the
// file of the npm package web/package-lock.json pins (checked when npm ci
// has run in web/, as hack/install-browser.sh does).
func TestVendoredPreactMatchesLockfile(t *testing.T) {
	src, err := os.ReadFile(filepath.Join(root, apigen.VendorSource))
	if err != nil {
		if os.Getenv("CI") != "" {
			t.Fatalf("%v: run hack/install-browser.sh", err)
		}
		t.Skipf("%s missing (npm ci in web/ installs it): %v", apigen.VendorSource, err)
	}
	got, err := os.ReadFile(filepath.Join(root, apigen.VendorTarget))
	if err != nil {
		t.Fatal(err)
	}
	if !bytes.Equal(got, append([]byte(apigen.VendorHeader), src...)) {
		t.Fatalf("%s differs from %s: run go run ./hack/gen-dashboard-types -vendor", apigen.VendorTarget, apigen.VendorSource)
	}
	lock, err := os.ReadFile(filepath.Join(root, "web", "package-lock.json"))
	if err != nil {
		t.Fatal(err)
	}
	if !strings.Contains(string(lock), `"node_modules/htm": {`+"\n"+`      "version": "3.1.1"`) || !strings.Contains(apigen.VendorHeader, "htm 3.1.1") {
		t.Fatal("web/package-lock.json and the vendored header disagree on the htm version")
	}
}

// TestFirstLoadBudget: JS + CSS (and index.html, the icon) of the first
// load stay within 250 KB gzipped.
func TestFirstLoadBudget(t *testing.T) {
	h, err := New("")
	if err != nil {
		t.Fatal(err)
	}
	files, gz := h.FirstLoad()
	t.Logf("first load: %d files, %.1f KB gzipped", len(files), float64(gz)/1024)
	if gz > 250*1024 {
		t.Fatalf("first load is %d bytes gzipped, over the 250 KB budget: %v", gz, files)
	}
}

func TestServe(t *testing.T) {
	for _, prefix := range []string{"", "/dns"} {
		h, err := New(prefix)
		if err != nil {
			t.Fatal(err)
		}
		cases := []struct {
			method, path string
			served       bool
			code         int
			ctype        string
		}{
			{"GET", prefix + "/", true, 200, "text/html"},
			{"GET", prefix + "/queries", true, 200, "text/html"},
			{"HEAD", prefix + "/overview", true, 200, "text/html"},
			{"GET", prefix + "/queries/extra", true, 200, "text/html"},
			{"GET", prefix + "/ui/app.js", true, 200, "text/javascript"},
			{"GET", prefix + "/ui/app.css", true, 200, "text/css"},
			{"GET", prefix + "/ui/missing.js", false, 0, ""},
			{"GET", prefix + "/nope", false, 0, ""},
			{"POST", prefix + "/queries", false, 0, ""},
		}
		if prefix != "" {
			cases = append(cases, struct {
				method, path string
				served       bool
				code         int
				ctype        string
			}{"GET", "/queries", false, 0, ""}, struct {
				method, path string
				served       bool
				code         int
				ctype        string
			}{"GET", prefix, true, 301, ""})
		}
		for _, c := range cases {
			rec := httptest.NewRecorder()
			served := h.Serve(rec, httptest.NewRequest(c.method, c.path, nil))
			if served != c.served {
				t.Errorf("%s %s: served %v, want %v", c.method, c.path, served, c.served)
				continue
			}
			if !served {
				continue
			}
			if rec.Code != c.code || !strings.HasPrefix(rec.Header().Get("Content-Type"), c.ctype) {
				t.Errorf("%s %s: %d %q", c.method, c.path, rec.Code, rec.Header().Get("Content-Type"))
			}
			if c.code == 200 && rec.Header().Get("Content-Security-Policy") != CSP {
				t.Errorf("%s %s: CSP %q", c.method, c.path, rec.Header().Get("Content-Security-Policy"))
			}
		}
		rec := httptest.NewRecorder()
		h.Serve(rec, httptest.NewRequest(http.MethodGet, prefix+"/", nil))
		if want := `<base href="` + prefix + `/">`; !strings.Contains(rec.Body.String(), want) {
			t.Errorf("index under %q lacks %s", prefix, want)
		}
		// The index loads versioned files, which the browser keeps.
		versioned := "ui/" + h.version + "/app.js"
		if !strings.Contains(rec.Body.String(), `src="`+versioned+`"`) {
			t.Errorf("index does not load %s:\n%s", versioned, rec.Body.String())
		}
		rec = httptest.NewRecorder()
		if !h.Serve(rec, httptest.NewRequest(http.MethodGet, prefix+"/"+versioned, nil)) || rec.Code != 200 ||
			!strings.Contains(rec.Header().Get("Cache-Control"), "immutable") {
			t.Errorf("GET %s: %d %v", versioned, rec.Code, rec.Header())
		}
	}
}
