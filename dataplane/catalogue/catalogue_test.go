package catalogue

import (
	"context"
	"encoding/json"
	"errors"
	"flag"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"strings"
	"sync/atomic"
	"testing"
	"time"
)

var update = flag.Bool("update", false, "rewrite golden files")

func TestBuiltin(t *testing.T) {
	c, err := Builtin(context.Background(), 7)
	if err != nil {
		t.Fatal(err)
	}
	in := c.Info()
	if in.Services < 80 || in.Categories < 10 {
		t.Fatalf("builtin has %d services in %d categories; want >= 80 in >= 10", in.Services, in.Categories)
	}
	if in.Origin != OriginEmbedded || in.SchemaVersion != 2 || len(in.Digest) != 64 || in.SafeSearchEngines != 7 {
		t.Fatalf("info = %+v", in)
	}
	if len(in.Sources) != 1 || in.Sources[0].DroppedRules != 0 || !in.Sources[0].Loaded {
		t.Fatalf("sources = %+v", in.Sources)
	}
	for _, cat := range c.Categories() {
		if cat.Services == 0 {
			t.Errorf("category %s has no services", cat.ID)
		}
	}
	for _, s := range c.Services() {
		if s.Rules == 0 || s.List != "service:"+s.ID || s.Origin != "builtin" {
			t.Errorf("service %+v", s)
		}
		light, ok1 := c.IconSVG(s.ID, false)
		dark, ok2 := c.IconSVG(s.ID, true)
		if !ok1 || !ok2 || string(light) == string(dark) || !strings.HasPrefix(string(light), "<svg") {
			t.Errorf("icons of %s", s.ID)
		}
	}
	for name, want := range map[string]bool{"www.youtube.com": true, "youtube.com": true, "i.ytimg.com": true, "notyoutube.com": false} {
		if got := matchService(c, "youtube", name); got != want {
			t.Errorf("youtube matches %s = %v, want %v", name, got, want)
		}
	}
}

// TestCategoriesGolden pins the category list and counts of the embedded
// catalogue (go test ./dataplane/catalogue -run Golden -update).
func TestCategoriesGolden(t *testing.T) {
	c, err := Builtin(context.Background(), 0)
	if err != nil {
		t.Fatal(err)
	}
	got, _ := json.MarshalIndent(c.Categories(), "", "  ")
	p := filepath.Join("testdata", "categories.golden.json")
	if *update {
		if err := os.WriteFile(p, append(got, '\n'), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	want, err := os.ReadFile(p)
	if err != nil {
		t.Fatal(err)
	}
	if strings.TrimSpace(string(want)) != strings.TrimSpace(string(got)) {
		t.Fatalf("categories differ from %s (run with -update):\n%s", p, got)
	}
}

func TestParseDocument(t *testing.T) {
	cases := []struct {
		name, doc, err string
	}{
		{"v2", `{"schemaVersion":2,"version":"2025.01.02","license":"MIT","categories":[{"id":"a","name":"A","order":1}],"services":[{"id":"x","name":"X","category":"a","rules":["||x.example^"]}]}`, ""},
		{"v1", `{"schemaVersion":1,"version":"2025.01.02","license":"MIT","services":[{"id":"x","name":"X","category":"a","domains":["x.example"]}]}`, ""},
		{"v3", `{"schemaVersion":3,"version":"2025.01.02","license":"MIT","services":[]}`, "schemaVersion 3"},
		{"bad version", `{"schemaVersion":2,"version":"2025-01-02","license":"MIT","categories":[{"id":"a","name":"A"}],"services":[{"id":"x","name":"X","category":"a","rules":["||x^"]}]}`, "YYYY.MM.DD"},
		{"no license", `{"schemaVersion":2,"version":"2025.01.02","categories":[{"id":"a","name":"A"}],"services":[{"id":"x","name":"X","category":"a","rules":["||x^"]}]}`, "license"},
		{"unknown category", `{"schemaVersion":2,"version":"2025.01.02","license":"MIT","categories":[{"id":"a","name":"A"}],"services":[{"id":"x","name":"X","category":"b","rules":["||x^"]}]}`, "unknown category"},
		{"duplicate", `{"schemaVersion":2,"version":"2025.01.02","license":"MIT","categories":[{"id":"a","name":"A"}],"services":[{"id":"x","name":"X","category":"a","rules":["||x^"]},{"id":"x","name":"X","category":"a","rules":["||x^"]}]}`, "duplicate"},
		{"not json", `<html>`, "invalid"},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			d, err := ParseDocument([]byte(tc.doc))
			if tc.err == "" {
				if err != nil {
					t.Fatal(err)
				}
				if d.SchemaVersion != 2 || len(d.Services[0].Rules) != 1 || d.Services[0].Rules[0] != "||x.example^" {
					t.Fatalf("doc = %+v", d)
				}
				return
			}
			if err == nil || !errors.Is(err, ErrInvalid) || !strings.Contains(err.Error(), tc.err) {
				t.Fatalf("err = %v, want %q", err, tc.err)
			}
		})
	}
}

