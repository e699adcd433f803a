package transport_test

import (
	"bytes"
	"context"
	"crypto/tls"
	"encoding/base64"
	"encoding/binary"
	"errors"
	"fmt"
	"io"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/miekg/dns"
	"github.com/quic-go/quic-go"
	"github.com/quic-go/quic-go/http3"

	"github.com/svcdns/svc/dataplane"
	"github.com/svcdns/svc/dataplane/transport"
	"github.com/svcdns/svc/test/proc"
	"github.com/svcdns/svc/test/testpki"
)

func run(t *testing.T, bin string, args ...string) string {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	out, err := exec.CommandContext(ctx, bin, args...).CombinedOutput()
	if err != nil {
		t.Fatalf("%s %s: %v\n%s", bin, strings.Join(args, " "), err, out)
	}
	return string(out)
}

// TestThirdPartyClients asks kdig and dig over every transport they speak.
func TestThirdPartyClients(t *testing.T) {
	st := newStack(t, stackOpts{})
	kdig, dig := tool(t, "kdig"), tool(t, "dig")
	port := func(k string) string { return fmt.Sprint(st.addr(k).Port()) }
	ca := st.pki.CAFile
	cases := []struct {
		name string
		bin  string
		args []string
		tr   dataplane.Transport
		id   string
	}{
		{"kdig/udp", kdig, []string{"-p", port("udp"), "+notcp"}, dataplane.TransportUDP, ""},
		{"kdig/tcp", kdig, []string{"-p", port("tcp"), "+tcp"}, dataplane.TransportTCP, ""},
		{"kdig/dot", kdig, []string{"-p", port("dot"), "+tls", "+tls-ca=" + ca, "+tls-hostname=" + serverName}, dataplane.TransportDoT, ""},
		{"kdig/dot-clientid", kdig, []string{"-p", port("dot"), "+tls", "+tls-ca=" + ca, "+tls-hostname=kdig1." + serverName, "+tls-sni=kdig1." + serverName}, dataplane.TransportDoT, "kdig1"},
		{"kdig/doh-post", kdig, []string{"-p", port("doh"), "+https=/dns-query", "+tls-ca=" + ca, "+tls-hostname=" + serverName}, dataplane.TransportDoH, ""},
		{"kdig/doh-get-clientid", kdig, []string{"-p", port("doh"), "+https=/dns-query/kdig2", "+https-get", "+tls-ca=" + ca, "+tls-hostname=" + serverName}, dataplane.TransportDoH, "kdig2"},
		{"kdig/doq-clientid", kdig, []string{"-p", port("doq"), "+tls-ca=" + ca, "+tls-hostname=kdig4." + serverName, "+tls-sni=kdig4." + serverName, "+quic"}, dataplane.TransportDoQ, "kdig4"},
		{"dig/udp", dig, []string{"-p", port("udp")}, dataplane.TransportUDP, ""},
		{"dig/tcp", dig, []string{"-p", port("tcp"), "+tcp"}, dataplane.TransportTCP, ""},
		{"dig/dot", dig, []string{"-p", port("dot"), "+tls", "+tls-ca=" + ca, "+tls-hostname=" + serverName}, dataplane.TransportDoT, ""},
		{"dig/doh-post", dig, []string{"-p", port("doh"), "+https=/dns-query", "+tls-ca=" + ca, "+tls-hostname=" + serverName}, dataplane.TransportDoH, ""},
		{"dig/doh-get-clientid", dig, []string{"-p", port("doh"), "+https-get=/dns-query/dig3", "+tls-ca=" + ca, "+tls-hostname=" + serverName}, dataplane.TransportDoH, "dig3"},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			retry := "+retry=0"
			if tc.bin == dig {
				retry = "+tries=1"
			}
			args := append([]string{"@127.0.0.1", retry, "+timeout=3"}, tc.args...)
			args = append(args, "www.example.com", "A")
			out := run(t, tc.bin, args...)
			if !strings.Contains(out, "192.0.2.1") || !strings.Contains(out, "NOERROR") {
				t.Fatalf("no answer:\n%s", out)
			}
			if tc.id != "" && !st.rec.seen(tc.tr, tc.id) {
				t.Errorf("client ID %q not passed to the pipeline", tc.id)
			}
		})
	}
}

