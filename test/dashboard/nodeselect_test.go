package dashboard_test

import (
	"strings"
	"testing"
	"time"

	"github.com/svcdns/svc/internal/node"
	"github.com/svcdns/svc/test/nodetest"
)

// chooseNode picks a node in the node selector as a user does.
func (b *browser) chooseNode(value string) {
	b.t.Helper()
	b.waitJS("the node selector", `!!document.querySelector('[data-testid=node-select]')`)
	evalAs[bool](b, `(() => { const s = document.querySelector('[data-testid=node-select]');
		s.value = `+"`"+value+"`"+`; s.dispatchEvent(new Event('change', { bubbles: true })); return true; })()`)
}

// TestNodeSelector: two SQLite nodes as peers (issue #19, node selector).
// The dashboard of node A shows a node selector on the overview and the
// query log (GET /nodes lists two nodes); choosing node B shows B's
// counts and top domains and, in the log, B's queries only, with the
// choice kept in the URL through the overview's links and a reload; back
// on A, A's queries only. A single node shows no selector.
func TestNodeSelector(t *testing.T) {
	key := "SERVICE_ENCRYPTION_KEY=" + strings.Repeat("cd", 32)
	single := startServer(t, nodetest.Name("dash-single"), nodetest.Env("SERVICE_ADMIN_PASSWORD="+adminPassword))
	nb := startServer(t, nodetest.Name("dash-b"), nodetest.Env(key))
	na := startServer(t, nodetest.Name("dash-a"), nodetest.Env(key, "SERVICE_ADMIN_PASSWORD="+adminPassword, node.PeersEnv+"="+nb.Addrs.Internal))
	dig(t, na, "on-a.example")
	for i := 0; i < 2; i++ {
		dig(t, nb, "on-b.example")
	}

	b := newBrowser(t, na.URL, 1280, 900)
	b.open(na.URL + "/overview")
	b.waitText("h1", "Sign in")
	b.login("admin", adminPassword)
	b.waitText("h1", "Overview")
	b.waitJS("two nodes offered", `[...document.querySelectorAll('[data-testid=node-select] option')].map(o => o.value + '=' + o.innerText.trim()).join(',') === '=dash-a (this node),dash-b=dash-b'`)
	// Counts and top lists come from the rollups: reload until they show.
	b.reloadUntil(30*time.Second, "dash-a's query in its top domains", `(document.querySelector("section[aria-label='Top domains']") || {innerText: ''}).innerText.includes('on-a.example')`)

	start := time.Now()
	b.chooseNode("dash-b")
	b.waitJS("dash-b's overview", `new URLSearchParams(location.search).get('node') === 'dash-b' &&
		document.body.innerText.includes('Node dash-b.') &&
		document.querySelector("section[aria-label='Top domains']").innerText.includes('on-b.example')`)
	t.Logf("overview of dash-b shown %s after choosing it", time.Since(start).Round(time.Millisecond))
	if got := evalAs[string](b, `document.querySelector('[data-testid=total]').innerText`); got == "…" || got == "0" {
		t.Errorf("dash-b's total = %q, want its queries counted", got)
	}
	if txt := evalAs[string](b, `document.querySelector("section[aria-label='Top domains']").innerText`); strings.Contains(txt, "on-a.example") {
		t.Errorf("dash-b's top domains show dash-a's query: %q", txt)
	}
	b.checkA11y("overview with the node selector")
	b.screenshot("overview-nodes")

	// The overview's link keeps the node: the log of dash-b, its queries only.
	b.click("section[aria-label='Top domains'] a")
	b.waitText("h1", "Query log")
	b.waitJS("dash-b's log", `new URLSearchParams(location.search).get('node') === 'dash-b' &&
		document.querySelector('[data-testid=node-select]').value === 'dash-b' &&
		document.querySelectorAll('tbody tr[data-domain="on-b.example"]').length >= 2`)
	b.open(na.URL + "/queries?node=dash-b")
	b.waitJS("dash-b's whole log after a reload, none of dash-a's", `document.querySelectorAll('tbody tr[data-domain="on-b.example"]').length >= 2 &&
		document.querySelectorAll('tbody tr[data-domain="on-a.example"]').length === 0`)
	b.checkA11y("query log with the node selector")
	b.screenshot("queries-nodes")

	// Live: a new query of dash-b appears in its log seen through dash-a.
	dig(t, nb, "live-b.example")
	b.waitJS("dash-b's new query live", `document.querySelectorAll('tbody tr[data-domain="live-b.example"]').length === 1`)

	// Back to this node: dash-a's queries only.
	b.chooseNode("")
	b.waitJS("dash-a's log", `!new URLSearchParams(location.search).get('node') &&
		document.querySelectorAll('tbody tr[data-domain="on-a.example"]').length >= 1 &&
		document.querySelectorAll('tbody tr[data-domain^="on-b"], tbody tr[data-domain="live-b.example"]').length === 0`)

	// One node: no selector.
	one := newBrowser(t, single.URL, 1280, 900)
	one.open(single.URL + "/queries")
	one.waitText("h1", "Sign in")
	one.login("admin", adminPassword)
	one.waitText("h1", "Query log")
	one.waitJS("the log loaded", `!!document.querySelector('tbody')`)
	if evalAs[bool](one, `!!document.querySelector('[data-testid=node-select]')`) {
		t.Error("a single node shows a node selector")
	}
}
