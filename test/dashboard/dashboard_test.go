package dashboard_test

import (
	"fmt"
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/miekg/dns"

	"github.com/svcdns/svc/test/nodetest"
)

// TestServedFromTheBinary: the dashboard is at / (and under the path
// prefix), its own routes reload to index.html, it carries a strict CSP, and
// anything else keeps the API's JSON 404.
func TestServedFromTheBinary(t *testing.T) {
	s := startServer(t, nodetest.Env("SERVICE_ADMIN_PASSWORD="+adminPassword))
	for _, p := range []string{"/", "/queries?domain=ads.example", "/overview", "/login?next=queries"} {
		resp, body := get(t, s.URL+p, nil)
		csp := resp.Header.Get("Content-Security-Policy")
		if resp.StatusCode != 200 || !strings.HasPrefix(resp.Header.Get("Content-Type"), "text/html") || !strings.Contains(body, `<base href="/">`) {
			t.Errorf("GET %s: %d %s\n%.300s", p, resp.StatusCode, resp.Header.Get("Content-Type"), body)
		}
		if !strings.Contains(csp, "script-src 'self'") || strings.Contains(csp, "unsafe") || !strings.Contains(csp, "default-src 'none'") {
			t.Errorf("GET %s: CSP %q", p, csp)
		}
		if strings.Contains(body, "<script>") || strings.Contains(body, "http://") || strings.Contains(body, "https://") {
			t.Errorf("GET %s: inline script or another origin in the page:\n%s", p, body)
		}
	}
	resp, body := get(t, s.URL+"/ui/app.js", map[string]string{"Accept-Encoding": "gzip"})
	if resp.StatusCode != 200 || resp.Header.Get("Content-Encoding") != "gzip" || !strings.HasPrefix(resp.Header.Get("Content-Type"), "text/javascript") || resp.Header.Get("ETag") == "" {
		t.Errorf("GET /ui/app.js: %d %v", resp.StatusCode, resp.Header)
	}
	resp, _ = get(t, s.URL+"/ui/app.js", map[string]string{"If-None-Match": resp.Header.Get("ETag")})
	if resp.StatusCode != http.StatusNotModified {
		t.Errorf("revalidated /ui/app.js: %d, want 304", resp.StatusCode)
	}
	for _, p := range []string{"/nope", "/ui/nope.js", "/api/v2/x"} {
		resp, body = get(t, s.URL+p, nil)
		if resp.StatusCode != 404 || !strings.Contains(body, `"not_found"`) {
			t.Errorf("GET %s: %d %.200s, want the API's 404", p, resp.StatusCode, body)
		}
	}

	// Under listeners.api.pathPrefix.
	p := startServer(t, nodetest.Env("SERVICE_ADMIN_PASSWORD="+adminPassword, "SERVICE_LISTENERS__API__PATHPREFIX=/dns"))
	resp, body = get(t, p.URL+"/dns/queries?domain=x", nil)
	if resp.StatusCode != 200 || !strings.Contains(body, `<base href="/dns/">`) {
		t.Errorf("GET /dns/queries: %d\n%.400s", resp.StatusCode, body)
	}
	if resp, _ = get(t, p.URL+"/dns", nil); resp.StatusCode != http.StatusMovedPermanently || resp.Header.Get("Location") != "/dns/" {
		t.Errorf("GET /dns: %d %q, want a redirect to /dns/", resp.StatusCode, resp.Header.Get("Location"))
	}
	if resp, _ = get(t, p.URL+"/queries", nil); resp.StatusCode != 404 {
		t.Errorf("GET /queries outside the prefix: %d", resp.StatusCode)
	}

	// And it works there in the browser: login, then the query log.
	b := newBrowser(t, p.URL, 1280, 900)
	b.open(p.URL + "/dns/queries?domain=prefixed.example")
	b.waitText("h1", "Sign in")
	b.login("admin", adminPassword)
	b.waitText("h1", "Query log")
	if loc := b.location(); loc != p.URL+"/dns/queries?domain=prefixed.example" {
		t.Errorf("after login under the prefix: %s", loc)
	}
	b.waitJS("domain filter filled from the URL", `document.querySelector('#f-domain').value === 'prefixed.example'`)
}

