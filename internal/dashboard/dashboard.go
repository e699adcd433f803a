// Package dashboard serves the web dashboard (the files of package web) on
// the API listener: index.html for the dashboard's own routes, so that a
// shared or reloaded URL such as /queries?domain=x opens that view, and the
// ES modules, style sheet and icons under ui/. It talks to nothing but the
// public REST API; see docs/dashboard.md.
package dashboard

//go:generate go run ../../hack/gen-dashboard-types -openapi ../../openapi/openapi.json -out ../../web/static/api.gen.js

import (
	"bytes"
	"compress/gzip"
	"crypto/sha256"
	"encoding/hex"
	"fmt"
	"html"
	"io/fs"
	"mime"
	"net/http"
	"path"
	"strings"

	"github.com/svcdns/svc/web"
)

// CSP allows the dashboard its own scripts, styles, images and same-origin
// API calls (fetch and the SSE stream); no inline script, no other origin.
const CSP = "default-src 'none'; script-src 'self'; style-src 'self'; img-src 'self' data:; connect-src 'self'; font-src 'self'; manifest-src 'self'; base-uri 'self'; form-action 'self'; frame-ancestors 'none'"

// Routes are the first path segments the dashboard answers with index.html;
// anything else under the prefix is left to the API's 404.
var Routes = []string{"", "login", "password", "overview", "queries", "clients", "lists", "services", "policies", "groups", "unblock", "zones", "admin"}

// AssetDir is the path under the prefix where the files are served.
const AssetDir = "/ui/"

type asset struct {
	body, gz []byte
	ctype    string
	etag     string
}

// Handler serves the dashboard under a path prefix.
type Handler struct {
	prefix  string
	version string // hash of every file: the versioned asset path ui/<version>/
	index   *asset
	assets  map[string]*asset
	routes  map[string]bool
}

// New prepares the files once: index.html with the prefix written into its
// <base href> and the versioned asset directory into its links, and a gzip
// copy of each file. Files under ui/<version>/ never change, so the browser
// keeps them without asking again; index.html is never cached.
func New(prefix string) (*Handler, error) {
	prefix = strings.TrimRight(prefix, "/")
	h := &Handler{prefix: prefix, assets: map[string]*asset{}, routes: map[string]bool{}}
	for _, r := range Routes {
		h.routes[r] = true
	}
	root, err := fs.Sub(web.Static, "static")
	if err != nil {
		return nil, fmt.Errorf("dashboard files: %w", err)
	}
	sum := sha256.New()
	err = fs.WalkDir(root, ".", func(p string, d fs.DirEntry, err error) error {
		if err != nil || d.IsDir() {
			return err
		}
		b, err := fs.ReadFile(root, p)
		if err != nil {
			return err
		}
		ct := mime.TypeByExtension(path.Ext(p))
		if path.Ext(p) == ".js" {
			ct = "text/javascript; charset=utf-8"
		}
		if ct == "" {
			ct = "application/octet-stream"
		}
		a, err := newAsset(b, ct)
		if err != nil {
			return err
		}
		h.assets[p] = a
		sum.Write([]byte(p + "\x00" + a.etag + "\x00"))
		return nil
	})
	if err != nil {
		return nil, fmt.Errorf("dashboard files: %w", err)
	}
	idx := h.assets["index.html"]
	if idx == nil {
		return nil, fmt.Errorf("dashboard files: no index.html")
	}
	delete(h.assets, "index.html")
	h.version = hex.EncodeToString(sum.Sum(nil)[:6])
	b := bytes.ReplaceAll(idx.body, []byte("{{BASE}}"), []byte(html.EscapeString(prefix+"/")))
	b = bytes.ReplaceAll(b, []byte("{{ASSETS}}"), []byte(strings.TrimPrefix(AssetDir, "/")+h.version+"/"))
	if h.index, err = newAsset(b, idx.ctype); err != nil {
		return nil, err
	}
	return h, nil
}

func newAsset(b []byte, ctype string) (*asset, error) {
	var gz bytes.Buffer
	zw, _ := gzip.NewWriterLevel(&gz, gzip.BestCompression)
	if _, err := zw.Write(b); err != nil {
		return nil, err
	}
	if err := zw.Close(); err != nil {
		return nil, err
	}
	sum := sha256.Sum256(b)
	return &asset{body: b, gz: gz.Bytes(), ctype: ctype, etag: `"` + hex.EncodeToString(sum[:12]) + `"`}, nil
}

// Serve answers GET and HEAD requests for the dashboard and reports whether
// it did; the caller answers the rest (the API's JSON 404).
func (h *Handler) Serve(w http.ResponseWriter, r *http.Request) bool {
	if r.Method != http.MethodGet && r.Method != http.MethodHead {
		return false
	}
	p := r.URL.Path
	if h.prefix != "" {
		if p == h.prefix {
			http.Redirect(w, r, h.prefix+"/", http.StatusMovedPermanently)
			return true
		}
		rest, ok := strings.CutPrefix(p, h.prefix)
		if !ok || !strings.HasPrefix(rest, "/") {
			return false
		}
		p = rest
	}
	if name, ok := strings.CutPrefix(p, AssetDir); ok {
		cache := "no-cache" // unversioned path (the icon): revalidated by ETag
		if rest, ok := strings.CutPrefix(name, h.version+"/"); ok {
			name, cache = rest, "public, max-age=31536000, immutable"
		}
		a := h.assets[name]
		if a == nil {
			return false
		}
		h.write(w, r, a, cache)
		return true
	}
	first, _, _ := strings.Cut(strings.TrimPrefix(p, "/"), "/")
	if !h.routes[first] {
		return false
	}
	h.write(w, r, h.index, "no-store")
	return true
}

func (h *Handler) write(w http.ResponseWriter, r *http.Request, a *asset, cache string) {
	hd := w.Header()
	hd.Set("Content-Security-Policy", CSP)
	hd.Set("Cache-Control", cache)
	hd.Set("Content-Type", a.ctype)
	hd.Set("ETag", a.etag)
	hd.Add("Vary", "Accept-Encoding")
	if match := r.Header.Get("If-None-Match"); match != "" && match == a.etag {
		w.WriteHeader(http.StatusNotModified)
		return
	}
	body := a.body
	if acceptsGzip(r) {
		hd.Set("Content-Encoding", "gzip")
		body = a.gz
	}
	hd.Set("Content-Length", fmt.Sprint(len(body)))
	if r.Method == http.MethodHead {
		return
	}
	_, _ = w.Write(body)
}

func acceptsGzip(r *http.Request) bool {
	for _, part := range strings.Split(r.Header.Get("Accept-Encoding"), ",") {
		enc, q, _ := strings.Cut(strings.TrimSpace(part), ";")
		if strings.EqualFold(strings.TrimSpace(enc), "gzip") && strings.ReplaceAll(q, " ", "") != "q=0" {
			return true
		}
	}
	return false
}

// FirstLoad lists the files a first visit loads (index.html and every
// module reachable from it), and their gzipped size in bytes.
func (h *Handler) FirstLoad() (files []string, gzipped int) {
	gzipped = len(h.index.gz)
	files = append(files, "index.html")
	for name, a := range h.assets {
		if strings.HasSuffix(name, ".js") || strings.HasSuffix(name, ".css") || strings.HasSuffix(name, ".svg") {
			files = append(files, name)
			gzipped += len(a.gz)
		}
	}
	return files, gzipped
}
