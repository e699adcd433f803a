package dashboard_test

import (
	"net/http"
	"strings"
	"testing"
	"time"

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
