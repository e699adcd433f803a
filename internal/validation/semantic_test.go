package validation

import (
	"context"
	"fmt"
	"io/fs"
	"regexp"
	"strings"
	"testing"

	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"

	"github.com/svcdns/svc/api/v1alpha1"
	"github.com/svcdns/svc/config/crd"
	"github.com/svcdns/svc/dataplane/authority"
)

// Each input an admin typed (issue 18) is refused at write time with a
// message that names the field, the value and what is expected: before, the
// schema let them through and only status (or nothing) said why.
func TestAdmitRefusesWhatTheDataPlaneWouldRefuse(t *testing.T) {
	v := newValidator(t)
	b := bases(t)
	cases := []struct {
		name  string
		kind  string
		edits []edit
		want  []string // all in the message
	}{
		{"record type AA", "DNSRecordSet", []edit{set("spec.endpoints[0].recordType", "AA")},
			[]string{`spec.endpoints[0].recordType: Invalid value: "AA"`, "unknown record type", "expected a type such as A, AAAA", `did you mean "A"`}},
		{"A 192.0.2.300", "DNSRecordSet", []edit{set("spec.endpoints[0].targets", []any{"192.0.2.300"})},
			[]string{`spec.endpoints[0].targets[0]: Invalid value: "192.0.2.300"`, "is not an IPv4 address", `e.g. "192.0.2.10"`}},
		{"AAAA with an IPv4 address", "DNSRecordSet", []edit{set("spec.endpoints[0].recordType", "AAAA")},
			[]string{`spec.endpoints[0].targets[0]: Invalid value: "192.0.2.10"`, "not an IPv6 address", "2001:db8::10"}},
		{"MX without a preference", "DNSRecordSet", []edit{set("spec.endpoints[0].recordType", "MX"), set("spec.endpoints[0].targets", []any{"mail.example.com."})},
			[]string{`spec.endpoints[0].targets[0]: Invalid value: "mail.example.com."`, "<preference> <mail host>", `"10 mail.example.com."`}},
		{"owner name with a space", "DNSRecordSet", []edit{set("spec.endpoints[0].dnsName", "my host")},
			[]string{`spec.endpoints[0].dnsName: Invalid value: "my host"`, "blank", "e.g. www"}},
		{"owner name with an empty label", "DNSRecordSet", []edit{set("spec.endpoints[0].dnsName", "a..b")},
			[]string{`spec.endpoints[0].dnsName: Invalid value: "a..b"`, "empty label"}},
		{"owner label over 63", "DNSRecordSet", []edit{set("spec.endpoints[0].dnsName", strings.Repeat("a", 64))},
			[]string{`spec.endpoints[0].dnsName`, "at most 63"}},
		{"CNAME and other data", "DNSRecordSet", []edit{set("spec.endpoints[1].dnsName", "web"), set("spec.endpoints[1].recordType", "CNAME"),
			set("spec.endpoints[1].targets", []any{"elsewhere.example."}), set("spec.endpoints[0].dnsName", "web")},
			[]string{"spec.endpoints[1].targets[0]", "CNAME and other data", "remove one of them"}},
		{"schedule tz Europe/Berln", "Policy", []edit{set("spec.schedule", map[string]any{"start": "21:00", "end": "07:00", "tz": "Europe/Berln"})},
			[]string{`spec.schedule.tz: Invalid value: "Europe/Berln"`, "unknown time zone", `did you mean "Europe/Berlin"`}},
		{"blockTTL", "Policy", []edit{set("spec.blockTTL", "5 minutes")},
			[]string{`spec.blockTTL: Invalid value: "5 minutes"`, "e.g. 10s, 5m"}},
		{"zone allowCIDRs", "DNSZone", []edit{set("spec.queryAccess", map[string]any{"allowCIDRs": []any{"10.0.0.0/33"}})},
			[]string{`spec.queryAccess.allowCIDRs[0]: Invalid value: "10.0.0.0/33"`, "192.0.2.0/24"}},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			err := v.Admit(context.Background(), build(b[c.kind], c.edits), nil)
			if err == nil {
				t.Fatal("admitted")
			}
			for _, w := range c.want {
				if !strings.Contains(err.Error(), w) {
					t.Errorf("message lacks %q:\n%v", w, err)
				}
			}
		})
	}
	// The bases themselves (a disabled or public record included) stay valid.
	for _, k := range []string{"DNSRecordSet", "Policy", "DNSZone"} {
		if err := v.Admit(context.Background(), build(b[k], nil), nil); err != nil {
			t.Errorf("%s base refused: %v", k, err)
		}
	}
}

// With its zone known (the API's write path), a name outside the zone is
// refused too, with both ways of writing it right.
func TestRecordSetErrorsOutsideZone(t *testing.T) {
	rs := &v1alpha1.DNSRecordSet{Spec: v1alpha1.DNSRecordSetSpec{ZoneRef: v1alpha1.ZoneRef{Name: "example-com"},
		Endpoints: []v1alpha1.Endpoint{{DNSName: "www.other.test.", RecordType: "A", Targets: []string{"192.0.2.1"}},
			{DNSName: "ok", RecordType: "A", Targets: []string{"192.0.2.1"}}}}}
	z := &v1alpha1.DNSZone{}
	z.Name, z.Spec.ZoneName = "example-com", "example.com"
	errs := RecordSetErrors(rs, z)
	if len(errs) != 1 || errs[0].Field != "spec.endpoints[0].dnsName" || !strings.Contains(errs[0].Error(), "outside zone example.com.") ||
		!strings.Contains(errs[0].Error(), "www.example.com.") {
		t.Fatalf("errors %v", errs)
	}
	if errs := RecordSetErrors(rs, nil); len(errs) != 0 {
		t.Fatalf("without the zone: %v", errs)
	}
}

