package node_test

import (
	"bytes"
	"context"
	"crypto/tls"
	"encoding/binary"
	"encoding/json"
	"fmt"
	"io"
	"maps"
	"net/http"
	"slices"
	"testing"
	"time"

	"github.com/miekg/dns"
	"github.com/quic-go/quic-go"
	"github.com/quic-go/quic-go/http3"

	"github.com/svcdns/svc/test/nodetest"
	"github.com/svcdns/svc/test/testpki"
)

// adsList blocks ads.example and below; the tests add a ClientGroup and a
// Policy that blocks it for the group.
const adsList = `apiVersion: service.io/v1alpha1
kind: BlockList
metadata: {name: ads, namespace: default}
spec:
  global: false # only the policies naming it block with it
  sources:
    - name: mine
      inline: ["||ads.example^"]
`

const kidsDocs = adsList + `---
apiVersion: service.io/v1alpha1
kind: ClientGroup
metadata: {name: kids, namespace: default}
spec:
  clientIDs: [kids]
---
apiVersion: service.io/v1alpha1
kind: Policy
metadata: {name: kids, namespace: default}
spec:
  clientGroupRefs: [kids]
  blockListRefs: [ads]
  blockMode: nxdomain
`

// TestNodeClientIDsFromEncryptedTransports configures a node the way a
// user does (listeners.dot/.doq/.doh with a certificate for dns.test and
// *.dns.test, a ClientGroup by client ID, a Policy for it) and asks over
// each transport: the client ID from the DoT and DoQ server name
// (kids.dns.test, through the certificate's wildcard) and from the DoH path
// and the DoH3 path (/dns-query/kids) puts the query in the group, so its policy blocks; the
// plain server name (dns.test, which the certificate names itself) and the
// plain path carry no ID and are not blocked. The query log keeps the
// client ID of each row (GET /queries?client_id=kids), next to the
// client's own address.
func TestNodeClientIDsFromEncryptedTransports(t *testing.T) {
	pki := testpki.New(t)
	tn := startNode(t, nodetest.TLS(pki.CertFile, pki.KeyFile), nodetest.Objects(map[string]string{"kids.yaml": kidsDocs}),
		nodetest.Env("SERVICE_BOOTSTRAP_TOKEN="+bootstrapToken))
	dot, doq, doh, doh3 := tn.DNSAddr("dot"), tn.DNSAddr("doq"), tn.DNSAddr("doh"), tn.DNSAddr("doh3")
	if dot == "" || doq == "" || doh == "" || doh3 == "" {
		t.Fatalf("encrypted listeners missing from %v", tn.Addrs.DNS)
	}
	cases := []struct {
		name    string
		ask     func(*dns.Msg) (*dns.Msg, error)
		blocked bool
	}{
		{"dot kids.dns.test", func(m *dns.Msg) (*dns.Msg, error) { return askDoT(pki, dot, "kids.dns.test", m) }, true},
		{"dot dns.test", func(m *dns.Msg) (*dns.Msg, error) { return askDoT(pki, dot, "dns.test", m) }, false},
		{"doq kids.dns.test", func(m *dns.Msg) (*dns.Msg, error) { return askDoQ(pki, doq, "kids.dns.test", m) }, true},
		{"doq dns.test", func(m *dns.Msg) (*dns.Msg, error) { return askDoQ(pki, doq, "dns.test", m) }, false},
		{"doh /dns-query/kids", func(m *dns.Msg) (*dns.Msg, error) { return askDoH(pki, "https://"+doh+"/dns-query/kids", m) }, true},
		{"doh /dns-query", func(m *dns.Msg) (*dns.Msg, error) { return askDoH(pki, "https://"+doh+"/dns-query", m) }, false},
		{"doh3 /dns-query/kids", func(m *dns.Msg) (*dns.Msg, error) { return askDoH3(pki, doh3, "/dns-query/kids", m) }, true},
		{"doh3 /dns-query", func(m *dns.Msg) (*dns.Msg, error) { return askDoH3(pki, doh3, "/dns-query", m) }, false},
	}
	// The policy is compiled after the start: wait until the group's
	// client is blocked, then check every case.
	nodetest.Eventually(t, 10*time.Second, "kids blocked over DoT", func() bool {
		r, err := cases[0].ask(question("x.ads.example."))
		return err == nil && r.Rcode == dns.RcodeNameError
	})
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			r, err := tc.ask(question("x.ads.example."))
			if err != nil {
				t.Fatal(err)
			}
			if blocked := r.Rcode == dns.RcodeNameError; blocked != tc.blocked {
				t.Errorf("rcode %s, blocked %v; want blocked %v", dns.RcodeToString[r.Rcode], blocked, tc.blocked)
			}
		})
	}
	// Every transport's kids query is in the log with the client ID, blocked
	// by the kids policy (a query before the policy was compiled is listed
	// too, not blocked); the plain ones are not listed under it.
	var page struct {
		Items []struct {
			Client    string `json:"client"`
			ClientID  string `json:"client_id"`
			Domain    string `json:"domain"`
			Status    string `json:"status"`
			Policy    string `json:"policy"`
			Transport string `json:"transport"`
		} `json:"items"`
	}
	wantTransports := []string{"doh", "doh3", "doq", "dot"}
	var got []string
	var body string
	ok := false
	for deadline := time.Now().Add(15 * time.Second); !ok && time.Now().Before(deadline); time.Sleep(100 * time.Millisecond) {
		ok = func() bool {
			var code int
			code, body = apiCall(t, tn, "GET", "/queries?client_id=kids&domain=x.ads.example&limit=1000", "")
			page.Items = nil // Unmarshal would keep the fields a row leaves out
			if code != 200 || json.Unmarshal([]byte(body), &page) != nil {
				return false
			}
			seen := map[string]bool{}
			for _, it := range page.Items {
				if it.Status == "blocked" && it.Policy == "default/kids" {
					seen[it.Transport] = true
				}
			}
			got = slices.Sorted(maps.Keys(seen))
			return slices.Equal(got, wantTransports)
		}()
	}
	if !ok {
		t.Fatalf("GET /queries?client_id=kids: transports %v, want %v: %.1000s", got, wantTransports, body)
	}
	for _, it := range page.Items {
		if it.ClientID != "kids" || it.Client != "127.0.0.1" {
			t.Errorf("client_id=kids row %+v, want client 127.0.0.1, client_id kids", it)
		}
	}
	page.Items = nil
	code, body := apiCall(t, tn, "GET", "/queries?domain=x.ads.example&limit=1000", "")
	if code != 200 || json.Unmarshal([]byte(body), &page) != nil {
		t.Fatalf("GET /queries = %d %.500s", code, body)
	}
	plain := 0
	for _, it := range page.Items {
		switch {
		case it.ClientID == "" && it.Status != "blocked":
			plain++
		case it.ClientID != "kids":
			t.Errorf("row %+v: client ID %q, want kids or none", it, it.ClientID)
		}
	}
	if plain < 4 {
		t.Errorf("%d rows without a client ID, want the 4 plain queries: %+v", plain, page.Items)
	}
}

