package transport_test

import (
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/miekg/dns"

	"github.com/svcdns/svc/dataplane"
	"github.com/svcdns/svc/test/freeport"
)

// The resolvers home and office networks put between their clients and a
// DoT server: stubby (getdns' DoT stub, with padding and edns-tcp-keepalive)
// and Unbound forwarding over TLS (the usual Pi-hole + Unbound setup). Each
// forwards to the DoT listener, authenticating it by name against the test
// CA, and is asked over UDP; answers and NXDOMAIN must come back through
// DoT. With a name the certificate does not carry, nothing may come back.

func TestStubby(t *testing.T) {
	st := newStack(t, stackOpts{})
	bin := tool(t, "stubby")
	p, addr := startStubby(t, st, bin, serverName)
	checkForwarder(t, st, addr, p)
	p, addr = startStubby(t, st, bin, "other.test")
	checkRefusesUnverified(t, addr, p)
}

func startStubby(t *testing.T, st *stack, bin, authName string) (*process, string) {
	port := freeport.UDPTCP(t)
	conf := fmt.Sprintf(`resolution_type: GETDNS_RESOLUTION_STUB
dns_transport_list: [GETDNS_TRANSPORT_TLS]
tls_authentication: GETDNS_AUTHENTICATION_REQUIRED
tls_query_padding_blocksize: 128
idle_timeout: 10000
round_robin_upstreams: 0
listen_addresses: [127.0.0.1@%d]
tls_ca_file: %q
upstream_recursive_servers:
  - address_data: 127.0.0.1
    tls_port: %d
    tls_auth_name: %q
`, port, st.pki.CAFile, st.addr("dot").Port(), authName)
	path := filepath.Join(t.TempDir(), "stubby.yml")
	if err := os.WriteFile(path, []byte(conf), 0o600); err != nil {
		t.Fatal(err)
	}
	return startProcess(t, bin, "-C", path, "-l"), fmt.Sprintf("127.0.0.1:%d", port)
}

func TestUnboundForwardsOverTLS(t *testing.T) {
	st := newStack(t, stackOpts{})
	bin := tool(t, "unbound")
	p, addr := startUnbound(t, st, bin, serverName)
	checkForwarder(t, st, addr, p)
	p, addr = startUnbound(t, st, bin, "other.test")
	checkRefusesUnverified(t, addr, p)
}

func startUnbound(t *testing.T, st *stack, bin, authName string) (*process, string) {
	port := freeport.UDPTCP(t)
	dir := t.TempDir()
	conf := fmt.Sprintf(`server:
  interface: 127.0.0.1
  port: %d
  do-daemonize: no
  use-syslog: no
  logfile: ""
  verbosity: 1
  do-not-query-localhost: no
  username: ""
  chroot: ""
  directory: %q
  pidfile: ""
  do-ip6: no
  access-control: 127.0.0.0/8 allow
  module-config: "iterator"
  tls-cert-bundle: %q
forward-zone:
  name: "."
  forward-tls-upstream: yes
  forward-addr: 127.0.0.1@%d#%s
`, port, dir, st.pki.CAFile, st.addr("dot").Port(), authName)
	path := filepath.Join(dir, "unbound.conf")
	if err := os.WriteFile(path, []byte(conf), 0o600); err != nil {
		t.Fatal(err)
	}
	return startProcess(t, bin, "-d", "-c", path), fmt.Sprintf("127.0.0.1:%d", port)
}

// checkRefusesUnverified: a forwarder told to expect another name answers
// SERVFAIL (which also shows it is up and asking): nothing over DoT.
func checkRefusesUnverified(t *testing.T, addr string, p *process) {
	t.Helper()
	m := new(dns.Msg)
	m.SetQuestion("www.example.com.", dns.TypeA)
	c := &dns.Client{Timeout: 3 * time.Second}
	var r *dns.Msg
	var err error
	for deadline := time.Now().Add(10 * time.Second); time.Now().Before(deadline); time.Sleep(200 * time.Millisecond) {
		if r, _, err = c.Exchange(m, addr); err == nil {
			break
		}
	}
	if err != nil || r.Rcode != dns.RcodeServerFailure || len(r.Answer) > 0 {
		t.Fatalf("through a DoT server whose certificate does not name it: %v %v, want SERVFAIL\n%s", r, err, p.Log())
	}
}

// checkForwarder asks a forwarder in front of the DoT listener for a name
// the zone has and one it does not.
func checkForwarder(t *testing.T, st *stack, addr string, p *process) {
	t.Helper()
	r, err := askFromUntilAnswered("udp", "127.0.0.1", addr, "www.example.com.", 10*time.Second)
	if err != nil || r.Rcode != dns.RcodeSuccess || len(r.Answer) != 1 || !strings.Contains(r.Answer[0].String(), "192.0.2.1") {
		t.Fatalf("through %s: %v %v\n%s", addr, r, err, p.Log())
	}
	if !st.rec.seenTransport(dataplane.TransportDoT) {
		t.Fatalf("the answer did not come over DoT\n%s", p.Log())
	}
	r, err = askFromUntilAnswered("udp", "127.0.0.1", addr, "nosuch.example.com.", 5*time.Second)
	if err != nil || r.Rcode != dns.RcodeNameError {
		t.Fatalf("nosuch.example.com through %s: %v %v\n%s", addr, r, err, p.Log())
	}
}