func TestImportedShadowing(t *testing.T) {
	imp := `{"blocked_services":[
	 {"id":"youtube","name":"YouTube (imported)","rules":["||youtube.com^"],"group":"streaming"},
	 {"id":"newsvc","name":"New Service","rules":["||newsvc.example^","||bad rule^","||x.example^$important"],"group":"social_network","icon_svg":"<svg xmlns=\"http://www.w3.org/2000/svg\"><circle r=\"3\"/></svg>"},
	 {"id":"evil","name":"Evil","rules":["||evil.example^"],"group":"weird","icon_svg":"<svg onload=\"alert(1)\"></svg>"},
	 {"id":"BAD ID","name":"x","rules":["||y.example^"]}]}`
	c, err := Build(context.Background(), Input{Imported: []byte(imp), ImportedOrigin: "https://example.net/services.json"})
	if err != nil {
		t.Fatal(err)
	}
	in := c.Info()
	if len(in.Sources) != 2 {
		t.Fatalf("sources %+v", in.Sources)
	}
	s := in.Sources[1]
	if !s.Loaded || s.Shadowed != 1 || s.Services != 2 || s.Skipped != 1 || s.DroppedRules != 2 {
		t.Fatalf("imported source = %+v", s)
	}
	if y, _ := c.Service("youtube"); y.Origin != "builtin" {
		t.Fatalf("youtube came from %s", y.Origin)
	}
	n, ok := c.Service("newsvc")
	if !ok || n.Category != "social" || n.Origin != "imported" || n.Rules != 1 {
		t.Fatalf("newsvc = %+v", n)
	}
	if svg, _ := c.IconSVG("newsvc", false); !strings.Contains(string(svg), "circle") {
		t.Fatalf("imported icon not used: %s", svg)
	}
	e, _ := c.Service("evil")
	if e.Category != "other" || !c.HasCategory("other") {
		t.Fatalf("evil = %+v", e)
	}
	if svg, _ := c.IconSVG("evil", false); strings.Contains(string(svg), "onload") {
		t.Fatal("unsafe icon served")
	}
}

func TestLoaderKeepsCurrentOnInvalid(t *testing.T) {
	var body atomic.Value
	body.Store(`{"schemaVersion":2,"version":"2025.02.03","license":"MIT","categories":[{"id":"a","name":"A","order":1}],"services":[{"id":"x","name":"X","category":"a","rules":["||x.example^"]}]}`)
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		_, _ = w.Write([]byte(body.Load().(string)))
	}))
	defer srv.Close()
	now := time.Date(2025, 2, 3, 4, 5, 6, 0, time.UTC)
	ctx := context.Background()
	l, err := NewLoader(ctx, LoaderConfig{URL: srv.URL}, srv.Client(), func() time.Time { return now }, nil)
	if err != nil {
		t.Fatal(err)
	}
	if !l.Current().HasService("youtube") {
		t.Fatal("loader does not start with the embedded catalogue")
	}
	if changed, err := l.Refresh(ctx); err != nil || !changed {
		t.Fatalf("refresh: %v %v", changed, err)
	}
	if in := l.Info(); in.Origin != srv.URL || in.Version != "2025.02.03" || in.Services != 1 || in.Refresh.LastSuccess == nil {
		t.Fatalf("info = %+v", in)
	}
	body.Store(`{"schemaVersion":2,"version":"bad"}`)
	if _, err := l.Refresh(ctx); err == nil {
		t.Fatal("invalid document accepted")
	}
	in := l.Info()
	if in.Version != "2025.02.03" || in.Refresh.LastError == "" || in.Refresh.LastSuccess == nil {
		t.Fatalf("after invalid: %+v %+v", in, in.Refresh)
	}
}

func TestInitials(t *testing.T) {
	for in, want := range map[string]string{"YouTube": "Yo", "X (Twitter)": "XT", "Disney+": "Di", "9GAG": "9g", "The New York Times": "TN", "": "?"} {
		if got := initials(in); got != want {
			t.Errorf("initials(%q) = %q, want %q", in, got, want)
		}
	}
}

func FuzzParseDocument(f *testing.F) {
	f.Add(builtinJSON)
	f.Add([]byte(`{"schemaVersion":1,"version":"2025.01.02","license":"MIT","services":[{"id":"x","name":"X","category":"a","domains":["x.example"]}]}`))
	f.Fuzz(func(t *testing.T, b []byte) {
		d, err := ParseDocument(b)
		if err != nil {
			return
		}
		if _, err := Build(context.Background(), Input{Document: b, Origin: "fuzz"}); err != nil {
			t.Fatalf("accepted document does not build: %v", err)
		}
		if d.SchemaVersion != 2 {
			t.Fatal("not upgraded")
		}
	})
}
