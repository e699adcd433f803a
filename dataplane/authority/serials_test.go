package authority

import (
	"testing"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/svcdns/svc/api/v1alpha1"
)

// A serial the user set (an imported zone file's) is where the zone starts;
// every change after it still raises the served serial, in every process
// that runs the rule, and a lowered spec.soa.serial never lowers it.
func TestSerialsUserSerialIsAFloor(t *testing.T) {
	zone := v1alpha1.DNSZone{ObjectMeta: metav1.ObjectMeta{Name: "z", UID: "u", Generation: 1, ResourceVersion: "3"},
		Spec: v1alpha1.DNSZoneSpec{SOA: &v1alpha1.SOA{Serial: 2024010101}}}
	set := func(gen int64, rv string) []v1alpha1.DNSRecordSet {
		return []v1alpha1.DNSRecordSet{{ObjectMeta: metav1.ObjectMeta{Name: "a", Namespace: "default", UID: "s", Generation: gen, ResourceVersion: rv},
			Spec: v1alpha1.DNSRecordSetSpec{ZoneRef: v1alpha1.ZoneRef{Name: "z"}}}}
	}
	var long Serials
	assign := func(s *Serials, z v1alpha1.DNSZone, sets []v1alpha1.DNSRecordSet) Assigned {
		zs := []v1alpha1.DNSZone{z}
		a := s.Assign(zs, sets)["z"]
		if zs[0].Spec.SOA.Serial != int64(a.Serial) {
			t.Fatalf("spec.soa.serial of the copy %d, returned %d", zs[0].Spec.SOA.Serial, a.Serial)
		}
		return a
	}
	first := assign(&long, zone, set(1, "5"))
	if first.Serial != 2024010101 {
		t.Fatalf("imported zone served with %d, want the file's 2024010101", first.Serial)
	}
	if again := assign(&long, zone, set(1, "5")); again != first {
		t.Fatalf("unchanged content moved from %d to %d", first.Serial, again.Serial)
	}
	// a record changes before the status writer recorded anything
	changed := assign(&long, zone, set(2, "7"))
	if changed.Serial != 2024010102 {
		t.Fatalf("after a change %d, want 2024010102", changed.Serial)
	}
	// the status writer records it; a process started now agrees
	zone.Status.Serial, zone.Status.SerialDigest = int64(changed.Serial), changed.Digest
	var fresh Serials
	if got := assign(&fresh, zone, set(2, "7")); got != changed {
		t.Fatalf("a new process serves %d, the long-running one %d", got.Serial, changed.Serial)
	}
	// another change: both move to the same greater serial
	a, b := assign(&long, zone, set(3, "9")), assign(&fresh, zone, set(3, "9"))
	if a != b || a.Serial != 2024010103 {
		t.Fatalf("second change: %d and %d, want both 2024010103", a.Serial, b.Serial)
	}
	zone.Status.Serial, zone.Status.SerialDigest = int64(a.Serial), a.Digest
	// the user lowers spec.soa.serial: ignored, the serial still grows
	zone.Spec.SOA = &v1alpha1.SOA{Serial: 7}
	zone.Generation = 2
	if got := assign(&long, zone, set(3, "9")); got.Serial != 2024010104 {
		t.Fatalf("lowered user serial: %d, want 2024010104", got.Serial)
	}
	// the user raises it: the zone jumps to it
	zone.Spec.SOA = &v1alpha1.SOA{Serial: 2025010101}
	zone.Generation = 3
	if got := assign(&long, zone, set(3, "9")); got.Serial != 2025010101 {
		t.Fatalf("raised user serial: %d, want 2025010101", got.Serial)
	}
}

// A user serial at the top of the space wraps as RFC 1982 says (and skips
// 0, which means "not assigned").
func TestSerialsUserSerialWraps(t *testing.T) {
	zone := v1alpha1.DNSZone{ObjectMeta: metav1.ObjectMeta{Name: "z", UID: "u", Generation: 1, ResourceVersion: "3"},
		Spec: v1alpha1.DNSZoneSpec{SOA: &v1alpha1.SOA{Serial: 4294967295}}}
	var s Serials
	first := s.Assign([]v1alpha1.DNSZone{zone}, nil)["z"]
	zone.Status.Serial, zone.Status.SerialDigest = int64(first.Serial), first.Digest
	zone.Generation = 2 // a change of the zone's own spec (its TTL, say)
	next := s.Assign([]v1alpha1.DNSZone{zone}, nil)["z"]
	if first.Serial != 4294967295 || next.Serial == 0 || !serialLess(first.Serial, next.Serial) {
		t.Fatalf("serials %d then %d, want 4294967295 then a greater one (RFC 1982) other than 0", first.Serial, next.Serial)
	}
}

func TestSerialLess(t *testing.T) {
	for _, c := range []struct {
		a, b uint32
		want bool
	}{{1, 2, true}, {2, 1, false}, {5, 5, false}, {4294967295, 1, true}, {1, 4294967295, false}, {0, 1 << 31, false}, {1, 1<<31 - 1, true}} {
		if got := serialLess(c.a, c.b); got != c.want {
			t.Errorf("serialLess(%d, %d) = %v, want %v", c.a, c.b, got, c.want)
		}
	}
}
