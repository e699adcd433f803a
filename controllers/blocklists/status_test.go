package blocklists

import (
	"testing"
	"time"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/svcdns/svc/api/v1alpha1"
)

func TestDesiredStatus(t *testing.T) {
	now := time.Date(2025, 1, 1, 0, 0, 0, 0, time.UTC)
	earlier := metav1.NewTime(now.Add(-time.Hour))
	bl := &v1alpha1.BlockList{}
	bl.Generation = 3
	bl.Status.Conditions = []metav1.Condition{{Type: "Ready", Status: metav1.ConditionTrue, Reason: ReasonCompiled, LastTransitionTime: earlier}}
	cases := []struct {
		name            string
		listOn          bool
		results         []SourceResult
		ready, degraded metav1.ConditionStatus
		reason          string
		entries         int64
		readySince      time.Time
	}{
		{"all compiled", true, []SourceResult{{Name: "a", Compiled: true, Entries: 5, RuleCount: 4}},
			metav1.ConditionTrue, metav1.ConditionFalse, ReasonCompiled, 5, earlier.Time},
		{"stale body served", true, []SourceResult{{Name: "a", Compiled: true, Stale: true, Err: "timeout", Entries: 2}},
			metav1.ConditionTrue, metav1.ConditionTrue, ReasonCompiled, 2, earlier.Time},
		{"source failed", true, []SourceResult{{Name: "a", Err: "404"}, {Name: "b", Compiled: true, Entries: 1}},
			metav1.ConditionFalse, metav1.ConditionFalse, ReasonSourceFailed, 1, now},
		{"list off", false, []SourceResult{{Name: "a", Disabled: true}},
			metav1.ConditionTrue, metav1.ConditionFalse, ReasonDisabled, 0, earlier.Time},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			st := DesiredStatus(bl, tc.listOn, tc.results, now)
			if st.Conditions[0].Status != tc.ready || st.Conditions[0].Reason != tc.reason || st.Conditions[1].Status != tc.degraded {
				t.Fatalf("conditions %+v", st.Conditions)
			}
			if !st.Conditions[0].LastTransitionTime.Time.Equal(tc.readySince) || st.Conditions[0].ObservedGeneration != 3 {
				t.Fatalf("ready since %s, want %s", st.Conditions[0].LastTransitionTime, tc.readySince)
			}
			if st.Entries != tc.entries || st.ObservedGeneration != 3 {
				t.Fatalf("status %+v", st)
			}
			if !StatusChanged(bl.Status, st) {
				t.Fatal("change not detected")
			}
			if StatusChanged(st, DesiredStatus(&v1alpha1.BlockList{ObjectMeta: bl.ObjectMeta, Status: st}, tc.listOn, tc.results, now.Add(time.Hour))) {
				t.Fatal("same inputs later count as a change")
			}
		})
	}
}

func TestFetchDue(t *testing.T) {
	now := time.Now()
	for _, tc := range []struct {
		last time.Time
		want bool
	}{{time.Time{}, true}, {now.Add(-time.Hour), false}, {now.Add(-24 * time.Hour), true}} {
		if got := FetchDue(tc.last, 24*time.Hour, now); got != tc.want {
			t.Errorf("FetchDue(%s) = %v", tc.last, got)
		}
	}
	bl := &v1alpha1.BlockList{}
	if RefreshInterval(bl, 0) != 24*time.Hour || RefreshInterval(bl, time.Hour) != time.Hour {
		t.Fatal("default refresh interval")
	}
	bl.Spec.RefreshInterval = "90m"
	if RefreshInterval(bl, time.Hour) != 90*time.Minute {
		t.Fatal("spec refresh interval")
	}
}
