package dashboard_test

import (
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/chromedp/chromedp"
	"github.com/miekg/dns"

	"github.com/svcdns/svc/test/nodetest"
)

// TestRecordEditor: a record added in the zone page is answered over DNS,
// shows in the zone file, a bad value gets the API's message, and removing
// it takes it out of DNS again.
func TestRecordEditor(t *testing.T) {
	s := startServer(t, nodetest.Env("SERVICE_ADMIN_PASSWORD="+adminPassword))
	api := signIn(t, s, "admin", adminPassword)
	api.do(http.MethodPut, "/objects/dnszones/lab", map[string]any{
		"apiVersion": "service.io/v1alpha1", "kind": "DNSZone",
		"metadata": map[string]any{"name": "lab"},
		"spec":     map[string]any{"zoneName": "lab.test."},
	}, nil)

	b := newBrowser(t, s.URL, 1280, 900)
	b.open(s.URL + "/zones?zone=lab")
	b.waitText("h1", "Sign in")
	b.login("admin", adminPassword)
	b.waitText("h1", "Zones")
	b.waitJS("the zone row and its file", `!!document.querySelector('tr[data-zone=lab]') && !!document.querySelector('[data-testid=zonefile]')`)

	b.typeInto("#r-name", "www")
	b.typeInto("#r-targets", "192.0.2.77")
	b.click("form[aria-label='Add or remove records'] button[type=submit]")
	b.waitText(".msg.ok", "www A added")
	b.waitText("[data-testid=zonefile]", "192.0.2.77")
	b.checkA11y("zones")
	b.screenshot("zones")
	nodetest.Eventually(t, 15*time.Second, "www.lab.test answered", func() bool {
		r, err := s.Exchange("udp", 2*time.Second, "www.lab.test", dns.TypeA)
		if err != nil || len(r.Answer) == 0 {
			return false
		}
		a, ok := r.Answer[0].(*dns.A)
		return ok && a.A.String() == "192.0.2.77"
	})

	// The API's validation message, as it words it.
	b.typeInto("#r-targets", "not-an-address")
	b.click("form[aria-label='Add or remove records'] button[type=submit]")
	b.waitJS("the API's refusal", `!!document.querySelector('.msg.error')`)
	if msg := evalAs[string](b, `document.querySelector('.msg.error').innerText`); !strings.Contains(msg, "not-an-address") && !strings.Contains(strings.ToLower(msg), "invalid") {
		t.Errorf("refusal of a bad A value: %q", msg)
	}

	b.typeInto("#r-targets", "192.0.2.77")
	b.click(`form[aria-label='Add or remove records'] button[type=button]`)
	b.waitText(".msg.ok", "removed")
	nodetest.Eventually(t, 15*time.Second, "www.lab.test gone", func() bool {
		r, err := s.Exchange("udp", 2*time.Second, "www.lab.test", dns.TypeA)
		return err == nil && len(r.Answer) == 0
	})
}

// TestZoneCreateImportExportDelete: a zone created in the page answers the
// records a BIND file imported into it, its export downloads them, and
// deleted (after the dry run's count) it stops answering. A zone another
// manager owns (the objects directory) says so, offers no delete, and an
// edit is refused with the owner named.
func TestZoneCreateImportExportDelete(t *testing.T) {
	s := startServer(t, nodetest.Env("SERVICE_ADMIN_PASSWORD="+adminPassword), nodetest.Objects(map[string]string{"zone.yaml": `apiVersion: service.io/v1alpha1
kind: DNSZone
metadata: {name: files-zone}
spec: {zoneName: files.test.}
`}))
	answers := func(name, want string) bool {
		r, err := s.Exchange("udp", 2*time.Second, name, dns.TypeA)
		if err != nil {
			return false
		}
		for _, rr := range r.Answer {
			if a, ok := rr.(*dns.A); ok && a.A.String() == want {
				return true
			}
		}
		return false
	}

	b := newBrowser(t, s.URL, 1280, 900)
	b.open(s.URL + "/zones")
	b.waitText("h1", "Sign in")
	b.login("admin", adminPassword)
	b.waitText("h1", "Zones")
	b.click("details.add-zone summary")
	b.typeInto("#z-zonename", "made.test")
	b.click(`form[aria-label="Create a zone"] button[type=submit]`)
	b.waitText(`form[aria-label="Create a zone"] .msg.ok`, "made.test. created as made-test")
	b.waitJS("the new zone chosen", `location.search === '?zone=made-test' && !!document.querySelector('tr[data-zone=made-test]')`)

	b.waitJS("the import form", `!!document.querySelector('#imp-text')`)
	b.typeInto("#imp-text", "www 300 IN A 192.0.2.55\nmail 300 IN A 192.0.2.56\n")
	b.click(`form[aria-label="Import a zone file"] button[type=submit]`)
	b.waitText(`form[aria-label="Import a zone file"] .msg.ok`, "Imported into")
	b.waitText("[data-testid=zonefile]", "192.0.2.56")
	b.checkA11y("zone with import")
	nodetest.Eventually(t, 15*time.Second, "www.made.test answered", func() bool { return answers("www.made.test", "192.0.2.55") })
	// The download link serves the zone file.
	exported := evalAs[string](b, `fetch(document.querySelector('a[download]').href).then(r => r.text())`, chromedp.EvalAwaitPromise)
	if !strings.Contains(exported, "192.0.2.55") || !strings.Contains(exported, "mail") {
		t.Errorf("downloaded zone file lacks the imported records:\n%s", exported)
	}

	b.click(".delete-zone button")
	b.waitText(".delete-zone", "record sets")
	b.click(".delete-zone button.primary")
	b.waitText(".msg.ok", "Zone made-test deleted")
	b.waitJS("the zone row gone", `!document.querySelector('tr[data-zone=made-test]')`)
	nodetest.Eventually(t, 15*time.Second, "www.made.test no longer answered", func() bool { return !answers("www.made.test", "192.0.2.55") })

	// Another manager's zone.
	b.open(s.URL + "/zones?zone=files-zone")
	b.waitText(".msg.info", "managed by")
	owner := evalAs[string](b, `document.querySelector('tr[data-zone=files-zone] td.opt').innerText`)
	b.click(".delete-zone button")
	b.waitJS("the dry run or its refusal", `!!document.querySelector('.delete-zone button.primary') || !!document.querySelector('.delete-zone .msg.error')`)
	if evalAs[bool](b, `!!document.querySelector('.delete-zone button.primary')`) {
		b.click(".delete-zone button.primary")
	}
	b.waitJS("the refusal", `!!document.querySelector('.delete-zone .msg.error')`)
	if msg := evalAs[string](b, `document.querySelector('.delete-zone .msg.error').innerText`); !strings.Contains(msg, owner) {
		t.Errorf("refusal to delete a %s-managed zone does not name the owner: %q", owner, msg)
	}
	b.checkA11y("zone of another manager")
	nodetest.Eventually(t, 5*time.Second, "files-zone still there", func() bool {
		return evalAs[bool](b, `!!document.querySelector('tr[data-zone=files-zone]')`)
	})
}
