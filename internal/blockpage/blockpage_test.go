package blockpage

import (
	"context"
	"crypto/tls"
	"crypto/x509"
	"errors"
	"fmt"
	"io"
	"log"
	"net"
	"net/http"
	"net/http/httptest"
	"net/netip"
	"net/url"
	"os"
	"path/filepath"
	"regexp"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/svcdns/svc/internal/unblock"
)

// fixedDecider blocks every name in blocked, with the decision given.
type fixedDecider struct {
	d       Decision
	blocked map[string]bool
}

func (f fixedDecider) Decide(_ context.Context, name string, _ netip.Addr) (Decision, error) {
	if f.blocked[name] {
		return f.d, nil
	}
	return Decision{}, nil
}

// recordingSubmitter stands in for the unblock service in unit tests (the
// end-to-end test in test/blockpage uses the real one).
type recordingSubmitter struct {
	mu  sync.Mutex
	got []unblock.Submission
	err error
}

func (r *recordingSubmitter) Submit(_ context.Context, s unblock.Submission) (unblock.Result, error) {
	r.mu.Lock()
	defer r.mu.Unlock()
	if r.err != nil {
		return unblock.Result{}, r.err
	}
	r.got = append(r.got, s)
	return unblock.Result{Namespace: "default", Name: fmt.Sprintf("req-%d", len(r.got))}, nil
}

func defaultSettings() Settings {
	return Settings{Title: "This site is blocked", Message: "Blocked by the administrator.", ShowDetails: true, RateLimit: 120, UnblockEnabled: true}
}

type harness struct {
	srv *Server
	set Settings
	now time.Time
	sub *recordingSubmitter
	mu  sync.Mutex
}

func newHarness(t testing.TB, d Decision, blocked ...string) *harness {
	t.Helper()
	h := &harness{set: defaultSettings(), now: time.Date(2026, 11, 26, 12, 0, 0, 0, time.UTC), sub: &recordingSubmitter{}}
	m := map[string]bool{}
	for _, b := range blocked {
		m[b] = true
	}
	srv, err := New(Options{
		Settings: func() Settings { h.mu.Lock(); defer h.mu.Unlock(); return h.set },
		Decider:  fixedDecider{d: d, blocked: m}, Submitter: h.sub, StateDir: t.TempDir(),
		Now: func() time.Time { h.mu.Lock(); defer h.mu.Unlock(); return h.now },
	})
	if err != nil {
		t.Fatal(err)
	}
	h.srv = srv
	return h
}

func (h *harness) advance(d time.Duration) { h.mu.Lock(); h.now = h.now.Add(d); h.mu.Unlock() }

// do sends one request as client (ip:port) for host.
func (h *harness) do(method, host, path, client string, body string, hdr map[string]string) *httptest.ResponseRecorder {
	var r *http.Request
	if body != "" {
		r = httptest.NewRequest(method, "http://"+host+path, strings.NewReader(body))
		r.Header.Set("Content-Type", "application/x-www-form-urlencoded")
	} else {
		r = httptest.NewRequest(method, "http://"+host+path, nil)
	}
	r.Host = host
	r.RemoteAddr = client
	for k, v := range hdr {
		r.Header.Set(k, v)
	}
	w := httptest.NewRecorder()
	h.srv.ServeHTTP(w, r)
	return w
}

var tokenRE = regexp.MustCompile(`name="token" value="([^"]+)"`)

func tokenOf(t *testing.T, body string) string {
	t.Helper()
	m := tokenRE.FindStringSubmatch(body)
	if m == nil {
		t.Fatalf("no form token in page:\n%s", body)
	}
	return m[1]
}