func question(name string) *dns.Msg {
	m := new(dns.Msg)
	m.SetQuestion(name, dns.TypeA)
	return m
}

func askDoT(pki *testpki.PKI, addr, sni string, m *dns.Msg) (*dns.Msg, error) {
	c := &dns.Client{Net: "tcp-tls", Timeout: 3 * time.Second, TLSConfig: &tls.Config{ServerName: sni, RootCAs: pki.Pool}}
	r, _, err := c.Exchange(m, addr)
	return r, err
}

func askDoQ(pki *testpki.PKI, addr, sni string, m *dns.Msg) (*dns.Msg, error) {
	ctx, cancel := context.WithTimeout(context.Background(), 3*time.Second)
	defer cancel()
	conn, err := quic.DialAddr(ctx, addr, &tls.Config{ServerName: sni, RootCAs: pki.Pool, NextProtos: []string{"doq"}}, nil)
	if err != nil {
		return nil, err
	}
	defer conn.CloseWithError(0, "")
	return askDoQConn(conn, m)
}

// askDoQConn asks m on a new stream of conn.
func askDoQConn(conn *quic.Conn, m *dns.Msg) (*dns.Msg, error) {
	ctx, cancel := context.WithTimeout(context.Background(), 3*time.Second)
	defer cancel()
	st, err := conn.OpenStreamSync(ctx)
	if err != nil {
		return nil, err
	}
	q := m.Copy()
	q.Id = 0 // RFC 9250 4.2.1
	b, err := q.Pack()
	if err != nil {
		return nil, err
	}
	if _, err := st.Write(append(binary.BigEndian.AppendUint16(nil, uint16(len(b))), b...)); err != nil {
		return nil, err
	}
	_ = st.Close()
	_ = st.SetReadDeadline(time.Now().Add(3 * time.Second))
	resp, err := io.ReadAll(st)
	if err != nil {
		return nil, err
	}
	if len(resp) < 2 || int(binary.BigEndian.Uint16(resp)) != len(resp)-2 {
		return nil, fmt.Errorf("doq answer of %d bytes is not one length-prefixed message", len(resp))
	}
	r := new(dns.Msg)
	return r, r.Unpack(resp[2:])
}

func askDoH(pki *testpki.PKI, url string, m *dns.Msg) (*dns.Msg, error) {
	tr := &http.Transport{TLSClientConfig: &tls.Config{ServerName: testpki.ServerName, RootCAs: pki.Pool}, ForceAttemptHTTP2: true}
	defer tr.CloseIdleConnections()
	return postDNS(tr, url, 2, m)
}

// askDoH3 posts m over HTTP/3 to the DoH3 listener at addr.
func askDoH3(pki *testpki.PKI, addr, path string, m *dns.Msg) (*dns.Msg, error) {
	tr := &http3.Transport{TLSClientConfig: &tls.Config{ServerName: testpki.ServerName, RootCAs: pki.Pool}}
	defer tr.Close()
	return postDNS(tr, "https://"+addr+path, 3, m)
}

// postDNS posts m as application/dns-message and wants HTTP/major back.
func postDNS(rt http.RoundTripper, url string, major int, m *dns.Msg) (*dns.Msg, error) {
	b, err := m.Pack()
	if err != nil {
		return nil, err
	}
	c := &http.Client{Transport: rt, Timeout: 3 * time.Second}
	resp, err := c.Post(url, "application/dns-message", bytes.NewReader(b))
	if err != nil {
		return nil, err
	}
	defer resp.Body.Close()
	body, err := io.ReadAll(io.LimitReader(resp.Body, 65536))
	if err != nil {
		return nil, err
	}
	if resp.StatusCode != http.StatusOK || resp.ProtoMajor != major {
		return nil, fmt.Errorf("%s: %s over %s", url, resp.Status, resp.Proto)
	}
	r := new(dns.Msg)
	return r, r.Unpack(body)
}
