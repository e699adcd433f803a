package policy

import (
	"context"
	"fmt"
	"slices"
	"strings"

	"github.com/svcdns/svc/api/v1alpha1"
)

// Reasons a Policy is refused (not compiled at all) by the tenancy rules.
const (
	// ReasonGlobalPolicyNotAllowed: empty clientGroupRefs (every client)
	// from a namespace that blocking.globalPolicyNamespaces does not list.
	ReasonGlobalPolicyNotAllowed = "GlobalPolicyNotAllowed"
	// ReasonForeignClientGroup: a clientGroupRef names a ClientGroup of
	// another namespace.
	ReasonForeignClientGroup = "ForeignClientGroup"
)

// Reasons of references that resolve to nothing (the rest of the policy
// applies).
const (
	ReasonUnknownList        = "UnknownList"
	ReasonUnknownClientGroup = "UnknownClientGroup"
	// ReasonListNotLoaded: the BlockList exists but has no compiled rules
	// (yet); its own status says why.
	ReasonListNotLoaded = "ListNotLoaded"
)

// Refused reports whether a problem reason means the policy is not applied.
func Refused(reason string) bool {
	return reason == ReasonGlobalPolicyNotAllowed || reason == ReasonForeignClientGroup
}

// AllNamespaces in Tenancy.GlobalNamespaces lets every namespace hold global
// policies (the behaviour before tenancy rules).
const AllNamespaces = "*"

// Tenancy is who may do what across namespaces (blocking.globalPolicyNamespaces,
// resolved by the node). A namespace it lists is trusted cluster-wide: its
// Policies may have empty clientGroupRefs (every client), may select
// ClientGroups of any namespace, and its references take a BlockList of any
// namespace out of the implicit global policy. Every other namespace's
// Policies select ClientGroups of their own namespace only, and only their
// own namespace's lists leave the global policy when they reference them.
type Tenancy struct {
	GlobalNamespaces []string
}

// Global reports whether policies of namespace ns may apply cluster-wide.
// A nil Tenancy is unconfined (callers that compile one team's objects,
// such as tests); the node always passes one.
func (t *Tenancy) Global(ns string) bool {
	return t == nil || slices.Contains(t.GlobalNamespaces, AllNamespaces) || slices.Contains(t.GlobalNamespaces, ns)
}

// admit applies the tenancy rules to one policy; it returns the refusals
// (empty: the policy may be compiled).
func (t *Tenancy) admit(p *v1alpha1.Policy) []Problem {
	if t.Global(p.Namespace) {
		return nil
	}
	name := key(p.Namespace, p.Name)
	var out []Problem
	if len(p.Spec.ClientGroupRefs) == 0 {
		out = append(out, Problem{"Policy", name, ReasonGlobalPolicyNotAllowed, fmt.Sprintf(
			"empty clientGroupRefs would apply the policy to every client, which only policies of the namespaces in blocking.globalPolicyNamespaces (%s) may do; name ClientGroups of namespace %s in clientGroupRefs",
			t.describe(), p.Namespace)})
	}
	var foreign []string
	for _, r := range p.Spec.ClientGroupRefs {
		if ns, _, ok := strings.Cut(r, "/"); ok && ns != p.Namespace {
			foreign = append(foreign, r)
		}
	}
	if len(foreign) > 0 {
		out = append(out, Problem{"Policy", name, ReasonForeignClientGroup, fmt.Sprintf(
			"clientGroupRefs %s name ClientGroups of other namespaces; a policy of namespace %s may select only ClientGroups of its own namespace (or move the policy to a namespace in blocking.globalPolicyNamespaces: %s)",
			strings.Join(foreign, ", "), p.Namespace, t.describe())})
	}
	return out
}

func (t *Tenancy) describe() string {
	if len(t.GlobalNamespaces) == 0 {
		return "none"
	}
	return strings.Join(t.GlobalNamespaces, ", ")
}

// takesOut reports whether a reference by a policy of namespace policyNS
// takes the list listKey ("namespace/name") out of the implicit global
// policy: a tenant may not switch off another namespace's global lists by
// naming them.
func (t *Tenancy) takesOut(policyNS, listKey string) bool {
	if t.Global(policyNS) {
		return true
	}
	ns, _, _ := strings.Cut(listKey, "/")
	return ns == policyNS
}

// Check runs the compile of one policy against in (its client groups,
// lists, catalogue and tenancy) and returns its problems, as Compile would
// report them for the data plane: the Policy status is written from the
// same code that decides what is served. Lists may lack compiled rules;
// that is not reported (ListNotLoaded), as the list's own status says it.
func Check(ctx context.Context, in Input, p *v1alpha1.Policy) []Problem {
	in.Policies = []v1alpha1.Policy{*p}
	_, problems := Compile(ctx, in)
	name := key(p.Namespace, p.Name)
	var out []Problem
	for _, pr := range problems {
		if pr.Kind == "Policy" && pr.Name == name && pr.Reason != ReasonListNotLoaded {
			out = append(out, pr)
		}
	}
	return out
}
