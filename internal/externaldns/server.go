package externaldns

import (
	"context"
	"crypto/subtle"
	"encoding/json"
	"errors"
	"fmt"
	"mime"
	"net"
	"net/http"
	"net/netip"
	"strings"
	"time"
)

// ServerOptions configure the webhook's HTTP handlers.
type ServerOptions struct {
	// Token, when set, must come with every request: "Authorization: Bearer
	// <token>", or as the password of HTTP basic authentication, which is how
	// external-dns sends it (--webhook-provider-url=http://x:<token>@host:port).
	Token string
	// LoopbackOnly refuses peers that are not loopback (the sidecar setup,
	// used when there is no token).
	LoopbackOnly bool
}

// Handler serves the webhook protocol: GET / (negotiation), GET and POST
// /records, POST /adjustendpoints.
func (p *Provider) Handler(o ServerOptions) http.Handler {
	mux := http.NewServeMux()
	mux.HandleFunc("/", p.negotiate)
	mux.HandleFunc("/records", p.records)
	mux.HandleFunc("/adjustendpoints", p.adjust)
	return p.guard(o, mux)
}

// HealthHandler serves /healthz: 200 while the store answers.
func (p *Provider) HealthHandler() http.Handler {
	mux := http.NewServeMux()
	mux.HandleFunc("GET /healthz", func(w http.ResponseWriter, r *http.Request) {
		ctx, cancel := context.WithTimeout(r.Context(), 5*time.Second)
		defer cancel()
		if _, _, err := p.servedZones(ctx); err != nil {
			http.Error(w, "store: "+err.Error(), http.StatusServiceUnavailable)
			return
		}
		w.Header().Set("Content-Type", "text/plain; charset=utf-8")
		_, _ = w.Write([]byte("ok\n"))
	})
	return mux
}

func (p *Provider) guard(o ServerOptions, next http.Handler) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set("Vary", "Content-Type")
		if o.LoopbackOnly && !loopbackPeer(r.RemoteAddr) {
			p.fail(w, r, http.StatusForbidden, "the external-dns webhook answers loopback peers only: run external-dns as a sidecar, or set externalDNS.webhook.tokenFile")
			return
		}
		if o.Token != "" && !tokenOK(r, o.Token) {
			w.Header().Set("WWW-Authenticate", `Bearer realm="external-dns webhook"`)
			p.fail(w, r, http.StatusUnauthorized, "missing or wrong token: send it as a bearer token or as the password in --webhook-provider-url")
			return
		}
		next.ServeHTTP(w, r)
	})
}

func loopbackPeer(remote string) bool {
	host, _, err := net.SplitHostPort(remote)
	if err != nil {
		return false
	}
	a, err := netip.ParseAddr(host)
	return err == nil && a.Unmap().IsLoopback()
}

func tokenOK(r *http.Request, token string) bool {
	got := ""
	if _, pw, ok := r.BasicAuth(); ok {
		got = pw
	} else if b, ok := strings.CutPrefix(r.Header.Get("Authorization"), "Bearer "); ok {
		got = b
	}
	return got != "" && subtle.ConstantTimeCompare([]byte(got), []byte(token)) == 1
}

// fail answers a plain-text error; 4xx tells external-dns not to retry,
// 5xx that it may.
func (p *Provider) fail(w http.ResponseWriter, r *http.Request, code int, msg string) {
	if code >= 500 {
		p.logger.Error("external-dns webhook", "method", r.Method, "path", r.URL.Path, "status", code, "err", msg)
	} else {
		p.logger.Warn("external-dns webhook refused a request", "method", r.Method, "path", r.URL.Path, "status", code, "reason", msg)
	}
	http.Error(w, msg, code)
}

// isMediaType reports whether v names the protocol's media type, version 1
// (parameters in any order, case of the type ignored).
func isMediaType(v string) bool {
	mt, params, err := mime.ParseMediaType(v)
	return err == nil && mt == "application/external.dns.webhook+json" && params["version"] == "1"
}

// accepts reports whether an Accept header admits the media type.
func accepts(h string) bool {
	if strings.TrimSpace(h) == "" {
		return true
	}
	for part := range strings.SplitSeq(h, ",") {
		part = strings.TrimSpace(part)
		mt, _, err := mime.ParseMediaType(part)
		if err != nil {
			continue
		}
		if mt == "*/*" || mt == "application/*" || isMediaType(part) {
			return true
		}
		if mt == "application/external.dns.webhook+json" {
			// another version: not this one
			continue
		}
	}
	return false
}

