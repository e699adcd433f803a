package xfr_test

import (
	"crypto/tls"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/miekg/dns"

	"github.com/svcdns/svc/test/freeport"
	"github.com/svcdns/svc/test/nodetest"
	"github.com/svcdns/svc/test/refdns"
)

// secondary is NSD or Knot configured as a secondary of the primary.
type secondary struct {
	name string
	addr string // 127.0.0.1:port
	log  *refdns.Daemon
}

func startNSD(t *testing.T, port int, primaryTCP, secret string) *secondary {
	t.Helper()
	refdns.Require(t, "/usr/sbin/nsd")
	dir := t.TempDir()
	ph, pp := hostPort(primaryTCP)
	conf := refdns.NSDConf(dir, port, 2, []string{`logfile: ""`}, fmt.Sprintf(`key:
	name: %[4]s
	algorithm: hmac-sha256
	secret: "%[5]s"
zone:
	name: example.test
	zonefile: "%[1]s/example.test.zone"
	allow-notify: 127.0.0.1 %[4]s
	request-xfr: %[2]s@%[3]s %[4]s
`, dir, ph, pp, keyName, secret))
	cf := filepath.Join(dir, "nsd.conf")
	if err := os.WriteFile(cf, []byte(conf), 0o644); err != nil {
		t.Fatal(err)
	}
	l := refdns.Start(t, "/usr/sbin/nsd", "-d", "-c", cf)
	return &secondary{name: "nsd", addr: fmt.Sprintf("127.0.0.1:%d", port), log: l}
}

func startKnot(t *testing.T, port int, primaryTCP, secret string) *secondary {
	t.Helper()
	return startKnotFor(t, "example.test", port, primaryTCP, secret)
}

// startKnotFor runs Knot as a secondary of zone.
func startKnotFor(t *testing.T, zone string, port int, primaryTCP, secret string) *secondary {
	t.Helper()
	refdns.Require(t, "/usr/sbin/knotd")
	dir := t.TempDir()
	ph, pp := hostPort(primaryTCP)
	conf := refdns.KnotConf(dir, port, "info", fmt.Sprintf(`key:
  - id: %[4]s
    algorithm: hmac-sha256
    secret: %[5]s
remote:
  - id: primary
    address: %[2]s@%[3]s
    key: %[4]s
acl:
  - id: notify-from-primary
    address: 127.0.0.1
    key: %[4]s
    action: notify
template:
  - id: default
    storage: "%[1]s"
    semantic-checks: off
zone:
  - domain: %[6]s
    file: "%[1]s/%[6]s.zone"
    master: primary
    acl: notify-from-primary
    zonefile-sync: -1
    journal-content: changes
`, dir, ph, pp, keyName, secret, zone))
	l := refdns.StartKnot(t, dir, conf)
	return &secondary{name: "knot", addr: fmt.Sprintf("127.0.0.1:%d", port), log: l}
}

// serialOf asks a server for example.test's SOA serial over UDP; 0 when it
// has none.
func serialOf(addr string) uint32 { return serialOfZone(addr, "example.test.") }

// serialOfZone asks a server for zone's SOA serial over UDP; 0 when it has
// none.
func serialOfZone(addr, zone string) uint32 {
	c := &dns.Client{Timeout: 500 * time.Millisecond}
	m := new(dns.Msg)
	m.SetQuestion(dns.Fqdn(zone), dns.TypeSOA)
	r, _, err := c.Exchange(m, addr)
	if err != nil || r.Rcode != dns.RcodeSuccess || len(r.Answer) != 1 {
		return 0
	}
	if soa, ok := r.Answer[0].(*dns.SOA); ok {
		return soa.Serial
	}
	return 0
}

// compareNames is every name of the test zone plus names that do not
// exist, a wildcard match and names at and below the delegation.
var compareNames = []string{
	"example.test.", "ns1.example.test.", "ns2.example.test.", "www.example.test.", "mail.example.test.",
	"alias.example.test.", "x.wild.example.test.", "*.wild.example.test.", "wild.example.test.",
	"sub.example.test.", "ns.sub.example.test.", "host.sub.example.test.", "txt.example.test.",
	"new.example.test.", "nothere.example.test.", "a.b.nothere.example.test.",
}