// TestFirstStartPasswordChange: a first start with a generated password
// lands on "choose a new password" after login, then on the page asked for.
func TestFirstStartPasswordChange(t *testing.T) {
	apiURL, generated := startFirstRun(t)
	b := newBrowser(t, apiURL, 1280, 900)
	b.open(apiURL + "/queries?domain=first.example")
	b.waitText("h1", "Sign in")
	b.waitText(".msg", "First start")
	b.checkA11y("login")
	b.screenshot("login")

	b.login("admin", generated)
	b.waitText("h1", "Choose a new password")
	b.checkA11y("password change")
	b.screenshot("password")
	const newPw = "a much better passphrase 1"
	b.typeInto("#current", generated)
	b.typeInto("#new", newPw)
	b.typeInto("#new2", newPw+"x")
	b.click("form button[type=submit]")
	b.waitText(".msg.error", "differ")
	b.typeInto("#new2", newPw)
	b.click("form button[type=submit]")
	b.waitText("h1", "Query log")
	if loc := b.location(); loc != apiURL+"/queries?domain=first.example" {
		t.Errorf("after the password change: %s, want the page asked for", loc)
	}
}

// TestLoginErrorsAndLockout: a wrong password says so; the sixth attempt
// from the same address is locked out and the page counts down.
func TestLoginErrorsAndLockout(t *testing.T) {
	s := startServer(t, nodetest.Env("SERVICE_ADMIN_PASSWORD="+adminPassword))
	b := newBrowser(t, s.URL, 1280, 900)
	b.open(s.URL + "/")
	b.waitText("h1", "Sign in")
	for i := 0; i < 5; i++ {
		b.login("admin", fmt.Sprintf("wrong password %d", i))
		b.waitText(".msg.error", "Wrong username or password")
		b.waitJS("form ready again", `!document.querySelector('form button[type=submit]').disabled`)
	}
	b.login("admin", adminPassword)
	b.waitText(".msg.error", "Too many failed sign-ins")
	b.waitJS("submit disabled during the lockout", `document.querySelector('form button[type=submit]').disabled`)
}

// TestQueryLogLiveBlockExplainReload is the centre of the product: queries
// of a real DNS client appear live, one is blocked from its row and the next
// query is blocked, explain shows why, and a filtered URL survives a reload.
func TestQueryLogLiveBlockExplainReload(t *testing.T) {
	s := startServer(t, nodetest.Env("SERVICE_ADMIN_PASSWORD="+adminPassword))
	b := newBrowser(t, s.URL, 1280, 900)
	b.open(s.URL + "/queries")
	b.waitText("h1", "Sign in")
	b.login("admin", adminPassword)
	b.waitText("h1", "Query log")
	b.waitText("[data-testid=live]", "Live")

	// A real client's query shows up without a reload.
	dig(t, s, "live-one.example")
	b.waitJS("live row of live-one.example", `!!document.querySelector('tr[data-domain="live-one.example"]')`)
	b.checkA11y("query log")

	// Block it from its row; the next query is blocked, live, with the list.
	b.click(`tr[data-domain="live-one.example"] button[aria-label="Block live-one.example"]`)
	b.waitText(".toast", "added to default/ui-deny")
	var rcode int
	nodetest.Eventually(t, 15*time.Second, "live-one.example blocked over DNS", func() bool {
		r, err := s.Exchange("udp", 2*time.Second, "live-one.example", dns.TypeA)
		if err != nil {
			return false
		}
		rcode = r.Rcode
		return r.Rcode != dns.RcodeServerFailure
	})
	t.Logf("blocked answer rcode %s", dns.RcodeToString[rcode])
	b.waitJS("a blocked live row", `[...document.querySelectorAll('tr[data-domain="live-one.example"] .badge')].some(e => e.innerText === 'blocked')`)

	// Explain the blocked row: the list that decided.
	b.click(`tr[data-domain="live-one.example"] button[aria-label="Explain live-one.example"]`)
	b.waitText(".explain", "default/ui-deny")
	// The Extended DNS Error the client got (RFC 8914 code 15, Blocked).
	b.waitText("[data-testid=explain-ede]", "15 Blocked")
	b.checkA11y("query log with explain")
	b.screenshot("queries")

	// Filters live in the URL and survive a reload.
	b.open(s.URL + "/queries?domain=live-one.example&status_class=blocked&qtype=A")
	b.waitText("h1", "Query log")
	b.waitJS("filtered rows", `document.querySelectorAll('tbody tr[data-domain]').length > 0 &&
		[...document.querySelectorAll('tbody tr[data-domain]')].every(r => r.dataset.domain === 'live-one.example')`)
	b.reload()
	b.waitJS("filters after reload", `document.querySelector('#f-domain') && document.querySelector('#f-domain').value === 'live-one.example' &&
		document.querySelector('#f-status_class').value === 'blocked' &&
		document.querySelector('details.more').open && document.querySelector('#f-qtype').value === 'A'`)
	if loc := b.location(); !strings.HasSuffix(loc, "/queries?domain=live-one.example&status_class=blocked&qtype=A") {
		t.Errorf("after reload: %s", loc)
	}

	// The list the block went to, with the entry and its origin; switched
	// off there, the name passes again.
	b.open(s.URL + "/lists")
	b.waitText("h1", "Lists")
	b.click(`tr[data-list="default/ui-deny"] a`)
	b.waitText(`tr[data-entry="live-one.example"]`, "querylog")
	b.checkA11y("lists")
	b.screenshot("lists")
	b.click(`tr[data-entry="live-one.example"] button[role=switch]`)
	b.waitText(".msg.ok", "live-one.example switched off")
	nodetest.Eventually(t, 15*time.Second, "live-one.example passes again", func() bool {
		r, err := s.Exchange("udp", 2*time.Second, "live-one.example", dns.TypeA)
		return err == nil && r.Rcode == dns.RcodeServerFailure
	})

	// Setting a filter in the form writes the URL.
	b.open(s.URL + "/queries")
	b.waitText("h1", "Query log")
	dig(t, s, "other.example")
	b.waitJS("the filter form", `!!document.querySelector('#f-domain')`)
	b.typeInto("#f-domain", "other.example")
	b.click("form[aria-label=Filters] button[type=submit]")
	b.waitJS("URL has the filter", `location.search === '?domain=other.example'`)
	b.waitJS("only other.example", `document.querySelectorAll('tbody tr[data-domain]').length > 0 &&
		[...document.querySelectorAll('tbody tr[data-domain]')].every(r => r.dataset.domain === 'other.example')`)
}

