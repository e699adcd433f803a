// Package externaldns_test runs the real external-dns (built by
// hack/build-external-dns.sh) in webhook mode against a node's external-dns
// webhook provider, with DNSEndpoint objects in a real kube-apiserver as
// its source, and checks what DNS answers.
package externaldns_test

import (
	"context"
	"fmt"
	"io"
	"net"
	"net/http"
	"os"
	"path/filepath"
	"regexp"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/miekg/dns"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/envtest"

	"github.com/svcdns/svc/test/kube/kubeenv"
	"github.com/svcdns/svc/test/nodetest"
	"github.com/svcdns/svc/test/proc"
)

var (
	env     *kubeenv.Env
	envErr  error
	envOnce sync.Once
)

// TestMain stops the control plane if a test started one.
func TestMain(m *testing.M) {
	code := m.Run()
	if env != nil {
		if err := env.Stop(); err != nil {
			fmt.Fprintln(os.Stderr, "stop envtest:", err)
		}
	}
	os.Exit(code)
}

// needEnv starts the control plane (a real kube-apiserver and etcd) with
// external-dns's DNSEndpoint CRD, once per package, for the tests that need
// it; without the envtest binaries the test is skipped.
func needEnv(t *testing.T) *kubeenv.Env {
	t.Helper()
	if reason := kubeenv.SkipReason(); reason != "" {
		t.Skip(reason)
	}
	envOnce.Do(func() {
		if env, envErr = kubeenv.Start(); envErr != nil {
			return
		}
		// external-dns's own CRD, from its module at the pinned version.
		if _, envErr = envtest.InstallCRDs(env.Config, envtest.CRDInstallOptions{Paths: []string{"testdata/dnsendpoints.externaldns.k8s.io.yaml"}, ErrorIfPathMissing: true}); envErr != nil {
			return
		}
		envErr = env.Namespaces(context.Background(), "apps", "team-b")
	})
	if envErr != nil {
		t.Fatal(envErr)
	}
	return env
}

// The node: zone example.test, records of another manager (the objects
// directory) in the same zone and namespace, one of them published only
// (view: public), and the webhook on a loopback port.
func startNode(t *testing.T) (*nodetest.Node, string) {
	t.Helper()
	n := nodetest.Start(t,
		nodetest.Objects(map[string]string{"zone.yaml": `
apiVersion: service.io/v1alpha1
kind: DNSZone
metadata: {name: example.test}
spec: {defaultTTL: 60}
---
apiVersion: service.io/v1alpha1
kind: DNSRecordSet
metadata: {name: by-hand, namespace: default}
spec:
  zoneRef: {name: example.test}
  endpoints:
    - {dnsName: manual.example.test, recordType: A, targets: [192.0.2.99]}
    - {dnsName: pub.example.test, recordType: A, targets: [198.51.100.1], service: {view: public}}
`}),
		nodetest.ExtraYAML(`
externalDNS:
  webhook:
    enabled: true
    address: 127.0.0.1:0
    healthAddress: 127.0.0.1:0
    zones: [example.test]
`))
	if n.Addrs.ExternalDNS == "" || n.Addrs.ExternalDNSHealth == "" {
		t.Fatalf("webhook listeners %q and %q: want both", n.Addrs.ExternalDNS, n.Addrs.ExternalDNSHealth)
	}
	resp, err := http.Get("http://" + n.Addrs.ExternalDNSHealth + "/healthz")
	if err != nil {
		t.Fatal(err)
	}
	resp.Body.Close()
	if resp.StatusCode != 200 {
		t.Fatalf("webhook /healthz: %d", resp.StatusCode)
	}
	nodetest.Eventually(t, 10*time.Second, "zone served", func() bool {
		return len(n.Query(t, "udp", "manual.example.test.", dns.TypeA).Answer) == 1
	})
	return n, "http://" + n.Addrs.ExternalDNS
}

var managedTypes = []string{"A", "AAAA", "CNAME", "TXT", "MX", "NS", "CAA"}