func TestPageShowsDecisionAndHeaders(t *testing.T) {
	h := newHarness(t, Decision{Blocked: true, Policy: "default/kids", List: "default/ads", Rule: "||ads.example^"}, "ads.example")
	h.set.DashboardURL = "https://dns.example/"
	h.set.Contact = "it@example.org"
	for _, path := range []string{"/", "/some/deep/path?x=1"} {
		w := h.do(http.MethodGet, "ads.example", path, "192.0.2.7:5555", "", nil)
		body := w.Body.String()
		if w.Code != http.StatusForbidden {
			t.Fatalf("GET %s: status %d", path, w.Code)
		}
		for _, want := range []string{"This site is blocked", "ads.example", "default/kids", "default/ads", "||ads.example^", "192.0.2.7", "2026-11-26T12:00:00Z",
			`href="https://dns.example/queries?domain=ads.example"`, `href="mailto:it@example.org"`, `action="/_blockpage/unblock"`} {
			if !strings.Contains(body, want) {
				t.Errorf("GET %s: page lacks %q", path, want)
			}
		}
		if strings.Contains(strings.ToLower(body), "<script") {
			t.Error("page has a script element")
		}
	}
	w := h.do(http.MethodHead, "ads.example", "/x", "192.0.2.7:5555", "", nil)
	if w.Code != http.StatusForbidden || w.Header().Get("Content-Type") != "text/html; charset=utf-8" {
		t.Errorf("HEAD: %d %q", w.Code, w.Header().Get("Content-Type"))
	}
	hdr := w.Header()
	for k, want := range map[string]string{"X-Content-Type-Options": "nosniff", "Referrer-Policy": "no-referrer", "X-Frame-Options": "DENY", "Cache-Control": "no-store"} {
		if got := hdr.Get(k); got != want {
			t.Errorf("%s = %q, want %q", k, got, want)
		}
	}
	c := hdr.Get("Content-Security-Policy")
	for _, want := range []string{"default-src 'none'", "frame-ancestors 'none'", "form-action 'self'", "style-src 'sha256-"} {
		if !strings.Contains(c, want) {
			t.Errorf("CSP %q lacks %q", c, want)
		}
	}
	if strings.Contains(c, "unsafe-inline") || strings.Contains(c, "script-src") {
		t.Errorf("CSP %q allows script or inline", c)
	}
}

func TestPageUnmatchedIsHonest(t *testing.T) {
	h := newHarness(t, Decision{Blocked: true, Rule: "x"}, "ads.example")
	cases := []struct{ host, want string }{
		{"other.example", "is not blocked from other.example"},
		{"192.0.2.1", "You opened the block page by its address"},
		{"[2001:db8::1]:8080", "You opened the block page by its address (2001:db8::1)"},
		{"", "did not say which site"},
	}
	for _, c := range cases {
		w := h.do(http.MethodGet, c.host, "/", "192.0.2.7:1", "", nil)
		body := w.Body.String()
		if !strings.Contains(body, c.want) {
			t.Errorf("Host %q: page lacks %q:\n%s", c.host, c.want, body)
		}
		if strings.Contains(body, `name="token"`) {
			t.Errorf("Host %q: unmatched page offers the form", c.host)
		}
	}
}

// TestPageEscapesHostileText: settings and decision text reach the page
// as text, never markup; a hostile Host is not reflected at all.
func TestPageEscapesHostileText(t *testing.T) {
	hostile := `<script>alert(1)</script><img src=x onerror=alert(2)>"'&`
	cases := []struct {
		name string
		set  func(*Settings, *Decision)
	}{
		{"title", func(s *Settings, _ *Decision) { s.Title = hostile }},
		{"message", func(s *Settings, _ *Decision) { s.Message = hostile }},
		{"contact", func(s *Settings, _ *Decision) { s.Contact = hostile }},
		{"contact javascript url", func(s *Settings, _ *Decision) { s.Contact = "javascript:alert(1)" }},
		{"policy", func(_ *Settings, d *Decision) { d.Policy = hostile }},
		{"list", func(_ *Settings, d *Decision) { d.List = hostile }},
		{"rule", func(_ *Settings, d *Decision) { d.Rule = "||ads.example^$" + hostile }},
		{"groups", func(_ *Settings, d *Decision) { d.Groups = []string{hostile} }},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			d := Decision{Blocked: true, Policy: "default/p", List: "default/l", Rule: "r"}
			set := defaultSettings()
			c.set(&set, &d)
			h := newHarness(t, d, "ads.example")
			h.set = set
			body := h.do(http.MethodGet, "ads.example", "/", "192.0.2.7:1", "", nil).Body.String()
			for _, bad := range []string{"<script>", "<img", `href="javascript:`} {
				if strings.Contains(body, bad) {
					t.Errorf("page carries %q unescaped", bad)
				}
			}
			if c.name != "contact javascript url" && !strings.Contains(body, "&lt;script&gt;alert(1)&lt;/script&gt;") {
				t.Errorf("hostile text not shown escaped")
			}
		})
	}
	h := newHarness(t, Decision{Blocked: true}, "ads.example")
	for _, host := range []string{`<script>.example`, `a"b.example`, "ads.example\x00"} {
		r := httptest.NewRequest(http.MethodGet, "http://x/", nil)
		r.Host, r.RemoteAddr = host, "192.0.2.7:1"
		w := httptest.NewRecorder()
		h.srv.ServeHTTP(w, r)
		body := w.Body.String()
		if strings.Contains(body, host) || !strings.Contains(body, "did not say which site") {
			t.Errorf("Host %q: reflected or not refused:\n%s", host, body)
		}
	}
}

