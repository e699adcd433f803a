package zones_test

import (
	"path/filepath"
	"testing"
	"time"

	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime"
	"sigs.k8s.io/yaml"

	"github.com/svcdns/svc/api/v1alpha1"
	"github.com/svcdns/svc/controllers/zones"
	"github.com/svcdns/svc/internal/store"
	"github.com/svcdns/svc/internal/store/sqlite"
	"github.com/svcdns/svc/internal/validation"
)

// The SQLite mode applies the same tenancy rule and writes the same
// statuses: objects admitted by the in-process CRD validation into a real
// SQLite file, statuses written through the store and read back.
func TestSQLiteTenancyAndStatus(t *testing.T) {
	ctx := t.Context()
	v, err := validation.New()
	if err != nil {
		t.Fatal(err)
	}
	st, err := sqlite.NewStore(ctx, filepath.Join(t.TempDir(), "state.db"), v, sqlite.Options{})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { st.Close() })
	for _, doc := range []string{
		`{apiVersion: service.io/v1alpha1, kind: DNSZone, metadata: {name: bank.test}, spec: {defaultTTL: 60}}`,
		`{apiVersion: service.io/v1alpha1, kind: DNSRecordSet, metadata: {name: ok, namespace: default}, spec: {zoneRef: {name: bank.test}, endpoints: [{dnsName: app, recordType: A, targets: [192.0.2.1]}]}}`,
		`{apiVersion: service.io/v1alpha1, kind: DNSRecordSet, metadata: {name: bad, namespace: default}, spec: {zoneRef: {name: bank.test}, endpoints: [{dnsName: www.other.test., recordType: A, targets: [192.0.2.9]}]}}`,
		`{apiVersion: service.io/v1alpha1, kind: DNSRecordSet, metadata: {name: hijack, namespace: intruder}, spec: {zoneRef: {name: bank.test}, endpoints: [{dnsName: www, recordType: A, targets: [192.0.2.66]}]}}`,
	} {
		u := &unstructured.Unstructured{}
		if err := yaml.Unmarshal([]byte(doc), &u.Object); err != nil {
			t.Fatal(err)
		}
		if _, err := st.Apply(ctx, u, store.ApplyOptions{Manager: store.ManagerAPI}); err != nil {
			t.Fatalf("apply %s: %v", u.GetName(), err)
		}
	}
	load := func() ([]v1alpha1.DNSZone, []v1alpha1.DNSRecordSet) {
		var zs []v1alpha1.DNSZone
		var rs []v1alpha1.DNSRecordSet
		for _, kind := range []string{store.KindDNSZone, store.KindDNSRecordSet} {
			page, err := st.List(ctx, store.ListOptions{Kind: kind})
			if err != nil {
				t.Fatal(err)
			}
			for _, u := range page.Items {
				if kind == store.KindDNSZone {
					var z v1alpha1.DNSZone
					if err := runtime.DefaultUnstructuredConverter.FromUnstructured(u.Object, &z); err != nil {
						t.Fatal(err)
					}
					zs = append(zs, z)
				} else {
					var r v1alpha1.DNSRecordSet
					if err := runtime.DefaultUnstructuredConverter.FromUnstructured(u.Object, &r); err != nil {
						t.Fatal(err)
					}
					rs = append(rs, r)
				}
			}
		}
		return zs, rs
	}
	zs, rs := load()
	if ns := zs[0].Spec.RecordSetNamespaces; ns == nil || ns.From != "Names" || len(ns.Names) != 1 || ns.Names[0] != "default" {
		t.Fatalf("admitted zone recordSetNamespaces = %+v, want the default {Names [default]}", ns)
	}
	var serials zones.Serials
	res := zones.Evaluate(&serials, zs, rs, time.Now())
	w := zones.Writer{Store: st, Now: time.Now}
	if err := w.Sync(ctx, zs, rs, res); err != nil {
		t.Fatal(err)
	}
	zs, rs = load()
	want := map[string]string{"ok": "True/Serving", "bad": "False/InvalidRecords", "hijack": "False/NamespaceNotAllowed"}
	for _, r := range rs {
		got := ""
		for _, c := range r.Status.Conditions {
			if c.Type == zones.ConditionReady {
				got = string(c.Status) + "/" + c.Reason
			}
		}
		if got != want[r.Name] {
			t.Errorf("%s/%s Ready = %q, want %q", r.Namespace, r.Name, got, want[r.Name])
		}
	}
	if s := zs[0].Status.Serial; s == 0 || s != res.Zones["bank.test"].Serial || zs[0].Status.SerialDigest == "" {
		t.Errorf("zone status serial %d digest %q, want the compiled serial %d", s, zs[0].Status.SerialDigest, res.Zones["bank.test"].Serial)
	}
	// A second pass over the re-read objects writes nothing new: the serial
	// holds although the status write moved the zone's resourceVersion.
	again := zones.Evaluate(&zones.Serials{}, zs, rs, time.Now())
	if again.Zones["bank.test"].Serial != res.Zones["bank.test"].Serial {
		t.Errorf("a fresh process serves serial %d, the status says %d", again.Zones["bank.test"].Serial, res.Zones["bank.test"].Serial)
	}
}
