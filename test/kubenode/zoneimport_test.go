package kubenode_test

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net"
	"net/http"
	"path/filepath"
	"reflect"
	"strings"
	"testing"
	"time"

	"github.com/miekg/dns"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/svcdns/svc/internal/zonefile"
	"github.com/svcdns/svc/test/nodetest"
)

// adminPost sends a POST over the node's admin socket.
func adminPost(t *testing.T, n *testNode, path, ctype, body string) (int, []byte) {
	t.Helper()
	sock := filepath.Join(n.Dir, "data", "service.sock")
	hc := &http.Client{Timeout: 60 * time.Second, Transport: &http.Transport{
		DialContext: func(ctx context.Context, _, _ string) (net.Conn, error) {
			var d net.Dialer
			return d.DialContext(ctx, "unix", sock)
		}}}
	resp, err := hc.Post("http://admin"+path, ctype, strings.NewReader(body))
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	b, _ := io.ReadAll(io.LimitReader(resp.Body, 4<<20))
	return resp.StatusCode, b
}

func kimpZone(hosts int) string {
	var b strings.Builder
	b.WriteString("$ORIGIN kimp.test.\n$TTL 300\n@ 900 IN SOA ns1 hostmaster 2024070101 3600 600 604800 120\n@ 7200 IN NS ns1\n@ 7200 IN NS ns2.example.net.\nns1 IN A 192.0.2.53\n")
	for i := range hosts {
		fmt.Fprintf(&b, "h%04d IN A 10.1.%d.%d\n", i, i/250, i%250+1)
	}
	return b.String()
}

// TestZoneImportOnKubernetes: on the Kubernetes store an import with origin
// creates the DNSZone with the file's SOA and NS and three record sets (2100
// names) on the apiserver, the data plane serves the file's SOA and NS, the
// export parses to the same zone as the file, and a smaller re-import
// deletes the record sets it no longer fills.
func TestZoneImportOnKubernetes(t *testing.T) {
	c, dp := startZonePair(t, "imp")
	removeAfter(t, c, [3]string{"DNSZone", "", "kimp"}, [3]string{"DNSRecordSet", "default", "import-kimp"},
		[3]string{"DNSRecordSet", "default", "import-kimp-2"}, [3]string{"DNSRecordSet", "default", "import-kimp-3"})
	text := kimpZone(2100)
	code, body := adminPost(t, dp, "/api/v1/zones/kimp/import?origin=kimp.test", "text/dns", text)
	if code != 200 {
		t.Fatalf("import: %d %s", code, body)
	}
	var res struct {
		Zone struct {
			Result           string
			SOATaken         bool
			NameServersTaken bool
		}
		RecordSets []struct{ Name, Result string }
	}
	if err := json.Unmarshal(body, &res); err != nil || res.Zone.Result != "created" || !res.Zone.SOATaken || !res.Zone.NameServersTaken || len(res.RecordSets) != 3 {
		t.Fatalf("import answer: %v %s", err, body)
	}
	nodetest.Eventually(t, 30*time.Second, "the data plane serves the file's SOA", func() bool {
		r := dp.query("kimp.test", dns.TypeSOA)
		if r == nil || len(r.Answer) != 1 {
			return false
		}
		soa, ok := r.Answer[0].(*dns.SOA)
		// The file's serial is a floor: on Kubernetes the zone and its
		// three record sets are four objects, and each state a data plane
		// served on the way raised the serial by one (secondaries must
		// not keep a partial zone under the file's serial).
		return ok && soa.Serial >= 2024070101 && soa.Serial <= 2024070101+4 && soa.Ns == "ns1.kimp.test." && soa.Mbox == "hostmaster.kimp.test." && soa.Hdr.Ttl == 900 && soa.Minttl == 120
	})
	r := dp.query("kimp.test", dns.TypeNS)
	var ns []string
	for _, rr := range r.Answer {
		ns = append(ns, fmt.Sprintf("%s %d", rr.(*dns.NS).Ns, rr.Header().Ttl))
	}
	if strings.Join(ns, ",") != "ns1.kimp.test. 7200,ns2.example.net. 7200" {
		t.Errorf("NS answer: %v", ns)
	}
	nodetest.Eventually(t, 30*time.Second, "the last host served", func() bool { return dp.answersA("h2099.kimp.test", "10.1.8.100") })
	code, exp := adminGet(t, dp, "/api/v1/zones/kimp/export")
	if code != 200 {
		t.Fatalf("export: %d %s", code, exp)
	}
	want, _ := zonefile.Parse("kimp.test", []byte(text))
	got, err := zonefile.Parse("kimp.test", exp)
	if err == nil && got.SOA != nil && want.SOA != nil && got.SOA.Serial >= want.SOA.Serial && got.SOA.Serial <= want.SOA.Serial+4 {
		got.SOA.Serial = want.SOA.Serial // the export has the served serial: the file's is a floor (above)
	}
	if err != nil || !reflect.DeepEqual(want, got) {
		t.Fatalf("export(import(file)) differs from the file: %v", err)
	}

	code, body = adminPost(t, dp, "/api/v1/zones/kimp/import", "text/dns", kimpZone(10))
	if code != 200 || !strings.Contains(string(body), `"name":"import-kimp-3","result":"deleted"`) {
		t.Fatalf("smaller re-import: %d %.500s", code, body)
	}
	for _, name := range []string{"import-kimp-2", "import-kimp-3"} {
		u := &unstructured.Unstructured{}
		u.SetGroupVersionKind(schema.GroupVersionKind{Group: "service.io", Version: "v1alpha1", Kind: "DNSRecordSet"})
		if err := c.Get(t.Context(), client.ObjectKey{Namespace: "default", Name: name}, u); err == nil {
			t.Errorf("%s is still on the apiserver", name)
		}
	}
	nodetest.Eventually(t, 30*time.Second, "a host of the removed sets gone", func() bool { return dp.rcode("h2099.kimp.test") == dns.RcodeNameError })
}
