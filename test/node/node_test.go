// Package node_test runs whole nodes in process, configured the way a user would
// (config file, objects directory, environment), and talks to them over sockets.
package node_test

import (
	"context"
	"crypto/tls"
	"io"
	"net/http"
	"os"
	"path/filepath"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/miekg/dns"

	"github.com/svcdns/svc/internal/auth"
	"github.com/svcdns/svc/internal/internalapi"
	"github.com/svcdns/svc/internal/node"
	"github.com/svcdns/svc/test/nodetest"
)

// startNode runs a node that must be ready within 30s and stop within 10s.
func startNode(t *testing.T, opts ...nodetest.Option) *nodetest.Node {
	t.Helper()
	return nodetest.Start(t, append([]nodetest.Option{nodetest.ReadyWithin(30 * time.Second), nodetest.StopWithin(10 * time.Second)}, opts...)...)
}

const zoneDoc = `apiVersion: service.io/v1alpha1
kind: DNSZone
metadata: {name: example.test}
spec:
  defaultTTL: 300
  nameServers: [ns1.example.test.]
---
apiVersion: service.io/v1alpha1
kind: DNSRecordSet
metadata: {name: hosts, namespace: default}
spec:
  zoneRef: {name: example.test}
  endpoints:
    - {dnsName: www.example.test, recordType: A, targets: [192.0.2.1]}
`

func aRecords(m *dns.Msg) []string {
	var out []string
	for _, rr := range m.Answer {
		if a, ok := rr.(*dns.A); ok {
			out = append(out, a.A.String())
		}
	}
	return out
}

func TestNodeServesObjectsDirAndFollowsEdits(t *testing.T) {
	tn := startNode(t, nodetest.Objects(map[string]string{"zone.yaml": zoneDoc}))
	for _, proto := range []string{"udp", "tcp"} {
		nodetest.Eventually(t, 5*time.Second, proto+" answer for www.example.test", func() bool {
			r := tn.Query(t, proto, "www.example.test", dns.TypeA)
			return r.Rcode == dns.RcodeSuccess && r.Authoritative && strings.Join(aRecords(r), ",") == "192.0.2.1"
		})
	}
	// An edit is answered within one second.
	edited := strings.Replace(zoneDoc, "192.0.2.1", "192.0.2.99", 1)
	if err := os.WriteFile(filepath.Join(tn.ObjectsDir, "zone.yaml"), []byte(edited), 0o644); err != nil {
		t.Fatal(err)
	}
	start := time.Now()
	nodetest.Eventually(t, 3*time.Second, "edited record served", func() bool {
		return strings.Join(aRecords(tn.Query(t, "udp", "www.example.test", dns.TypeA)), ",") == "192.0.2.99"
	})
	t.Logf("edit answered after %s", time.Since(start))

	// A broken file changes nothing stored and the node keeps serving.
	broken := strings.Replace(edited, "recordType: A", "recordType: a-lowercase", 1)
	if err := os.WriteFile(filepath.Join(tn.ObjectsDir, "zone.yaml"), []byte(broken), 0o644); err != nil {
		t.Fatal(err)
	}
	time.Sleep(time.Second)
	if got := aRecords(tn.Query(t, "udp", "www.example.test", dns.TypeA)); strings.Join(got, ",") != "192.0.2.99" {
		t.Fatalf("after a broken edit the node answers %v, want the last good 192.0.2.99", got)
	}

	// Deleting the file deletes its objects: the name leaves service.
	if err := os.Remove(filepath.Join(tn.ObjectsDir, "zone.yaml")); err != nil {
		t.Fatal(err)
	}
	nodetest.Eventually(t, 3*time.Second, "deleted zone no longer answered authoritatively", func() bool {
		r := tn.Query(t, "udp", "www.example.test", dns.TypeA)
		return !r.Authoritative && len(aRecords(r)) == 0
	})
}

