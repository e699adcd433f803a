// Package xfr_test runs a whole node as the primary of a zone and real
// clients and secondaries from Debian against it: kdig and dig (AXFR and
// IXFR with TSIG, over TCP and DoT), NSD and Knot (secondaries that
// receive NOTIFY and pull AXFR then IXFR).
package xfr_test

import (
	"encoding/base64"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/miekg/dns"

	"github.com/svcdns/svc/test/nodetest"
	"github.com/svcdns/svc/test/testpki"
)

// The key the secondaries share with the primary, and one nobody knows.
var (
	goodSecret = base64.StdEncoding.EncodeToString([]byte("0123456789abcdef0123456789abcdef"))
	badSecret  = base64.StdEncoding.EncodeToString([]byte("fedcba9876543210fedcba9876543210"))
)

const keyName = "xfr-key"

// zoneYAML is the test zone: apex NS with glue, a delegation, a wildcard,
// several types; extra endpoints are appended in YAML flow form.
func zoneYAML(serialNote string, extra ...string) string {
	var b strings.Builder
	fmt.Fprintf(&b, `apiVersion: service.io/v1alpha1
kind: DNSZone
metadata: {name: example.test}
spec:
  defaultTTL: 300
  nameServers: [ns1.example.test., ns2.example.test.]
  policy:
    transferTSIGKeyRefs: [%s]
---
apiVersion: service.io/v1alpha1
kind: DNSRecordSet
metadata: {name: hosts, namespace: default}
spec:
  zoneRef: {name: example.test}
  endpoints:
    - {dnsName: ns1.example.test, recordType: A, targets: [192.0.2.53]}
    - {dnsName: ns2.example.test, recordType: A, targets: [192.0.2.54]}
    - {dnsName: www.example.test, recordType: A, targets: [192.0.2.1, 192.0.2.2]}
    - {dnsName: www.example.test, recordType: AAAA, targets: ["2001:db8::1"]}
    - {dnsName: example.test, recordType: MX, targets: ["10 mail.example.test."]}
    - {dnsName: mail.example.test, recordType: A, targets: [192.0.2.25]}
    - {dnsName: alias.example.test, recordType: CNAME, targets: [www.example.test.]}
    - {dnsName: "*.wild.example.test", recordType: A, targets: [192.0.2.50]}
    - {dnsName: sub.example.test, recordType: NS, targets: [ns.sub.example.test.]}
    - {dnsName: ns.sub.example.test, recordType: A, targets: [192.0.2.100]}
    - {dnsName: txt.example.test, recordType: TXT, targets: ["note %s"]}
`, keyName, serialNote)
	for _, e := range extra {
		b.WriteString("    - " + e + "\n")
	}
	return b.String()
}

// primary is a node serving example.test with the transfer key.
type primary struct {
	*nodetest.Node
	pki *testpki.PKI
}

// startPrimary runs a node with tsigKeys, the test zone and extra YAML
// (the notify section).
func startPrimary(t *testing.T, extraYAML string) *primary {
	t.Helper()
	dir := t.TempDir()
	secretFile := filepath.Join(dir, "xfr.key")
	if err := os.WriteFile(secretFile, []byte(goodSecret+"\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	pki := testpki.New(t)
	yaml := fmt.Sprintf(`
tsigKeys:
  - {name: %s, algorithm: hmac-sha256, secretFile: %s}
%s`, keyName, secretFile, extraYAML)
	n := nodetest.Start(t, nodetest.ReadyWithin(30*time.Second), nodetest.StopWithin(10*time.Second),
		nodetest.TLS(pki.CertFile, pki.KeyFile), nodetest.ExtraYAML(yaml),
		nodetest.Env("SERVICE_BOOTSTRAP_TOKEN="+bootstrapToken),
		nodetest.Objects(map[string]string{"zone.yaml": zoneYAML("one")}))
	p := &primary{Node: n, pki: pki}
	nodetest.Eventually(t, 10*time.Second, "zone served", func() bool {
		r, err := n.Exchange("udp", time.Second, "www.example.test", dns.TypeA)
		return err == nil && r.Authoritative && len(r.Answer) == 2
	})
	return p
}

// setZone rewrites the zone file in the objects dir (the node follows it).
func (p *primary) setZone(t *testing.T, yaml string) {
	t.Helper()
	if err := os.WriteFile(filepath.Join(p.ObjectsDir, "zone.yaml"), []byte(yaml), 0o644); err != nil {
		t.Fatal(err)
	}
}

// soaSerial asks the primary for the zone's serial over UDP.
func (p *primary) soaSerial(t *testing.T) uint32 {
	t.Helper()
	r := p.Query(t, "udp", "example.test", dns.TypeSOA)
	if len(r.Answer) != 1 {
		t.Fatalf("SOA answer: %v", r)
	}
	return r.Answer[0].(*dns.SOA).Serial
}

const bootstrapToken = "svc_abcdefghij12_AAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAA"

// kdig runs kdig with args and returns its output; it fails the test when
// kdig cannot run at all (a DNS error is in the output).
func kdig(t *testing.T, args ...string) string {
	t.Helper()
	cmd := exec.Command("kdig", args...)
	out, err := cmd.CombinedOutput()
	if err != nil && len(out) == 0 {
		t.Fatalf("kdig %v: %v", args, err)
	}
	return string(out)
}

// hostPort splits "127.0.0.1:5353" for kdig's @host -p port.
func hostPort(addr string) (string, string) {
	i := strings.LastIndexByte(addr, ':')
	return addr[:i], addr[i+1:]
}
