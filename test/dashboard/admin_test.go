package dashboard_test

import (
	"net/http"
	"strings"
	"testing"

	"github.com/svcdns/svc/test/nodetest"
)

// TestAdministration: settings from the schema (a key set by the
// environment is read-only with the variable named, a restart key is
// marked, a change is saved through PATCH /settings and a bad value gets
// the API's refusal at the key), a token created with a scope is shown once
// and works as a bearer token until revoked, and the users, access, audit
// and cluster tabs show what the node holds.
func TestAdministration(t *testing.T) {
	s := startServer(t, nodetest.SettingsFile(), nodetest.Env("SERVICE_ADMIN_PASSWORD="+adminPassword, "SERVICE_CACHE__MAXENTRIES=1234"))
	api := signIn(t, s, "admin", adminPassword)

	b := newBrowser(t, s.URL, 1280, 900)
	b.open(s.URL + "/admin?tab=settings&q=cache")
	b.waitText("h1", "Sign in")
	b.login("admin", adminPassword)
	b.waitText("h1", "Administration")
	b.waitJS("the settings rows", `!!document.querySelector('tr[data-key="cache.maxEntries"]') && !!document.querySelector('tr[data-key="cache.negativeTTL"]')`)

	// Locked by the environment: read-only, the reason names the variable, no Save.
	row := `document.querySelector('tr[data-key="cache.maxEntries"]')`
	if v := evalAs[string](b, row+`.querySelector('input').value`); v != "1234" {
		t.Errorf("cache.maxEntries shows %q, want the environment's 1234", v)
	}
	if !evalAs[bool](b, row+`.querySelector('input').readOnly`) {
		t.Error("cache.maxEntries, set by the environment, is editable")
	}
	if lock := evalAs[string](b, row+`.querySelector('.lock').innerText`); !strings.Contains(lock, "SERVICE_CACHE__MAXENTRIES") {
		t.Errorf("lock reason of cache.maxEntries: %q, want the variable named", lock)
	}
	if evalAs[bool](b, row+`.querySelector('button') !== null`) {
		t.Error("cache.maxEntries, set by the environment, has a Save button")
	}

	// A change saved through PATCH /settings with CSRF.
	b.typeInto(`tr[data-key="cache.negativeTTL"] input`, "2m")
	b.click(`button[aria-label="Save cache.negativeTTL"]`)
	b.waitText(`tr[data-key="cache.negativeTTL"] .msg.ok`, "Saved")
	var eff struct {
		Cache struct {
			NegativeTTL string `json:"negativeTTL"`
		} `json:"cache"`
	}
	api.do(http.MethodGet, "/settings", nil, &eff)
	if eff.Cache.NegativeTTL != "2m0s" && eff.Cache.NegativeTTL != "2m" {
		t.Errorf("cache.negativeTTL after saving 2m: %q", eff.Cache.NegativeTTL)
	}
	// A bad value: the API's refusal at the key.
	b.typeInto(`tr[data-key="cache.negativeTTL"] input`, "banana")
	b.click(`button[aria-label="Save cache.negativeTTL"]`)
	b.waitJS("the refusal at the key", `!!document.querySelector('tr[data-key="cache.negativeTTL"] .msg.error')`)
	if msg := evalAs[string](b, `document.querySelector('tr[data-key="cache.negativeTTL"] .msg.error').innerText`); !strings.Contains(msg, "negativeTTL") && !strings.Contains(msg, "banana") {
		t.Errorf("refusal of a bad duration does not name the key or value: %q", msg)
	}
	b.checkA11y("admin settings")
	b.screenshot("admin")

	// A restart-required key is marked.
	b.typeInto("#set-filter", "blockPage.enabled")
	b.waitText(`tr[data-key="blockPage.enabled"]`, "restart required")

	// Tokens: created with a scope, the secret shown once, usable, revoked.
	b.click(`nav.tabs a[href="admin?tab=tokens"]`)
	b.waitJS("the token form", `!!document.querySelector('#t-desc')`)
	b.typeInto("#t-desc", "dashboard test")
	b.typeInto("#t-scopes", "viewer")
	b.click(`form[aria-label="Create a token"] button[type=submit]`)
	b.waitJS("the new token", `!!document.querySelector('[data-testid=new-token]')`)
	token := evalAs[string](b, `document.querySelector('[data-testid=new-token]').innerText`)
	b.waitText("table", "dashboard test")
	b.checkA11y("admin tokens")
	resp, body := get(t, s.URL+"/api/v1/auth/me", map[string]string{"Authorization": "Bearer " + token})
	if resp.StatusCode != http.StatusOK || !strings.Contains(body, "viewer") {
		t.Fatalf("the created token on /auth/me: %d %s", resp.StatusCode, body)
	}
	b.reload()
	b.waitText("table", "dashboard test")
	if evalAs[bool](b, `!!document.querySelector('[data-testid=new-token]')`) || strings.Contains(evalAs[string](b, `document.body.innerText`), token) {
		t.Error("the token's secret is shown again after a reload")
	}
	b.click(`tbody tr button[aria-label^="Revoke token"]`)
	b.waitJS("the token gone", `!document.body.innerText.includes('dashboard test')`)
	if resp, _ := get(t, s.URL+"/api/v1/auth/me", map[string]string{"Authorization": "Bearer " + token}); resp.StatusCode != http.StatusUnauthorized {
		t.Errorf("a revoked token on /auth/me: %d, want 401", resp.StatusCode)
	}

	// Users, access and diagnoses, audit, nodes and cluster.
	b.click(`nav.tabs a[href="admin?tab=users"]`)
	b.waitText(`tr[data-user="admin"]`, "built-in admin")
	b.checkA11y("admin users")
	b.click(`nav.tabs a[href="admin?tab=access"]`)
	b.waitText("h2", "Diagnoses")
	b.waitText("h2", "Role bindings")
	b.checkA11y("admin access")
	b.click(`nav.tabs a[href="admin?tab=audit"]`)
	b.waitText("table", "patch-settings")
	b.checkA11y("admin audit")
	b.click(`nav.tabs a[href="admin?tab=cluster"]`)
	b.waitJS("a node row", `!!document.querySelector('tr[data-node]')`)
	b.waitText("dl.facts", "file (SQLite)")
	b.waitText("h2", "Catalogue")
	b.checkA11y("admin cluster")
	b.fits("admin")
}
