package xfr_test

import (
	"crypto/tls"
	"fmt"
	"io"
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/miekg/dns"

	"github.com/svcdns/svc/test/freeport"
	"github.com/svcdns/svc/test/nodetest"
)

// importedZone is a zone file with a date serial, as exported by another
// primary.
const importedZone = `$ORIGIN imported.test.
$TTL 300
@	3600 IN SOA ns1.imported.test. hostmaster.imported.test. 2024010101 3600 600 604800 300
@	3600 IN NS ns1.imported.test.
ns1	IN A 192.0.2.53
www	IN A 192.0.2.1
`

// TestImportedSerialGrows: a zone imported with the serial 2024010101 is
// served with it; each record change after the import raises the served
// serial (the user's serial is a floor, not a fixed value), so a Knot
// secondary gets NOTIFY, pulls IXFR and serves the change. Before, the
// serial stayed 2024010101 and the secondary never saw the change.
func TestImportedSerialGrows(t *testing.T) {
	const zone = "imported.test"
	knotPort := freeport.UDPTCP(t)
	p := startPrimary(t, fmt.Sprintf(`
notify:
  timeout: 500ms
  retries: 3
  targets:
    - {zone: %s, addresses: ["127.0.0.1:%d"]}
`, zone, knotPort))
	udp := p.DNSAddr("udp")
	code, body := apiSend(t, p, "POST", "/apply", "application/json",
		fmt.Sprintf(`{"apiVersion":"service.io/v1alpha1","kind":"DNSZone","metadata":{"name":%q},"spec":{"policy":{"transferTSIGKeyRefs":[%q]}}}`, zone, keyName))
	if code != http.StatusOK {
		t.Fatalf("apply the zone: %d %s", code, body)
	}
	code, body = apiSend(t, p, "POST", "/zones/"+zone+"/import?updateZone=true", "text/dns", importedZone)
	if code != http.StatusOK {
		t.Fatalf("import: %d %s", code, body)
	}
	nodetest.Eventually(t, 10*time.Second, "the imported serial served", func() bool { return serialOfZone(udp, zone) == 2024010101 })

	knot := startKnotFor(t, zone, knotPort, p.DNSAddr("tcp"), goodSecret)
	nodetest.Eventually(t, 20*time.Second, "knot has the imported zone", func() bool { return serialOfZone(knot.addr, zone) == 2024010101 })

	prev := uint32(2024010101)
	for i, name := range []string{"new", "newer"} {
		code, body = apiSend(t, p, "POST", "/zones/"+zone+"/records", "application/json",
			fmt.Sprintf(`{"name":%q,"type":"A","targets":["192.0.2.%d"]}`, name, 77+i))
		if code != http.StatusOK {
			t.Fatalf("add %s: %d %s", name, code, body)
		}
		var next uint32
		nodetest.Eventually(t, 10*time.Second, "a greater serial after adding "+name, func() bool {
			next = serialOfZone(udp, zone)
			return next != prev
		})
		if next <= prev {
			t.Fatalf("after adding %s the node serves serial %d, want above %d", name, next, prev)
		}
		changed := time.Now()
		nodetest.Eventually(t, 15*time.Second, "knot has the new serial", func() bool { return serialOfZone(knot.addr, zone) == next })
		t.Logf("after adding %s: serial %d -> %d, on Knot %s later", name, prev, next, time.Since(changed).Round(time.Millisecond))
		r := exchange(t, knot.addr, name+"."+zone+".", dns.TypeA)
		if len(r.Answer) != 1 || r.Answer[0].(*dns.A).A.String() != fmt.Sprintf("192.0.2.%d", 77+i) {
			t.Fatalf("knot answers %s with %v, want 192.0.2.%d", name, r.Answer, 77+i)
		}
		prev = next
	}
	if !knot.log.Contains("IXFR, incoming") {
		t.Errorf("knot did not pull an IXFR:\n%s", knot.log.Log())
	}
	if got := metric(t, p, `service_xfr_total{result="ixfr",type="ixfr",zone="imported.test."}`); got < 2 {
		t.Errorf("%v IXFR answered from the journal, want 2", got)
	}
	// The query log has a row per transfer: who, zone, serial, bytes, key.
	nodetest.Eventually(t, 10*time.Second, "the IXFR in the query log", func() bool {
		code, body := apiSend(t, p, "GET", "/queries?qtype=IXFR", "application/json", "")
		return code == http.StatusOK && strings.Contains(body, fmt.Sprintf(`ixfr serial=%d bytes=`, prev)) &&
			strings.Contains(body, "key=xfr-key.") && strings.Contains(body, `"127.0.0.1`) && strings.Contains(body, "zone_transfer")
	})
	if p.Log.Contains("zone content changed without a greater serial") {
		t.Errorf("the node saw a change without a greater serial")
	}
}

// exchange asks addr over UDP.
func exchange(t *testing.T, addr, name string, qtype uint16) *dns.Msg {
	t.Helper()
	m := new(dns.Msg)
	m.SetQuestion(name, qtype)
	r, _, err := (&dns.Client{Timeout: 2 * time.Second}).Exchange(m, addr)
	if err != nil {
		t.Fatalf("ask %s %s: %v", addr, name, err)
	}
	return r
}

// apiSend calls the node's API with the bootstrap token and a body.
func apiSend(t *testing.T, p *primary, method, path, contentType, body string) (int, string) {
	t.Helper()
	client := &http.Client{Timeout: 10 * time.Second, Transport: &http.Transport{TLSClientConfig: &tls.Config{InsecureSkipVerify: true}}}
	req, err := http.NewRequest(method, "https://"+p.Addrs.API+"/api/v1"+path, strings.NewReader(body))
	if err != nil {
		t.Fatal(err)
	}
	req.Header.Set("Authorization", "Bearer "+bootstrapToken)
	req.Header.Set("Content-Type", contentType)
	resp, err := client.Do(req)
	if err != nil {
		t.Fatalf("%s %s: %v", method, path, err)
	}
	defer resp.Body.Close()
	b, _ := io.ReadAll(resp.Body)
	return resp.StatusCode, string(b)
}