func query(t testing.TB, id uint16) []byte {
	m := new(dns.Msg)
	m.SetQuestion("www.example.com.", dns.TypeA)
	m.Id = id
	b, err := m.Pack()
	if err != nil {
		t.Fatal(err)
	}
	return b
}

func checkAnswer(t testing.TB, b []byte) *dns.Msg {
	t.Helper()
	m := new(dns.Msg)
	if err := m.Unpack(b); err != nil {
		t.Fatalf("unpack: %v", err)
	}
	if len(m.Answer) != 1 || !strings.Contains(m.Answer[0].String(), "192.0.2.1") {
		t.Fatalf("unexpected answer: %v", m)
	}
	return m
}

// doqAsk sends one query on a new stream of conn.
func doqAsk(ctx context.Context, conn *quic.Conn, msg []byte) ([]byte, error) {
	st, err := conn.OpenStreamSync(ctx)
	if err != nil {
		return nil, err
	}
	_ = st.SetDeadline(time.Now().Add(3 * time.Second))
	if _, err := st.Write(binary.BigEndian.AppendUint16(nil, uint16(len(msg)))); err != nil {
		return nil, err
	}
	if _, err := st.Write(msg); err != nil {
		return nil, err
	}
	_ = st.Close()
	var lb [2]byte
	if _, err := io.ReadFull(st, lb[:]); err != nil {
		return nil, err
	}
	resp := make([]byte, binary.BigEndian.Uint16(lb[:]))
	if _, err := io.ReadFull(st, resp); err != nil {
		return nil, err
	}
	return resp, nil
}

// TestDoQ uses quic-go's client: answers on ID 0, client ID from the SNI,
// PROTOCOL_ERROR for a nonzero message ID.
func TestDoQ(t *testing.T) {
	st := newStack(t, stackOpts{})
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	tc := st.pki.ClientTLS("doq")
	tc.ServerName = "quic7." + serverName
	conn, err := quic.DialAddr(ctx, st.addr("doq").String(), tc, &quic.Config{})
	if err != nil {
		t.Fatal(err)
	}
	defer conn.CloseWithError(0, "")
	if conn.ConnectionState().TLS.NegotiatedProtocol != "doq" {
		t.Fatalf("ALPN %q", conn.ConnectionState().TLS.NegotiatedProtocol)
	}
	for range 3 {
		resp, err := doqAsk(ctx, conn, query(t, 0))
		if err != nil {
			t.Fatal(err)
		}
		if m := checkAnswer(t, resp); m.Id != 0 {
			t.Fatalf("id %d", m.Id)
		}
	}
	if !st.rec.seen(dataplane.TransportDoQ, "quic7") {
		t.Error("client ID from SNI not passed")
	}
	_, err = doqAsk(ctx, conn, query(t, 1234))
	var aerr *quic.ApplicationError
	if !errors.As(err, &aerr) || aerr.ErrorCode != quic.ApplicationErrorCode(transport.DoQProtocolError) {
		t.Fatalf("nonzero ID: got %v, want application error 0x2", err)
	}
}

// TestDoH3 uses quic-go's HTTP/3 client with net/http.
func TestDoH3(t *testing.T) {
	st := newStack(t, stackOpts{})
	rt := &http3.Transport{TLSClientConfig: st.pki.ClientTLS()}
	defer rt.Close()
	c := &http.Client{Transport: rt, Timeout: 5 * time.Second}
	base := fmt.Sprintf("https://%s:%d/dns-query", serverName, st.addr("doh3").Port())
	rt.Dial = func(ctx context.Context, _ string, tlsCfg *tls.Config, cfg *quic.Config) (*quic.Conn, error) {
		return quic.DialAddrEarly(ctx, st.addr("doh3").String(), tlsCfg, cfg)
	}
	resp, err := c.Get(base + "/h3id?dns=" + base64.RawURLEncoding.EncodeToString(query(t, 0)))
	if err != nil {
		t.Fatal(err)
	}
	body, _ := io.ReadAll(resp.Body)
	resp.Body.Close()
	if resp.StatusCode != 200 || resp.ProtoMajor != 3 {
		t.Fatalf("status %d proto %s", resp.StatusCode, resp.Proto)
	}
	checkAnswer(t, body)
	if !st.rec.seen(dataplane.TransportDoH3, "h3id") {
		t.Error("client ID from path not passed")
	}
	resp, err = c.Post(base, "application/dns-message", bytes.NewReader(query(t, 0)))
	if err != nil {
		t.Fatal(err)
	}
	body, _ = io.ReadAll(resp.Body)
	resp.Body.Close()
	checkAnswer(t, body)
}