// TestPagingWithContinue: pages come from the server by `continue`.
func TestPagingWithContinue(t *testing.T) {
	s := startServer(t, nodetest.Env("SERVICE_ADMIN_PASSWORD="+adminPassword))
	for i := 0; i < 60; i++ {
		if _, err := s.Exchange("udp", 2*time.Second, fmt.Sprintf("page%02d.example", i), dns.TypeA); err != nil {
			t.Logf("query: %v (logged anyway)", err)
		}
	}
	b := newBrowser(t, s.URL, 1280, 900)
	b.open(s.URL + "/queries?live=0&domain=page&domain_match=substring")
	b.waitText("h1", "Sign in")
	b.login("admin", adminPassword)
	b.waitText("h1", "Query log")
	b.reloadUntil(30*time.Second, "a full first page of the 60 queries", `document.querySelectorAll('tbody tr[data-domain]').length === 50`)
	b.click("a[rel=next]")
	b.waitJS("second page", `location.search.includes('continue=') && document.querySelectorAll('tbody tr[data-domain]').length === 10`)
	first := evalAs[string](b, `document.querySelector('tbody tr[data-domain]').dataset.domain`)
	if first != "page09.example" {
		t.Errorf("second page starts with %s, want page09.example", first)
	}
	b.waitText("nav[aria-label=Pages]", "End of the log")
}

// TestOverviewLinksIntoTheLog: totals and top lists, each entry a link to
// the filtered log; also at 360 px.
func TestOverviewLinksIntoTheLog(t *testing.T) {
	s := startServer(t, nodetest.Env("SERVICE_ADMIN_PASSWORD="+adminPassword))
	for i := 0; i < 3; i++ {
		dig(t, s, "popular.example")
	}
	dig(t, s, "rare.example")
	b := newBrowser(t, s.URL, 1280, 900)
	b.open(s.URL + "/")
	b.waitText("h1", "Sign in")
	b.login("admin", adminPassword)
	b.waitText("h1", "Overview")
	b.reloadUntil(30*time.Second, "4 queries counted", `(document.querySelector('[data-testid=total]') || {}).innerText === '4'`)
	b.waitText("section[aria-label='Top domains']", "popular.example")
	b.checkA11y("overview")
	b.screenshot("overview")
	b.click("section[aria-label='Top domains'] a")
	b.waitText("h1", "Query log")
	b.waitJS("log filtered by the domain", `new URLSearchParams(location.search).get('domain') === 'popular.example' &&
		document.querySelectorAll('tbody tr[data-domain="popular.example"]').length === 3`)

	// Clients: counts, the client's own series, and its log.
	b.open(s.URL + "/clients")
	b.waitText("h1", "Clients")
	b.waitJS("the client row with 4 queries", `[...document.querySelectorAll('tr[data-client="127.0.0.1"] td')].some(td => td.innerText === '4')`)
	b.click(`tr[data-client="127.0.0.1"] td a`)
	b.waitText("section[aria-label='Queries over time'] h2", "of 127.0.0.1")
	b.waitJS("client chart", `!!document.querySelector('svg.chart')`)
	b.checkA11y("clients")
	b.screenshot("clients")
	b.click(`tr[data-client="127.0.0.1"] td:last-child a`)
	b.waitText("h1", "Query log")
	b.waitJS("the client's log", `new URLSearchParams(location.search).get('client') === '127.0.0.1' &&
		document.querySelectorAll('tbody tr[data-domain]').length === 4`)

	// A phone: nothing wider than the screen but the log's own scroller.
	m := newBrowser(t, s.URL, 360, 780)
	m.open(s.URL + "/overview")
	m.waitText("h1", "Sign in")
	m.checkA11y("login at 360px")
	m.login("admin", adminPassword)
	m.waitText("h1", "Overview")
	m.waitJS("the overview's data", `performance.getEntriesByName('svc:ready').length > 0 && !document.body.innerText.includes('Loading')`)
	m.fits("the overview")
	m.screenshot("overview-360")
	m.open(s.URL + "/queries")
	m.waitText("h1", "Query log")
	m.waitJS("rows", `document.querySelectorAll('tbody tr[data-domain]').length > 0`)
	m.fits("the query log")
	m.checkA11y("query log at 360px")
	m.screenshot("queries-360")

	// The dark theme, switched by hand, is kept across a reload.
	b.open(s.URL + "/overview")
	b.waitText("h1", "Overview")
	b.click(`button[aria-label="Switch to the dark theme"]`)
	b.reload()
	b.waitJS("dark after reload", `document.documentElement.dataset.theme === 'dark'`)
	b.waitText("h1", "Overview")
	b.waitJS("the overview's data", `performance.getEntriesByName('svc:ready').length > 0 && !document.body.innerText.includes('Loading')`)
	b.checkA11y("overview, dark")
	b.screenshot("overview-dark")
}

