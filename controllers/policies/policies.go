// Package policies is the Policy reconciler: it writes Ready and Degraded
// from the problems the data plane's own compile finds for a policy
// (injected as a Checker: controllers never import the data plane), and
// records Kubernetes Events for Policies and ClientGroups. The decision is a
// pure function; Reconcile gathers and writes status only when it changed.
package policies

import (
	"context"
	"errors"
	"fmt"
	"sort"
	"strings"
	"time"

	"k8s.io/apimachinery/pkg/api/equality"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime"

	"github.com/svcdns/svc/api/v1alpha1"
	"github.com/svcdns/svc/controllers/events"
	"github.com/svcdns/svc/internal/store"
)

// Kind is the stored kind.
const Kind = "Policy"

// Reasons. Refusals (GlobalPolicyNotAllowed, ForeignClientGroup) and
// dangling references (UnknownList, UnknownClientGroup) make Ready False;
// the other problems leave the rest of the policy applied and set Degraded.
const (
	ReasonUnknownService         = "UnknownService"
	ReasonUnknownCategory        = "UnknownCategory"
	ReasonUnknownList            = "UnknownList"
	ReasonUnknownClientGroup     = "UnknownClientGroup"
	ReasonGlobalPolicyNotAllowed = "GlobalPolicyNotAllowed"
	ReasonForeignClientGroup     = "ForeignClientGroup"
	// ReasonNotGlobalList and ReasonOptOutNotAllowed: excludeListRefs or
	// globalLists: false that cannot take effect (Degraded; the rest applies).
	ReasonNotGlobalList    = "NotGlobalList"
	ReasonOptOutNotAllowed = "OptOutNotAllowed"
	ReasonAsExpected       = "AsExpected"
	ReasonAccepted         = "Accepted"
)

// Problem is one thing the compile of a policy could not apply.
type Problem struct {
	Reason  string
	Message string
}

// Checker compiles one policy against the current client groups, lists,
// catalogue and tenancy settings and returns its problems (the node passes
// dataplane/policy.Check).
type Checker interface {
	CheckPolicy(ctx context.Context, p *v1alpha1.Policy) ([]Problem, error)
}

// refused: the policy is not compiled at all.
func refused(reason string) bool {
	return reason == ReasonGlobalPolicyNotAllowed || reason == ReasonForeignClientGroup
}

// dangling: a reference resolves to nothing; the rest applies, but not
// what the policy says.
func dangling(reason string) bool {
	return reason == ReasonUnknownList || reason == ReasonUnknownClientGroup
}

// DesiredStatus computes the status of a policy from its problems.
func DesiredStatus(p *v1alpha1.Policy, problems []Problem, now time.Time) v1alpha1.PolicyStatus {
	st := v1alpha1.PolicyStatus{ObservedGeneration: p.Generation, Conditions: append([]metav1.Condition(nil), p.Status.Conditions...)}
	byReason := map[string][]string{}
	var order []string
	for _, pr := range problems {
		if _, ok := byReason[pr.Reason]; !ok {
			order = append(order, pr.Reason)
		}
		byReason[pr.Reason] = append(byReason[pr.Reason], pr.Message)
	}
	// the most serious reason names the condition: refusals, then dangling
	// references, then unknown services and categories, then the rest
	rank := func(r string) int {
		switch {
		case refused(r):
			return 0
		case dangling(r):
			return 1
		case r == ReasonUnknownService:
			return 2
		case r == ReasonUnknownCategory:
			return 3
		}
		return 4
	}
	sort.SliceStable(order, func(i, j int) bool { return rank(order[i]) < rank(order[j]) })
	msg := func(filter func(string) bool) string {
		var parts []string
		for _, r := range order {
			if filter(r) {
				ms := append([]string(nil), byReason[r]...)
				sort.Strings(ms)
				parts = append(parts, strings.Join(ms, "; "))
			}
		}
		return strings.Join(parts, "; ")
	}
	ts := metav1.NewTime(now.UTC().Truncate(time.Second))
	set := func(typ string, s metav1.ConditionStatus, reason, msg string) {
		meta.SetStatusCondition(&st.Conditions, metav1.Condition{Type: typ, Status: s, Reason: reason, Message: msg,
			ObservedGeneration: p.Generation, LastTransitionTime: ts})
	}
	switch {
	case len(order) > 0 && refused(order[0]):
		set("Ready", metav1.ConditionFalse, order[0], "policy refused, not applied to any client: "+msg(refused))
	case len(order) > 0 && dangling(order[0]):
		set("Ready", metav1.ConditionFalse, order[0], msg(dangling)+" (the rest of the policy applies)")
	default:
		set("Ready", metav1.ConditionTrue, ReasonAccepted, "policy compiled")
	}
	partial := func(r string) bool { return !refused(r) }
	switch {
	case len(order) > 0 && refused(order[0]):
		set("Degraded", metav1.ConditionFalse, ReasonAsExpected, "")
	case len(order) > 0:
		set("Degraded", metav1.ConditionTrue, order[0], msg(partial))
	default:
		set("Degraded", metav1.ConditionFalse, ReasonAsExpected, "")
	}
	return st
}

