package policies

import (
	"strings"
	"testing"
	"time"

	"k8s.io/apimachinery/pkg/api/meta"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"

	"github.com/svcdns/svc/api/v1alpha1"
)

func TestDesiredStatus(t *testing.T) {
	now := time.Now()
	cases := []struct {
		name                     string
		problems                 []Problem
		ready, readyReason       string
		degraded, degradedReason string
		readyMsgHas, degradedHas string
	}{
		{"known", nil, "True", ReasonAccepted, "False", ReasonAsExpected, "", ""},
		{"unknown service", []Problem{{ReasonUnknownService, `service "nope" is not in the catalogue`}},
			"True", ReasonAccepted, "True", ReasonUnknownService, "", `"nope"`},
		{"unknown category", []Problem{{ReasonUnknownCategory, `category "nope" is not in the catalogue`}},
			"True", ReasonAccepted, "True", ReasonUnknownCategory, "", `category "nope"`},
		{"service before category", []Problem{{ReasonUnknownCategory, "c"}, {ReasonUnknownService, "s"}},
			"True", ReasonAccepted, "True", ReasonUnknownService, "", "s; c"},
		{"missing list", []Problem{{ReasonUnknownService, "s"}, {ReasonUnknownList, "block list team/gone does not exist"}},
			"False", ReasonUnknownList, "True", ReasonUnknownList, "team/gone", "s"},
		{"missing group", []Problem{{ReasonUnknownClientGroup, "client group team/kids does not exist"}},
			"False", ReasonUnknownClientGroup, "True", ReasonUnknownClientGroup, "team/kids", "team/kids"},
		{"exclude of a list that is not global", []Problem{{ReasonNotGlobalList, "excludeListRefs names default/private, which is not global"}},
			"True", ReasonAccepted, "True", ReasonNotGlobalList, "", "default/private"},
		{"refused", []Problem{{ReasonGlobalPolicyNotAllowed, "empty clientGroupRefs ..."}, {ReasonUnknownList, "l"}},
			"False", ReasonGlobalPolicyNotAllowed, "False", ReasonAsExpected, "not applied", ""},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			p := &v1alpha1.Policy{}
			p.Generation = 2
			st := DesiredStatus(p, tc.problems, now)
			if len(st.Conditions) != 2 {
				t.Fatalf("conditions %+v", st.Conditions)
			}
			r, d := meta.FindStatusCondition(st.Conditions, "Ready"), meta.FindStatusCondition(st.Conditions, "Degraded")
			if string(r.Status) != tc.ready || r.Reason != tc.readyReason || !strings.Contains(r.Message, tc.readyMsgHas) {
				t.Errorf("ready %+v", r)
			}
			if string(d.Status) != tc.degraded || d.Reason != tc.degradedReason || d.ObservedGeneration != 2 || !strings.Contains(d.Message, tc.degradedHas) {
				t.Errorf("degraded %+v", d)
			}
		})
	}
}

// TestReferencesExclude: a policy excluding a list is re-checked when the
// list changes (it may turn global or not).
func TestReferencesExclude(t *testing.T) {
	u := &unstructured.Unstructured{Object: map[string]any{"metadata": map[string]any{"namespace": "default", "name": "kids"},
		"spec": map[string]any{"excludeListRefs": []any{"ui-allow", "platform/ads"}}}}
	if !references(u, "BlockList", "default", "ui-allow") || !references(u, "BlockList", "platform", "ads") {
		t.Fatal("excludeListRefs not counted as references")
	}
	if references(u, "BlockList", "default", "ads") {
		t.Fatal("default/ads is not referenced")
	}
}
