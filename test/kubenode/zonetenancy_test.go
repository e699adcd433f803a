package kubenode_test

import (
	"context"
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/miekg/dns"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/client-go/kubernetes"
	"sigs.k8s.io/controller-runtime/pkg/client"
	sigsyaml "sigs.k8s.io/yaml"

	"github.com/svcdns/svc/internal/node"
	"github.com/svcdns/svc/internal/zonefile"
	"github.com/svcdns/svc/test/nodetest"
)

// zoneCondition is the condition typ of a service.io object: status, reason
// and message ("" when absent).
func zoneCondition(c client.Client, kind, ns, name, typ string) (status, reason, message string) {
	u := &unstructured.Unstructured{}
	u.SetGroupVersionKind(schema.GroupVersionKind{Group: "service.io", Version: "v1alpha1", Kind: kind})
	if err := c.Get(context.Background(), client.ObjectKey{Namespace: ns, Name: name}, u); err != nil {
		return "", "", ""
	}
	conds, _, _ := unstructured.NestedSlice(u.Object, "status", "conditions")
	for _, x := range conds {
		if m, _ := x.(map[string]any); m["type"] == typ {
			s, _ := m["status"].(string)
			r, _ := m["reason"].(string)
			msg, _ := m["message"].(string)
			return s, r, msg
		}
	}
	return "", "", ""
}

// zoneEvent reports whether an Event of typ and reason regards the object.
func zoneEvent(cs kubernetes.Interface, kind, ns, name, typ, reason string) bool {
	evs, err := cs.EventsV1().Events(ns).List(context.Background(), metav1.ListOptions{})
	if err != nil {
		return false
	}
	for _, e := range evs.Items {
		if e.Regarding.Kind == kind && e.Regarding.Name == name && e.Type == typ && e.Reason == reason {
			return true
		}
	}
	return false
}

func removeAfter(t *testing.T, c client.Client, objs ...[3]string) {
	t.Cleanup(func() {
		for _, o := range objs {
			u := &unstructured.Unstructured{}
			u.SetGroupVersionKind(schema.GroupVersionKind{Group: "service.io", Version: "v1alpha1", Kind: o[0]})
			u.SetNamespace(o[1])
			u.SetName(o[2])
			_ = c.Delete(context.Background(), u)
		}
	})
}

func startZonePair(t *testing.T, suffix string) (c client.Client, dp *testNode) {
	t.Helper()
	c = needEnv(t)
	if err := env.Namespaces(t.Context(), "team", "intruder"); err != nil {
		t.Fatal(err)
	}
	kc := kubeconfig(t, env.Config, "")
	op := startNode(t, "op-"+suffix, node.RoleOperator, kc)
	dp = startNode(t, "dp-"+suffix, node.RoleDataplane, kc, "SERVICE_INTERNAL_PEERS="+op.Addrs.Internal)
	return c, dp
}