// run runs external-dns once (one sync loop) and returns its log.
func run(t *testing.T, url, kubeconfig, namespace, owner string, extra ...string) string {
	t.Helper()
	args := []string{
		"--source=crd", "--crd-source-apiversion=externaldns.k8s.io/v1alpha1", "--crd-source-kind=DNSEndpoint",
		"--namespace=" + namespace,
		"--provider=webhook", "--webhook-provider-url=" + url,
		// The prefix keeps the ownership records of apex records inside
		// the zone (docs/external-dns.md).
		"--registry=txt", "--txt-owner-id=" + owner, "--txt-prefix=_extdns-%{record_type}.",
		"--kubeconfig=" + kubeconfig, "--metrics-address=127.0.0.1:0",
		"--once", "--log-level=debug",
	}
	for _, ty := range managedTypes {
		args = append(args, "--managed-record-types="+ty)
	}
	args = append(args, extra...)
	start := time.Now()
	r := proc.Run(t, os.Environ(), "", proc.ServiceTool(t, "external-dns"), args...)
	log := r.Stdout + r.Stderr
	t.Logf("external-dns (owner %s) ran %s", owner, time.Since(start).Round(time.Millisecond))
	if r.Code != 0 || strings.Contains(log, "level=fatal") || strings.Contains(log, "level=error") {
		t.Fatalf("external-dns exited %d:\n%s", r.Code, log)
	}
	return log
}

func endpointObj(namespace, name string, eps ...string) string {
	return fmt.Sprintf(`
apiVersion: externaldns.k8s.io/v1alpha1
kind: DNSEndpoint
metadata: {name: %s, namespace: %s}
spec:
  endpoints:
%s`, name, namespace, "    - "+strings.Join(eps, "\n    - ")+"\n")
}

// answers is the sorted record data of name/type the node answers now.
func answers(t *testing.T, n *nodetest.Node, name string, qtype uint16) []string {
	t.Helper()
	m := n.Query(t, "udp", name, qtype)
	var out []string
	for _, rr := range m.Answer {
		if rr.Header().Rrtype != qtype {
			continue
		}
		f := strings.Fields(rr.String())
		out = append(out, fmt.Sprintf("%d %s", rr.Header().Ttl, strings.Join(f[4:], " ")))
	}
	slices.Sort(out)
	return out
}

func wantAnswers(t *testing.T, n *nodetest.Node, name string, qtype uint16, want ...string) {
	t.Helper()
	slices.Sort(want)
	deadline := time.Now().Add(10 * time.Second)
	for {
		got := answers(t, n, name, qtype)
		if slices.Equal(got, want) {
			return
		}
		if time.Now().After(deadline) {
			t.Fatalf("%s %s: answers %q, want %q", name, dns.TypeToString[qtype], got, want)
		}
		time.Sleep(100 * time.Millisecond)
	}
}