func TestCatalogueErrorsSuggest(t *testing.T) {
	s := &v1alpha1.PolicySpec{BlockedServices: []string{"youtube", "tiktokk"}, BlockedCategories: []string{"gamez"}}
	errs := CatalogueErrors(s, []string{"youtube", "tiktok", "twitch"}, []string{"games", "social"})
	got := errs.ToAggregate().Error()
	for _, w := range []string{`spec.blockedServices[1]: Invalid value: "tiktokk"`, `did you mean "tiktok"`, `spec.blockedCategories[0]`, `did you mean "games"`} {
		if !strings.Contains(got, w) {
			t.Errorf("lacks %q: %s", w, got)
		}
	}
	if len(errs) != 2 {
		t.Errorf("%d errors, want 2: %v", len(errs), errs)
	}
}

// The CEL rules on endpoints stay within the apiserver's runtime cost budget
// at the list bound: 1000 endpoints with long names are admitted.
func TestThousandEndpointsWithinCELBudget(t *testing.T) {
	v := newValidator(t)
	b := bases(t)
	eps := make([]any, 1000)
	long := strings.Repeat("a", 60) + "." + strings.Repeat("b", 60) + "." + strings.Repeat("c", 60)
	for i := range eps {
		eps[i] = map[string]any{"dnsName": fmt.Sprintf("h%03d.%s", i, long), "recordType": "TYPE65534", "targets": []any{`\# 4 c0000201`}}
	}
	if err := v.Admit(context.Background(), build(b["DNSRecordSet"], []edit{set("spec.endpoints", eps)}), nil); err != nil {
		t.Fatalf("1000 endpoints refused: %.500v", err)
	}
}

// The CRD's recordType rule (what kubectl users get) lists exactly the types
// the compile step serves.
func TestCRDRecordTypesMatchCompile(t *testing.T) {
	data, err := fs.ReadFile(crd.Bases, "bases/service.io_dnsrecordsets.yaml")
	if err != nil {
		t.Fatal(err)
	}
	m := regexp.MustCompile(`self\.recordType in \[([^\]]*)\]`).FindSubmatch(data)
	if m == nil {
		t.Fatal("no recordType rule in the DNSRecordSet CRD")
	}
	var inCRD []string
	for _, q := range strings.Split(string(m[1]), ",") {
		inCRD = append(inCRD, strings.Trim(strings.TrimSpace(q), "'"))
	}
	var want []string
	for _, s := range authority.RecordTypes() {
		if regexp.MustCompile(`^[A-Z0-9]+$`).MatchString(s) { // the field's pattern
			want = append(want, s)
		}
	}
	if strings.Join(inCRD, ",") != strings.Join(want, ",") {
		t.Errorf("the CRD's recordType rule lists\n%v\nthe compile step serves\n%v\n(edit the marker on Endpoint in api/v1alpha1, make manifests)", inCRD, want)
	}
}

// A file of many bad targets gets a readable answer: ten errors and a count.
func TestRecordSetErrorsAreBounded(t *testing.T) {
	rs := &v1alpha1.DNSRecordSet{Spec: v1alpha1.DNSRecordSetSpec{ZoneRef: v1alpha1.ZoneRef{Name: "z"}}}
	for i := range 30 {
		rs.Spec.Endpoints = append(rs.Spec.Endpoints, v1alpha1.Endpoint{DNSName: fmt.Sprintf("h%d", i), RecordType: "A", Targets: []string{"x"}})
	}
	errs := RecordSetErrors(rs, nil)
	if len(errs) != 11 || !strings.Contains(errs[10].Error(), "20 more records are refused") {
		t.Fatalf("%d errors: %v", len(errs), errs)
	}
}

// A record set stored before a rule existed (or past the API) can still be
// changed elsewhere: only what the write adds or changes is refused.
func TestSemanticRatchetsOnUpdate(t *testing.T) {
	v := newValidator(t)
	b := bases(t)
	old := build(b["DNSRecordSet"], []edit{set("spec.endpoints[0].targets", []any{"192.0.2.300"})})
	eps, _, _ := unstructured.NestedSlice(old.Object, "spec", "endpoints")
	more := append(append([]any{}, eps...), map[string]any{"dnsName": "new", "recordType": "A", "targets": []any{"192.0.2.9"}})
	next := old.DeepCopy()
	_ = unstructured.SetNestedSlice(next.Object, more, "spec", "endpoints")
	if err := v.Admit(context.Background(), next, old.DeepCopy()); err != nil {
		t.Fatalf("adding a good record next to a stored bad one: %v", err)
	}
	bad := append(append([]any{}, eps...), map[string]any{"dnsName": "new", "recordType": "A", "targets": []any{"10.0.0.256"}})
	next = old.DeepCopy()
	_ = unstructured.SetNestedSlice(next.Object, bad, "spec", "endpoints")
	err := v.Admit(context.Background(), next, old.DeepCopy())
	if err == nil || !strings.Contains(err.Error(), "10.0.0.256") || strings.Contains(err.Error(), "192.0.2.300") {
		t.Fatalf("adding a bad record: %v, want only the new target refused", err)
	}
	// On create the stored mistake is refused as before.
	if err := v.Admit(context.Background(), old.DeepCopy(), nil); err == nil {
		t.Fatal("bad record admitted on create")
	}
}
