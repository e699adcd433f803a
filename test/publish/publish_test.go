// Package publish_test runs a whole node (SQLite store) that publishes
// record sets labelled service.io/publish to Debian's Knot over RFC 2136
// UPDATE signed with TSIG, and checks what Knot then answers, what the node
// answers, and what status.publications says.
package publish_test

import (
	"crypto/tls"
	"encoding/base64"
	"encoding/json"
	"fmt"
	"io"
	"net"
	"net/http"
	"os"
	"path/filepath"
	"slices"
	"sort"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/miekg/dns"

	"github.com/svcdns/svc/api/v1alpha1"
	"github.com/svcdns/svc/test/freeport"
	"github.com/svcdns/svc/test/nodetest"
	"github.com/svcdns/svc/test/refdns"
)

var (
	goodSecret  = base64.StdEncoding.EncodeToString([]byte("0123456789abcdef0123456789abcdef"))
	otherSecret = base64.StdEncoding.EncodeToString([]byte("fedcba9876543210fedcba9876543210"))
)

const (
	keyName        = "pub-key."
	bootstrapToken = "svc_abcdefghij12_AAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAA"
	wait           = 60 * time.Second // generous: the machine is shared
)

// knot is Knot DNS as the primary of pub.test, accepting UPDATE signed
// with pub-key.
type knot struct {
	addr string
	log  *refdns.Daemon
}

func startKnot(t *testing.T) *knot {
	t.Helper()
	refdns.Require(t, "/usr/sbin/knotd")
	dir := t.TempDir()
	zone := `$ORIGIN pub.test.
$TTL 300
@ SOA ns.pub.test. hostmaster.pub.test. 1 3600 600 86400 300
@ NS ns.pub.test.
ns A 127.0.0.1
`
	if err := os.WriteFile(filepath.Join(dir, "pub.test.zone"), []byte(zone), 0o644); err != nil {
		t.Fatal(err)
	}
	port := freeport.UDPTCP(t)
	conf := refdns.KnotConf(dir, port, "info", fmt.Sprintf(`key:
  - id: %[2]s
    algorithm: hmac-sha256
    secret: %[3]s
acl:
  - id: update
    key: %[2]s
    action: update
template:
  - id: default
    storage: "%[1]s"
    semantic-checks: off
zone:
  - domain: pub.test
    file: "%[1]s/pub.test.zone"
    acl: update
    zonefile-sync: -1
    journal-content: changes
`, dir, keyName, goodSecret))
	k := &knot{addr: fmt.Sprintf("127.0.0.1:%d", port), log: refdns.StartKnot(t, dir, conf)}
	nodetest.Eventually(t, wait, "knot serves pub.test", func() bool {
		r, err := exchange(k.addr, "pub.test.", dns.TypeSOA)
		return err == nil && r.Rcode == dns.RcodeSuccess && len(r.Answer) == 1
	})
	return k
}

func exchange(addr, name string, qtype uint16) (*dns.Msg, error) {
	m := new(dns.Msg)
	m.SetQuestion(dns.Fqdn(name), qtype)
	c := &dns.Client{Net: "tcp", Timeout: 2 * time.Second}
	r, _, err := c.Exchange(m, addr)
	return r, err
}

// answers are the records of name/qtype at addr, rdata only, sorted; nil
// when the server does not answer.
func answers(addr, name string, qtype uint16) []string {
	r, err := exchange(addr, name, qtype)
	if err != nil {
		return nil
	}
	out := []string{}
	for _, rr := range r.Answer {
		if rr.Header().Rrtype == qtype {
			out = append(out, strings.TrimPrefix(rr.String(), rr.Header().String()))
		}
	}
	sort.Strings(out)
	return out
}

// update sends a signed UPDATE to Knot as another writer would.
func (k *knot) update(t *testing.T, rr string) {
	t.Helper()
	r, err := dns.NewRR(rr)
	if err != nil {
		t.Fatal(err)
	}
	m := new(dns.Msg)
	m.SetUpdate("pub.test.")
	m.Insert([]dns.RR{r})
	m.SetTsig(keyName, dns.HmacSHA256, 300, time.Now().Unix())
	c := &dns.Client{Net: "tcp", Timeout: 5 * time.Second, TsigSecret: map[string]string{keyName: goodSecret}}
	resp, _, err := c.Exchange(m, k.addr)
	if err != nil || resp.Rcode != dns.RcodeSuccess {
		t.Fatalf("UPDATE %s at knot: %v %v", rr, err, resp)
	}
}

