package policy

import (
	"context"
	"net/netip"
	"testing"
	"time"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/svcdns/svc/api/v1alpha1"
	"github.com/svcdns/svc/dataplane"
)

// entriesList is a global list whose only source holds structured entries,
// compiled as the block list reconciler compiles it.
func entriesList(t *testing.T, name, mode string, entries ...v1alpha1.BlockListEntry) List {
	t.Helper()
	bl := &v1alpha1.BlockList{ObjectMeta: metav1.ObjectMeta{Namespace: "default", Name: name}}
	bl.Spec.Mode = mode
	src := v1alpha1.BlockListSource{Name: "manual", Entries: entries}
	bl.Spec.Sources = []v1alpha1.BlockListSource{src}
	cs, err := ListCompiler{}.CompileSource(context.Background(), src, nil)
	if err != nil {
		t.Fatal(err)
	}
	return List{Object: bl, Compiled: ListCompiler{}.NewList(bl, []CompiledSource{cs})}
}

// TestGroupEntries: an entry with groups applies to the clients of those
// groups only, whichever policy serves them (the global policy here, and a
// policy that serves two groups), and an allow entry for a group exempts
// only that group.
func TestGroupEntries(t *testing.T) {
	now := time.Date(2025, 6, 2, 12, 0, 0, 0, time.UTC)
	off := false
	in := Input{
		Groups: []v1alpha1.ClientGroup{
			group("kids", []string{"10.0.0.0/24"}, nil, nil),
			group("adults", []string{"10.0.1.0/24"}, nil, nil),
			group("guests", []string{"10.0.2.0/24"}, nil, nil),
		},
		Policies: []v1alpha1.Policy{pol("family", 1, func(s *v1alpha1.PolicySpec) { s.ClientGroupRefs = []string{"kids", "adults"} })},
		Lists: []List{
			entriesList(t, "ui-deny", "block",
				v1alpha1.BlockListEntry{Value: "everyone.example"},
				v1alpha1.BlockListEntry{Value: "kids.example", Groups: []string{"kids"}},
				v1alpha1.BlockListEntry{Value: "*.guests.example", Type: "wildcard", Groups: []string{"default/guests"}},
				v1alpha1.BlockListEntry{Value: "off.example", Groups: []string{"kids"}, Enabled: &off}),
			entriesList(t, "ui-allow", "allow",
				v1alpha1.BlockListEntry{Value: "everyone.example", Groups: []string{"adults"}}),
		},
	}
	tab := build(t, in, &now)
	cases := []struct {
		client, name string
		want         dataplane.Verdict
	}{
		{"10.0.0.5", "kids.example", dataplane.VerdictBlock},
		{"10.0.1.5", "kids.example", dataplane.VerdictPass},
		{"10.0.2.5", "kids.example", dataplane.VerdictPass},
		{"10.9.9.9", "kids.example", dataplane.VerdictPass},
		{"10.0.2.5", "a.guests.example", dataplane.VerdictBlock},
		{"10.0.0.5", "a.guests.example", dataplane.VerdictPass},
		{"10.0.0.5", "off.example", dataplane.VerdictPass},
		{"10.0.0.5", "everyone.example", dataplane.VerdictBlock},
		{"10.0.1.5", "everyone.example", dataplane.VerdictAllow},
		{"10.9.9.9", "everyone.example", dataplane.VerdictBlock},
	}
	for _, c := range cases {
		ci := tab.Groups().Identify(netip.MustParseAddr(c.client), "")
		d := tab.Decide(wireName(t, c.name), 1, ci)
		if d.Verdict != c.want {
			t.Errorf("%s asks %s: verdict %v (list %q rule %q), want %v", c.client, c.name, d.Verdict, d.List, d.Rule, c.want)
		}
		if c.want == dataplane.VerdictBlock && (d.List != "default/ui-deny" || d.Rule == "") {
			t.Errorf("%s asks %s: list %q rule %q, want default/ui-deny and the entry", c.client, c.name, d.List, d.Rule)
		}
	}
}
