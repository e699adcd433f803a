package node_test

import (
	"crypto/tls"
	"io"
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/miekg/dns"

	"github.com/svcdns/svc/test/nodetest"
)

// apiDo is apiCall with the response headers.
func apiDo(t *testing.T, tn *nodetest.Node, method, path, body string) (int, string, http.Header) {
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
	// Messages hold quotes; compare them unescaped.
	return resp.StatusCode, strings.ReplaceAll(string(b), `\"`, `"`), resp.Header
}

const writeCheckZone = `{"apiVersion":"service.io/v1alpha1","kind":"DNSZone","metadata":{"name":"example.test"},"spec":{"defaultTTL":300}}`

func rrset(endpoints string) string {
	return `{"apiVersion":"service.io/v1alpha1","kind":"DNSRecordSet","metadata":{"name":"web","namespace":"default"},` +
		`"spec":{"zoneRef":{"name":"example.test"},"endpoints":[` + endpoints + `]}}`
}

func policy(spec string) string {
	return `{"apiVersion":"service.io/v1alpha1","kind":"Policy","metadata":{"name":"bedtime","namespace":"default"},"spec":` + spec + `}`
}

// Every bad input of issue 18 is refused at write time by the API of a real
// node (SQLite store), through the route an admin uses, with a message that
// names the field, the value and the fix; nothing of it is stored or served.
// Before, each was stored and reported success.
func TestWriteTimeValidation(t *testing.T) {
	tn := startNode(t, nodetest.Env("SERVICE_BOOTSTRAP_TOKEN="+bootstrapToken))
	if code, body, _ := apiDo(t, tn, "POST", "/apply", writeCheckZone); code != 200 {
		t.Fatalf("apply zone: %d %s", code, body)
	}
	cases := []struct {
		name         string
		method, path string
		body         string
		want         []string
	}{
		{"records add type AA", "POST", "/zones/example.test/records", `{"name":"www","type":"AA","targets":["192.0.2.1"]}`,
			[]string{`recordType: Invalid value: "AA"`, "unknown record type", `did you mean "A"`}},
		{"records add A 192.0.2.300", "POST", "/zones/example.test/records", `{"name":"www","type":"A","targets":["192.0.2.300"]}`,
			[]string{`targets[0]: Invalid value: "192.0.2.300"`, "not an IPv4 address", `e.g. "192.0.2.10"`}},
		{"records add MX without preference", "POST", "/zones/example.test/records", `{"name":"@","type":"MX","targets":["mail.example.test."]}`,
			[]string{`targets[0]: Invalid value: "mail.example.test."`, "<preference> <mail host>", `"10 mail.example.com."`}},
		{"records add name with a space", "POST", "/zones/example.test/records", `{"name":"my host","type":"A","targets":["192.0.2.1"]}`,
			[]string{`dnsName: Invalid value: "my host.example.test"`, "blank", "e.g. www"}},
		{"apply A 192.0.2.300", "POST", "/apply", rrset(`{"dnsName":"www","recordType":"A","targets":["192.0.2.300"]}`),
			[]string{`spec.endpoints[0].targets[0]: Invalid value: "192.0.2.300"`}},
		{"apply name outside the zone", "POST", "/apply", rrset(`{"dnsName":"www.other.test.","recordType":"A","targets":["192.0.2.1"]}`),
			[]string{`spec.endpoints[0].dnsName: Invalid value: "www.other.test."`, "outside zone example.test.", "www.example.test."}},
		{"apply CNAME and other data", "POST", "/apply", rrset(`{"dnsName":"www","recordType":"A","targets":["192.0.2.1"]},{"dnsName":"www","recordType":"CNAME","targets":["elsewhere.example."]}`),
			[]string{`spec.endpoints[1].targets[0]`, "CNAME and other data at www.example.test."}},
		{"PUT record type AA", "PUT", "/objects/dnsrecordsets/default/web", rrset(`{"dnsName":"www","recordType":"AA","targets":["192.0.2.1"]}`),
			[]string{`spec.endpoints[0].recordType: Invalid value: "AA"`}},
		{"apply unknown service id", "POST", "/apply", policy(`{"blockedServices":["youtube","youtubee"]}`),
			[]string{`spec.blockedServices[1]: Invalid value: "youtubee"`, "not in the catalogue", `did you mean "youtube"`}},
		{"apply unknown category", "POST", "/apply", policy(`{"blockedCategories":["socail"]}`),
			[]string{`spec.blockedCategories[0]: Invalid value: "socail"`, `did you mean "social"`}},
		{"apply schedule tz Europe/Berln", "POST", "/apply", policy(`{"schedule":{"start":"21:00","end":"07:00","tz":"Europe/Berln"}}`),
			[]string{`spec.schedule.tz: Invalid value: "Europe/Berln"`, "IANA time zone", `did you mean "Europe/Berlin"`}},
		{"apply schedule start 9pm", "POST", "/apply", policy(`{"schedule":{"start":"9pm","end":"07:00"}}`),
			[]string{`spec.schedule.start`, "9pm"}},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			code, body, _ := apiDo(t, tn, c.method, c.path, c.body)
			if code != http.StatusBadRequest || !strings.Contains(body, `"invalid"`) {
				t.Fatalf("%s %s = %d, want 400 invalid: %s", c.method, c.path, code, body)
			}
			for _, w := range c.want {
				if !strings.Contains(body, w) {
					t.Errorf("answer lacks %q:\n%s", w, body)
				}
			}
		})
	}
	// Nothing of it was stored, and nothing is served.
	for _, p := range []string{"/objects/dnsrecordsets/default/api-example.test", "/objects/dnsrecordsets/default/web", "/objects/policies/default/bedtime"} {
		if code, body, _ := apiDo(t, tn, "GET", p, ""); code != http.StatusNotFound {
			t.Errorf("GET %s = %d after refusals: %s", p, code, body)
		}
	}
	if r := tn.Query(t, "udp", "my\\032host.example.test", dns.TypeA); r != nil && len(r.Answer) > 0 {
		t.Errorf("a refused name is served: %v", r.Answer)
	}

	// Valid input still goes through, and the same record set applied with
	// its zone in one request is checked against that zone.
	batch := `[{"apiVersion":"service.io/v1alpha1","kind":"DNSZone","metadata":{"name":"new.test"},"spec":{}},` +
		`{"apiVersion":"service.io/v1alpha1","kind":"DNSRecordSet","metadata":{"name":"n","namespace":"default"},"spec":{"zoneRef":{"name":"new.test"},"endpoints":[{"dnsName":"www.new.test.","recordType":"MX","targets":["10 mail.new.test."]}]}}]`
	if code, body, _ := apiDo(t, tn, "POST", "/apply", batch); code != 200 || strings.Contains(body, "warnings") {
		t.Errorf("zone and record set in one apply: %d %s", code, body)
	}
	if code, body, _ := apiDo(t, tn, "POST", "/zones/example.test/records", `{"name":"www","type":"A","targets":["192.0.2.1"]}`); code != 200 {
		t.Errorf("records add: %d %s", code, body)
	}
}

