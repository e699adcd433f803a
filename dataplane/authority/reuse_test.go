package authority

import (
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/miekg/dns"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"

	"github.com/svcdns/svc/api/v1alpha1"
)

// stored gives an object the identity a store gives it.
func stored(m *metav1.ObjectMeta, uid string, gen int64) {
	m.UID, m.Generation = types.UID(uid), gen
}

func lookupA(t *testing.T, tab *Table, name string) string {
	t.Helper()
	a := tab.Lookup(wireName(t, name), dns.TypeA, Client{})
	if a.Kind != Answered {
		return "kind " + a.Kind.String()
	}
	var out []string
	for _, rr := range a.Answer {
		out = append(out, rr.(*dns.A).A.String())
	}
	if len(out) == 0 && a.Wire != nil {
		return "wire"
	}
	return strings.Join(out, ",")
}

func TestCompileReusingTakesOverUnchangedZones(t *testing.T) {
	now := time.Date(2026, 1, 1, 12, 0, 0, 0, time.UTC)
	za, zb := zoneObj("a-example"), zoneObj("b-example")
	za.Spec.ZoneName, zb.Spec.ZoneName = "a.example", "b.example"
	stored(&za.ObjectMeta, "uid-za", 1)
	stored(&zb.ObjectMeta, "uid-zb", 1)
	ra := recordSet("default", "ra", "a-example", ep("www", "A", "192.0.2.1"))
	rb := recordSet("default", "rb", "b-example", ep("www", "A", "192.0.2.2"), ep("bad", "A", "not-an-address"),
		withExt(ep("soon", "A", "192.0.2.3"), v1alpha1.EndpointExtension{ExpiresAt: &metav1.Time{Time: now.Add(time.Hour)}}))
	stored(&ra.ObjectMeta, "uid-ra", 1)
	stored(&rb.ObjectMeta, "uid-rb", 1)
	zones := []v1alpha1.DNSZone{za, zb}
	t1, p1 := CompileReusing(nil, zones, []v1alpha1.DNSRecordSet{ra, rb}, now)
	if len(p1) != 1 || p1[0].Name != "rb" {
		t.Fatalf("problems %v", p1)
	}
	wa, wb := t1.zoneByName("a.example"), t1.zoneByName("b.example")

	// a changes (new generation); b does not and is taken over as is,
	// its problem still reported and its expiry still scheduled.
	ra.Spec.Endpoints[0].Targets = []string{"192.0.2.9"}
	ra.Generation = 2
	t2, p2 := CompileReusing(t1, zones, []v1alpha1.DNSRecordSet{ra, rb}, now.Add(time.Minute))
	if t2.zoneByName("b.example") != wb {
		t.Fatal("unchanged zone b.example was compiled again")
	}
	if t2.zoneByName("a.example") == wa {
		t.Fatal("changed zone a.example was taken over")
	}
	if got := lookupA(t, t2, "www.a.example."); got != "192.0.2.9" && got != "wire" {
		t.Fatalf("www.a.example = %s", got)
	}
	if got := lookupA(t, t2, "www.a.example."); got == "192.0.2.1" {
		t.Fatal("old answer served after the change")
	}
	if len(p2) != 1 || p2[0].Name != "rb" {
		t.Fatalf("reused zone's problems %v", p2)
	}
	if !t2.NextChange().Equal(now.Add(time.Hour)) {
		t.Fatalf("next change %v, want the reused zone's expiry", t2.NextChange())
	}
	// The old table still answers as before: zones are shared, not changed.
	if got := lookupA(t, t1, "soon.b.example."); got == "kind NXDomain" {
		t.Fatal("old table changed")
	}

	// Once the expiry passes, b is compiled again and the record is gone.
	t3, _ := CompileReusing(t2, zones, []v1alpha1.DNSRecordSet{ra, rb}, now.Add(2*time.Hour))
	if t3.zoneByName("b.example") == wb {
		t.Fatal("zone with an expired record was taken over")
	}
	if got := lookupA(t, t3, "soon.b.example."); got != "kind NXDomain" {
		t.Fatalf("expired record still served: %s", got)
	}

	// A record set removed, a serial change, or an object never stored
	// (no UID) all compile the zone again.
	t4, _ := CompileReusing(t3, zones, []v1alpha1.DNSRecordSet{ra}, now.Add(2*time.Hour))
	if t4.zoneByName("b.example") == t3.zoneByName("b.example") {
		t.Fatal("zone whose record set was removed was taken over")
	}
	if got := lookupA(t, t4, "www.b.example."); got != "kind NXDomain" {
		t.Fatalf("removed record set still served: %s", got)
	}
	zs := []v1alpha1.DNSZone{za, zb}
	zs[0].Spec.SOA = &v1alpha1.SOA{Serial: 7}
	t5, _ := CompileReusing(t4, zs, []v1alpha1.DNSRecordSet{ra}, now.Add(2*time.Hour))
	if t5.zoneByName("a.example") == t4.zoneByName("a.example") {
		t.Fatal("serial change did not recompile")
	}
	if t5.zoneByName("b.example") != t4.zoneByName("b.example") {
		t.Fatal("untouched zone recompiled")
	}
	loose := []v1alpha1.DNSZone{zoneObj("a-example", func(z *v1alpha1.DNSZone) { z.Spec.ZoneName = "a.example" })}
	t6, _ := CompileReusing(t5, loose, nil, now)
	t7, _ := CompileReusing(t6, loose, nil, now)
	if t7.zoneByName("a.example") == t6.zoneByName("a.example") {
		t.Fatal("object without UID taken over")
	}
	// Unsynced copies are never a source of reuse.
	t8, _ := CompileReusing(t5.WithSync(func(string, string) bool { return false }), zs, []v1alpha1.DNSRecordSet{ra}, now.Add(2*time.Hour))
	if t8.zoneByName("b.example").unsynced {
		t.Fatal("unsynced zone taken over")
	}
}