// wideJS names the elements that reach past the right edge of the window
// (outside a sideways scroller).
const wideJS = `[...document.querySelectorAll('body *')].filter(e => e.getBoundingClientRect().right > window.innerWidth + 1 && !(e.parentElement && e.parentElement.closest('.table-wrap')))
	.slice(0, 8).map(e => e.tagName.toLowerCase() + (e.id ? '#' + e.id : '') + (e.className && e.className.baseVal === undefined ? '.' + e.className : '') + ' ' + Math.round(e.getBoundingClientRect().right)).join(', ')`

// fits fails when the page stays wider than the window (outside the log's
// own sideways scroller) for 5 s; a moment of wider layout while rendering
// is not a failure.
func (b *browser) fits(what string) {
	b.t.Helper()
	deadline := time.Now().Add(5 * time.Second)
	for evalAs[bool](b, `document.documentElement.scrollWidth > window.innerWidth`) {
		if time.Now().After(deadline) {
			b.t.Errorf("%s is wider than the %d px screen (%d px): %s", what, evalAs[int](b, `window.innerWidth`),
				evalAs[int](b, `document.documentElement.scrollWidth`), evalAs[string](b, wideJS))
			return
		}
		time.Sleep(100 * time.Millisecond)
	}
}

// dig asks the node with the dig binary when installed (a real third-party
// client), else with miekg/dns. The answer does not matter: every query is
// logged.
func dig(t *testing.T, s *server, name string) {
	t.Helper()
	addr := s.DNSAddr("udp")
	if out, err := runDig(addr, name); err == nil {
		_ = out
		return
	}
	if _, err := s.Exchange("udp", 3*time.Second, name, dns.TypeA); err != nil {
		t.Logf("query %s: %v (logged anyway)", name, err)
	}
}

// TestFirstPaint reports, for a signed-in user opening the overview and the
// query log on loopback, the first contentful paint and the time until the
// page shows its data (the performance mark svc:ready). The goal is under
// 1 s; the test fails only past 3 s, as the test machines are shared and
// loaded. (A 10-million-row log is the benchmark's job.)
func TestFirstPaint(t *testing.T) {
	s := startServer(t, nodetest.Env("SERVICE_ADMIN_PASSWORD="+adminPassword))
	for i := 0; i < 20; i++ {
		dig(t, s, fmt.Sprintf("paint%02d.example", i))
	}
	b := newBrowser(t, s.URL, 1280, 900)
	b.open(s.URL + "/overview")
	b.waitText("h1", "Sign in")
	b.login("admin", adminPassword)
	b.waitText("h1", "Overview")
	for _, page := range []string{"/overview", "/queries"} {
		b.open(s.URL + page)
		b.waitJS("svc:ready on "+page, `performance.getEntriesByName('svc:ready').length > 0`)
		fcp := evalAs[float64](b, `(performance.getEntriesByName('first-contentful-paint')[0] || {startTime: -1}).startTime`)
		ready := evalAs[float64](b, `performance.getEntriesByName('svc:ready')[0].startTime`)
		t.Logf("%s: first contentful paint %.0f ms, data shown %.0f ms after navigation", page, fcp, ready)
		if ready > 3000 {
			t.Errorf("%s: data shown after %.0f ms, want under 1 s on loopback (3 s tolerated on a loaded machine)", page, ready)
		}
	}
}
