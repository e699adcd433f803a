// Package blockpage serves the block page: what a browser shows when the
// service answered a blocked name with the block page address. It re-runs
// the decision for the page's Host and the browser's address to say why,
// offers the unblock form (through unblock.Submitter), rate limits each
// client and mints HTTPS certificates from a generated CA.
package blockpage

import (
	"context"
	"crypto/sha256"
	_ "embed"
	"encoding/base64"
	"errors"
	"fmt"
	"html/template"
	"io"
	"log/slog"
	"net/http"
	"net/mail"
	"net/netip"
	"net/url"
	"path/filepath"
	"strconv"
	"strings"
	"time"

	"github.com/svcdns/svc/internal/unblock"
)

// Paths of the block page's own resources; every other path on every Host
// is the page, as a browser opening a blocked site asks for any of them.
const (
	CAPath      = "/_blockpage/ca.crt"
	UnblockPath = "/_blockpage/unblock"
)

// Decision is why a client is answered the way it is for a name.
type Decision struct {
	Blocked bool
	Policy  string // namespace/name of the deciding policy
	List    string // namespace/name of the list, or service:<id>
	Rule    string
	Groups  []string // client groups the client is in
}

// Decider re-runs the DNS decision for a name and a client address
// through the same stages that answer DNS queries.
type Decider interface {
	Decide(ctx context.Context, name string, client netip.Addr) (Decision, error)
}

// Settings are the cluster settings the page reads on every request, so
// changes apply without a restart.
type Settings struct {
	Title, Message, Contact string
	ShowDetails             bool
	DashboardURL            string
	RateLimit               int // per minute per client; 0: none
	UnblockEnabled          bool
}

// Options configure a Server.
type Options struct {
	Settings func() Settings
	Decider  Decider
	// Submitter files unblock requests; nil offers no form.
	Submitter unblock.Submitter
	// StateDir holds the generated CA and the form key (<dataDir>/blockpage);
	// "" keeps a per-process form key and generates no CA.
	StateDir string
	// CA, when set, is shown on the page for download.
	CA     *CA
	Logger *slog.Logger
	Now    func() time.Time
}

// Server is the block page handler.
type Server struct {
	opts   Options
	log    *slog.Logger
	now    func() time.Time
	limit  *limiter
	tokens *tokens
}

// New builds the block page; it reads or creates the form key in StateDir.
func New(opts Options) (*Server, error) {
	if opts.Settings == nil || opts.Decider == nil {
		return nil, errors.New("block page: Settings and Decider are required")
	}
	key, err := loadTokenKey(opts.StateDir)
	if err != nil {
		return nil, err
	}
	s := &Server{opts: opts, log: opts.Logger, now: opts.Now, limit: newLimiter(), tokens: newTokens(key)}
	if s.log == nil {
		s.log = slog.New(slog.NewTextHandler(io.Discard, nil))
	}
	if s.now == nil {
		s.now = time.Now
	}
	return s, nil
}

// StateDir is where a node keeps the block page's CA and form key.
func StateDir(dataDir string) string { return filepath.Join(dataDir, "blockpage") }

//go:embed page.html
var pageHTML string

var pageTmpl = template.Must(template.New("page").Parse(pageHTML))

// pageCSS is the page's only style; the CSP allows exactly it by hash, so
// no other inline style or any script can run.
const pageCSS = `body{margin:0;font:16px/1.5 system-ui,-apple-system,"Segoe UI",Roboto,sans-serif;background:#f4f5f7;color:#1d2330}` +
	`main{max-width:40rem;margin:3rem auto;padding:2rem;background:#fff;border-radius:8px;box-shadow:0 1px 4px rgba(0,0,0,.12)}` +
	`h1{margin-top:0;font-size:1.6rem;color:#a4161a}h2{font-size:1.1rem;margin-top:1.5rem}` +
	`.domain{font-size:1.2rem;font-weight:600;word-break:break-all}.message{white-space:pre-line}` +
	`dl{display:grid;grid-template-columns:max-content 1fr;gap:.25rem 1rem}dt{font-weight:600}dd{margin:0;word-break:break-all}` +
	`code{background:#eef0f3;padding:0 .25rem;border-radius:3px}` +
	`.notice{padding:.75rem;border-radius:4px}.ok{background:#e6f4ea}.error{background:#fdecea}` +
	`.unmatched{background:#fff8e1;padding:.75rem;border-radius:4px}` +
	`label{display:block;margin-top:.75rem;font-weight:600}textarea,input{width:100%;box-sizing:border-box;font:inherit;padding:.4rem}` +
	`button{margin-top:1rem;font:inherit;padding:.5rem 1rem;background:#1d4ed8;color:#fff;border:0;border-radius:4px}` +
	`.contact,.ca{color:#4a5162;font-size:.9rem}.fp{font-family:monospace;word-break:break-all}` +
	`@media (prefers-color-scheme:dark){body{background:#15171c;color:#e6e8ee}main{background:#1f232b}code{background:#2b303a}.ok{background:#1c3a26}.error{background:#4a1f1c}.unmatched{background:#3d3419}.contact,.ca{color:#aab0bd}h1{color:#ff6b6b}}`