// A record set in a namespace the zone does not admit is never served, and
// says so on its status and with a Warning Event; the zone owner admits a
// namespace by name.
func TestZoneTenancy(t *testing.T) {
	c, dp := startZonePair(t, "ten")
	cs := kubernetes.NewForConfigOrDie(env.Config)
	removeAfter(t, c, [3]string{"DNSZone", "", "bank.test"}, [3]string{"DNSZone", "", "shop.test"},
		[3]string{"DNSRecordSet", "default", "bank"}, [3]string{"DNSRecordSet", "intruder", "hijack"},
		[3]string{"DNSRecordSet", "team", "shop"}, [3]string{"DNSRecordSet", "intruder", "shop-hijack"})
	// bank.test: no recordSetNamespaces, so the default (namespace default only).
	apply(t, c, `apiVersion: service.io/v1alpha1
kind: DNSZone
metadata: {name: bank.test}
spec: {defaultTTL: 60}
---
apiVersion: service.io/v1alpha1
kind: DNSRecordSet
metadata: {name: bank, namespace: default}
spec:
  zoneRef: {name: bank.test}
  endpoints: [{dnsName: app, recordType: A, targets: [192.0.2.10]}]
---
apiVersion: service.io/v1alpha1
kind: DNSRecordSet
metadata: {name: hijack, namespace: intruder}
spec:
  zoneRef: {name: bank.test}
  endpoints: [{dnsName: www, recordType: A, targets: [192.0.2.66]}]
---
apiVersion: service.io/v1alpha1
kind: DNSZone
metadata: {name: shop.test}
spec:
  defaultTTL: 60
  recordSetNamespaces: {from: Names, names: [team]}
---
apiVersion: service.io/v1alpha1
kind: DNSRecordSet
metadata: {name: shop, namespace: team}
spec:
  zoneRef: {name: shop.test}
  endpoints: [{dnsName: www, recordType: A, targets: [192.0.2.20]}]
---
apiVersion: service.io/v1alpha1
kind: DNSRecordSet
metadata: {name: shop-hijack, namespace: intruder}
spec:
  zoneRef: {name: shop.test}
  endpoints: [{dnsName: pay, recordType: A, targets: [192.0.2.66]}]
`)
	nodetest.Eventually(t, 10*time.Second, "admitted record sets served", func() bool {
		return dp.answersA("app.bank.test", "192.0.2.10") && dp.answersA("www.shop.test", "192.0.2.20")
	})
	for _, name := range []string{"www.bank.test", "pay.shop.test"} {
		if rc := dp.rcode(name); rc != dns.RcodeNameError {
			t.Errorf("%s answers %s; a record set from namespace intruder must not be served", name, dns.RcodeToString[rc])
		}
	}
	for _, rs := range []string{"hijack", "shop-hijack"} {
		nodetest.Eventually(t, 30*time.Second, "intruder/"+rs+" refused on its status with an Event", func() bool {
			st, reason, msg := zoneCondition(c, "DNSRecordSet", "intruder", rs, "Ready")
			return st == "False" && reason == "NamespaceNotAllowed" && strings.Contains(msg, "recordSetNamespaces") &&
				zoneEvent(cs, "DNSRecordSet", "intruder", rs, "Warning", "NamespaceNotAllowed")
		})
	}
	nodetest.Eventually(t, 30*time.Second, "admitted record sets Ready", func() bool {
		return ready(c, "DNSRecordSet", "default", "bank") && ready(c, "DNSRecordSet", "team", "shop")
	})

	// The zone owner admits intruder: its record set is served and Ready.
	apply(t, c, `apiVersion: service.io/v1alpha1
kind: DNSZone
metadata: {name: shop.test}
spec:
  defaultTTL: 60
  recordSetNamespaces: {from: Names, names: [team, intruder]}
`)
	nodetest.Eventually(t, 10*time.Second, "pay.shop.test served once admitted", func() bool { return dp.answersA("pay.shop.test", "192.0.2.66") })
	nodetest.Eventually(t, 30*time.Second, "intruder/shop-hijack Ready once admitted", func() bool { return ready(c, "DNSRecordSet", "intruder", "shop-hijack") })
}