func TestRateLimit(t *testing.T) {
	h := newHarness(t, Decision{Blocked: true}, "ads.example")
	for i := 1; i <= 120; i++ {
		if w := h.do(http.MethodGet, "ads.example", "/", "192.0.2.7:1", "", nil); w.Code != http.StatusForbidden {
			t.Fatalf("request %d: %d", i, w.Code)
		}
		h.advance(100 * time.Millisecond)
	}
	w := h.do(http.MethodGet, "ads.example", "/", "192.0.2.7:1", "", nil)
	if w.Code != http.StatusTooManyRequests || w.Header().Get("Retry-After") != "48" {
		t.Fatalf("121st: %d Retry-After %q, want 429 and 48", w.Code, w.Header().Get("Retry-After"))
	}
	if w := h.do(http.MethodGet, "ads.example", "/", "192.0.2.8:1", "", nil); w.Code != http.StatusForbidden {
		t.Fatalf("another client limited: %d", w.Code)
	}
	h.advance(48 * time.Second)
	if w := h.do(http.MethodGet, "ads.example", "/", "192.0.2.7:1", "", nil); w.Code != http.StatusForbidden {
		t.Fatalf("after the window: %d", w.Code)
	}
	h.set.RateLimit = 0
	for i := 0; i < 300; i++ {
		if w := h.do(http.MethodGet, "ads.example", "/", "192.0.2.9:1", "", nil); w.Code != http.StatusForbidden {
			t.Fatalf("rateLimit 0, request %d: %d", i, w.Code)
		}
	}
}

func TestLimiterMemoryBounded(t *testing.T) {
	l := newLimiter()
	l.max = 1000
	now := time.Now()
	for i := 0; i < 5000; i++ {
		a := netip.AddrFrom4([4]byte{10, byte(i >> 16), byte(i >> 8), byte(i)})
		l.allow(a, 10, now)
	}
	if n := l.size(); n > 1000 {
		t.Fatalf("limiter holds %d clients, bound 1000", n)
	}
}