// csp allows the one style by hash, posting forms to this origin only, and
// nothing else: no script, no frames around the page, no base tag.
var csp = func() string {
	sum := sha256.Sum256([]byte(pageCSS))
	return "default-src 'none'; style-src 'sha256-" + base64.StdEncoding.EncodeToString(sum[:]) + "'; " +
		"img-src 'none'; form-action 'self'; frame-ancestors 'none'; base-uri 'none'"
}()

// securityHeaders go on every answer of the listener.
func securityHeaders(h http.Header) {
	h.Set("Content-Security-Policy", csp)
	h.Set("X-Content-Type-Options", "nosniff")
	h.Set("Referrer-Policy", "no-referrer")
	h.Set("X-Frame-Options", "DENY")
	h.Set("Cross-Origin-Resource-Policy", "same-origin")
	// an unblocked site must not be shadowed by a cached block page
	h.Set("Cache-Control", "no-store")
}

// ServeHTTP answers every path on every Host.
func (s *Server) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	securityHeaders(w.Header())
	client, err := clientAddr(r.RemoteAddr)
	if err != nil {
		http.Error(w, "cannot tell the client's address", http.StatusBadRequest)
		return
	}
	set := s.opts.Settings()
	now := s.now()
	if ok, wait := s.limit.allow(client, set.RateLimit, now); !ok {
		secs := int((wait + time.Second - 1) / time.Second)
		w.Header().Set("Retry-After", strconv.Itoa(secs))
		w.Header().Set("Content-Type", "text/plain; charset=utf-8")
		w.WriteHeader(http.StatusTooManyRequests)
		fmt.Fprintf(w, "Too many requests from %s: at most %d a minute (blockPage.rateLimit). Try again in %d seconds.\n", client, set.RateLimit, secs)
		return
	}
	switch r.URL.Path {
	case CAPath:
		s.serveCA(w, r)
		return
	case UnblockPath:
		if r.Method == http.MethodPost {
			s.serveUnblock(w, r, client, set, now)
			return
		}
	}
	if r.Method != http.MethodGet && r.Method != http.MethodHead {
		w.Header().Set("Allow", "GET, HEAD")
		http.Error(w, "the block page answers GET and HEAD (and POST of its unblock form)", http.StatusMethodNotAllowed)
		return
	}
	v := s.view(r.Context(), r.Host, client, set, now)
	s.render(w, http.StatusForbidden, v)
}

func clientAddr(remote string) (netip.Addr, error) {
	ap, err := netip.ParseAddrPort(remote)
	if err != nil {
		return netip.Addr{}, err
	}
	return ap.Addr().Unmap(), nil
}

func (s *Server) serveCA(w http.ResponseWriter, r *http.Request) {
	if r.Method != http.MethodGet && r.Method != http.MethodHead {
		w.Header().Set("Allow", "GET, HEAD")
		http.Error(w, "GET the CA certificate", http.StatusMethodNotAllowed)
		return
	}
	if s.opts.CA == nil {
		http.Error(w, "this block page has no generated CA: its HTTPS listener is off or uses a configured certificate (listeners.blockPage.tls.certFile)", http.StatusNotFound)
		return
	}
	w.Header().Set("Content-Type", "application/x-x509-ca-cert")
	w.Header().Set("Content-Disposition", `attachment; filename="service-blockpage-ca.crt"`)
	_, _ = w.Write(s.opts.CA.CertPEM())
}

// view is what one page shows.
type view struct {
	Title, Message string
	CSS            template.CSS
	Domain         string
	Client         string
	Time           string
	Details        *details
	Unmatched      string
	DashboardLink  string
	Contact        *contact
	Form           *formView
	FormAction     string
	Notice         *notice
	CA             *caView

	decision Decision // what the form files
	host     string   // the Host the page was served for
}

type details struct {
	Policy, List, Rule string
	Groups             string
}

type contact struct{ Text, Href string }

type formView struct {
	Token                   string
	Reason, Requester       string
	MaxReason, MaxRequester int
}

type notice struct{ Kind, Text string }

type caView struct{ Path, Fingerprint string }