// serviceTool finds a client that hack/install-dns-clients.sh builds.
func serviceTool(t *testing.T, name string) string {
	t.Helper()
	return proc.ServiceTool(t, name)
}

// TestQClient asks q, a Go DNS client with its own quic-go and HTTP/3
// stacks, over DoQ and DoH3 (and DoT and DoH over HTTP/2 for comparison).
// q has no CA flag: Go reads SSL_CERT_FILE, so the test CA is trusted
// without turning verification off. q sets the QUIC SNI to the server's
// host (an address here), so the DoQ client ID from the SNI is checked with
// kdig +quic in TestThirdPartyClients instead.
func TestQClient(t *testing.T) {
	st := newStack(t, stackOpts{})
	q := serviceTool(t, "q")
	port := func(k string) string { return fmt.Sprint(st.addr(k).Port()) }
	cases := []struct {
		name   string
		server string
		flags  []string
		sni    string
		tr     dataplane.Transport
		id     string
	}{
		{"doq", "quic://127.0.0.1:" + port("doq"), nil, serverName, dataplane.TransportDoQ, ""},
		{"doh3-get", "https://127.0.0.1:" + port("doh3") + "/dns-query/qid2", []string{"--http3"}, serverName, dataplane.TransportDoH3, "qid2"},
		{"doh3-post", "https://127.0.0.1:" + port("doh3") + "/dns-query", []string{"--http3", "--http-method=POST"}, serverName, dataplane.TransportDoH3, ""},
		{"doh2-get", "https://127.0.0.1:" + port("doh") + "/dns-query/qid3", []string{"--http2"}, serverName, dataplane.TransportDoH, "qid3"},
		{"dot", "tls://127.0.0.1:" + port("dot"), nil, serverName, dataplane.TransportDoT, ""},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			ctx, cancel := context.WithTimeout(context.Background(), 15*time.Second)
			defer cancel()
			args := append([]string{"@" + tc.server, "A", "www.example.com", "--tls-server-name=" + tc.sni,
				"--timeout=5s", "--format=json"}, tc.flags...)
			cmd := exec.CommandContext(ctx, q, args...)
			cmd.Env = append(os.Environ(), "SSL_CERT_FILE="+st.pki.CAFile, "SSL_CERT_DIR=/nonexistent")
			out, err := cmd.CombinedOutput()
			if err != nil {
				t.Fatalf("q %s: %v\n%s", strings.Join(args, " "), err, out)
			}
			if !strings.Contains(string(out), "192.0.2.1") {
				t.Fatalf("no answer from q:\n%s", out)
			}
			if tc.id != "" && !st.rec.seen(tc.tr, tc.id) {
				t.Errorf("client ID %q not passed to the pipeline", tc.id)
			}
			if !st.rec.seenTransport(tc.tr) {
				t.Errorf("no query reached the pipeline over %v", tc.tr)
			}
		})
	}
	// An untrusted certificate is refused: q really verifies.
	ctx, cancel := context.WithTimeout(context.Background(), 15*time.Second)
	defer cancel()
	cmd := exec.CommandContext(ctx, q, "@quic://127.0.0.1:"+port("doq"), "A", "www.example.com", "--tls-server-name="+serverName, "--timeout=3s")
	cmd.Env = append(os.Environ(), "SSL_CERT_FILE=/nonexistent", "SSL_CERT_DIR=/nonexistent")
	if out, err := cmd.CombinedOutput(); err == nil && strings.Contains(string(out), "192.0.2.1") {
		t.Fatalf("q accepted the test certificate without the test CA:\n%s", out)
	}
}