var compareTypes = []uint16{dns.TypeSOA, dns.TypeNS, dns.TypeA, dns.TypeAAAA, dns.TypeMX, dns.TypeTXT, dns.TypeCNAME}

// render is an answer order-independently: rcode, AA and the answer and
// authority sections (additional sections differ with minimal-responses).
func render(r *dns.Msg) string {
	sec := func(rrs []dns.RR) string {
		var out []string
		for _, rr := range rrs {
			out = append(out, strings.ToLower(rr.String()))
		}
		slices.Sort(out)
		return strings.Join(out, " | ")
	}
	return fmt.Sprintf("%s aa=%v an=[%s] ns=[%s]", dns.RcodeToString[r.Rcode], r.Authoritative, sec(r.Answer), sec(r.Ns))
}

// compareAnswers queries the primary and the secondary for every name and
// type and fails on the first difference; it returns how many it compared.
func compareAnswers(t *testing.T, primary, sec string, what string) int {
	t.Helper()
	c := &dns.Client{Timeout: 2 * time.Second}
	n := 0
	for _, name := range compareNames {
		for _, qt := range compareTypes {
			m := new(dns.Msg)
			m.SetQuestion(name, qt)
			m.RecursionDesired = false
			a, _, err := c.Exchange(m, primary)
			if err != nil {
				t.Fatalf("primary %s %s: %v", name, dns.TypeToString[qt], err)
			}
			b, _, err := c.Exchange(m, sec)
			if err != nil {
				t.Fatalf("%s %s %s: %v", what, name, dns.TypeToString[qt], err)
			}
			if ra, rb := render(a), render(b); ra != rb {
				t.Errorf("%s %s differs:\n primary: %s\n %s: %s", name, dns.TypeToString[qt], ra, what, rb)
			}
			n++
		}
	}
	return n
}