func TestUnblockForm(t *testing.T) {
	d := Decision{Blocked: true, Policy: "team/kids", List: "team/ads", Rule: "||ads.example^"}
	h := newHarness(t, d, "ads.example")
	page := h.do(http.MethodGet, "ads.example", "/", "192.0.2.7:1", "", nil).Body.String()
	tok := tokenOf(t, page)
	form := func(tok, reason string) string {
		return url.Values{"token": {tok}, "reason": {reason}, "requester": {"kim@example.org"}}.Encode()
	}
	post := func(host, client, body string, hdr map[string]string) *httptest.ResponseRecorder {
		return h.do(http.MethodPost, host, UnblockPath, client, body, hdr)
	}
	tampered := []byte(tok)
	tampered[3] ^= 1
	refusals := []struct {
		name, host, client, body string
		hdr                      map[string]string
		status                   int
		want                     string
	}{
		{"no token", "ads.example", "192.0.2.7:1", form("", "work"), nil, 403, "not valid"},
		{"tampered token", "ads.example", "192.0.2.7:1", form(string(tampered), "work"), nil, 403, "not valid"},
		{"garbage token", "ads.example", "192.0.2.7:1", form("x.y", "work"), nil, 403, "not valid"},
		{"other client", "ads.example", "192.0.2.8:1", form(tok, "work"), nil, 403, "not valid"},
		{"other host", "ads.example:8080", "192.0.2.7:1", form(tok, "work"), nil, 403, "not valid"},
		{"cross-site", "ads.example", "192.0.2.7:1", form(tok, "work"), map[string]string{"Sec-Fetch-Site": "cross-site"}, 403, "only be sent from the block page"},
		{"empty reason", "ads.example", "192.0.2.7:1", form(tok, "  "), nil, 400, "say why"},
		{"reason too long", "ads.example", "192.0.2.7:1", form(tok, strings.Repeat("é", 1001)), nil, 400, "at most 1000"},
		{"control chars", "ads.example", "192.0.2.7:1", form(tok, "a\x1b[31mb"), nil, 400, "control"},
	}
	for _, c := range refusals {
		w := post(c.host, c.client, c.body, c.hdr)
		if w.Code != c.status || !strings.Contains(w.Body.String(), c.want) {
			t.Errorf("%s: %d, want %d with %q:\n%s", c.name, w.Code, c.status, c.want, w.Body.String())
		}
	}
	if len(h.sub.got) != 0 {
		t.Fatalf("refused posts submitted %d requests", len(h.sub.got))
	}
	w := post("ads.example", "192.0.2.7:1", form(tok, "I need it for <b>work</b>"), map[string]string{"Sec-Fetch-Site": "same-origin"})
	if w.Code != http.StatusOK || !strings.Contains(w.Body.String(), "Your request was sent") {
		t.Fatalf("valid post: %d\n%s", w.Code, w.Body.String())
	}
	want := unblock.Submission{Domain: "ads.example", Client: netip.MustParseAddr("192.0.2.7"), Namespace: "team", Policy: "team/kids",
		List: "team/ads", Rule: "||ads.example^", Reason: "I need it for <b>work</b>", Requester: "kim@example.org", At: h.now}
	if len(h.sub.got) != 1 || h.sub.got[0] != want {
		t.Fatalf("submitted %+v, want %+v", h.sub.got, want)
	}
	if w := post("ads.example", "192.0.2.7:1", form(tok, "again"), nil); w.Code != http.StatusConflict || !strings.Contains(w.Body.String(), "already sent") {
		t.Fatalf("replay: %d\n%s", w.Code, w.Body.String())
	}
	// expired
	tok2 := tokenOf(t, h.do(http.MethodGet, "ads.example", "/", "192.0.2.7:1", "", nil).Body.String())
	h.advance(tokenLifetime)
	if w := post("ads.example", "192.0.2.7:1", form(tok2, "late"), nil); w.Code != http.StatusForbidden || !strings.Contains(w.Body.String(), "expired") {
		t.Fatalf("expired: %d\n%s", w.Code, w.Body.String())
	}
	if len(h.sub.got) != 1 {
		t.Fatalf("%d submissions after replay and expiry, want 1", len(h.sub.got))
	}
}

func TestUnblockRefusalsMapped(t *testing.T) {
	cases := []struct {
		err        error
		status     int
		retryAfter string
		want       string
	}{
		{unblock.ErrDisabled, 403, "", "turned off"},
		{unblock.ErrTooManyPending, 503, "", "Too many unblock requests are waiting"},
		{&unblock.RateLimitedError{RetryAfter: 42 * time.Minute}, 429, "2520", "try again in 42m"},
		{fmt.Errorf("reason: %w", unblock.ErrInvalid), 400, "", "The request was refused: reason: invalid"},
		{errors.New("store down"), 500, "", "could not be sent"},
	}
	for _, c := range cases {
		h := newHarness(t, Decision{Blocked: true, Policy: "default/p"}, "ads.example")
		h.sub.err = c.err
		tok := tokenOf(t, h.do(http.MethodGet, "ads.example", "/", "192.0.2.7:1", "", nil).Body.String())
		w := h.do(http.MethodPost, "ads.example", UnblockPath, "192.0.2.7:1", url.Values{"token": {tok}, "reason": {"x"}}.Encode(), nil)
		if w.Code != c.status || w.Header().Get("Retry-After") != c.retryAfter || !strings.Contains(w.Body.String(), c.want) {
			t.Errorf("%v: %d Retry-After %q, want %d %q with %q:\n%s", c.err, w.Code, w.Header().Get("Retry-After"), c.status, c.retryAfter, c.want, w.Body.String())
		}
	}
	h := newHarness(t, Decision{Blocked: true}, "ads.example")
	h.set.UnblockEnabled = false
	if body := h.do(http.MethodGet, "ads.example", "/", "192.0.2.7:1", "", nil).Body.String(); strings.Contains(body, `name="token"`) {
		t.Error("form offered with unblock requests off")
	}
}

