package node_test

import (
	"context"
	"crypto/tls"
	"net"
	"net/http"
	"net/netip"
	"testing"
	"time"

	"github.com/miekg/dns"

	"github.com/svcdns/svc/dataplane/proxyproto"
	"github.com/svcdns/svc/test/nodetest"
	"github.com/svcdns/svc/test/testpki"
)

const lbDocs = adsList + `---
apiVersion: service.io/v1alpha1
kind: ClientGroup
metadata: {name: behind-lb, namespace: default}
spec:
  addresses: [192.0.2.50/32]
---
apiVersion: service.io/v1alpha1
kind: Policy
metadata: {name: behind-lb, namespace: default}
spec:
  clientGroupRefs: [behind-lb]
  blockListRefs: [ads]
  blockMode: nxdomain
`

// TestNodeProxyProtocolReachesClientGroups puts a load balancer on
// loopback (listeners.proxyProtocolFrom) in front of a whole node and
// sends queries over TCP, DoT and DoH (HTTP/1.1 and HTTP/2) with PROXY v2
// headers: the address in the header is what the identify stage matches
// (192.0.2.50 is in a ClientGroup whose Policy blocks, 192.0.2.51 is not),
// and a connection from the trusted peer without a header is refused.
func TestNodeProxyProtocolReachesClientGroups(t *testing.T) {
	pki := testpki.New(t)
	tn := startNode(t, nodetest.TLS(pki.CertFile, pki.KeyFile), nodetest.ProxyProtocolFrom("127.0.0.1/32"),
		nodetest.Objects(map[string]string{"lb.yaml": lbDocs}))
	// dialAs connects to a TCP listener and sends the PROXY v2 header of
	// client src first (none if src is empty).
	dialAs := func(ctx context.Context, target, src string) (net.Conn, error) {
		c, err := (&net.Dialer{Timeout: 3 * time.Second}).DialContext(ctx, "tcp", target)
		if err != nil || src == "" {
			return c, err
		}
		hdr := proxyproto.Append(nil, netip.MustParseAddrPort(src), netip.MustParseAddrPort(target), nil)
		if _, err := c.Write(hdr); err != nil {
			c.Close()
			return nil, err
		}
		return c, nil
	}
	tlsCfg := func(protos ...string) *tls.Config {
		return &tls.Config{ServerName: testpki.ServerName, RootCAs: pki.Pool, NextProtos: protos}
	}
	tcpAsk := func(src string, m *dns.Msg) (*dns.Msg, error) {
		c, err := dialAs(context.Background(), tn.DNSAddr("tcp"), src)
		if err != nil {
			return nil, err
		}
		defer c.Close()
		dc := &dns.Conn{Conn: c}
		_ = c.SetDeadline(time.Now().Add(3 * time.Second))
		if err := dc.WriteMsg(m); err != nil {
			return nil, err
		}
		return dc.ReadMsg()
	}
	dotAsk := func(src string, m *dns.Msg) (*dns.Msg, error) {
		c, err := dialAs(context.Background(), tn.DNSAddr("dot"), src)
		if err != nil {
			return nil, err
		}
		tc := tls.Client(c, tlsCfg("dot"))
		defer tc.Close()
		dc := &dns.Conn{Conn: tc}
		_ = tc.SetDeadline(time.Now().Add(3 * time.Second))
		if err := dc.WriteMsg(m); err != nil {
			return nil, err
		}
		return dc.ReadMsg()
	}
	dohAsk := func(proto string) func(string, *dns.Msg) (*dns.Msg, error) {
		return func(src string, m *dns.Msg) (*dns.Msg, error) {
			tr := &http.Transport{ForceAttemptHTTP2: proto == "h2", DialTLSContext: func(ctx context.Context, _, _ string) (net.Conn, error) {
				c, err := dialAs(ctx, tn.DNSAddr("doh"), src)
				if err != nil {
					return nil, err
				}
				tc := tls.Client(c, tlsCfg(proto))
				if err := tc.HandshakeContext(ctx); err != nil {
					c.Close()
					return nil, err
				}
				return tc, nil
			}}
			if proto != "h2" {
				tr.TLSNextProto = map[string]func(string, *tls.Conn) http.RoundTripper{}
			}
			defer tr.CloseIdleConnections()
			return postDNS(tr, "https://"+testpki.ServerName+"/dns-query", map[string]int{"h2": 2, "http/1.1": 1}[proto], m)
		}
	}
	kinds := []struct {
		name string
		ask  func(string, *dns.Msg) (*dns.Msg, error)
	}{
		{"tcp", tcpAsk}, {"dot", dotAsk}, {"doh-http1.1", dohAsk("http/1.1")}, {"doh-h2", dohAsk("h2")},
	}
	nodetest.Eventually(t, 10*time.Second, "192.0.2.50 blocked over TCP", func() bool {
		r, err := tcpAsk("192.0.2.50:4000", question("x.ads.example."))
		return err == nil && r.Rcode == dns.RcodeNameError
	})
	for _, k := range kinds {
		t.Run(k.name, func(t *testing.T) {
			r, err := k.ask("192.0.2.50:4000", question("x.ads.example."))
			if err != nil || r.Rcode != dns.RcodeNameError {
				t.Errorf("client 192.0.2.50 (in the group): %v %v, want NXDOMAIN (blocked)", r, err)
			}
			r, err = k.ask("192.0.2.51:4000", question("x.ads.example."))
			if err != nil || r.Rcode == dns.RcodeNameError {
				t.Errorf("client 192.0.2.51 (not in the group): %v %v, want not blocked", r, err)
			}
			if r, err := k.ask("", question("x.ads.example.")); err == nil {
				t.Errorf("the trusted peer without a header was answered: %v", r)
			}
		})
	}
}