// view decides what the page for host and client says now.
func (s *Server) view(ctx context.Context, hostHeader string, client netip.Addr, set Settings, now time.Time) *view {
	v := &view{
		Title: set.Title, Message: set.Message, CSS: template.CSS(pageCSS),
		Client: client.String(), Time: now.UTC().Format(time.RFC3339), FormAction: UnblockPath,
		Contact: contactOf(set.Contact),
	}
	if v.Title == "" {
		v.Title = "This site is blocked"
	}
	if s.opts.CA != nil {
		v.CA = &caView{Path: CAPath, Fingerprint: s.opts.CA.Fingerprint()}
	}
	host, kind := parseHost(hostHeader)
	switch kind {
	case hostNone:
		v.Unmatched = "The browser did not say which site it opened (no valid Host), so this page cannot tell why it was blocked."
		return v
	case hostIP:
		v.Unmatched = "You opened the block page by its address (" + host + "). It explains a block when this network's DNS sends a browser here for a blocked name."
		return v
	}
	v.Domain, v.host = host, host
	if set.DashboardURL != "" {
		v.DashboardLink = strings.TrimRight(set.DashboardURL, "/") + "/queries?domain=" + url.QueryEscape(host)
	}
	dctx, cancel := context.WithTimeout(ctx, 2*time.Second)
	defer cancel()
	d, err := s.opts.Decider.Decide(dctx, host, client)
	if err != nil {
		s.log.Warn("block page: decision failed", "domain", host, "client", client.String(), "err", err)
		v.Unmatched = "The reason for this block could not be looked up right now. Reload the page to try again."
		return v
	}
	if !d.Blocked {
		v.Unmatched = "Your address " + client.String() + " is not blocked from " + host + " by the current rules, so this page cannot say why it was blocked. " +
			"The block may have been for another address of this device (IPv4 or IPv6) or for a DNS forwarder asking on its behalf, " +
			"it may have been lifted since, or the browser reused an earlier answer. Try opening the site again in a few minutes."
		return v
	}
	v.decision = d
	if set.ShowDetails {
		v.Details = &details{Policy: d.Policy, List: d.List, Rule: d.Rule, Groups: strings.Join(d.Groups, ", ")}
	}
	if s.opts.Submitter != nil && set.UnblockEnabled {
		v.Form = &formView{Token: s.tokens.issue(host, hostHeader, client, now), MaxReason: maxReasonRunes, MaxRequester: maxRequesterLen}
	}
	return v
}

// contactOf links an e-mail address or a web address; anything else is text.
func contactOf(c string) *contact {
	c = strings.TrimSpace(c)
	if c == "" {
		return nil
	}
	if u, err := url.Parse(c); err == nil && (u.Scheme == "https" || u.Scheme == "http") && u.Host != "" {
		return &contact{Text: c, Href: u.String()}
	}
	if a, err := mail.ParseAddress(c); err == nil && a.Name == "" && !strings.ContainsAny(c, " <>") {
		return &contact{Text: c, Href: "mailto:" + a.Address}
	}
	return &contact{Text: c}
}

func (s *Server) render(w http.ResponseWriter, status int, v *view) {
	var b strings.Builder
	if err := pageTmpl.Execute(&b, v); err != nil {
		s.log.Error("block page template", "err", err)
		http.Error(w, "block page error", http.StatusInternalServerError)
		return
	}
	w.Header().Set("Content-Type", "text/html; charset=utf-8")
	w.Header().Set("Content-Length", strconv.Itoa(b.Len()))
	w.WriteHeader(status)
	_, _ = io.WriteString(w, b.String())
}