func TestNodeHealthNameAndLameduck(t *testing.T) {
	tn := startNode(t)
	r := tn.Query(t, "udp", "health.service.internal", dns.TypeTXT)
	if r.Rcode != dns.RcodeSuccess || len(r.Answer) != 1 {
		t.Fatalf("health name answered %s with %d records, want NOERROR with one TXT", dns.RcodeToString[r.Rcode], len(r.Answer))
	}
	if code := opsCall(t, tn, "GET", "/healthz/ready"); code != 200 {
		t.Fatalf("ready = %d, want 200", code)
	}
	if code := opsCall(t, tn, "POST", "/lameduck?duration=30s"); code != http.StatusAccepted {
		t.Fatalf("lameduck = %d, want 202", code)
	}
	if r := tn.Query(t, "udp", "health.service.internal", dns.TypeTXT); r.Rcode != dns.RcodeServerFailure {
		t.Fatalf("health name in lameduck = %s, want SERVFAIL", dns.RcodeToString[r.Rcode])
	}
	if code := opsCall(t, tn, "GET", "/healthz/ready"); code != http.StatusServiceUnavailable {
		t.Fatalf("ready in lameduck = %d, want 503", code)
	}
	// Listeners keep serving during lameduck.
	if r := tn.Query(t, "tcp", "health.service.internal", dns.TypeTXT); r.Rcode != dns.RcodeServerFailure {
		t.Fatalf("tcp health name in lameduck = %s, want SERVFAIL", dns.RcodeToString[r.Rcode])
	}
	opsCall(t, tn, "POST", "/lameduck?cancel=true")
	if r := tn.Query(t, "udp", "health.service.internal", dns.TypeTXT); r.Rcode != dns.RcodeSuccess {
		t.Fatalf("health name after cancel = %s, want NOERROR", dns.RcodeToString[r.Rcode])
	}
}

// opsCall sends a bodiless request to the node's ops listener and returns
// the status code.
func opsCall(t *testing.T, tn *nodetest.Node, method, path string) int {
	t.Helper()
	req, err := http.NewRequest(method, "http://"+tn.Addrs.Ops+path, nil)
	if err != nil {
		t.Fatal(err)
	}
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	resp.Body.Close()
	return resp.StatusCode
}

func TestNodeRefusesBadStartup(t *testing.T) {
	// A zone, so the status writer has something to write while the
	// failed start closes the store.
	withZone := nodetest.Objects(map[string]string{"zone.yaml": zoneDoc})
	garbage := filepath.Join(t.TempDir(), "garbage.pem")
	if err := os.WriteFile(garbage, []byte("not a certificate"), 0o600); err != nil {
		t.Fatal(err)
	}
	for _, tc := range []struct {
		name, extra string
		environ     []string
		opts        []nodetest.Option
		want        string
	}{
		{"unknown env var", "", []string{"SERVICE_CACHE__NOSUCHKEY=1"}, nil, "SERVICE_CACHE__NOSUCHKEY"},
		{"bad env duration", "", []string{"SERVICE_CACHE__MINTTL=5x"}, nil, "cache.minTTL"},
		{"bad file duration", "cache:\n  maxTTL: soon\n", nil, nil, "cache.maxTTL"},
		{"unknown file key", "cache:\n  bogus: 1\n", nil, nil, "cache.bogus"},
		// Found only once the store and the zones are up: the node stops
		// cleanly, with the error naming the file and nothing else to say.
		{"missing certificate", "", nil, []nodetest.Option{nodetest.TLS("/nonexistent/cert.pem", garbage), withZone}, "/nonexistent/cert.pem"},
		{"garbage certificate", "", nil, []nodetest.Option{nodetest.TLS(garbage, garbage), withZone}, garbage},
	} {
		t.Run(tc.name, func(t *testing.T) {
			path := nodetest.WriteConfig(t, t.TempDir(), append(tc.opts, nodetest.ExtraYAML(tc.extra))...)
			ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
			defer cancel()
			log := nodetest.NewLog(t, "")
			err := node.Run(ctx, node.Options{ConfigPath: path, ConfigExplicit: true, Environ: tc.environ, Stderr: log})
			if err == nil || !strings.Contains(err.Error(), tc.want) {
				t.Fatalf("Run = %v, want an error naming %s", err, tc.want)
			}
			if log.Contains("level=WARN") || log.Contains("level=ERROR") {
				t.Errorf("a refused start logged warnings or errors besides its error")
			}
		})
	}
}

