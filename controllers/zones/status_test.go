package zones

import (
	"strings"
	"testing"
	"time"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"

	"github.com/svcdns/svc/api/v1alpha1"
	"github.com/svcdns/svc/dataplane/authority"
)

func cond(t *testing.T, conds []metav1.Condition, typ string) metav1.Condition {
	t.Helper()
	for _, c := range conds {
		if c.Type == typ {
			return c
		}
	}
	t.Fatalf("no %s condition in %+v", typ, conds)
	return metav1.Condition{}
}

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
			st := ZoneStatus(z, tc.c, tc.found, 2, 0, nil, nil, now)
			ready := cond(t, st.Conditions, ConditionReady)
			if ready.Status != tc.wantStatus || ready.Reason != tc.wantReason {
				t.Fatalf("conditions = %+v, want %s %s", st.Conditions, tc.wantStatus, tc.wantReason)
			}
			if st.Serial != tc.wantSerial || st.ObservedGeneration != 3 || ready.ObservedGeneration != 3 || st.RecordSets != 2 {
				t.Fatalf("status = %+v", st)
			}
		})
	}
}

func TestConditionKeepsTransitionTime(t *testing.T) {
	t0 := time.Date(2026, 11, 22, 8, 0, 0, 0, time.UTC)
	rs := &v1alpha1.DNSRecordSet{ObjectMeta: metav1.ObjectMeta{Generation: 1}, Spec: v1alpha1.DNSRecordSetSpec{ZoneRef: v1alpha1.ZoneRef{Name: "z"},
		Endpoints: []v1alpha1.Endpoint{{DNSName: "a.z", RecordType: "A", Targets: []string{"192.0.2.1"}}, {DNSName: "A.z.", RecordType: "AAAA", Targets: []string{"2001:db8::1"}}}}}
	first := RecordSetStatus(rs, nil, nil, t0)
	if first.Names != 1 || cond(t, first.Conditions, ConditionReady).Status != metav1.ConditionTrue {
		t.Fatalf("first = %+v, want 1 name (case and trailing dot folded), Ready", first)
	}
	later := RecordSetStatus(rs, nil, first.Conditions, t0.Add(time.Hour))
	if a, b := cond(t, later.Conditions, ConditionReady), cond(t, first.Conditions, ConditionReady); !a.LastTransitionTime.Equal(&b.LastTransitionTime) {
		t.Fatal("an unchanged Ready condition moved its transition time")
	}
	broken := RecordSetStatus(rs, []authority.Problem{{Endpoint: 0, Target: 0, Reason: "bad address"}}, later.Conditions, t0.Add(2*time.Hour))
	if c := cond(t, broken.Conditions, ConditionReady); c.Status != metav1.ConditionFalse || c.Reason != ReasonInvalidRecords || c.LastTransitionTime.Time != t0.Add(2*time.Hour) {
		t.Fatalf("broken = %+v", c)
	}
	if c := cond(t, broken.Conditions, ConditionDegraded); c.Status != metav1.ConditionTrue || c.Reason != ReasonPartiallyServed {
		t.Fatalf("degraded = %+v", c)
	}
}