func (p *Provider) checkAccept(w http.ResponseWriter, r *http.Request) bool {
	if !accepts(r.Header.Get("Accept")) {
		p.fail(w, r, http.StatusNotAcceptable, fmt.Sprintf("Accept %q does not admit %s", r.Header.Get("Accept"), MediaType))
		return false
	}
	return true
}

func (p *Provider) checkContentType(w http.ResponseWriter, r *http.Request) bool {
	if ct := r.Header.Get("Content-Type"); !isMediaType(ct) {
		p.fail(w, r, http.StatusUnsupportedMediaType, fmt.Sprintf("Content-Type %q: send %s", ct, MediaType))
		return false
	}
	return true
}

func (p *Provider) method(w http.ResponseWriter, r *http.Request, allowed ...string) bool {
	for _, m := range allowed {
		if r.Method == m {
			return true
		}
	}
	w.Header().Set("Allow", strings.Join(allowed, ", "))
	p.fail(w, r, http.StatusMethodNotAllowed, fmt.Sprintf("method %s: use %s", r.Method, strings.Join(allowed, " or ")))
	return false
}

func (p *Provider) reply(w http.ResponseWriter, r *http.Request, v any) {
	b, err := json.Marshal(v)
	if err != nil {
		p.fail(w, r, http.StatusInternalServerError, "encode: "+err.Error())
		return
	}
	w.Header().Set("Content-Type", MediaType)
	w.WriteHeader(http.StatusOK)
	_, _ = w.Write(append(b, '\n'))
}

func (p *Provider) negotiate(w http.ResponseWriter, r *http.Request) {
	if r.URL.Path != "/" {
		p.fail(w, r, http.StatusNotFound, fmt.Sprintf("no route %s: the webhook serves /, /records and /adjustendpoints", r.URL.Path))
		return
	}
	if !p.method(w, r, http.MethodGet) || !p.checkAccept(w, r) {
		return
	}
	p.reply(w, r, p.DomainFilter())
}

func (p *Provider) records(w http.ResponseWriter, r *http.Request) {
	if !p.method(w, r, http.MethodGet, http.MethodPost) {
		return
	}
	if r.Method == http.MethodGet {
		if !p.checkAccept(w, r) {
			return
		}
		eps, err := p.Records(r.Context())
		if err != nil {
			p.fail(w, r, http.StatusInternalServerError, err.Error())
			return
		}
		p.reply(w, r, eps)
		return
	}
	if !p.checkContentType(w, r) {
		return
	}
	ch, err := DecodeChanges(r.Body, MaxBodyBytes)
	if err != nil {
		p.badBody(w, r, err)
		return
	}
	if err := p.ApplyChanges(r.Context(), ch); err != nil {
		p.applyError(w, r, err)
		return
	}
	w.WriteHeader(http.StatusNoContent)
}

func (p *Provider) adjust(w http.ResponseWriter, r *http.Request) {
	if !p.method(w, r, http.MethodPost) || !p.checkContentType(w, r) || !p.checkAccept(w, r) {
		return
	}
	eps, err := DecodeEndpoints(r.Body, MaxBodyBytes)
	if err != nil {
		p.badBody(w, r, err)
		return
	}
	out, err := p.AdjustEndpoints(r.Context(), eps)
	if err != nil {
		p.applyError(w, r, err)
		return
	}
	p.reply(w, r, out)
}

func (p *Provider) badBody(w http.ResponseWriter, r *http.Request, err error) {
	if errors.Is(err, errTooLarge) {
		p.fail(w, r, http.StatusRequestEntityTooLarge, err.Error())
		return
	}
	p.fail(w, r, http.StatusBadRequest, err.Error())
}

func (p *Provider) applyError(w http.ResponseWriter, r *http.Request, err error) {
	var ref *Refusal
	if errors.As(err, &ref) {
		p.fail(w, r, http.StatusUnprocessableEntity, ref.Reason)
		return
	}
	// The store failed: external-dns retries 5xx.
	p.fail(w, r, http.StatusInternalServerError, err.Error())
}