const blockingDocs = `apiVersion: service.io/v1alpha1
kind: BlockList
metadata: {name: ads, namespace: default}
spec:
  sources:
    - name: mine
      inline: ["||ads.example^", "tracker.example"]
---
apiVersion: service.io/v1alpha1
kind: ClientGroup
metadata: {name: everyone-local, namespace: default}
spec:
  addresses: [127.0.0.0/8]
---
apiVersion: service.io/v1alpha1
kind: Policy
metadata: {name: home, namespace: default}
spec:
  clientGroupRefs: [everyone-local]
  blockListRefs: [ads]
  blockMode: nxdomain
  blockTTL: 1m
`

func TestNodeBlocksThroughPolicy(t *testing.T) {
	tn := startNode(t, nodetest.Objects(map[string]string{"blocking.yaml": blockingDocs}))
	nodetest.Eventually(t, 5*time.Second, "ads.example blocked with NXDOMAIN", func() bool {
		r := tn.Query(t, "udp", "x.ads.example", dns.TypeA)
		return r.Rcode == dns.RcodeNameError
	})
	r := tn.Query(t, "tcp", "tracker.example", dns.TypeA)
	if r.Rcode != dns.RcodeNameError {
		t.Fatalf("tracker.example = %s, want NXDOMAIN", dns.RcodeToString[r.Rcode])
	}
	// Exact hosts-style entries do not block subdomains.
	if r := tn.Query(t, "udp", "sub.tracker.example", dns.TypeA); r.Rcode == dns.RcodeNameError {
		t.Fatal("sub.tracker.example blocked by an exact entry")
	}
	// The metrics listener shows the blocked queries, the list size and builds.
	resp, err := http.Get("http://" + tn.Addrs.Metrics + "/metrics")
	if err != nil {
		t.Fatal(err)
	}
	body, _ := io.ReadAll(resp.Body)
	resp.Body.Close()
	for _, want := range []string{
		`service_dns_queries_total{rcode="NXDOMAIN",status="blocked",transport="udp"}`,
		`service_blocklist_rules{list="default/ads"} 2`,
		`service_snapshot_build_seconds_count`,
		`service_dns_query_duration_seconds_bucket`,
	} {
		if !strings.Contains(string(body), want) {
			t.Errorf("metrics lack %s", want)
		}
	}
}

const bootstrapToken = "svc_abcdefghij12_AAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAA"

func apiCall(t *testing.T, tn *nodetest.Node, method, path, body string) (int, string) {
	t.Helper()
	client := &http.Client{Timeout: 10 * time.Second, Transport: &http.Transport{TLSClientConfig: &tls.Config{InsecureSkipVerify: true}}}
	req, err := http.NewRequest(method, "https://"+tn.Addrs.API+"/api/v1"+path, strings.NewReader(body))
	if err != nil {
		t.Fatal(err)
	}
	req.Header.Set("Authorization", "Bearer "+bootstrapToken)
	req.Header.Set("Content-Type", "application/json")
	resp, err := client.Do(req)
	if err != nil {
		t.Fatalf("%s %s: %v", method, path, err)
	}
	defer resp.Body.Close()
	b, _ := io.ReadAll(resp.Body)
	return resp.StatusCode, string(b)
}