// BenchmarkRecompileBesideMillion changes one record of a small zone next to
// a 1,000,000-record zone and compiles again, with CompileReusing (the big
// zone taken over) and with Compile (everything encoded), in the same run.
//
//	go test ./dataplane/authority -run '^$' -bench RecompileBesideMillion -benchtime 3x
func BenchmarkRecompileBesideMillion(b *testing.B) {
	zones, sets := bigZone(1_000_000)
	for i := range zones {
		stored(&zones[i].ObjectMeta, "uid-zone-"+zones[i].Name, 1)
	}
	for i := range sets {
		stored(&sets[i].ObjectMeta, "uid-set-"+sets[i].Namespace+"/"+sets[i].Name, 1)
	}
	small := zoneObj("small", func(z *v1alpha1.DNSZone) { z.Spec.ZoneName = "small.example" })
	stored(&small.ObjectMeta, "uid-small", 1)
	rs := recordSet("default", "small-www", "small", ep("www", "A", "192.0.2.1"))
	stored(&rs.ObjectMeta, "uid-small-www", 1)
	zones = append(zones, small)
	sets = append(sets, rs)
	prev, _ := CompileReusing(nil, zones, sets, fixtureNow)
	var reuse, full time.Duration
	for b.Loop() {
		last := &sets[len(sets)-1]
		last.Generation++
		last.Spec.Endpoints[0].Targets = []string{fmt.Sprintf("192.0.2.%d", last.Generation%250+1)}
		c0 := cpuTime()
		next, problems := CompileReusing(prev, zones, sets, fixtureNow)
		c1 := cpuTime()
		if len(problems) > 0 || next.zoneByName("small.example") == prev.zoneByName("small.example") {
			b.Fatal("small zone not recompiled")
		}
		prev = next
		_, _ = Compile(zones, sets, fixtureNow)
		c2 := cpuTime()
		reuse += c1 - c0
		full += c2 - c1
	}
	b.ReportMetric(reuse.Seconds()/float64(b.N), "reuse-cpu-s")
	b.ReportMetric(full.Seconds()/float64(b.N), "full-cpu-s")
	b.ReportMetric(full.Seconds()/reuse.Seconds(), "full/reuse")
}
