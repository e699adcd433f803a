package zones

import (
	"testing"
	"time"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/svcdns/svc/api/v1alpha1"
)

func TestZoneStatus(t *testing.T) {
	now := time.Date(2026, 11, 22, 8, 0, 0, 0, time.UTC)
	z := &v1alpha1.DNSZone{ObjectMeta: metav1.ObjectMeta{Name: "example.test", Generation: 3}}
	for _, tc := range []struct {
		name       string
		c          Compiled
		found      bool
		wantStatus metav1.ConditionStatus
		wantReason string
		wantSerial int64
	}{
		{"served", Compiled{Serial: 7, Records: 12, Synced: true}, true, metav1.ConditionTrue, "Serving", 7},
		{"not compiled", Compiled{}, false, metav1.ConditionFalse, "NotCompiled", 0},
		{"stale store", Compiled{Serial: 7, Synced: false}, true, metav1.ConditionFalse, "Unsynced", 0},
	} {
		t.Run(tc.name, func(t *testing.T) {
			st := ZoneStatus(z, tc.c, tc.found, 2, nil, now)
			if len(st.Conditions) != 1 || st.Conditions[0].Status != tc.wantStatus || st.Conditions[0].Reason != tc.wantReason {
				t.Fatalf("conditions = %+v, want %s %s", st.Conditions, tc.wantStatus, tc.wantReason)
			}
			if st.Serial != tc.wantSerial || st.ObservedGeneration != 3 || st.Conditions[0].ObservedGeneration != 3 || st.RecordSets != 2 {
				t.Fatalf("status = %+v", st)
			}
		})
	}
}

func TestConditionKeepsTransitionTime(t *testing.T) {
	t0 := time.Date(2026, 11, 22, 8, 0, 0, 0, time.UTC)
	rs := &v1alpha1.DNSRecordSet{ObjectMeta: metav1.ObjectMeta{Generation: 1}, Spec: v1alpha1.DNSRecordSetSpec{ZoneRef: v1alpha1.ZoneRef{Name: "z"},
		Endpoints: []v1alpha1.Endpoint{{DNSName: "a.z", RecordType: "A", Targets: []string{"192.0.2.1"}}, {DNSName: "A.z.", RecordType: "AAAA", Targets: []string{"2001:db8::1"}}}}}
	first := RecordSetStatus(rs, true, nil, nil, t0)
	if first.Names != 1 || first.Conditions[0].Status != metav1.ConditionTrue {
		t.Fatalf("first = %+v, want 1 name (case and trailing dot folded), Ready", first)
	}
	later := RecordSetStatus(rs, true, nil, first.Conditions, t0.Add(time.Hour))
	if !later.Conditions[0].LastTransitionTime.Equal(&first.Conditions[0].LastTransitionTime) {
		t.Fatal("an unchanged Ready condition moved its transition time")
	}
	broken := RecordSetStatus(rs, true, []string{"endpoint 0 target 0: bad address"}, later.Conditions, t0.Add(2*time.Hour))
	if broken.Conditions[0].Status != metav1.ConditionFalse || broken.Conditions[0].Reason != "InvalidRecords" || broken.Conditions[0].LastTransitionTime.Time != t0.Add(2*time.Hour) {
		t.Fatalf("broken = %+v", broken.Conditions[0])
	}
	if missing := RecordSetStatus(rs, false, nil, nil, t0); missing.Conditions[0].Reason != "ZoneNotFound" {
		t.Fatalf("missing zone = %+v", missing.Conditions[0])
	}
}