// TestDnsperf drives Debian's dnsperf 2.10, the load generator users and
// the issue measure DoT and DoH with, over every transport it speaks, with
// several queries in flight per connection: every query must be answered.
// Its DoH client takes at most one answer from each TLS record it reads,
// so this also holds the lean h2 server to one record per answer.
func TestDnsperf(t *testing.T) {
	st := newStack(t, stackOpts{})
	bin := tool(t, "dnsperf")
	data := filepath.Join(t.TempDir(), "queries.txt")
	if err := os.WriteFile(data, []byte("www.example.com A\nwww.example.com A\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	port := func(k string) string { return fmt.Sprint(st.addr(k).Port()) }
	uri := "doh-uri=https://127.0.0.1:" + port("doh") + "/dns-query"
	cases := []struct {
		name string
		args []string
	}{
		{"udp", []string{"-m", "udp", "-p", port("udp")}},
		{"tcp", []string{"-m", "tcp", "-p", port("tcp")}},
		{"dot", []string{"-m", "dot", "-p", port("dot")}},
		{"doh-get", []string{"-m", "doh", "-p", port("doh"), "-O", uri, "-O", "doh-method=GET"}},
		{"doh-post", []string{"-m", "doh", "-p", port("doh"), "-O", uri, "-O", "doh-method=POST"}},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
			defer cancel()
			args := append([]string{"-s", "127.0.0.1", "-d", data, "-c", "2", "-q", "16", "-n", "100", "-t", "3"}, tc.args...)
			out, err := exec.CommandContext(ctx, bin, args...).CombinedOutput()
			if err != nil {
				t.Fatalf("dnsperf %s: %v\n%s", strings.Join(args, " "), err, out)
			}
			s := string(out)
			if !strings.Contains(s, "Queries completed:    200 ") || !strings.Contains(s, "Queries lost:         0 ") {
				t.Fatalf("dnsperf did not get every answer:\n%s", s)
			}
		})
	}
}

// TestKeepaliveOption: dig +keepalive (edns-tcp-keepalive, RFC 7828) learns
// the idle timeout over TCP (the data plane's 10s) and DoT (the transports'
// 30s); over UDP the option is ignored.
func TestKeepaliveOption(t *testing.T) {
	st := newStack(t, stackOpts{})
	dig := tool(t, "dig")
	port := func(k string) string { return fmt.Sprint(st.addr(k).Port()) }
	for _, tc := range []struct {
		name string
		args []string
		want string
	}{
		{"tcp", []string{"-p", port("tcp"), "+tcp"}, "TCP KEEPALIVE: 10.0 secs"},
		{"dot", []string{"-p", port("dot"), "+tls", "+tls-ca=" + st.pki.CAFile, "+tls-hostname=" + serverName}, "TCP KEEPALIVE: 30.0 secs"},
		{"udp", []string{"-p", port("udp")}, ""},
	} {
		t.Run(tc.name, func(t *testing.T) {
			out := run(t, dig, append([]string{"@127.0.0.1", "+tries=1", "+timeout=3", "+keepalive"}, append(tc.args, "www.example.com", "A")...)...)
			if !strings.Contains(out, "192.0.2.1") {
				t.Fatalf("no answer:\n%s", out)
			}
			if tc.want == "" && strings.Contains(out, "KEEPALIVE") || tc.want != "" && !strings.Contains(out, tc.want) {
				t.Fatalf("want %q:\n%s", tc.want, out)
			}
		})
	}
}

// TestCurlDoH resolves through curl's DoH client (libcurl, HTTP/2 POST for
// A and AAAA), which applications embedding libcurl use: curl must try the
// address the server gave (www.example.com A 192.0.2.1; nothing listens
// there, so the transfer itself fails) and the queries must have arrived
// over DoH with the client ID in the path. curl checks the certificate
// against the test CA; without it the name does not resolve.
func TestCurlDoH(t *testing.T) {
	st := newStack(t, stackOpts{})
	bin := tool(t, "curl")
	doh := fmt.Sprintf("https://127.0.0.1:%d/dns-query/curl1", st.addr("doh").Port())
	curl := func(ca string) string {
		ctx, cancel := context.WithTimeout(context.Background(), 15*time.Second)
		defer cancel()
		// The transfer fails (nothing listens at 192.0.2.1): only the
		// resolution is checked.
		out, _ := exec.CommandContext(ctx, bin, "-sv", "--max-time", "5", "--connect-timeout", "1",
			"--cacert", ca, "--doh-url", doh, "http://www.example.com:9/").CombinedOutput()
		return string(out)
	}
	if out := curl(st.pki.CAFile); !strings.Contains(out, "Trying 192.0.2.1:9") {
		t.Fatalf("curl did not resolve www.example.com through DoH:\n%s", out)
	}
	if !st.rec.seen(dataplane.TransportDoH, "curl1") {
		t.Error("curl's queries did not arrive over DoH with client ID curl1")
	}
	other := testpki.New(t) // a CA that did not issue the server's certificate
	if out := curl(other.CAFile); strings.Contains(out, "192.0.2.1") || !strings.Contains(out, "SSL certificate problem") {
		t.Fatalf("curl without a CA that verifies the server: want a certificate error and no address:\n%s", out)
	}
}