const zoneYAML = `apiVersion: service.io/v1alpha1
kind: DNSZone
metadata: {name: pub.test}
spec:
  defaultTTL: 300
  nameServers: [ns.pub.test.]
---
apiVersion: service.io/v1alpha1
kind: DNSRecordSet
metadata: {name: infra, namespace: default}
spec:
  zoneRef: {name: pub.test}
  endpoints:
    - {dnsName: ns, recordType: A, targets: [127.0.0.1]}
`

// webYAML is the published record set; endpoints in YAML flow form.
func webYAML(endpoints ...string) string {
	return `---
apiVersion: service.io/v1alpha1
kind: DNSRecordSet
metadata:
  name: web
  namespace: default
  labels: {service.io/publish: public-dns}
spec:
  zoneRef: {name: pub.test}
  endpoints:
    - ` + strings.Join(endpoints, "\n    - ") + "\n"
}

const otherSetsYAML = `---
apiVersion: service.io/v1alpha1
kind: DNSRecordSet
metadata:
  name: wrong-key
  namespace: default
  labels: {service.io/publish: wrong-key}
spec:
  zoneRef: {name: pub.test}
  endpoints:
    - {dnsName: wk, recordType: A, targets: [192.0.2.99]}
---
apiVersion: service.io/v1alpha1
kind: DNSRecordSet
metadata:
  name: typo
  namespace: default
  labels: {service.io/publish: public-dsn}
spec:
  zoneRef: {name: pub.test}
  endpoints:
    - {dnsName: typo, recordType: A, targets: [192.0.2.98]}
`

const silentYAML = `---
apiVersion: service.io/v1alpha1
kind: DNSRecordSet
metadata:
  name: hang
  namespace: default
  labels: {service.io/publish: silent}
spec:
  zoneRef: {name: pub.test}
  endpoints:
    - {dnsName: h, recordType: A, targets: [192.0.2.97]}
`

