package dashboard_test

import (
	"net/http"
	"net/http/httptest"
	"testing"
	"time"

	"github.com/miekg/dns"

	"github.com/svcdns/svc/test/nodetest"
)

// TestListAddFromURL: a list added from a URL in the lists page shows its
// first fetch's result, says whom it applies to, blocks its names at the
// next query, and an exclude saved in the page lets one pass again.
func TestListAddFromURL(t *testing.T) {
	lists := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, _ *http.Request) {
		_, _ = w.Write([]byte("! a test list\n||ads-from-url.example^\n||second-from-url.example^\n"))
	}))
	defer lists.Close()
	s := startServer(t, nodetest.Env("SERVICE_ADMIN_PASSWORD="+adminPassword, "SERVICE_BLOCKING__ALLOWLOCALLISTURLS=true"))
	// Upstreams are unreachable in the test node: a name that is not
	// blocked gets SERVFAIL, a blocked one does not.
	blocked := func(name string) bool {
		r, err := s.Exchange("udp", 2*time.Second, name, dns.TypeA)
		return err == nil && r.Rcode != dns.RcodeServerFailure
	}

	b := newBrowser(t, s.URL, 1280, 900)
	b.open(s.URL + "/lists")
	b.waitText("h1", "Sign in")
	b.login("admin", adminPassword)
	b.waitText("h1", "Lists")
	b.click("details.add-list summary")
	b.typeInto("#al-url", lists.URL+"/ads.txt")
	b.typeInto("#al-name", "from-url")
	b.click(`form[aria-label="Add a list from a URL"] button[type=submit]`)
	b.waitText(`form[aria-label="Add a list from a URL"] .msg.ok`, "Fetched: 2 entries")
	b.waitJS("the new list chosen", `location.search.includes('list=default%2Ffrom-url') || location.search.includes('list=default/from-url')`)
	b.waitText("[data-testid=applies-to]", "everyone")
	b.checkA11y("lists with the add form")
	nodetest.Eventually(t, 15*time.Second, "ads-from-url.example blocked", func() bool { return blocked("ads-from-url.example") })

	// An exclude saved in the page lets the name pass again.
	b.waitJS("the excludes form", `!!document.querySelector('#ex-text')`)
	b.typeInto("#ex-text", "||ads-from-url.example^")
	b.click(`form[aria-label="Excludes of main"] button[type=submit]`)
	b.waitText(`form[aria-label="Excludes of main"] .msg.ok`, "saved (1)")
	nodetest.Eventually(t, 15*time.Second, "ads-from-url.example passes after the exclude", func() bool { return !blocked("ads-from-url.example") })
	if !blocked("second-from-url.example") {
		t.Error("second-from-url.example, not excluded, is not blocked")
	}
	b.checkA11y("lists with excludes")
}