// Status comes from the data plane's compile step: what is not served is
// never reported Ready. Single-object mistakes are refused by the apiserver.
func TestZoneStatusTellsTheTruth(t *testing.T) {
	c, dp := startZonePair(t, "truth")
	removeAfter(t, c, [3]string{"DNSZone", "", "truth.test"}, [3]string{"DNSZone", "", "gone.test"},
		[3]string{"DNSRecordSet", "default", "bad-ip"}, [3]string{"DNSRecordSet", "default", "cname-clash"},
		[3]string{"DNSRecordSet", "default", "outside"}, [3]string{"DNSRecordSet", "default", "orphan"}, [3]string{"DNSRecordSet", "default", "ok"})
	apply(t, c, `apiVersion: service.io/v1alpha1
kind: DNSZone
metadata: {name: truth.test}
spec: {defaultTTL: 60}
---
apiVersion: service.io/v1alpha1
kind: DNSZone
metadata: {name: gone.test}
spec: {defaultTTL: 60}
---
apiVersion: service.io/v1alpha1
kind: DNSRecordSet
metadata: {name: ok, namespace: default}
spec:
  zoneRef: {name: truth.test}
  endpoints: [{dnsName: t1, recordType: A, targets: [192.0.2.1]}]
---
apiVersion: service.io/v1alpha1
kind: DNSRecordSet
metadata: {name: bad-ip, namespace: default}
spec:
  zoneRef: {name: truth.test}
  endpoints: [{dnsName: bad, recordType: A, targets: [not-an-ip]}]
---
apiVersion: service.io/v1alpha1
kind: DNSRecordSet
metadata: {name: cname-clash, namespace: default}
spec:
  zoneRef: {name: truth.test}
  endpoints:
    - {dnsName: t2, recordType: A, targets: [192.0.2.2]}
    - {dnsName: t2, recordType: CNAME, targets: [elsewhere.example.]}
---
apiVersion: service.io/v1alpha1
kind: DNSRecordSet
metadata: {name: outside, namespace: default}
spec:
  zoneRef: {name: truth.test}
  endpoints: [{dnsName: www.other.test., recordType: A, targets: [192.0.2.9]}]
---
apiVersion: service.io/v1alpha1
kind: DNSRecordSet
metadata: {name: orphan, namespace: default}
spec:
  zoneRef: {name: gone.test}
  endpoints: [{dnsName: x, recordType: A, targets: [192.0.2.5]}]
`)
	nodetest.Eventually(t, 10*time.Second, "t1.truth.test served", func() bool { return dp.answersA("t1.truth.test", "192.0.2.1") })
	for _, c2 := range []struct{ name, inMsg string }{
		{"bad-ip", "not-an-ip"},
		{"cname-clash", "CNAME and other data"},
		{"outside", "outside zone"},
	} {
		nodetest.Eventually(t, 30*time.Second, c2.name+" Ready=False InvalidRecords", func() bool {
			st, reason, msg := zoneCondition(c, "DNSRecordSet", "default", c2.name, "Ready")
			return st == "False" && reason == "InvalidRecords" && strings.Contains(msg, c2.inMsg)
		})
	}
	nodetest.Eventually(t, 30*time.Second, "orphan Ready while its zone exists", func() bool { return ready(c, "DNSRecordSet", "default", "orphan") })

	// Deleting the zone leaves its record set ZoneNotFound.
	z := &unstructured.Unstructured{}
	z.SetGroupVersionKind(schema.GroupVersionKind{Group: "service.io", Version: "v1alpha1", Kind: "DNSZone"})
	z.SetName("gone.test")
	if err := c.Delete(t.Context(), z); err != nil {
		t.Fatal(err)
	}
	nodetest.Eventually(t, 30*time.Second, "orphan ZoneNotFound after its zone was deleted", func() bool {
		st, reason, _ := zoneCondition(c, "DNSRecordSet", "default", "orphan", "Ready")
		return st == "False" && reason == "ZoneNotFound"
	})

	// The SERIAL column: status.serial is the serial the data plane serves.
	var lastStatus, lastServed int64
	defer func() {
		if t.Failed() {
			t.Logf("last status.serial %d, served SOA serial %d", lastStatus, lastServed)
		}
	}()
	nodetest.Eventually(t, 30*time.Second, "status.serial equals the served SOA serial", func() bool {
		u := &unstructured.Unstructured{}
		u.SetGroupVersionKind(schema.GroupVersionKind{Group: "service.io", Version: "v1alpha1", Kind: "DNSZone"})
		if err := c.Get(t.Context(), client.ObjectKey{Name: "truth.test"}, u); err != nil {
			return false
		}
		serial, ok, _ := unstructured.NestedInt64(u.Object, "status", "serial")
		r := dp.query("truth.test", dns.TypeSOA)
		if !ok || serial == 0 || r == nil || len(r.Answer) != 1 {
			return false
		}
		soa, _ := r.Answer[0].(*dns.SOA)
		lastStatus = serial
		if soa != nil {
			lastServed = int64(soa.Serial)
		}
		return soa != nil && int64(soa.Serial) == serial
	})

	// Single-object mistakes are refused by kubectl apply.
	for _, bad := range []struct{ doc, field string }{
		{`{dnsName: neg, recordType: A, targets: [192.0.2.1], recordTTL: -5}`, "recordTTL"},
		{`{dnsName: "has space", recordType: A, targets: [192.0.2.1]}`, "dnsName"},
		{`{dnsName: c, recordType: CNAME, targets: [a.example., b.example.]}`, "targets"},
	} {
		u := &unstructured.Unstructured{}
		doc := fmt.Sprintf("apiVersion: service.io/v1alpha1\nkind: DNSRecordSet\nmetadata: {name: refused, namespace: default}\nspec:\n  zoneRef: {name: truth.test}\n  endpoints: [%s]\n", bad.doc)
		if err := yamlInto(doc, u); err != nil {
			t.Fatal(err)
		}
		err := c.Patch(t.Context(), u, client.Apply, client.FieldOwner("kubectl"), client.ForceOwnership)
		if !apierrors.IsInvalid(err) || !strings.Contains(err.Error(), bad.field) {
			_ = c.Delete(t.Context(), u)
			t.Errorf("apply of %s: %v; want Invalid naming %s", bad.doc, err, bad.field)
		}
	}
}

