package api

import (
	"context"
	"errors"
	"fmt"
	"reflect"
	"strings"
	"testing"

	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"

	"github.com/svcdns/svc/internal/store"
	"github.com/svcdns/svc/internal/zonefile"
)

// zoneText is a zone file with a SOA, two name servers (NS TTL 86400) and
// n A records.
func zoneText(serial uint32, n int, extra string) string {
	var b strings.Builder
	fmt.Fprintf(&b, "$ORIGIN example.org.\n$TTL 3600\n@ 7200 IN SOA ns1.example.org. admin.example.org. %d 10800 1800 1209600 600\n", serial)
	b.WriteString("@ 86400 IN NS ns1.example.org.\n@ 86400 IN NS ns2.example.net.\nns1 IN A 192.0.2.53\n")
	for i := range n {
		fmt.Fprintf(&b, "h%04d 300 IN A 198.51.100.%d\n", i, i%250+1)
	}
	b.WriteString(extra)
	return b.String()
}

// TestZoneImportTakesSOAAndSplits: an import with origin creates the zone
// from the file's SOA and NS, splits 2500 names over three record sets in
// one write, answers what it did, exports the same zone, and a later smaller
// import removes the sets it no longer fills. Without updateZone an existing
// zone keeps its SOA (and the answer says so); with it an older serial is
// raised instead of going backwards (RFC 1982).
func TestZoneImportTakesSOAAndSplits(t *testing.T) {
	e := newEnv(t)
	c := e.withToken(e.adminToken())
	ctx := context.Background()
	text := zoneText(2024010101, 2500, "")

	if r := c.do("POST", "/zones/ex/import", text, "Content-Type", "text/dns"); r.code != 404 || !strings.Contains(string(r.body), "origin") {
		t.Fatalf("missing zone without origin: %d %s", r.code, r.body)
	}
	r := c.do("POST", "/zones/ex/import?origin=example.org&dryRun=true", text, "Content-Type", "text/dns")
	if r.code != 200 || r.json(t)["dryRun"] != true {
		t.Fatalf("dry run: %d %s", r.code, r.body)
	}
	if _, err := e.st.Get(ctx, store.KindDNSZone, "", "ex"); !errors.Is(err, store.ErrNotFound) {
		t.Fatalf("a dry run stored the zone: %v", err)
	}

	r = c.do("POST", "/zones/ex/import?origin=example.org", text, "Content-Type", "text/dns")
	if r.code != 200 {
		t.Fatalf("import: %d %s", r.code, r.body)
	}
	m := r.json(t)
	z := m["zone"].(map[string]any)
	if z["result"] != "created" || z["soaTaken"] != true || z["nameServersTaken"] != true || m["endpoints"].(float64) != 2501 || m["records"].(float64) != 2501 {
		t.Fatalf("import answer: %s", r.body)
	}
	sets := m["recordSets"].([]any)
	if len(sets) != 3 || sets[0].(map[string]any)["name"] != "import-ex" || sets[2].(map[string]any)["name"] != "import-ex-3" || m["name"] != "import-ex" || m["result"] != "created" {
		t.Fatalf("record sets: %s", r.body)
	}
	zone, err := e.st.Get(ctx, store.KindDNSZone, "", "ex")
	if err != nil {
		t.Fatal(err)
	}
	soa, _, _ := unstructured.NestedMap(zone.Object, "spec", "soa")
	nss, _, _ := unstructured.NestedStringSlice(zone.Object, "spec", "nameServers")
	dttl, _, _ := unstructured.NestedInt64(zone.Object, "spec", "defaultTTL")
	if fmt.Sprintf("%v %v %v %v %v %v %v %v", soa["mname"], soa["rname"], soa["serial"], soa["refresh"], soa["retry"], soa["expire"], soa["minimum"], soa["ttl"]) != "ns1.example.org. admin.example.org. 2024010101 10800 1800 1209600 600 7200" ||
		strings.Join(nss, ",") != "ns1.example.org.,ns2.example.net." || dttl != 86400 {
		t.Fatalf("zone spec: soa %v ns %v defaultTTL %d", soa, nss, dttl)
	}

	// Export holds the file's SOA, NS and every record.
	r = c.do("GET", "/zones/ex/export", nil)
	exp := string(r.body)
	for _, want := range []string{"example.org.\t7200\tIN\tSOA\tns1.example.org. admin.example.org. 2024010101 10800 1800 1209600 600\n",
		"example.org.\t86400\tIN\tNS\tns2.example.net.\n", "h2499.example.org.\t300\tIN\tA\t198.51.100.250\n"} {
		if !strings.Contains(exp, want) {
			t.Fatalf("export lacks %q", want)
		}
	}
	a, _ := zonefile.Parse("example.org", []byte(text))
	b, err := zonefile.Parse("example.org", r.body)
	if err != nil || !reflect.DeepEqual(a, b) {
		t.Fatalf("export(import(file)) differs from the file: %v", err)
	}

	// A records-API set of the zone is not the import's and stays.
	if r := c.do("POST", "/zones/ex/records", map[string]any{"name": "api", "type": "A", "targets": []string{"192.0.2.9"}}); r.code != 200 {
		t.Fatalf("records add: %d %s", r.code, r.body)
	}
	// Smaller file, other SOA, zone not updated: SOA kept, stale sets deleted.
	r = c.do("POST", "/zones/ex/import", zoneText(2023010101, 10, ""), "Content-Type", "text/dns")
	m = r.json(t)
	z = m["zone"].(map[string]any)
	if r.code != 200 || z["result"] != "kept" || z["soaTaken"] != false || !strings.Contains(fmt.Sprint(z["notes"]), "updateZone") {
		t.Fatalf("import into an existing zone: %d %s", r.code, r.body)
	}
	got := map[string]string{}
	for _, s := range m["recordSets"].([]any) {
		s := s.(map[string]any)
		got[s["name"].(string)] = s["result"].(string)
	}
	if fmt.Sprint(got) != "map[import-ex:updated import-ex-2:deleted import-ex-3:deleted]" {
		t.Fatalf("record sets: %v", got)
	}
	for _, name := range []string{"import-ex-2", "import-ex-3"} {
		if _, err := e.st.Get(ctx, store.KindDNSRecordSet, "default", name); !errors.Is(err, store.ErrNotFound) {
			t.Errorf("%s still stored: %v", name, err)
		}
	}
	if _, err := e.st.Get(ctx, store.KindDNSRecordSet, "default", "api-ex"); err != nil {
		t.Errorf("the records API's set went: %v", err)
	}
	if zone2, _ := e.st.Get(ctx, store.KindDNSZone, "", "ex"); zone2.GetResourceVersion() != zone.GetResourceVersion() {
		t.Errorf("a kept zone was written")
	}

	// updateZone with an older serial: raised past the served one.
	r = c.do("POST", "/zones/ex/import?updateZone=true", zoneText(2023010101, 10, ""), "Content-Type", "text/dns")
	m = r.json(t)
	z = m["zone"].(map[string]any)
	if r.code != 200 || z["result"] != "updated" || z["soa"].(map[string]any)["serial"].(float64) != 2024010102 || !strings.Contains(fmt.Sprint(z["notes"]), "older") {
		t.Fatalf("update with an older serial: %d %s", r.code, r.body)
	}
	// The same serial with changed records: raised by one.
	r = c.do("POST", "/zones/ex/import?updateZone=true", zoneText(2024010102, 11, ""), "Content-Type", "text/dns")
	if z = r.json(t)["zone"].(map[string]any); r.code != 200 || z["soa"].(map[string]any)["serial"].(float64) != 2024010103 {
		t.Fatalf("same serial, changed records: %d %s", r.code, r.body)
	}
	// The same file again changes nothing, with or without updateZone (and
	// without a note: the zone holds the file's SOA and NS already).
	r = c.do("POST", "/zones/ex/import?updateZone=true", zoneText(2024010103, 11, ""), "Content-Type", "text/dns")
	if m = r.json(t); r.code != 200 || m["zone"].(map[string]any)["result"] != "unchanged" || m["result"] != "unchanged" {
		t.Fatalf("same file again: %d %s", r.code, r.body)
	}
	r = c.do("POST", "/zones/ex/import", zoneText(2024010103, 11, ""), "Content-Type", "text/dns")
	if m = r.json(t); r.code != 200 || m["zone"].(map[string]any)["result"] != "kept" || m["zone"].(map[string]any)["notes"] != nil || m["result"] != "unchanged" {
		t.Fatalf("same file again without updateZone: %d %s", r.code, r.body)
	}
	// A newer serial is taken as is.
	r = c.do("POST", "/zones/ex/import?updateZone=true", zoneText(2025010101, 11, ""), "Content-Type", "text/dns")
	if z = r.json(t)["zone"].(map[string]any); r.code != 200 || z["soa"].(map[string]any)["serial"].(float64) != 2025010101 || z["notes"] != nil {
		t.Fatalf("newer serial: %d %s", r.code, r.body)
	}
	if r := c.do("POST", "/zones/ex/import?origin=other.org", text, "Content-Type", "text/dns"); r.code != 400 || !strings.Contains(string(r.body), "example.org.") {
		t.Fatalf("origin of another name: %d %s", r.code, r.body)
	}
}

