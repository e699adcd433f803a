// Package clientgroups computes the status of a ClientGroup: how many of
// its members identify clients, which Policies select it, and the Ready and
// Referenced conditions. The reconciler (controllers/policies
// GroupReconciler, run by the local runner on the sqlite store and by the
// operator on the kube store) writes it; the decision is pure.
package clientgroups

import (
	"fmt"
	"slices"
	"strings"
	"time"

	"k8s.io/apimachinery/pkg/api/equality"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/svcdns/svc/api/v1alpha1"
)

// Condition types and reasons.
const (
	TypeReady      = "Ready"
	TypeReferenced = "Referenced"

	ReasonMembersValid   = "MembersValid"
	ReasonInvalidMembers = "InvalidMembers"
	ReasonTooManyGroups  = "TooManyGroups"
	ReasonNoMembers      = "NoMembers"
	ReasonPolicies       = "SelectedByPolicies"
	ReasonNoPolicy       = "NoPolicy"
)

// MaxPolicies bounds status.policies.
const MaxPolicies = 100

// Problem is one thing the data plane's compile of the groups reported
// for this group (reason InvalidAddress, TooManyGroups, ...).
type Problem struct {
	Reason  string
	Message string
}

// Referencing returns the policies ("namespace/name", sorted) whose
// clientGroupRefs name the group ("namespace/name" or a name in the
// policy's namespace). Policies without refs apply to every client and are
// not counted: they do not select the group.
func Referencing(g *v1alpha1.ClientGroup, pols []v1alpha1.Policy) []string {
	self := g.Namespace + "/" + g.Name
	var out []string
	for i := range pols {
		p := &pols[i]
		for _, r := range p.Spec.ClientGroupRefs {
			if !strings.Contains(r, "/") {
				r = p.Namespace + "/" + r
			}
			if r == self {
				out = append(out, p.Namespace+"/"+p.Name)
				break
			}
		}
	}
	slices.Sort(out)
	return out
}

// DesiredStatus computes the status of g from the problems of its compile
// and the policies that select it.
func DesiredStatus(g *v1alpha1.ClientGroup, problems []Problem, policies []string, now time.Time) v1alpha1.ClientGroupStatus {
	st := v1alpha1.ClientGroupStatus{ObservedGeneration: g.Generation,
		Conditions: append([]metav1.Condition(nil), g.Status.Conditions...)}
	tooMany := false
	var invalid []string
	for _, p := range problems {
		switch p.Reason {
		case ReasonTooManyGroups:
			tooMany = true
		default:
			invalid = append(invalid, p.Message)
		}
	}
	slices.Sort(invalid)
	if !tooMany {
		st.Invalid = int64(len(invalid))
		st.Addresses = max(int64(len(g.Spec.Addresses))-st.Invalid, 0)
		st.ClientIDs = int64(len(g.Spec.ClientIDs))
		st.Names = int64(len(g.Spec.Names))
		st.Members = st.Addresses + st.ClientIDs + st.Names
	}
	if len(policies) > MaxPolicies {
		policies = policies[:MaxPolicies]
	}
	st.Policies = policies
	ts := metav1.NewTime(now.UTC().Truncate(time.Second))
	set := func(typ string, s metav1.ConditionStatus, reason, msg string) {
		meta.SetStatusCondition(&st.Conditions, metav1.Condition{Type: typ, Status: s, Reason: reason, Message: msg,
			ObservedGeneration: g.Generation, LastTransitionTime: ts})
	}
	switch {
	case tooMany:
		set(TypeReady, metav1.ConditionFalse, ReasonTooManyGroups, "more client groups than one node identifies: this group matches nobody; merge or delete groups")
	case len(invalid) > 0:
		set(TypeReady, metav1.ConditionFalse, ReasonInvalidMembers, fmt.Sprintf("%d members match nobody: %s (the other %d apply)",
			len(invalid), strings.Join(invalid, "; "), st.Members))
	case st.Members == 0:
		set(TypeReady, metav1.ConditionTrue, ReasonNoMembers, "the group has no members: it matches nobody")
	default:
		set(TypeReady, metav1.ConditionTrue, ReasonMembersValid, fmt.Sprintf("%d members", st.Members))
	}
	if len(policies) > 0 {
		set(TypeReferenced, metav1.ConditionTrue, ReasonPolicies, "selected by policies "+strings.Join(policies, ", "))
	} else {
		set(TypeReferenced, metav1.ConditionFalse, ReasonNoPolicy,
			"no Policy names this group in clientGroupRefs: its clients get the policy that applies to every client (zone query access, record views and group entries still use it)")
	}
	return st
}

// Changed reports whether the stored status differs from the desired one.
func Changed(stored, desired v1alpha1.ClientGroupStatus) bool {
	return !equality.Semantic.DeepEqual(stored, desired)
}