// TestSecondariesNSDAndKnot: NSD and Knot, secondaries of a node with TSIG
// hmac-sha256, pull the zone (AXFR), answer every name as the node does,
// receive NOTIFY when a record changes, pull IXFR and answer the new
// content; a Knot with a wrong secret is refused and logs it.
func TestSecondariesNSDAndKnot(t *testing.T) {
	nsdPort, knotPort, badPort := freeport.UDPTCP(t), freeport.UDPTCP(t), freeport.UDPTCP(t)
	p := startPrimary(t, fmt.Sprintf(`
notify:
  timeout: 500ms
  retries: 3
  targets:
    - {zone: example.test, addresses: ["127.0.0.1:%d", "127.0.0.1:%d"]}
`, nsdPort, knotPort))
	tcp, udp := p.DNSAddr("tcp"), p.DNSAddr("udp")
	serial := p.soaSerial(t)

	nsd := startNSD(t, nsdPort, tcp, goodSecret)
	knot := startKnot(t, knotPort, tcp, goodSecret)
	start := time.Now()
	for _, s := range []*secondary{nsd, knot} {
		nodetest.Eventually(t, 20*time.Second, s.name+" serves the zone after AXFR", func() bool { return serialOf(s.addr) == serial })
		t.Logf("%s has serial %d after %s", s.name, serial, time.Since(start).Round(time.Millisecond))
	}
	if !p.Log.Contains("result=axfr") {
		t.Fatalf("no AXFR in the node's log")
	}
	for _, s := range []*secondary{nsd, knot} {
		n := compareAnswers(t, udp, s.addr, s.name)
		t.Logf("%s answers %d questions as the node does", s.name, n)
	}

	// A record change: the node's serial grows, NOTIFY goes out, both pull
	// IXFR (the journal holds the change) well before any SOA refresh.
	p.setZone(t, zoneYAML("two", `{dnsName: new.example.test, recordType: A, targets: [192.0.2.77]}`))
	nodetest.Eventually(t, 10*time.Second, "new serial served", func() bool { return p.soaSerial(t) != serial })
	next := p.soaSerial(t)
	changed := time.Now()
	for _, s := range []*secondary{nsd, knot} {
		nodetest.Eventually(t, 15*time.Second, s.name+" has the new serial after NOTIFY", func() bool { return serialOf(s.addr) == next })
		t.Logf("%s has serial %d %s after the change", s.name, next, time.Since(changed).Round(time.Millisecond))
	}
	nodetest.Eventually(t, 5*time.Second, "two IXFR answered from the journal", func() bool {
		return metric(t, p, `service_xfr_total{result="ixfr",type="ixfr",zone="example.test."}`) >= 2
	})
	nodetest.Eventually(t, 5*time.Second, "NOTIFY answered NOERROR by NSD and Knot", func() bool {
		return metric(t, p, `service_notify_sent_total{result="NOERROR",zone="example.test."}`) >= 2
	})
	if !knot.log.Contains("notify, incoming") {
		t.Errorf("knot did not log the NOTIFY")
	}
	if !knot.log.Contains("IXFR, incoming") {
		t.Errorf("knot did not log an IXFR")
	}
	if !strings.Contains(strings.ToLower(nsd.log.Log()), "notify") {
		t.Errorf("nsd did not log the NOTIFY")
	}
	for _, s := range []*secondary{nsd, knot} {
		n := compareAnswers(t, udp, s.addr, s.name)
		t.Logf("%s answers %d questions as the node does after the IXFR", s.name, n)
	}

	// POST /zones/{zone}/notify says what each secondary answered.
	code, body := apiCall(t, p, "POST", "/zones/example.test/notify")
	var res struct {
		Serial int64 `json:"serial"`
		Sent   []struct {
			Target, Key, Rcode string
			Attempts           int
		} `json:"sent"`
	}
	if err := json.Unmarshal([]byte(body), &res); err != nil || code != http.StatusAccepted {
		t.Fatalf("notify: %d %s (%v)", code, body, err)
	}
	if res.Serial != int64(next) || len(res.Sent) != 2 {
		t.Fatalf("notify answered %s, want serial %d sent to 2 targets", body, next)
	}
	for _, s := range res.Sent {
		if s.Rcode != "NOERROR" || s.Key != keyName+"." {
			t.Fatalf("notify target %+v, want NOERROR signed with %s", s, keyName)
		}
	}
	t.Logf("POST /zones/example.test/notify: %s", body)
	nodetest.Eventually(t, 5*time.Second, "the NOTIFY is in the audit trail with each answer", func() bool {
		_, audit := apiCall(t, p, "GET", "/audit")
		return strings.Contains(audit, `"notify"`) && strings.Contains(audit, fmt.Sprintf("serial %d: 127.0.0.1:%d NOERROR", next, nsdPort))
	})

	// A secondary with the wrong secret gets nothing and says why.
	bad := startKnot(t, badPort, tcp, badSecret)
	nodetest.Eventually(t, 15*time.Second, "knot with a wrong secret logs the refusal", func() bool {
		l := bad.log.Log()
		return strings.Contains(l, "BADSIG") || strings.Contains(l, "TSIG") || strings.Contains(l, "NOTAUTH")
	})
	if serialOf(bad.addr) != 0 {
		t.Fatalf("knot with a wrong secret serves the zone")
	}
	if !p.Log.Contains("BADSIG") {
		t.Fatalf("the node did not log BADSIG")
	}
}

// metric reads one series from the node's metrics listener (0 if absent).
func metric(t *testing.T, p *primary, series string) float64 {
	t.Helper()
	resp, err := http.Get("http://" + p.Addrs.Metrics + "/metrics")
	if err != nil {
		t.Fatalf("metrics: %v", err)
	}
	defer resp.Body.Close()
	b, _ := io.ReadAll(resp.Body)
	for _, line := range strings.Split(string(b), "\n") {
		if rest, ok := strings.CutPrefix(line, series+" "); ok {
			v, _ := strconv.ParseFloat(strings.TrimSpace(rest), 64)
			return v
		}
	}
	return 0
}

// apiCall calls the node's API with the bootstrap token.
func apiCall(t *testing.T, p *primary, method, path string) (int, string) {
	t.Helper()
	client := &http.Client{Timeout: 10 * time.Second, Transport: &http.Transport{TLSClientConfig: &tls.Config{InsecureSkipVerify: true}}}
	req, err := http.NewRequest(method, "https://"+p.Addrs.API+"/api/v1"+path, nil)
	if err != nil {
		t.Fatal(err)
	}
	req.Header.Set("Authorization", "Bearer "+bootstrapToken)
	resp, err := client.Do(req)
	if err != nil {
		t.Fatalf("%s %s: %v", method, path, err)
	}
	defer resp.Body.Close()
	b, _ := io.ReadAll(resp.Body)
	return resp.StatusCode, string(b)
}