func TestExternalDNSWebhook(t *testing.T) {
	env := needEnv(t)
	// Fails, naming hack/build-external-dns.sh, when the binary is missing.
	proc.ServiceTool(t, "external-dns")
	c, err := client.New(env.Config, client.Options{})
	if err != nil {
		t.Fatal(err)
	}
	kc := kubeenv.Kubeconfig(t, env.Config, "")
	n, url := startNode(t)
	began := time.Now()

	// Another external-dns instance (owner team-b) owns one record first.
	kubeenv.Apply(t, c, endpointObj("team-b", "theirs", `{dnsName: theirs.example.test, recordType: A, targets: [192.0.2.50]}`))
	run(t, url, kc, "team-b", "team-b")
	wantAnswers(t, n, "theirs.example.test.", dns.TypeA, "60 192.0.2.50")

	kubeenv.Apply(t, c, endpointObj("apps", "main",
		`{dnsName: www.example.test, recordType: A, recordTTL: 300, targets: [192.0.2.11, 192.0.2.10]}`,
		`{dnsName: www.example.test, recordType: AAAA, targets: ["2001:db8::10"]}`,
		`{dnsName: alias.example.test, recordType: CNAME, targets: [www.example.test]}`,
		`{dnsName: example.test, recordType: MX, targets: ["10 mail.example.test"]}`,
		`{dnsName: sub.example.test, recordType: NS, targets: [ns1.elsewhere.test]}`,
		`{dnsName: example.test, recordType: CAA, targets: ['0 issue "letsencrypt.org"']}`,
	)+"---\n"+endpointObj("apps", "extra",
		`{dnsName: note.example.test, recordType: TXT, targets: ["hello=world"]}`,
	))
	first := run(t, url, kc, "apps", "apps", "--policy=sync")
	if strings.Contains(first, "All records are already up to date") {
		t.Errorf("first sync planned nothing:\n%s", first)
	}
	wantAnswers(t, n, "www.example.test.", dns.TypeA, "300 192.0.2.10", "300 192.0.2.11")
	wantAnswers(t, n, "www.example.test.", dns.TypeAAAA, "60 2001:db8::10")
	wantAnswers(t, n, "alias.example.test.", dns.TypeCNAME, "60 www.example.test.")
	wantAnswers(t, n, "example.test.", dns.TypeMX, "60 10 mail.example.test.")
	// No SRV here: external-dns v0.21's crd source drops an SRV target
	// with a final dot and its endpoint check one without, so none passes;
	// TestWebhookThroughNode writes one as external-dns would.
	wantAnswers(t, n, "example.test.", dns.TypeCAA, `60 0 issue "letsencrypt.org"`)
	wantAnswers(t, n, "note.example.test.", dns.TypeTXT, `60 "hello=world"`)
	// NS at sub.example.test is a delegation: a referral, not an answer.
	ns := n.Query(t, "udp", "host.sub.example.test.", dns.TypeA)
	if len(ns.Ns) != 1 || !strings.HasSuffix(ns.Ns[0].String(), "ns1.elsewhere.test.") {
		t.Errorf("sub.example.test is not delegated to ns1.elsewhere.test: %v", ns)
	}
	// The ownership records of the txt registry are served too.
	for _, owner := range []string{"_extdns-a.www.example.test.", "_extdns-mx.example.test."} {
		if got := answers(t, n, owner, dns.TypeTXT); len(got) != 1 || !strings.Contains(got[0], "external-dns/owner=apps") {
			t.Errorf("%s TXT (ownership): %q", owner, got)
		}
	}

	// A second loop finds nothing to change: GET /records returned exactly
	// what was written.
	second := run(t, url, kc, "apps", "apps", "--policy=sync")
	if !strings.Contains(second, "All records are already up to date") {
		t.Errorf("second sync planned changes:\n%s", second)
	}

	// A change and a deletion follow; records of others survive the sync policy.
	kubeenv.Apply(t, c, endpointObj("apps", "main",
		`{dnsName: www.example.test, recordType: A, recordTTL: 300, targets: [192.0.2.20]}`,
		`{dnsName: www.example.test, recordType: AAAA, targets: ["2001:db8::10"]}`,
		`{dnsName: alias.example.test, recordType: CNAME, targets: [www.example.test]}`,
		`{dnsName: example.test, recordType: MX, targets: ["10 mail.example.test"]}`,
		`{dnsName: sub.example.test, recordType: NS, targets: [ns1.elsewhere.test]}`,
		`{dnsName: example.test, recordType: CAA, targets: ['0 issue "letsencrypt.org"']}`,
	))
	if out, err := kubectl(t, kc, "delete", "dnsendpoint", "extra", "-n", "apps"); err != nil {
		t.Fatalf("delete DNSEndpoint extra: %v\n%s", err, out)
	}
	run(t, url, kc, "apps", "apps", "--policy=sync")
	wantAnswers(t, n, "www.example.test.", dns.TypeA, "300 192.0.2.20")
	wantAnswers(t, n, "note.example.test.", dns.TypeTXT)
	wantAnswers(t, n, "theirs.example.test.", dns.TypeA, "60 192.0.2.50")
	wantAnswers(t, n, "manual.example.test.", dns.TypeA, "60 192.0.2.99")
	// Published only, never served.
	wantAnswers(t, n, "pub.example.test.", dns.TypeA)
	t.Logf("four external-dns runs and the checks took %s", time.Since(began).Round(time.Millisecond))
}

// admin sends a request over the node's admin socket (the whole API, as
// the socket's peer) and returns the status and body.
func admin(t *testing.T, n *nodetest.Node, method, path, body string) (int, string) {
	t.Helper()
	sock := filepath.Join(n.Dir, "data", "service.sock")
	hc := &http.Client{Timeout: 10 * time.Second, Transport: &http.Transport{
		DialContext: func(ctx context.Context, _, _ string) (net.Conn, error) {
			var d net.Dialer
			return d.DialContext(ctx, "unix", sock)
		}}}
	req, err := http.NewRequestWithContext(t.Context(), method, "http://admin"+path, strings.NewReader(body))
	if err != nil {
		t.Fatal(err)
	}
	if body != "" {
		req.Header.Set("Content-Type", "application/json")
	}
	resp, err := hc.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	b, _ := io.ReadAll(io.LimitReader(resp.Body, 1<<20))
	return resp.StatusCode, string(b)
}