// TestSNIClientIDFromCertificate: with no ClientIDDomain (the node's
// configuration), the certificate's wildcard name decides: kdig asking for
// kdig7.dns.test over DoT and kdig8.dns.test over DoQ (the certificate is
// for *.dns.test) sends client IDs kdig7 and kdig8; asking for dns.test,
// which the certificate names, sends none.
func TestSNIClientIDFromCertificate(t *testing.T) {
	st := newStack(t, stackOpts{transport: func(c *transport.Config) { c.ClientIDDomain = "" }})
	kdig := tool(t, "kdig")
	port := func(k string) string { return fmt.Sprint(st.addr(k).Port()) }
	ca := st.pki.CAFile
	for _, tc := range []struct {
		name, sni, id string
		tr            dataplane.Transport
		flags         []string
	}{
		{"dot", "kdig7." + serverName, "kdig7", dataplane.TransportDoT, []string{"-p", port("dot"), "+tls"}},
		{"doq", "kdig8." + serverName, "kdig8", dataplane.TransportDoQ, []string{"-p", port("doq")}},
		{"dot-plain", serverName, "", dataplane.TransportDoT, []string{"-p", port("dot"), "+tls"}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			before := st.rec.count(tc.tr)
			args := append([]string{"@127.0.0.1", "+retry=0", "+timeout=3"}, tc.flags...)
			args = append(args, "+tls-ca="+ca, "+tls-hostname="+tc.sni, "+tls-sni="+tc.sni)
			if tc.tr == dataplane.TransportDoQ {
				args = append(args, "+quic") // last: kdig 3.2 crashes on +tls-* after +quic
			}
			out := run(t, kdig, append(args, "www.example.com", "A")...)
			if !strings.Contains(out, "192.0.2.1") {
				t.Fatalf("no answer:\n%s", out)
			}
			ids := st.rec.idsSince(tc.tr, before)
			if want := []string{tc.id}; !slices.Equal(ids, want) {
				t.Errorf("client IDs %q, want %q", ids, want)
			}
		})
	}
}

// TestEDNSPadding asks kdig, which pads its queries over TLS, HTTPS and
// QUIC by default: every answer over DoT, DoH and DoQ is padded to a
// multiple of 468 bytes (RFC 8467 4.1) and shows a Padding option; a
// query sent without padding, and a padded query over plain UDP, get an
// answer as small as it is.
func TestEDNSPadding(t *testing.T) {
	st := newStack(t, stackOpts{})
	kdig := tool(t, "kdig")
	port := func(k string) string { return fmt.Sprint(st.addr(k).Port()) }
	tlsArgs := []string{"+tls-ca=" + st.pki.CAFile, "+tls-hostname=" + serverName}
	for _, tc := range []struct {
		name   string
		args   []string
		padded bool
	}{
		{"dot", append([]string{"-p", port("dot"), "+tls"}, tlsArgs...), true},
		{"doh", append([]string{"-p", port("doh"), "+https"}, tlsArgs...), true},
		{"doq", append(append([]string{"-p", port("doq")}, tlsArgs...), "+quic"), true},
		{"dot-unpadded-query", append([]string{"-p", port("dot"), "+tls", "+nopadding"}, tlsArgs...), false},
		{"udp-padded-query", []string{"-p", port("udp"), "+notcp", "+padding"}, false},
	} {
		t.Run(tc.name, func(t *testing.T) {
			args := append([]string{"@127.0.0.1", "+retry=0", "+timeout=3"}, tc.args...)
			out := run(t, kdig, append(args, "www.example.com", "A")...)
			if !strings.Contains(out, "192.0.2.1") {
				t.Fatalf("no answer:\n%s", out)
			}
			var size int
			for _, l := range strings.Split(out, "\n") {
				if _, err := fmt.Sscanf(l, ";; Received %d B", &size); err == nil {
					break
				}
			}
			if size == 0 {
				t.Fatalf("no size in kdig's output:\n%s", out)
			}
			if padded := strings.Contains(out, "PADDING:"); padded != tc.padded || tc.padded && size%468 != 0 {
				t.Errorf("answer of %d bytes, padding shown %v; want padded %v (to a multiple of 468)\n%s", size, padded, tc.padded, out)
			}
		})
	}
}

