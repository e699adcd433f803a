package clientgroups

import (
	"strings"
	"testing"
	"time"

	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/svcdns/svc/api/v1alpha1"
)

func TestDesiredStatus(t *testing.T) {
	now := time.Date(2026, 1, 2, 3, 4, 5, 0, time.UTC)
	g := &v1alpha1.ClientGroup{ObjectMeta: metav1.ObjectMeta{Namespace: "home", Name: "kids", Generation: 3},
		Spec: v1alpha1.ClientGroupSpec{Addresses: []string{"10.0.0.0/24", "::ffff:10.0.0.1/120"}, ClientIDs: []string{"tablet"}, Names: []string{"kid-laptop"}}}
	pols := []v1alpha1.Policy{
		{ObjectMeta: metav1.ObjectMeta{Namespace: "home", Name: "school"}, Spec: v1alpha1.PolicySpec{ClientGroupRefs: []string{"kids"}}},
		{ObjectMeta: metav1.ObjectMeta{Namespace: "other", Name: "cross"}, Spec: v1alpha1.PolicySpec{ClientGroupRefs: []string{"home/kids"}}},
		{ObjectMeta: metav1.ObjectMeta{Namespace: "other", Name: "samename"}, Spec: v1alpha1.PolicySpec{ClientGroupRefs: []string{"kids"}}},
		{ObjectMeta: metav1.ObjectMeta{Namespace: "home", Name: "everyone"}},
	}
	refs := Referencing(g, pols)
	if strings.Join(refs, ",") != "home/school,other/cross" {
		t.Fatalf("Referencing: %v", refs)
	}
	st := DesiredStatus(g, []Problem{{Reason: "InvalidAddress", Message: `address "::ffff:10.0.0.1/120": prefix too long`}}, refs, now)
	if st.ObservedGeneration != 3 || st.Members != 3 || st.Addresses != 1 || st.Invalid != 1 || st.ClientIDs != 1 || st.Names != 1 {
		t.Errorf("counts: %+v", st)
	}
	ready := meta.FindStatusCondition(st.Conditions, TypeReady)
	if ready == nil || ready.Status != metav1.ConditionFalse || ready.Reason != ReasonInvalidMembers || !strings.Contains(ready.Message, "prefix too long") {
		t.Errorf("Ready: %+v", ready)
	}
	if c := meta.FindStatusCondition(st.Conditions, TypeReferenced); c == nil || c.Status != metav1.ConditionTrue || !strings.Contains(c.Message, "home/school") {
		t.Errorf("Referenced: %+v", c)
	}
	// Fixed and unreferenced: Ready true, Referenced false; a second pass
	// changes nothing (no status write).
	g.Status = st
	g.Spec.Addresses = g.Spec.Addresses[:1]
	st2 := DesiredStatus(g, nil, nil, now.Add(time.Minute))
	if c := meta.FindStatusCondition(st2.Conditions, TypeReady); c.Status != metav1.ConditionTrue || c.Reason != ReasonMembersValid || c.Message != "3 members" {
		t.Errorf("Ready after fix: %+v", c)
	}
	if c := meta.FindStatusCondition(st2.Conditions, TypeReferenced); c.Status != metav1.ConditionFalse || c.Reason != ReasonNoPolicy {
		t.Errorf("Referenced: %+v", c)
	}
	g.Status = st2
	if Changed(st2, DesiredStatus(g, nil, nil, now.Add(time.Hour))) {
		t.Error("an unchanged group changes its status")
	}
	// Beyond the group limit: matches nobody.
	st3 := DesiredStatus(g, []Problem{{Reason: ReasonTooManyGroups, Message: "more than 512 client groups"}}, nil, now)
	if c := meta.FindStatusCondition(st3.Conditions, TypeReady); st3.Members != 0 || c.Reason != ReasonTooManyGroups {
		t.Errorf("too many: %+v %+v", st3, c)
	}
}
