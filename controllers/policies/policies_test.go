package policies

import (
	"testing"
	"time"

	"github.com/svcdns/svc/api/v1alpha1"
)

type cat struct{}

func (cat) HasService(id string) bool  { return id == "youtube" || id == "tiktok" }
func (cat) HasCategory(id string) bool { return id == "video" }

func TestDesiredStatus(t *testing.T) {
	now := time.Now()
	cases := []struct {
		name             string
		spec             v1alpha1.PolicySpec
		degraded, reason string
	}{
		{"known", v1alpha1.PolicySpec{BlockedServices: []string{"youtube"}, BlockedCategories: []string{"video"}}, "False", ReasonAsExpected},
		{"unknown service", v1alpha1.PolicySpec{BlockedServices: []string{"youtube", "nope"}}, "True", ReasonUnknownService},
		{"unknown allowed service", v1alpha1.PolicySpec{AllowedServices: []string{"nope"}}, "True", ReasonUnknownService},
		{"unknown category", v1alpha1.PolicySpec{BlockedCategories: []string{"nope"}}, "True", ReasonUnknownCategory},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			p := &v1alpha1.Policy{Spec: tc.spec}
			p.Generation = 2
			st := DesiredStatus(p, cat{}, now)
			if len(st.Conditions) != 2 || st.Conditions[0].Type != "Ready" || string(st.Conditions[0].Status) != "True" {
				t.Fatalf("conditions %+v", st.Conditions)
			}
			d := st.Conditions[1]
			if d.Type != "Degraded" || string(d.Status) != tc.degraded || d.Reason != tc.reason || d.ObservedGeneration != 2 {
				t.Fatalf("degraded %+v", d)
			}
		})
	}
}