// TestZoneImportAllOrNothing: a zone file that cannot be stored whole (its
// second record set would replace one another manager owns) stores nothing,
// not even the zone or the first record set.
func TestZoneImportAllOrNothing(t *testing.T) {
	e := newEnv(t)
	c := e.withToken(e.adminToken())
	ctx := context.Background()
	theirs := &unstructured.Unstructured{Object: map[string]any{
		"apiVersion": "service.io/v1alpha1", "kind": store.KindDNSRecordSet,
		"metadata": map[string]any{"name": "import-ex-2", "namespace": "default"},
		"spec": map[string]any{"zoneRef": map[string]any{"name": "ex"},
			"endpoints": []any{map[string]any{"dnsName": "x", "recordType": "A", "targets": []any{"192.0.2.1"}}}},
	}}
	if _, err := e.st.Apply(ctx, theirs, store.ApplyOptions{Manager: "file:/etc/service/zones.yaml"}); err != nil {
		t.Fatal(err)
	}
	r := c.do("POST", "/zones/ex/import?origin=example.org", zoneText(1, 2000, ""), "Content-Type", "text/dns")
	if r.code != 409 || r.errKey(t) != KeyManagedBy {
		t.Fatalf("import over another manager's set: %d %s", r.code, r.body)
	}
	if _, err := e.st.Get(ctx, store.KindDNSZone, "", "ex"); !errors.Is(err, store.ErrNotFound) {
		t.Errorf("a refused import stored the zone: %v", err)
	}
	if _, err := e.st.Get(ctx, store.KindDNSRecordSet, "default", "import-ex"); !errors.Is(err, store.ErrNotFound) {
		t.Errorf("a refused import stored its first record set: %v", err)
	}
	var ns strings.Builder
	for i := range 17 {
		fmt.Fprintf(&ns, "@ IN NS ns%d.example.net.\n", i)
	}
	r = c.do("POST", "/zones/ex2/import?origin=example.org", zoneText(1, 10, ns.String()), "Content-Type", "text/dns")
	if r.code != 400 || !strings.Contains(string(r.body), "at most 16") {
		t.Fatalf("17 name servers: %d %s", r.code, r.body)
	}
}