// serveUnblock files an unblock request from the form.
func (s *Server) serveUnblock(w http.ResponseWriter, r *http.Request, client netip.Addr, set Settings, now time.Time) {
	// A browser says where a form post comes from; only a post from this
	// very page (same origin) or a typed navigation is taken. The token
	// is the real guard, as Origin is "null" under no-referrer.
	if site := r.Header.Get("Sec-Fetch-Site"); site != "" && site != "same-origin" && site != "none" {
		s.renderRefusal(w, r, client, set, now, http.StatusForbidden, "This form can only be sent from the block page itself.", nil)
		return
	}
	if s.opts.Submitter == nil || !set.UnblockEnabled {
		s.renderRefusal(w, r, client, set, now, http.StatusForbidden, "Unblock requests are turned off on this network.", nil)
		return
	}
	body, err := io.ReadAll(http.MaxBytesReader(w, r.Body, maxFormBody))
	if err != nil {
		s.renderRefusal(w, r, client, set, now, http.StatusRequestEntityTooLarge, fmt.Sprintf("The form is over %d KiB.", maxFormBody>>10), nil)
		return
	}
	f, err := parseUnblockForm(body)
	if err != nil {
		var fe *formError
		if errors.As(err, &fe) {
			s.renderRefusal(w, r, client, set, now, http.StatusBadRequest, fe.msg, &f)
			return
		}
		s.renderRefusal(w, r, client, set, now, http.StatusBadRequest, "The form could not be read.", &f)
		return
	}
	host, kind := parseHost(r.Host)
	if kind != hostDomain {
		s.renderRefusal(w, r, client, set, now, http.StatusBadRequest, "The form was not sent for a blocked site.", nil)
		return
	}
	nonce, err := s.tokens.check(f.Token, host, r.Host, client, now)
	if err != nil {
		msg := "This form is not valid for this page and address. Reload the page and send it again."
		if errors.Is(err, errTokenExpired) {
			msg = "This form has expired. Reload the page and send it again."
		}
		s.renderRefusal(w, r, client, set, now, http.StatusForbidden, msg, &f)
		return
	}
	dctx, cancel := context.WithTimeout(r.Context(), 2*time.Second)
	d, err := s.opts.Decider.Decide(dctx, host, client)
	cancel()
	if err != nil || !d.Blocked {
		if err != nil {
			s.log.Warn("block page: decision failed", "domain", host, "client", client.String(), "err", err)
		}
		s.renderRefusal(w, r, client, set, now, http.StatusConflict, host+" is no longer blocked for your address; no request is needed. Open the site again.", nil)
		return
	}
	if err := s.tokens.spend(nonce, now); err != nil {
		msg := "This form was already sent. Reload the page to send another request."
		status := http.StatusConflict
		if errors.Is(err, errTokenBusy) {
			msg, status = "Too many requests are being sent right now. Try again in a few minutes.", http.StatusServiceUnavailable
			w.Header().Set("Retry-After", "300")
		}
		s.renderRefusal(w, r, client, set, now, status, msg, nil)
		return
	}
	ns, _, _ := strings.Cut(d.Policy, "/")
	if !strings.Contains(d.Policy, "/") {
		ns = ""
	}
	res, err := s.opts.Submitter.Submit(r.Context(), unblock.Submission{
		Domain: host, Client: client, Namespace: ns, Policy: d.Policy, List: d.List, Rule: d.Rule,
		Reason: f.Reason, Requester: f.Requester, At: now,
	})
	var rl *unblock.RateLimitedError
	switch {
	case err == nil:
		text := "Your request was sent. An administrator will decide on it; once approved, the site opens normally."
		if res.Merged {
			text = "A request for this site from your address is already waiting; your reason was added to it."
		}
		s.log.Info("block page: unblock request filed", "domain", host, "client", client.String(), "request", res.Namespace+"/"+res.Name, "merged", res.Merged)
		v := s.view(r.Context(), r.Host, client, set, now)
		v.Form = nil
		v.Notice = &notice{Kind: "ok", Text: text}
		s.render(w, http.StatusOK, v)
	case errors.As(err, &rl):
		secs := int((rl.RetryAfter + time.Second - 1) / time.Second)
		if secs < 1 {
			secs = 1
		}
		w.Header().Set("Retry-After", strconv.Itoa(secs))
		s.renderRefusal(w, r, client, set, now, http.StatusTooManyRequests, "Too many unblock requests from your network. "+capitalize(rl.Error())+".", nil)
	case errors.Is(err, unblock.ErrDisabled):
		s.renderRefusal(w, r, client, set, now, http.StatusForbidden, "Unblock requests are turned off on this network.", nil)
	case errors.Is(err, unblock.ErrInvalid):
		s.renderRefusal(w, r, client, set, now, http.StatusBadRequest, "The request was refused: "+err.Error(), &f)
	case errors.Is(err, unblock.ErrTooManyPending):
		s.renderRefusal(w, r, client, set, now, http.StatusServiceUnavailable, "Too many unblock requests are waiting for an administrator. Try again later, or contact the administrator.", nil)
	default:
		s.log.Error("block page: unblock request not filed", "domain", host, "client", client.String(), "err", err)
		s.renderRefusal(w, r, client, set, now, http.StatusInternalServerError, "The request could not be sent because of an error on this network's DNS service. Try again later.", nil)
	}
}

// renderRefusal shows the page with an error notice; f, when set, refills
// the form (with a fresh token) so nothing typed is lost.
func (s *Server) renderRefusal(w http.ResponseWriter, r *http.Request, client netip.Addr, set Settings, now time.Time, status int, msg string, f *unblockForm) {
	v := s.view(r.Context(), r.Host, client, set, now)
	v.Notice = &notice{Kind: "error", Text: msg}
	if v.Form != nil && f != nil {
		v.Form.Reason, v.Form.Requester = truncate(f.Reason, 4*maxReasonRunes), truncate(f.Requester, 4*maxRequesterLen)
	}
	s.render(w, status, v)
}

func capitalize(s string) string {
	if s == "" {
		return s
	}
	return strings.ToUpper(s[:1]) + s[1:]
}