// Zone export on the kube driver writes relative names under the origin
// (t1 is t1.apps.test., not t1.), and what it writes imports to the same
// records.
func TestZoneExportRoundTrip(t *testing.T) {
	c, dp := startZonePair(t, "exp")
	removeAfter(t, c, [3]string{"DNSZone", "", "apps.test"}, [3]string{"DNSRecordSet", "default", "apps"})
	apply(t, c, `apiVersion: service.io/v1alpha1
kind: DNSZone
metadata: {name: apps.test}
spec: {defaultTTL: 300}
---
apiVersion: service.io/v1alpha1
kind: DNSRecordSet
metadata: {name: apps, namespace: default}
spec:
  zoneRef: {name: apps.test}
  endpoints:
    - {dnsName: t1, recordType: A, targets: [192.0.2.1], recordTTL: 60}
    - {dnsName: "@", recordType: TXT, targets: ["\"v=spf1 -all\""]}
    - {dnsName: www.apps.test, recordType: CNAME, targets: [t1.apps.test.]}
    - {dnsName: mail.apps.test., recordType: MX, targets: [10 t1.apps.test.]}
`)
	nodetest.Eventually(t, 10*time.Second, "t1.apps.test served", func() bool { return dp.answersA("t1.apps.test", "192.0.2.1") })
	code, body := adminGet(t, dp, "/api/v1/zones/apps.test/export")
	if code != 200 {
		t.Fatalf("export: %d %s", code, body)
	}
	text := string(body)
	if !strings.Contains(text, "\nt1.apps.test.\t60\tIN\tA\t192.0.2.1\n") || strings.Contains(text, "\nt1.\t") {
		t.Fatalf("export writes t1 outside the origin:\n%s", text)
	}
	eps, err := zonefile.Import("apps.test", body)
	if err != nil {
		t.Fatalf("export does not import: %v\n%s", err, text)
	}
	got := map[string]string{}
	for _, e := range eps {
		got[e.DNSName+" "+e.RecordType] = strings.Join(e.Targets, ",")
	}
	want := map[string]string{
		"t1.apps.test A":      "192.0.2.1",
		"apps.test TXT":       `"v=spf1 -all"`,
		"www.apps.test CNAME": "t1.apps.test.",
		"mail.apps.test MX":   "10 t1.apps.test.",
	}
	for k, v := range want {
		if got[k] != v {
			t.Errorf("import(export) %s = %q, want %q (all: %v)", k, got[k], v, got)
		}
	}
	if len(got) != len(want) {
		t.Errorf("import(export) = %v, want %v", got, want)
	}
	// Each imported name is what the data plane answers.
	for _, e := range eps {
		if e.RecordType != "A" {
			continue
		}
		for _, target := range e.Targets {
			if !dp.answersA(e.DNSName, target) {
				t.Errorf("%s does not answer %s", e.DNSName, target)
			}
		}
	}
}

func yamlInto(doc string, u *unstructured.Unstructured) error {
	return sigsyaml.Unmarshal([]byte(doc), &u.Object)
}