// Accepted-but-degraded objects come back with warnings: in the apply
// result (`svc apply` prints them) and as Warning headers of PUT.
func TestApplyWarnings(t *testing.T) {
	tn := startNode(t, nodetest.Env("SERVICE_BOOTSTRAP_TOKEN="+bootstrapToken))
	code, body, _ := apiDo(t, tn, "POST", "/apply", policy(`{"blockListRefs":["kids-lists"],"clientGroupRefs":["kids"]}`))
	if code != 200 {
		t.Fatalf("apply: %d %s", code, body)
	}
	for _, w := range []string{"spec.blockListRefs names BlockList default/kids-lists, which does not exist; nothing is blocked through it",
		"spec.clientGroupRefs names ClientGroup default/kids, which does not exist"} {
		if !strings.Contains(body, w) {
			t.Errorf("apply result lacks warning %q: %s", w, body)
		}
	}
	code, body, hdr := apiDo(t, tn, "PUT", "/objects/policies/default/bedtime", policy(`{"blockListRefs":["kids-lists"]}`))
	if code != 200 || len(hdr.Values("Warning")) != 1 || !strings.HasPrefix(hdr.Get("Warning"), `299 - "Policy default/bedtime: spec.blockListRefs names BlockList default/kids-lists`) {
		t.Errorf("PUT: %d Warning %q %s", code, hdr.Values("Warning"), body)
	}
	// A record set for a zone that does not exist yet is accepted, with a warning.
	code, body, _ = apiDo(t, tn, "POST", "/apply", strings.Replace(rrset(`{"dnsName":"www","recordType":"A","targets":["192.0.2.1"]}`), "example.test", "later.test", 1))
	if code != 200 || !strings.Contains(body, `zone "later.test" does not exist; its records are served once a DNSZone later.test is applied`) {
		t.Errorf("record set without zone: %d %s", code, body)
	}
}
