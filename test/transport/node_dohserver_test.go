package transport_test

import (
	"bytes"
	"crypto/tls"
	"io"
	"net/http"
	"testing"
	"time"

	"github.com/miekg/dns"

	"github.com/svcdns/svc/test/nodetest"
	"github.com/svcdns/svc/test/testpki"
)

// TestNodeDoHServerSetting: a node started with listeners.dohServer lean
// or stdlib answers DoH over HTTP/2 and HTTP/1.1 either way, and the
// setting reaches the listener: the lean HTTP/1.1 server closes the
// connection after a HEAD (it answers 405 without the body the client
// may still send), net/http keeps it.
func TestNodeDoHServerSetting(t *testing.T) {
	for _, server := range []string{"lean", "stdlib"} {
		t.Run(server, func(t *testing.T) {
			pki := testpki.New(t)
			n := nodetest.Start(t, nodetest.TLS(pki.CertFile, pki.KeyFile), nodetest.Env("SERVICE_LISTENERS__DOHSERVER="+server),
				nodetest.ReadyWithin(30*time.Second), nodetest.StopWithin(10*time.Second))
			addr := n.DNSAddr("doh")
			if addr == "" {
				t.Fatalf("no DoH listener in %v", n.Addrs.DNS)
			}
			m := new(dns.Msg)
			m.SetQuestion("example.org.", dns.TypeA)
			q, _ := m.Pack()
			for _, h2 := range []bool{true, false} {
				tr := &http.Transport{TLSClientConfig: &tls.Config{ServerName: testpki.ServerName, RootCAs: pki.Pool}, ForceAttemptHTTP2: h2}
				if !h2 {
					tr.TLSNextProto = map[string]func(string, *tls.Conn) http.RoundTripper{}
				}
				c := &http.Client{Transport: tr, Timeout: 5 * time.Second}
				resp, err := c.Post("https://"+addr+"/dns-query", "application/dns-message", bytes.NewReader(q))
				if err != nil {
					t.Fatal(err)
				}
				body, _ := io.ReadAll(resp.Body)
				resp.Body.Close()
				r := new(dns.Msg)
				if resp.StatusCode != 200 || r.Unpack(body) != nil || r.Id != m.Id || (resp.ProtoMajor == 2) != h2 {
					t.Fatalf("h2 %v: %s %s, %d bytes", h2, resp.Proto, resp.Status, len(body))
				}
				if !h2 {
					req, _ := http.NewRequest(http.MethodHead, "https://"+addr+"/dns-query", nil)
					resp, err := c.Do(req)
					if err != nil {
						t.Fatal(err)
					}
					resp.Body.Close()
					if resp.StatusCode != http.StatusMethodNotAllowed || resp.Close != (server == "lean") {
						t.Fatalf("HEAD: %s, connection closed %v", resp.Status, resp.Close)
					}
				}
				tr.CloseIdleConnections()
			}
		})
	}
}