func TestPublishRFC2136ToKnot(t *testing.T) {
	k := startKnot(t)
	// Another writer's records: one at a name of its own, one of another
	// type at a name the node publishes.
	k.update(t, "other.pub.test. 300 IN A 203.0.113.5")
	k.update(t, "www.pub.test. 300 IN TXT \"kept\"")

	silent := silentServer(t)
	yaml := publishYAML(t, k, fmt.Sprintf("    - {name: silent, type: rfc2136, server: %q, zone: pub.test, timeout: 4s}\n", silent))
	web := webYAML(
		`{dnsName: www, recordType: A, recordTTL: 120, targets: [192.0.2.1, 192.0.2.2]}`,
		`{dnsName: public, recordType: A, targets: [198.51.100.7], service: {view: public}}`,
		`{dnsName: "@", recordType: MX, targets: ["10 mail.pub.test."]}`,
		`{dnsName: off, recordType: A, targets: [192.0.2.50], service: {disabled: true}}`,
	)
	n := nodetest.Start(t, nodetest.ReadyWithin(30*time.Second), nodetest.StopWithin(10*time.Second),
		nodetest.ExtraYAML(yaml), nodetest.APITLSOff(), nodetest.Env("SERVICE_BOOTSTRAP_TOKEN="+bootstrapToken),
		nodetest.Objects(map[string]string{"zone.yaml": zoneYAML + web + otherSetsYAML + silentYAML}))
	setObjects := func(yaml string) {
		t.Helper()
		if err := os.WriteFile(filepath.Join(n.ObjectsDir, "zone.yaml"), []byte(yaml), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	node := n.DNSAddr("tcp")

	t.Run("published and served", func(t *testing.T) {
		eventuallyEqual(t, "www A at knot", func() []string { return answers(k.addr, "www.pub.test", dns.TypeA) }, []string{"192.0.2.1", "192.0.2.2"})
		eventuallyEqual(t, "MX at knot", func() []string { return answers(k.addr, "pub.test", dns.TypeMX) }, []string{"10 mail.pub.test."})
		eventuallyEqual(t, "view: public at knot", func() []string { return answers(k.addr, "public.pub.test", dns.TypeA) }, []string{"198.51.100.7"})
		if r, err := exchange(k.addr, "www.pub.test.", dns.TypeA); err != nil || r.Answer[0].Header().Ttl != 120 {
			t.Errorf("www A TTL at knot: %v %v, want recordTTL 120", r, err)
		}
		if got := answers(k.addr, "off.pub.test", dns.TypeA); len(got) != 0 {
			t.Errorf("disabled endpoint published: %v", got)
		}
		// Served by the node too, except the view: public endpoint.
		eventuallyEqual(t, "www A at the node", func() []string { return answers(node, "www.pub.test", dns.TypeA) }, []string{"192.0.2.1", "192.0.2.2"})
		r, err := exchange(node, "public.pub.test.", dns.TypeA)
		if err != nil || !r.Authoritative || len(r.Answer) != 0 {
			t.Errorf("the node answers the view: public endpoint: %v %v", r, err)
		}
		// The other writer's TXT at www survives the A RRset's replacement.
		if got := answers(k.addr, "www.pub.test", dns.TypeTXT); !slices.Equal(got, []string{`"kept"`}) {
			t.Errorf("TXT of another writer at www: %v", got)
		}
		eventuallyPublication(t, n, "web", "Programmed", "3 RRsets in zone pub.test at "+k.addr)
		eventuallyPublication(t, n, "wrong-key", "Failed", "NOTAUTH: TSIG key unknown-key. refused by "+k.addr)
		// A primary that never answers: queued while the UPDATE waits,
		// then Failed with the timeout.
		eventuallyPublication(t, n, "hang", "Accepted", "1 of 1 RRsets queued for "+silent)
		eventuallyPublication(t, n, "hang", "Failed", "h.pub.test. A: no answer from "+silent+" within 4s")
		eventuallyPublication(t, n, "typo", "Failed", `unknown publication target "public-dsn": publish.targets configures public-dns, silent, wrong-key`)
		if got := answers(k.addr, "wk.pub.test", dns.TypeA); len(got) != 0 {
			t.Errorf("knot took an UPDATE signed with a key it does not know: %v", got)
		}
		if !n.Ready() {
			t.Error("node not ready")
		}
	})

	t.Run("a change follows", func(t *testing.T) {
		setObjects(zoneYAML + webYAML(
			`{dnsName: www, recordType: A, recordTTL: 120, targets: [192.0.2.3]}`,
			`{dnsName: "@", recordType: MX, targets: ["10 mail.pub.test."]}`,
			`{dnsName: api, recordType: CNAME, targets: [www.pub.test.]}`,
		) + otherSetsYAML + silentYAML)
		eventuallyEqual(t, "www A at knot", func() []string { return answers(k.addr, "www.pub.test", dns.TypeA) }, []string{"192.0.2.3"})
		eventuallyEqual(t, "api CNAME at knot", func() []string { return answers(k.addr, "api.pub.test", dns.TypeCNAME) }, []string{"www.pub.test."})
		eventuallyEqual(t, "removed endpoint at knot", func() []string { return answers(k.addr, "public.pub.test", dns.TypeA) }, []string{})
		eventuallyPublication(t, n, "web", "Programmed", "3 RRsets in zone pub.test at "+k.addr)
	})

	t.Run("a deletion removes only what was published", func(t *testing.T) {
		setObjects(zoneYAML + otherSetsYAML + silentYAML)
		eventuallyEqual(t, "www A at knot", func() []string { return answers(k.addr, "www.pub.test", dns.TypeA) }, []string{})
		eventuallyEqual(t, "MX at knot", func() []string { return answers(k.addr, "pub.test", dns.TypeMX) }, []string{})
		eventuallyEqual(t, "api CNAME at knot", func() []string { return answers(k.addr, "api.pub.test", dns.TypeCNAME) }, []string{})
		for _, c := range []struct {
			name  string
			qtype uint16
			want  []string
		}{
			{"other.pub.test", dns.TypeA, []string{"203.0.113.5"}},
			{"www.pub.test", dns.TypeTXT, []string{`"kept"`}},
			{"ns.pub.test", dns.TypeA, []string{"127.0.0.1"}},
			{"pub.test", dns.TypeNS, []string{"ns.pub.test."}},
		} {
			if got := answers(k.addr, c.name, c.qtype); !slices.Equal(got, c.want) {
				t.Errorf("%s %s at knot after the deletion: %v, want %v", c.name, dns.TypeToString[c.qtype], got, c.want)
			}
		}
	})
}

// publishYAML configures the targets public-dns (the key Knot knows) and
// wrong-key (a key Knot does not know), both at Knot.
func publishYAML(t *testing.T, k *knot, extraTargets ...string) string {
	t.Helper()
	dir := t.TempDir()
	good, other := filepath.Join(dir, "good.key"), filepath.Join(dir, "other.key")
	for f, s := range map[string]string{good: goodSecret, other: otherSecret} {
		if err := os.WriteFile(f, []byte(s+"\n"), 0o600); err != nil {
			t.Fatal(err)
		}
	}
	return fmt.Sprintf(`
tsigKeys:
  - {name: %[1]s, algorithm: hmac-sha256, secretFile: %[2]s}
  - {name: unknown-key., algorithm: hmac-sha256, secretFile: %[3]s}
publish:
  targets:
    - {name: public-dns, type: rfc2136, server: "%[4]s", zone: pub.test, tsigKey: %[1]s, timeout: 3s}
    - {name: wrong-key, type: rfc2136, server: "%[4]s", zone: pub.test, tsigKey: unknown-key., timeout: 3s}
`, keyName, good, other, k.addr) + strings.Join(extraTargets, "")
}

// silentServer accepts TCP connections and never answers: a primary that
// hangs. It returns the address.
func silentServer(t *testing.T) string {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	var conns []net.Conn
	var mu sync.Mutex
	done := make(chan struct{})
	go func() {
		defer close(done)
		for {
			c, err := ln.Accept()
			if err != nil {
				return
			}
			mu.Lock()
			conns = append(conns, c)
			mu.Unlock()
		}
	}()
	t.Cleanup(func() {
		ln.Close()
		<-done
		mu.Lock()
		for _, c := range conns {
			c.Close()
		}
		mu.Unlock()
	})
	return ln.Addr().String()
}

// TestPublishStateSurvivesRestart: a record set deleted while the node is
// down (its objects file edited) is removed from Knot after the restart,
// because the node remembers what it published (data dir publish/).
func TestPublishStateSurvivesRestart(t *testing.T) {
	k := startKnot(t)
	k.update(t, "other.pub.test. 300 IN A 203.0.113.5")
	yaml := publishYAML(t, k)
	dir := t.TempDir()
	dirs := nodetest.Dirs(filepath.Join(dir, "data"), filepath.Join(dir, "objects.d"))
	start := func(objects string) *nodetest.Node {
		return nodetest.Start(t, nodetest.ReadyWithin(30*time.Second), nodetest.StopWithin(10*time.Second), dirs,
			nodetest.ExtraYAML(yaml), nodetest.APITLSOff(), nodetest.Env("SERVICE_BOOTSTRAP_TOKEN="+bootstrapToken),
			nodetest.Objects(map[string]string{"zone.yaml": objects}))
	}
	n := start(zoneYAML + webYAML(`{dnsName: gone, recordType: A, targets: [192.0.2.77]}`))
	eventuallyEqual(t, "gone A at knot", func() []string { return answers(k.addr, "gone.pub.test", dns.TypeA) }, []string{"192.0.2.77"})
	eventuallyPublication(t, n, "web", "Programmed", "1 RRsets")
	n.Stop()

	n = start(zoneYAML)
	eventuallyEqual(t, "gone A at knot after the restart", func() []string { return answers(k.addr, "gone.pub.test", dns.TypeA) }, []string{})
	if got := answers(k.addr, "other.pub.test", dns.TypeA); !slices.Equal(got, []string{"203.0.113.5"}) {
		t.Errorf("another writer's record after the restart: %v", got)
	}
	if !n.Ready() {
		t.Error("node not ready")
	}
}

func eventuallyEqual(t *testing.T, what string, get func() []string, want []string) {
	t.Helper()
	var got []string
	deadline := time.Now().Add(wait)
	for time.Now().Before(deadline) {
		if got = get(); got != nil && slices.Equal(got, want) {
			return
		}
		time.Sleep(100 * time.Millisecond)
	}
	t.Fatalf("%s: %q, want %q", what, got, want)
}

// eventuallyPublication waits until the record set default/name shows the
// state, with a message holding msg.
func eventuallyPublication(t *testing.T, n *nodetest.Node, name, state, msg string) {
	t.Helper()
	var last []v1alpha1.Publication
	deadline := time.Now().Add(wait)
	for time.Now().Before(deadline) {
		last = publications(t, n, name)
		if len(last) == 1 && last[0].State == state && strings.Contains(last[0].Message, msg) {
			return
		}
		time.Sleep(100 * time.Millisecond)
	}
	t.Fatalf("status.publications of %s: %+v, want one %s with a message holding %q", name, last, state, msg)
}

func publications(t *testing.T, n *nodetest.Node, name string) []v1alpha1.Publication {
	t.Helper()
	client := &http.Client{Timeout: 10 * time.Second, Transport: &http.Transport{TLSClientConfig: &tls.Config{InsecureSkipVerify: true}}}
	req, err := http.NewRequest("GET", "http://"+n.Addrs.API+"/api/v1/objects/dnsrecordsets/default/"+name, nil)
	if err != nil {
		t.Fatal(err)
	}
	req.Header.Set("Authorization", "Bearer "+bootstrapToken)
	resp, err := client.Do(req)
	if err != nil {
		return nil
	}
	defer resp.Body.Close()
	b, _ := io.ReadAll(resp.Body)
	var rs v1alpha1.DNSRecordSet
	if resp.StatusCode != 200 || json.Unmarshal(b, &rs) != nil {
		return nil
	}
	return rs.Status.Publications
}