func TestNodeAPIAppliesAndQueries(t *testing.T) {
	tn := startNode(t, nodetest.Env("SERVICE_BOOTSTRAP_TOKEN="+bootstrapToken))
	zone := `{"apiVersion":"service.io/v1alpha1","kind":"DNSZone","metadata":{"name":"api.test"},"spec":{"nameServers":["ns1.api.test."]}}`
	rs := `{"apiVersion":"service.io/v1alpha1","kind":"DNSRecordSet","metadata":{"name":"r","namespace":"default"},"spec":{"zoneRef":{"name":"api.test"},"endpoints":[{"dnsName":"host.api.test","recordType":"A","targets":["192.0.2.44"]}]}}`
	code, body := apiCall(t, tn, "POST", "/apply", "["+zone+","+rs+"]")
	if code != 200 || !strings.Contains(body, `"created"`) {
		t.Fatalf("apply = %d %s", code, body)
	}
	nodetest.Eventually(t, 2*time.Second, "applied record answered over DNS", func() bool {
		return strings.Join(aRecords(tn.Query(t, "udp", "host.api.test", dns.TypeA)), ",") == "192.0.2.44"
	})
	code, body = apiCall(t, tn, "POST", "/dns/query", `{"name":"host.api.test","type":"A"}`)
	if code != 200 || !strings.Contains(body, "192.0.2.44") || !strings.Contains(body, `"aa":true`) {
		t.Fatalf("dns/query = %d %s", code, body)
	}
	// A second apply of the same objects changes nothing.
	code, body = apiCall(t, tn, "POST", "/apply", "["+zone+","+rs+"]")
	if code != 200 || strings.Count(body, `"unchanged"`) != 2 {
		t.Fatalf("re-apply = %d %s, want two unchanged results", code, body)
	}
	// An invalid object is refused with the field named, and nothing changes.
	bad := strings.Replace(rs, `"recordType":"A"`, `"recordType":"a"`, 1)
	code, body = apiCall(t, tn, "POST", "/apply", bad)
	if code < 400 || !strings.Contains(body, "recordType") {
		t.Fatalf("invalid apply = %d %s, want an error naming recordType", code, body)
	}
	if got := aRecords(tn.Query(t, "udp", "host.api.test", dns.TypeA)); strings.Join(got, ",") != "192.0.2.44" {
		t.Fatalf("after a refused apply the node answers %v", got)
	}
	code, body = apiCall(t, tn, "POST", "/dns/blocking", `{"blocking":false,"duration":"1m"}`)
	if code != 200 || !strings.Contains(body, `"blocking":false`) {
		t.Fatalf("blocking disable = %d %s", code, body)
	}
	code, _ = apiCall(t, tn, "POST", "/cache/flush", `{}`)
	if code/100 != 2 {
		t.Fatalf("cache flush = %d", code)
	}
}

func TestNodeInternalListener(t *testing.T) {
	key := strings.Repeat("ab", 32)
	tn := startNode(t, nodetest.Env("SERVICE_ENCRYPTION_KEY="+key), nodetest.Objects(map[string]string{"zone.yaml": zoneDoc}))
	raw, err := auth.DecodeKey(key)
	if err != nil {
		t.Fatal(err)
	}
	creds, err := internalapi.LoadCredentials(internalapi.Files{}, raw)
	if err != nil {
		t.Fatal(err)
	}
	c := internalapi.NewClient(creds)
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	nodetest.Eventually(t, 5*time.Second, "internal status ready", func() bool {
		st, err := c.Status(ctx, tn.Addrs.Internal)
		return err == nil && st.Ready
	})
	zones, err := c.Zones(ctx, tn.Addrs.Internal)
	if err != nil {
		t.Fatal(err)
	}
	found := false
	for _, z := range zones {
		found = found || z.Name == "example.test."
	}
	if !found {
		t.Fatalf("internal zones %v lack example.test.", zones)
	}
	// A node with another key is refused.
	other, _ := internalapi.LoadCredentials(internalapi.Files{}, []byte(strings.Repeat("x", 32)))
	if _, err := internalapi.NewClient(other).Status(ctx, tn.Addrs.Internal); err == nil {
		t.Fatal("a client with credentials from another key was served")
	}
}

func TestNodeWritesZoneAndRecordSetStatus(t *testing.T) {
	docs := zoneDoc + `---
apiVersion: service.io/v1alpha1
kind: DNSRecordSet
metadata: {name: broken, namespace: default}
spec:
  zoneRef: {name: example.test}
  endpoints:
    # A target that does not parse is refused at write time; a name outside
    # the zone is known only with the zone, so the compile step reports it.
    - {dnsName: bad.other.test., recordType: A, targets: [192.0.2.9]}
    - {dnsName: good.example.test, recordType: A, targets: [192.0.2.7]}
`
	tn := startNode(t, nodetest.Env("SERVICE_BOOTSTRAP_TOKEN="+bootstrapToken), nodetest.Objects(map[string]string{"zone.yaml": docs}))
	nodetest.Eventually(t, 5*time.Second, "zone status Ready with a serial", func() bool {
		code, body := apiCall(t, tn, "GET", "/objects/dnszones/example.test", "")
		return code == 200 && strings.Contains(body, `"serial":`) && strings.Contains(body, `"type":"Ready"`) && strings.Contains(body, `"status":"True"`)
	})
	nodetest.Eventually(t, 5*time.Second, "broken record set reports the bad target", func() bool {
		code, body := apiCall(t, tn, "GET", "/objects/dnsrecordsets/default/broken", "")
		return code == 200 && strings.Contains(body, "InvalidRecords") && strings.Contains(body, "endpoint 0: dnsName") && strings.Contains(body, "outside zone")
	})
	// The good record of the same set is still served.
	if got := aRecords(tn.Query(t, "udp", "good.example.test", dns.TypeA)); strings.Join(got, ",") != "192.0.2.7" {
		t.Fatalf("good.example.test = %v", got)
	}
}

