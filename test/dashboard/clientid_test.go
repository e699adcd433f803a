package dashboard_test

import (
	"bytes"
	"crypto/tls"
	"net/http"
	"testing"
	"time"

	"github.com/miekg/dns"

	"github.com/svcdns/svc/test/nodetest"
	"github.com/svcdns/svc/test/testpki"
)

// TestQueryLogClientID: a DoH query with a client ID in its path shows the
// client ID next to the client; the ID links to the log filtered by it,
// and the client_id filter is kept in the URL and the form over a reload.
func TestQueryLogClientID(t *testing.T) {
	pki := testpki.New(t)
	s := startServer(t, nodetest.Env("SERVICE_ADMIN_PASSWORD="+adminPassword), nodetest.TLS(pki.CertFile, pki.KeyFile))
	doh := s.DNSAddr("doh")
	if doh == "" {
		t.Fatalf("no DoH listener in %v", s.Addrs.DNS)
	}
	askDoH := func(path, name string) {
		m := new(dns.Msg)
		m.SetQuestion(dns.Fqdn(name), dns.TypeA)
		b, err := m.Pack()
		if err != nil {
			t.Fatal(err)
		}
		c := &http.Client{Timeout: 5 * time.Second, Transport: &http.Transport{TLSClientConfig: &tls.Config{ServerName: testpki.ServerName, RootCAs: pki.Pool}}}
		res, err := c.Post("https://"+doh+path, "application/dns-message", bytes.NewReader(b))
		if err != nil {
			t.Fatalf("DoH %s: %v", path, err)
		}
		res.Body.Close()
	}
	askDoH("/dns-query/kids", "with-id.example")
	askDoH("/dns-query", "without-id.example")

	b := newBrowser(t, s.URL, 1280, 900)
	b.open(s.URL + "/queries?live=0")
	b.waitText("h1", "Sign in")
	b.login("admin", adminPassword)
	b.waitText("h1", "Query log")
	b.reloadUntil(30*time.Second, "both DoH queries in the log", `!!document.querySelector('tr[data-domain="with-id.example"]') && !!document.querySelector('tr[data-domain="without-id.example"]')`)
	b.waitText(`tr[data-domain="with-id.example"] .client-id`, "kids")
	if n := evalAs[int](b, `document.querySelectorAll('tr[data-domain="without-id.example"] .client-id').length`); n != 0 {
		t.Errorf("the query without a client ID shows %d client IDs", n)
	}
	b.checkA11y("query log with a client ID")

	// The client ID links to the log of that client ID; the filter is in
	// the URL and the form, and survives a reload.
	b.click(`tr[data-domain="with-id.example"] .client-id`)
	b.waitJS("log filtered by client ID", `new URLSearchParams(location.search).get('client_id') === 'kids' &&
		document.querySelectorAll('tbody tr[data-domain]').length === 1 && !!document.querySelector('tr[data-domain="with-id.example"]')`)
	b.reload()
	b.waitJS("client_id filter after reload", `!!document.querySelector('#f-client_id') && document.querySelector('#f-client_id').value === 'kids' &&
		document.querySelector('details.more').open && document.querySelectorAll('tbody tr[data-domain]').length === 1`)
}