// The statuses come from the compile step: what the data plane drops is
// never reported as served.
func TestEvaluateReportsWhatIsNotServed(t *testing.T) {
	now := time.Date(2026, 11, 22, 8, 0, 0, 0, time.UTC)
	zone := v1alpha1.DNSZone{ObjectMeta: metav1.ObjectMeta{Name: "apps.test", UID: "z", Generation: 1, ResourceVersion: "5"}}
	set := func(ns, name, zoneName string, eps ...v1alpha1.Endpoint) v1alpha1.DNSRecordSet {
		return v1alpha1.DNSRecordSet{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: name, UID: types.UID(name), Generation: 1, ResourceVersion: "7"},
			Spec: v1alpha1.DNSRecordSetSpec{ZoneRef: v1alpha1.ZoneRef{Name: zoneName}, Endpoints: eps}}
	}
	ep := func(n, typ string, targets ...string) v1alpha1.Endpoint {
		return v1alpha1.Endpoint{DNSName: n, RecordType: typ, Targets: targets}
	}
	cases := []struct {
		name       string
		rs         v1alpha1.DNSRecordSet
		wantReason string
		wantInMsg  string
	}{
		{"served", set("default", "ok", "apps.test", ep("t1", "A", "192.0.2.1")), ReasonServing, "served"},
		{"bad address", set("default", "bad", "apps.test", ep("t1", "A", "not-an-ip")), ReasonInvalidRecords, "not-an-ip"},
		{"partly bad", set("default", "part", "apps.test", ep("t1", "A", "192.0.2.1", "not-an-ip")), ReasonInvalidRecords, "1 of 2"},
		{"outside", set("default", "out", "apps.test", ep("www.other.test.", "A", "192.0.2.1")), ReasonInvalidRecords, "outside zone"},
		{"cname and other", set("default", "cn", "apps.test", ep("x", "A", "192.0.2.1"), ep("x", "CNAME", "y.test.")), ReasonInvalidRecords, "CNAME and other data"},
		{"no zone", set("default", "gone", "deleted.test", ep("x", "A", "192.0.2.1")), authority.CodeZoneNotFound, "does not exist"},
		{"tenant", set("intruder", "hijack", "apps.test", ep("www", "A", "192.0.2.66")), authority.CodeNamespaceNotAllowed, "recordSetNamespaces"},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			var s Serials
			res := Evaluate(&s, []v1alpha1.DNSZone{zone}, []v1alpha1.DNSRecordSet{c.rs}, now)
			st := RecordSetStatus(&c.rs, res.Problems[Key("DNSRecordSet", c.rs.Namespace, c.rs.Name)], nil, now)
			ready := cond(t, st.Conditions, ConditionReady)
			wantStatus := metav1.ConditionFalse
			if c.wantReason == ReasonServing {
				wantStatus = metav1.ConditionTrue
			}
			if ready.Status != wantStatus || ready.Reason != c.wantReason || !strings.Contains(ready.Message, c.wantInMsg) {
				t.Fatalf("Ready = %s %s %q, want %s %s containing %q", ready.Status, ready.Reason, ready.Message, wantStatus, c.wantReason, c.wantInMsg)
			}
		})
	}
}

func TestSerialsAgreeAcrossProcesses(t *testing.T) {
	zone := v1alpha1.DNSZone{ObjectMeta: metav1.ObjectMeta{Name: "z", UID: "u", Generation: 1, ResourceVersion: "3"}}
	set := func(name, rv string, gen int64) v1alpha1.DNSRecordSet {
		return v1alpha1.DNSRecordSet{ObjectMeta: metav1.ObjectMeta{Namespace: "default", Name: name, UID: types.UID(name), ResourceVersion: rv, Generation: gen},
			Spec: v1alpha1.DNSRecordSetSpec{ZoneRef: v1alpha1.ZoneRef{Name: "z"}}}
	}
	sets := []v1alpha1.DNSRecordSet{set("a", "5", 1), set("b", "9", 1)}
	var operator, longRunning Serials
	first := operator.Assign([]v1alpha1.DNSZone{zone}, sets)["z"]
	longRunning.Assign([]v1alpha1.DNSZone{zone}, sets)
	if first.Serial != 9 {
		t.Fatalf("first serial %d, want 9", first.Serial)
	}
	// The operator records it; the zone's resourceVersion moves with the write.
	zone.Status.Serial, zone.Status.SerialDigest, zone.ResourceVersion = int64(first.Serial), first.Digest, "12"
	// A removal: every process, fresh or not, serves the same larger serial.
	sets = sets[:1]
	var fresh Serials
	a := operator.Assign([]v1alpha1.DNSZone{zone}, sets)["z"]
	b := longRunning.Assign([]v1alpha1.DNSZone{zone}, sets)["z"]
	c := fresh.Assign([]v1alpha1.DNSZone{zone}, sets)["z"]
	if a.Serial <= first.Serial || a != b || b != c {
		t.Fatalf("after a removal: operator %d, long-running pod %d, new pod %d; want equal and above %d", a.Serial, b.Serial, c.Serial, first.Serial)
	}
	// A new pod started after the status was written serves the recorded serial.
	zone.Status.Serial, zone.Status.SerialDigest, zone.ResourceVersion = int64(a.Serial), a.Digest, "14"
	var later Serials
	if got := later.Assign([]v1alpha1.DNSZone{zone}, sets)["z"]; got.Serial != a.Serial {
		t.Fatalf("a pod started later serves %d, want the recorded %d", got.Serial, a.Serial)
	}
}
