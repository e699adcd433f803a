package api

import (
	"embed"
	"net/http"
)

// docsUI is the API reference page: a small renderer of openapi.json kept
// in the binary, so that /docs works on a LAN without internet and an admin
// page makes no third-party request (it once loaded Stoplight Elements
// from unpkg.com).
//
//go:embed docsui/index.html docsui/docs.js docsui/docs.css
var docsUI embed.FS

// docsCSP allows the page its own script and style and the same-origin
// fetch of openapi.json; nothing else.
const docsCSP = "default-src 'none'; script-src 'self'; style-src 'self'; connect-src 'self'; img-src 'self' data:; base-uri 'none'; form-action 'none'; frame-ancestors 'none'"

// registerDocsPage serves GET /docs and its two assets under /docs/.
func (s *Server) registerDocsPage(mux *http.ServeMux) {
	serve := func(name, ctype string) http.HandlerFunc {
		return func(w http.ResponseWriter, r *http.Request) {
			b, err := docsUI.ReadFile("docsui/" + name)
			if err != nil {
				writeError(w, r, errInternal())
				return
			}
			w.Header().Set("Content-Type", ctype)
			w.Header().Set("Content-Security-Policy", docsCSP)
			_, _ = w.Write(b)
		}
	}
	mux.HandleFunc("GET /docs", serve("index.html", "text/html; charset=utf-8"))
	mux.HandleFunc("GET /docs/docs.js", serve("docs.js", "text/javascript; charset=utf-8"))
	mux.HandleFunc("GET /docs/docs.css", serve("docs.css", "text/css; charset=utf-8"))
}
