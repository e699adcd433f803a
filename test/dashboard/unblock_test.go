package dashboard_test

import (
	"fmt"
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/chromedp/chromedp"

	"github.com/svcdns/svc/test/nodetest"
)

// TestUnblockQueue: two requests filed for blocked names wait in the queue
// (the navigation shows 2 pending); one is approved for the client group
// kids with subdomains for an hour in one click, and dig from this machine
// (a kids client) is no longer answered 0.0.0.0; the other is denied with
// a comment; both show in the history and the pending count goes away.
func TestUnblockQueue(t *testing.T) {
	s := startServer(t, nodetest.Env("SERVICE_ADMIN_PASSWORD="+adminPassword))
	api := signIn(t, s, "admin", adminPassword)
	for _, o := range []string{
		`{"apiVersion":"service.io/v1alpha1","kind":"BlockList","metadata":{"name":"ads","namespace":"default"},"spec":{"sources":[{"name":"main","inline":["||ads.example.com^","||tracker.example.com^"]}]}}`,
		`{"apiVersion":"service.io/v1alpha1","kind":"ClientGroup","metadata":{"name":"kids","namespace":"default"},"spec":{"addresses":["127.0.0.0/8"]}}`,
		`{"apiVersion":"service.io/v1alpha1","kind":"Policy","metadata":{"name":"kids","namespace":"default"},"spec":{"clientGroupRefs":["kids"],"blockListRefs":["ads"],"blockMode":"zeroIP"}}`,
		`{"apiVersion":"service.io/v1alpha1","kind":"UnblockRequest","metadata":{"name":"ads-1","namespace":"default"},"spec":{"domain":"ads.example.com","reason":"school project","policy":"default/kids","rule":"||ads.example.com^","requester":{"ip":"127.0.0.1","contact":"kid@example.org"}}}`,
		`{"apiVersion":"service.io/v1alpha1","kind":"UnblockRequest","metadata":{"name":"tracker-1","namespace":"default"},"spec":{"domain":"tracker.example.com","reason":"games","policy":"default/kids","requester":{"ip":"127.0.0.1"}}}`,
	} {
		api.do(http.MethodPost, "/apply", jsonRaw(o), nil)
	}
	dnsAddr := s.DNSAddr("udp")
	nodetest.Eventually(t, 20*time.Second, "ads.example.com blocked (0.0.0.0)", func() bool {
		out, err := runDig(dnsAddr, "ads.example.com")
		return err == nil && strings.Contains(out, "0.0.0.0")
	})

	b := newBrowser(t, s.URL, 1280, 900)
	b.open(s.URL + "/unblock")
	b.waitText("h1", "Sign in")
	b.login("admin", adminPassword)
	b.waitText("h1", "Unblock requests")
	b.waitText(`li[data-domain="ads.example.com"]`, "school project")
	b.waitJS("2 pending in the navigation", `(document.querySelector('nav.main [data-pending]') || {}).dataset?.pending === "2"`)
	b.checkA11y("unblock queue")

	// approve for the group kids, with subdomains, for an hour
	form := `form[data-request="ads-1"]`
	b.choose(form+` select[name=scope]`, "groups")
	b.waitJS("the group choice", fmt.Sprintf(`!!document.querySelector(%q)`, form+` select[name=groups]`))
	evalAs[chromedp.Void](b, fmt.Sprintf(`(s => { s.options[0].selected = true; s.dispatchEvent(new Event("change", {bubbles: true})); })(document.querySelector(%q))`, form+` select[name=groups]`))
	b.click(form + ` input[name=subdomains]`)
	b.choose(form+` select[name=duration]`, "1h")
	b.typeInto(form+` input[name=comment]`, "ok for the project")
	b.click(form + ` button[type=submit]`)
	b.waitText(`tr[data-domain="ads.example.com"]`, "approved")
	b.waitText(`tr[data-domain="ads.example.com"]`, "default/kids, subdomains, 1h0m0s")
	out, err := runDig(dnsAddr, "ads.example.com")
	if err != nil || strings.Contains(out, "0.0.0.0") {
		t.Fatalf("dig after the approval in the dashboard: still blocked: %v\n%s", err, out)
	}
	out, _ = runDig(dnsAddr, "cdn.ads.example.com")
	if strings.Contains(out, "0.0.0.0") {
		t.Fatalf("subdomain still blocked after an approval with subdomains:\n%s", out)
	}

	// deny the other one with a comment
	form = `form[data-request="tracker-1"]`
	b.typeInto(form+` input[name=comment]`, "not during school")
	b.click(form + ` button[name=deny]`)
	b.waitText(`tr[data-domain="tracker.example.com"]`, "not during school")
	b.waitJS("no pending count left", `!document.querySelector('nav.main [data-pending]')`)
	b.waitText("#ub-pending", "Pending (0)")
	b.checkA11y("unblock history")
	b.screenshot("unblock")
}

// jsonRaw sends a JSON text as it is.
type jsonRaw string

func (j jsonRaw) MarshalJSON() ([]byte, error) { return []byte(j), nil }
