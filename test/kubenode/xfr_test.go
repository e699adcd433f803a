package kubenode_test

import (
	"encoding/base64"
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/miekg/dns"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/svcdns/svc/internal/node"
	"github.com/svcdns/svc/test/nodetest"
)

var xfrSecret = base64.StdEncoding.EncodeToString([]byte("0123456789abcdef0123456789abcdef"))

// xfrZones are two zones the data planes serve and transfer: one whose
// serial is left to the service, one with a user serial (an imported
// zone's), each with a record set; extra endpoints go to both sets.
func xfrZones(extra ...string) string {
	var b strings.Builder
	for _, z := range []struct{ name, soa string }{{"auto.xfr.test", ""}, {"dated.xfr.test", "\n  soa: {serial: 2024010101}"}} {
		// The record set before its zone: the zone's first content is
		// then the whole of it, whichever event a data plane sees first.
		fmt.Fprintf(&b, `apiVersion: service.io/v1alpha1
kind: DNSRecordSet
metadata: {name: %[1]s, namespace: default}
spec:
  zoneRef: {name: %[1]s}
  endpoints:
    - {dnsName: ns1.%[1]s, recordType: A, targets: [192.0.2.53]}
    - {dnsName: www.%[1]s, recordType: A, targets: [192.0.2.1, 192.0.2.2]}
    - {dnsName: txt.%[1]s, recordType: TXT, targets: ["hello"]}
`, z.name)
		for _, e := range extra {
			fmt.Fprintf(&b, "    - {dnsName: %s.%s, recordType: A, targets: [%s]}\n", e, z.name, "192.0.2.99")
		}
		fmt.Fprintf(&b, `---
apiVersion: service.io/v1alpha1
kind: DNSZone
metadata: {name: %[1]s}
spec:
  defaultTTL: 300
  nameServers: [ns1.%[1]s.]%[2]s
  policy:
    transferTSIGKeyRefs: [xfr-key]
---
`, z.name, z.soa)
	}
	return b.String()
}

// axfrOf transfers zone from addr with the key and returns the serial and
// the records in canonical text, sorted; an error is returned as text.
func axfrOf(addr, zone string) (uint32, []string, error) {
	m := new(dns.Msg)
	m.SetAxfr(dns.Fqdn(zone))
	m.SetTsig("xfr-key.", dns.HmacSHA256, 300, time.Now().Unix())
	tr := &dns.Transfer{TsigSecret: map[string]string{"xfr-key.": xfrSecret}, ReadTimeout: 10 * time.Second}
	ch, err := tr.In(m, addr)
	if err != nil {
		return 0, nil, err
	}
	var serial uint32
	var rrs []string
	for e := range ch {
		if e.Error != nil {
			return 0, nil, e.Error
		}
		for _, rr := range e.RR {
			if soa, ok := rr.(*dns.SOA); ok {
				if serial != 0 && soa.Serial != serial {
					return 0, nil, fmt.Errorf("AXFR of %s from %s changed serial %d -> %d mid-way", zone, addr, serial, soa.Serial)
				}
				serial = soa.Serial
				continue
			}
			rrs = append(rrs, strings.ToLower(rr.String()))
		}
	}
	slices.Sort(rrs)
	return serial, rrs, nil
}

// zoneStatusSerial reads a DNSZone's status.serial as the operator wrote it.
func zoneStatusSerial(t *testing.T, c client.Client, name string) int64 {
	t.Helper()
	u := &unstructured.Unstructured{}
	u.SetGroupVersionKind(schema.GroupVersionKind{Group: "service.io", Version: "v1alpha1", Kind: "DNSZone"})
	if err := c.Get(t.Context(), client.ObjectKey{Name: name}, u); err != nil {
		t.Fatal(err)
	}
	s, _, _ := unstructured.NestedInt64(u.Object, "status", "serial")
	return s
}