// Reconciler writes Policy status and records Events.
type Reconciler struct {
	Store   store.Store
	Checker Checker
	// Events records Warning Events on problems and Normal on recovery
	// (nil: none, the sqlite store).
	Events *events.Reporter
	Now    func() time.Time
	// Enqueue, when set, queues the reconcile of a policy that
	// ReconcileReferencing finds instead of running it here: the local
	// runner's Policy queue then keeps one status write per policy at a
	// time (a BlockList or ClientGroup worker would otherwise race the
	// Policy worker for the same status).
	Enqueue func(namespace, name string)
}

// Reconcile updates one policy's status; it reports whether it wrote.
func (r *Reconciler) Reconcile(ctx context.Context, namespace, name string) (bool, error) {
	u, err := r.Store.Get(ctx, Kind, namespace, name)
	if errors.Is(err, store.ErrNotFound) {
		r.Events.Forget(Kind, namespace, name)
		return false, nil
	}
	if err != nil {
		return false, fmt.Errorf("get policy %s/%s: %w", namespace, name, err)
	}
	var p v1alpha1.Policy
	if err := runtime.DefaultUnstructuredConverter.FromUnstructured(u.Object, &p); err != nil {
		return false, fmt.Errorf("decode policy %s/%s: %w", namespace, name, err)
	}
	problems, err := r.Checker.CheckPolicy(ctx, &p)
	if err != nil {
		return false, fmt.Errorf("check policy %s/%s: %w", namespace, name, err)
	}
	now := time.Now
	if r.Now != nil {
		now = r.Now
	}
	desired := DesiredStatus(&p, problems, now())
	report(r.Events, u, desired.Conditions)
	if equality.Semantic.DeepEqual(p.Status, desired) {
		return false, nil
	}
	m, err := runtime.DefaultUnstructuredConverter.ToUnstructured(&desired)
	if err != nil {
		return false, fmt.Errorf("encode status: %w", err)
	}
	u.Object["status"] = m
	if _, err := r.Store.UpdateStatus(ctx, u); err != nil {
		return false, fmt.Errorf("update status of policy %s/%s: %w", namespace, name, err)
	}
	return true, nil
}

// report turns Ready and Degraded into (deduplicated) Events.
func report(ev *events.Reporter, obj *unstructured.Unstructured, conds []metav1.Condition) {
	ready := meta.FindStatusCondition(conds, "Ready")
	degraded := meta.FindStatusCondition(conds, "Degraded")
	switch {
	case ready != nil && ready.Status != metav1.ConditionTrue:
		ev.Warn(obj, ready.Reason, ready.Message)
	case degraded != nil && degraded.Status == metav1.ConditionTrue:
		ev.Warn(obj, degraded.Reason, degraded.Message)
	case ready != nil:
		ev.OK(obj, ready.Reason, ready.Message)
	}
}

// ReconcileReferencing reconciles every policy that names the ClientGroup
// or BlockList kind namespace/name (in clientGroupRefs, blockListRefs,
// allowListRefs or excludeListRefs), so a reference that appears or disappears shows on the
// policies at once (with Enqueue, queues them). It returns the first error after trying them all.
func (r *Reconciler) ReconcileReferencing(ctx context.Context, kind, namespace, name string) error {
	var firstErr error
	opts := store.ListOptions{Kind: Kind, Limit: 500}
	for {
		page, err := r.Store.List(ctx, opts)
		if err != nil {
			return fmt.Errorf("list policies: %w", err)
		}
		for _, u := range page.Items {
			if !references(u, kind, namespace, name) {
				continue
			}
			if r.Enqueue != nil {
				r.Enqueue(u.GetNamespace(), u.GetName())
				continue
			}
			if _, err := r.Reconcile(ctx, u.GetNamespace(), u.GetName()); err != nil && firstErr == nil {
				firstErr = err
			}
		}
		if page.Continue == "" {
			return firstErr
		}
		opts.Continue = page.Continue
	}
}

func references(u *unstructured.Unstructured, kind, namespace, name string) bool {
	// excludeListRefs too: a list turning global or not changes whether
	// excluding it is a problem (NotGlobalList)
	fields := [][]string{{"spec", "blockListRefs"}, {"spec", "allowListRefs"}, {"spec", "excludeListRefs"}}
	if kind == GroupKind {
		fields = [][]string{{"spec", "clientGroupRefs"}}
	}
	for _, f := range fields {
		refs, _, _ := unstructured.NestedStringSlice(u.Object, f...)
		for _, ref := range refs {
			ns, n, ok := strings.Cut(ref, "/")
			if !ok {
				ns, n = u.GetNamespace(), ref
			}
			if ns == namespace && n == name {
				return true
			}
		}
	}
	return false
}