func TestCALeavesVerifyAndPersist(t *testing.T) {
	dir := t.TempDir()
	ca, err := LoadOrCreateCA(dir, nil)
	if err != nil {
		t.Fatal(err)
	}
	if fi, err := os.Stat(filepath.Join(dir, caKeyFile)); err != nil || fi.Mode().Perm() != 0o600 {
		t.Fatalf("ca.key: %v %v", fi.Mode(), err)
	}
	again, err := LoadOrCreateCA(dir, nil)
	if err != nil || again.Fingerprint() != ca.Fingerprint() {
		t.Fatalf("reloaded CA differs (%v): %s vs %s", err, again.Fingerprint(), ca.Fingerprint())
	}
	pool := x509.NewCertPool()
	pool.AppendCertsFromPEM(ca.CertPEM())
	for _, name := range []string{"ads.example", "sub.ads.example", "192.0.2.1"} {
		c, err := again.Leaf(name)
		if err != nil {
			t.Fatal(err)
		}
		if _, err := c.Leaf.Verify(x509.VerifyOptions{DNSName: name, Roots: pool}); err != nil {
			t.Errorf("leaf for %s from the reloaded CA does not verify: %v", name, err)
		}
		if _, err := c.Leaf.Verify(x509.VerifyOptions{DNSName: "other.example", Roots: pool}); err == nil {
			t.Errorf("leaf for %s verifies for other.example", name)
		}
	}
	if _, err := ca.Leaf("bad name<>"); err == nil {
		t.Error("leaf minted for an invalid name")
	}
	for i := 0; i < maxLeaves+50; i++ {
		if _, err := ca.Leaf(fmt.Sprintf("n%d.example", i)); err != nil {
			t.Fatal(err)
		}
	}
	if n := ca.cachedLeaves(); n != maxLeaves {
		t.Fatalf("leaf cache holds %d, bound %d", n, maxLeaves)
	}
	os.Remove(filepath.Join(dir, caKeyFile))
	if _, err := LoadOrCreateCA(dir, nil); err == nil || !strings.Contains(err.Error(), "only one of") {
		t.Fatalf("half a CA: %v", err)
	}
}

// TestHTTPSListener serves the handler over TLS with the CA and checks a
// client trusting the CA verifies the per-name leaf and one without fails.
func TestHTTPSListener(t *testing.T) {
	h := newHarness(t, Decision{Blocked: true, Rule: "||ads.example^"}, "ads.example")
	ca, err := LoadOrCreateCA(t.TempDir(), nil)
	if err != nil {
		t.Fatal(err)
	}
	h.srv.opts.CA = ca
	tc, err := TLSConfig("", "", ca)
	if err != nil {
		t.Fatal(err)
	}
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	hs := HTTPServer(h.srv, tc, log.New(io.Discard, "", 0))
	go hs.ServeTLS(ln, "", "")
	t.Cleanup(func() { hs.Close() })
	pool := x509.NewCertPool()
	pool.AppendCertsFromPEM(ca.CertPEM())
	dial := func(roots *x509.CertPool) (*http.Response, error) {
		tr := &http.Transport{TLSClientConfig: &tls.Config{RootCAs: roots},
			DialContext: func(ctx context.Context, _, _ string) (net.Conn, error) {
				return (&net.Dialer{}).DialContext(ctx, "tcp", ln.Addr().String())
			}}
		defer tr.CloseIdleConnections()
		return (&http.Client{Transport: tr, Timeout: 5 * time.Second}).Get("https://ads.example/")
	}
	resp, err := dial(pool)
	if err != nil {
		t.Fatalf("with the CA: %v", err)
	}
	b, _ := io.ReadAll(resp.Body)
	resp.Body.Close()
	if resp.StatusCode != http.StatusForbidden || !strings.Contains(string(b), "||ads.example^") || !strings.Contains(string(b), CAPath) {
		t.Fatalf("with the CA: %d\n%s", resp.StatusCode, b)
	}
	if _, err := dial(x509.NewCertPool()); err == nil {
		t.Fatal("a client without the CA accepted the certificate")
	}
}