// TestTransfersAgreeAcrossDataPlanes: two data-plane nodes on the same
// apiserver (an operator beside them) serve AXFR of the same serial and the
// same records for a zone whose serial the service assigns and for one
// with a user serial (2024010101, as an import sets it); after a record
// change both move to the same greater serial, which is the one the
// operator records in status.serial, and both answer an IXFR from the old
// serial with the same difference.
func TestTransfersAgreeAcrossDataPlanes(t *testing.T) {
	c := needEnv(t)
	kc := kubeconfig(t, env.Config, "")
	secretFile := filepath.Join(t.TempDir(), "xfr.key")
	if err := os.WriteFile(secretFile, []byte(xfrSecret+"\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	op := startNode(t, "op-xfr", node.RoleOperator, kc)
	var dps []*testNode
	for _, name := range []string{"dp-xfr-a", "dp-xfr-b"} {
		dps = append(dps, &testNode{nodetest.Start(t, nodetest.Name(name), nodetest.Role(node.RoleDataplane),
			nodetest.KubeStore(20*time.Second, 3*time.Second),
			nodetest.ExtraYAML(fmt.Sprintf("tsigKeys:\n  - {name: xfr-key, algorithm: hmac-sha256, secretFile: %s}\n", secretFile)),
			nodetest.Env("KUBECONFIG="+kc, "SERVICE_ENCRYPTION_KEY="+encryptionKey, "SERVICE_NAMESPACE="+node.DefaultNamespace,
				"SERVICE_INTERNAL_PEERS="+op.Addrs.Internal))})
	}
	zones := []string{"auto.xfr.test", "dated.xfr.test"}
	for _, z := range zones {
		removeAfter(t, c, [3]string{"DNSZone", "", z}, [3]string{"DNSRecordSet", "default", z})
	}
	apply(t, c, xfrZones())

	// agree waits until both data planes transfer zone with one serial and
	// the same records, and returns them.
	agree := func(zone, what string, done func(serial uint32, rrs []string) bool) (uint32, []string) {
		t.Helper()
		var serial uint32
		var rrs []string
		var last string
		nodetest.Eventually(t, 30*time.Second, what, func() bool {
			s0, r0, err0 := axfrOf(dps[0].DNSAddr("tcp"), zone)
			s1, r1, err1 := axfrOf(dps[1].DNSAddr("tcp"), zone)
			last = fmt.Sprintf("%s: serial %d (%v) on %s, %d (%v) on %s", zone, s0, err0, dps[0].Name, s1, err1, dps[1].Name)
			if err0 != nil || err1 != nil || s0 != s1 || !slices.Equal(r0, r1) || !done(s0, r0) {
				return false
			}
			serial, rrs = s0, r0
			return true
		})
		t.Logf("%s: %s", what, last)
		return serial, rrs
	}
	before := map[string]uint32{}
	for _, z := range zones {
		serial, rrs := agree(z, "both data planes transfer "+z, func(_ uint32, rrs []string) bool { return len(rrs) == 5 })
		if z == "dated.xfr.test" && serial != 2024010101 {
			t.Fatalf("%s transferred with serial %d, want the user's 2024010101", z, serial)
		}
		before[z] = serial
		t.Logf("%s: serial %d, %d records on both", z, serial, len(rrs))
	}

	// A change: both move to the same greater serial, the operator's.
	apply(t, c, xfrZones("new"))
	for _, z := range zones {
		serial, _ := agree(z, "both data planes transfer the change of "+z, func(_ uint32, rrs []string) bool {
			return slices.ContainsFunc(rrs, func(s string) bool { return strings.HasPrefix(s, "new."+z+".") })
		})
		if serial <= before[z] {
			t.Fatalf("%s: serial %d after the change, want above %d", z, serial, before[z])
		}
		nodetest.Eventually(t, 30*time.Second, fmt.Sprintf("the operator records the served serial %d of %s", serial, z), func() bool {
			return zoneStatusSerial(t, c, z) == int64(serial)
		})
		// IXFR from the old serial: the same difference from both.
		var diffs []string
		for _, dp := range dps {
			m := new(dns.Msg)
			m.SetIxfr(dns.Fqdn(z), before[z], "ns1."+z+".", "hostmaster."+z+".")
			m.SetTsig("xfr-key.", dns.HmacSHA256, 300, time.Now().Unix())
			tr := &dns.Transfer{TsigSecret: map[string]string{"xfr-key.": xfrSecret}, ReadTimeout: 10 * time.Second}
			ch, err := tr.In(m, dp.DNSAddr("tcp"))
			if err != nil {
				t.Fatal(err)
			}
			var got []string
			for e := range ch {
				if e.Error != nil {
					t.Fatalf("IXFR of %s from %s: %v", z, dp.Name, e.Error)
				}
				for _, rr := range e.RR {
					got = append(got, strings.ToLower(rr.String()))
				}
			}
			diffs = append(diffs, strings.Join(got, "\n"))
		}
		if diffs[0] != diffs[1] || !strings.Contains(diffs[0], "new."+z+".") {
			t.Fatalf("IXFR of %s from serial %d differs between the data planes:\n%s\n--- and ---\n%s", z, before[z], diffs[0], diffs[1])
		}
		t.Logf("%s: serial %d -> %d on both data planes and in status.serial; IXFR alike (%d records)", z, before[z], serial, strings.Count(diffs[0], "\n")+1)
	}
}
