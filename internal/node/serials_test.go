package node

import (
	"testing"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"

	"github.com/svcdns/svc/api/v1alpha1"
)

func TestSerialsGrowWithEveryChangeIncludingRemovals(t *testing.T) {
	zone := func(rv string, gen int64) v1alpha1.DNSZone {
		return v1alpha1.DNSZone{ObjectMeta: metav1.ObjectMeta{Name: "z", UID: "u", ResourceVersion: rv, Generation: gen}}
	}
	set := func(name, rv string, gen int64) v1alpha1.DNSRecordSet {
		return v1alpha1.DNSRecordSet{ObjectMeta: metav1.ObjectMeta{Namespace: "d", Name: name, UID: types.UID("u-" + name), ResourceVersion: rv, Generation: gen},
			Spec: v1alpha1.DNSRecordSetSpec{ZoneRef: v1alpha1.ZoneRef{Name: "z"}}}
	}
	var s serials
	serialOf := func(zs []v1alpha1.DNSZone, rs []v1alpha1.DNSRecordSet) int64 {
		s.assign(zs, rs)
		return zs[0].Spec.SOA.Serial
	}
	first := serialOf([]v1alpha1.DNSZone{zone("1", 1)}, []v1alpha1.DNSRecordSet{set("a", "5", 1), set("b", "9", 1)})
	if first != 9 {
		t.Fatalf("first serial %d, want the highest resource version 9", first)
	}
	if again := serialOf([]v1alpha1.DNSZone{zone("1", 1)}, []v1alpha1.DNSRecordSet{set("a", "5", 1), set("b", "9", 1)}); again != first {
		t.Fatalf("unchanged content moved the serial %d -> %d", first, again)
	}
	// Status writes move resource versions without changing content.
	if st := serialOf([]v1alpha1.DNSZone{zone("12", 1)}, []v1alpha1.DNSRecordSet{set("a", "10", 1), set("b", "11", 1)}); st != first {
		t.Fatalf("a status-only change moved the serial %d -> %d", first, st)
	}
	// Removing the set with the highest version must still raise the serial.
	removed := serialOf([]v1alpha1.DNSZone{zone("12", 1)}, []v1alpha1.DNSRecordSet{set("a", "10", 1)})
	if removed <= first {
		t.Fatalf("serial after a removal %d, want more than %d", removed, first)
	}
	edited := serialOf([]v1alpha1.DNSZone{zone("12", 1)}, []v1alpha1.DNSRecordSet{set("a", "30", 2)})
	if edited != 30 {
		t.Fatalf("serial after an edit %d, want 30", edited)
	}
	// A serial the user set is kept.
	user := zone("40", 2)
	user.Spec.SOA = &v1alpha1.SOA{Serial: 2026112201}
	if got := serialOf([]v1alpha1.DNSZone{user}, nil); got != 2026112201 {
		t.Fatalf("user serial replaced by %d", got)
	}
}