// TestQUICConnectionLimit: with MaxQUICConns 2, a DoQ or DoH3 listener
// holding two connections closes a third as soon as its handshake is done
// (DOQ_EXCESSIVE_LOAD, H3_EXCESSIVE_LOAD), and takes a new one once one of
// the two has gone.
func TestQUICConnectionLimit(t *testing.T) {
	st := newStack(t, stackOpts{transport: func(c *transport.Config) { c.MaxQUICConns = 2 }})
	t.Run("doq", func(t *testing.T) {
		dial := func() *quic.Conn {
			ctx, cancel := context.WithTimeout(context.Background(), 3*time.Second)
			defer cancel()
			c, err := quic.DialAddr(ctx, st.addr("doq").String(), st.pki.ClientTLS("doq"), nil)
			if err != nil {
				t.Fatal(err)
			}
			return c
		}
		ask := func(c *quic.Conn) error {
			ctx, cancel := context.WithTimeout(context.Background(), 3*time.Second)
			defer cancel()
			resp, err := doqAsk(ctx, c, query(t, 0))
			if err == nil {
				checkAnswer(t, resp)
			}
			return err
		}
		a, b := dial(), dial()
		for _, c := range []*quic.Conn{a, b} {
			if err := ask(c); err != nil {
				t.Fatalf("within the limit: %v", err)
			}
		}
		third := dial()
		var ae *quic.ApplicationError
		if err := ask(third); !errors.As(err, &ae) || ae.ErrorCode != quic.ApplicationErrorCode(transport.DoQExcessiveLoad) {
			t.Fatalf("third connection: %v, want DOQ_EXCESSIVE_LOAD", err)
		}
		_ = a.CloseWithError(0, "")
		deadline := time.Now().Add(3 * time.Second)
		for {
			c := dial()
			err := ask(c)
			_ = c.CloseWithError(0, "")
			if err == nil {
				break
			}
			if time.Now().After(deadline) {
				t.Fatalf("no room after a connection went: %v", err)
			}
			time.Sleep(50 * time.Millisecond)
		}
		_ = b.CloseWithError(0, "")
	})
	t.Run("doh3", func(t *testing.T) {
		url := fmt.Sprintf("https://%s:%d/dns-query?dns=%s", serverName, st.addr("doh3").Port(), base64.RawURLEncoding.EncodeToString(query(t, 0)))
		client := func() (*http3.Transport, *http.Client) {
			rt := &http3.Transport{TLSClientConfig: st.pki.ClientTLS(), Dial: func(ctx context.Context, _ string, tc *tls.Config, qc *quic.Config) (*quic.Conn, error) {
				return quic.DialAddrEarly(ctx, st.addr("doh3").String(), tc, qc)
			}}
			return rt, &http.Client{Transport: rt, Timeout: 3 * time.Second}
		}
		get := func(c *http.Client) error {
			resp, err := c.Get(url)
			if err != nil {
				return err
			}
			body, _ := io.ReadAll(resp.Body)
			resp.Body.Close()
			if resp.StatusCode != 200 {
				return fmt.Errorf("status %d", resp.StatusCode)
			}
			checkAnswer(t, body)
			return nil
		}
		rtA, a := client()
		rtB, b := client()
		defer rtB.Close()
		for _, c := range []*http.Client{a, b} {
			if err := get(c); err != nil {
				t.Fatalf("within the limit: %v", err)
			}
		}
		rtC, c := client()
		defer rtC.Close()
		var ae *quic.ApplicationError
		if err := get(c); !errors.As(err, &ae) || ae.ErrorCode != 0x0107 {
			t.Fatalf("third connection: %v, want H3_EXCESSIVE_LOAD", err)
		}
		rtA.Close()
		deadline := time.Now().Add(3 * time.Second)
		for {
			rt, c := client()
			err := get(c)
			rt.Close()
			if err == nil {
				break
			}
			if time.Now().After(deadline) {
				t.Fatalf("no room after a connection went: %v", err)
			}
			time.Sleep(50 * time.Millisecond)
		}
	})
}