func TestNodeDataRoutes(t *testing.T) {
	tn := startNode(t, nodetest.Env("SERVICE_BOOTSTRAP_TOKEN="+bootstrapToken), nodetest.Objects(map[string]string{"blocking.yaml": blockingDocs, "zone.yaml": zoneDoc}))
	nodetest.Eventually(t, 5*time.Second, "blocked", func() bool { return tn.Query(t, "udp", "ads.example", dns.TypeA).Rcode == dns.RcodeNameError })
	tn.Query(t, "udp", "www.example.test", dns.TypeA)
	nodetest.Eventually(t, 5*time.Second, "query log lists the blocked query", func() bool {
		code, body := apiCall(t, tn, "GET", "/queries?status_class=blocked", "")
		return code == 200 && strings.Contains(body, "ads.example") && strings.Contains(body, "default/ads")
	})
	for _, tc := range []struct{ path, want string }{
		{"/stats/summary?window=1h", "blocked"},
		{"/stats/top?dim=domains&top=5", "ads.example"},
		{"/catalogue", `"origin":"embedded"`},
		{"/catalogue/categories", `"id":`},
		{"/dns/blocking", `"blocking":true`},
		{"/policies/default/home/state", `"active":true`},
		{"/blocklists/default/ads/sources/mine/entries", "ads.example"},
		{"/nodes", `"ready":true`},
		{"/cluster", `"driver":"sqlite"`},
	} {
		code, body := apiCall(t, tn, "GET", tc.path, "")
		if code != 200 || !strings.Contains(body, tc.want) {
			t.Errorf("GET %s = %d %.300s, want 200 containing %s", tc.path, code, body, tc.want)
		}
	}
	if code, body := apiCall(t, tn, "POST", "/blocklists/default/ads/refresh", ""); code/100 != 2 {
		t.Errorf("refresh = %d %s", code, body)
	}
}

// TestNotReadyUntilListening: /healthz/ready answers 503 until every
// listener is up, so the first query after "ready" is answered (the
// snapshot used to be ready ~100 ms before the DNS sockets were bound, and
// a query sent then was lost).
func TestNotReadyUntilListening(t *testing.T) {
	cfg := nodetest.WriteConfig(t, t.TempDir())
	opsUp := make(chan string, 1)
	var listening atomic.Bool
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() {
		done <- node.Run(ctx, node.Options{ConfigPath: cfg, ConfigExplicit: true, Stderr: io.Discard,
			OpsUp: func(a string) { opsUp <- a }, Ready: func(node.Addrs) { listening.Store(true) }})
	}()
	t.Cleanup(func() {
		cancel()
		select {
		case <-done:
		case <-time.After(10 * time.Second):
			t.Error("node did not stop")
		}
	})
	var addr string
	select {
	case addr = <-opsUp:
	case err := <-done:
		t.Fatalf("node stopped: %v", err)
	case <-time.After(30 * time.Second):
		t.Fatal("no ops listener within 30s")
	}
	c := &http.Client{Timeout: 2 * time.Second}
	notReady := 0
	for deadline := time.Now().Add(30 * time.Second); time.Now().Before(deadline); time.Sleep(time.Millisecond) {
		resp, err := c.Get("http://" + addr + "/healthz/ready")
		if err != nil {
			continue
		}
		_ = resp.Body.Close()
		if resp.StatusCode != http.StatusOK {
			notReady++
			continue
		}
		if !listening.Load() {
			t.Fatalf("ready after %d polls, before every listener was up", notReady)
		}
		return
	}
	t.Fatal("not ready within 30s")
}