// kubectl runs the envtest kubectl with kubeconfig.
func kubectl(t *testing.T, kubeconfig string, args ...string) (string, error) {
	t.Helper()
	r := proc.Run(t, os.Environ(), "", filepath.Join(kubeenv.Assets(), "kubectl"), append([]string{"--kubeconfig", kubeconfig}, args...)...)
	if r.Code != 0 {
		return r.Stdout + r.Stderr, fmt.Errorf("kubectl exited %d", r.Code)
	}
	return r.Stdout, nil
}

// The webhook of a running node, driven over HTTP as external-dns drives
// it: what it writes is answered over DNS at once, the API refuses to touch
// it, and an endpoint published only (view: public) is never served.
func TestWebhookThroughNode(t *testing.T) {
	n, url := startNode(t)
	post(t, url, `{"create":[{"dnsName":"www.example.test","targets":["192.0.2.10","192.0.2.11"],"recordType":"A","recordTTL":300},{"dnsName":"a-www.example.test","targets":["heritage=external-dns,external-dns/owner=apps"],"recordType":"TXT"},{"dnsName":"_sip._tcp.example.test","targets":["10 60 5060 sip.example.test."],"recordType":"SRV","recordTTL":120}]}`)
	wantAnswers(t, n, "www.example.test.", dns.TypeA, "300 192.0.2.10", "300 192.0.2.11")
	wantAnswers(t, n, "a-www.example.test.", dns.TypeTXT, `60 "heritage=external-dns,external-dns/owner=apps"`)
	wantAnswers(t, n, "_sip._tcp.example.test.", dns.TypeSRV, "120 10 60 5060 sip.example.test.")
	wantAnswers(t, n, "manual.example.test.", dns.TypeA, "60 192.0.2.99")
	wantAnswers(t, n, "pub.example.test.", dns.TypeA)

	code, body := admin(t, n, "GET", "/api/v1/objects/dnsrecordsets?namespace=default&limit=1000", "")
	m := regexp.MustCompile(`"name":"(extdns-www-example-test-[0-9a-f]+)"`).FindStringSubmatch(body)
	if code != 200 || m == nil {
		t.Fatalf("GET record sets: %d, no extdns-www-example-test-*:\n%s", code, body)
	}
	if code, body := admin(t, n, "DELETE", "/api/v1/objects/dnsrecordsets/default/"+m[1], ""); code != 409 || !strings.Contains(body, "managed_by") || !strings.Contains(body, "integration:external-dns") {
		t.Errorf("API delete of %s: %d %s, want 409 managed_by naming integration:external-dns", m[1], code, body)
	}
	apply := `{"apiVersion":"service.io/v1alpha1","kind":"DNSRecordSet","metadata":{"name":"` + m[1] + `","namespace":"default"},"spec":{"zoneRef":{"name":"example.test"},"endpoints":[{"dnsName":"www.example.test","recordType":"A","targets":["192.0.2.66"]}]}}`
	if code, body := admin(t, n, "POST", "/api/v1/apply", apply); !strings.Contains(body, "managed_by") {
		t.Errorf("API apply over %s: %d %s, want managed_by", m[1], code, body)
	}
	wantAnswers(t, n, "www.example.test.", dns.TypeA, "300 192.0.2.10", "300 192.0.2.11")

	// Deleting through the webhook: gone from DNS; the other manager's stay.
	post(t, url, `{"delete":[{"dnsName":"www.example.test","targets":["192.0.2.10","192.0.2.11"],"recordType":"A","recordTTL":300},{"dnsName":"manual.example.test","targets":["192.0.2.99"],"recordType":"A"}]}`)
	wantAnswers(t, n, "www.example.test.", dns.TypeA)
	wantAnswers(t, n, "manual.example.test.", dns.TypeA, "60 192.0.2.99")
}

// post sends changes to the webhook at url as external-dns does (POST
// /records) and fails the test unless it answers 204.
func post(t *testing.T, url, changes string) {
	t.Helper()
	req, err := http.NewRequestWithContext(t.Context(), "POST", url+"/records", strings.NewReader(changes))
	if err != nil {
		t.Fatal(err)
	}
	req.Header.Set("Content-Type", "application/external.dns.webhook+json;version=1")
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	b, _ := io.ReadAll(resp.Body)
	if resp.StatusCode != 204 {
		t.Fatalf("POST /records: %d %s", resp.StatusCode, b)
	}
}
