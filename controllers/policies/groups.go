package policies

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"sort"
	"strings"
	"time"

	"k8s.io/apimachinery/pkg/api/meta"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime"

	"github.com/svcdns/svc/api/v1alpha1"
	"github.com/svcdns/svc/controllers/clientgroups"
	"github.com/svcdns/svc/controllers/events"
	"github.com/svcdns/svc/internal/store"
)

// GroupKind is the stored kind of client groups.
const GroupKind = "ClientGroup"

// ReasonMembersValid is the Normal Event of a ClientGroup that recovered.
const ReasonMembersValid = "MembersValid"

// GroupChecker compiles the client groups and returns the problems of one
// (invalid members, beyond the group limit); the node passes the data
// plane's CompileGroups.
type GroupChecker interface {
	CheckGroup(ctx context.Context, g *v1alpha1.ClientGroup) ([]Problem, error)
}

// GroupReconciler writes ClientGroup status (clientgroups.DesiredStatus:
// member counts, the policies that select it, Ready and Referenced) and
// reports problems as Events on the group (Warning on invalid members,
// Normal on recovery); the policies that select it show them in their
// status too. Every change of a group re-checks the policies that name it.
type GroupReconciler struct {
	Store    store.Store
	Checker  GroupChecker
	Events   *events.Reporter
	Policies *Reconciler
	Now      func() time.Time
}

// Reconcile checks one group and the policies that reference it.
func (r *GroupReconciler) Reconcile(ctx context.Context, namespace, name string) error {
	u, err := r.Store.Get(ctx, GroupKind, namespace, name)
	switch {
	case errors.Is(err, store.ErrNotFound):
		r.Events.Forget(GroupKind, namespace, name)
	case err != nil:
		return fmt.Errorf("get client group %s/%s: %w", namespace, name, err)
	default:
		var g v1alpha1.ClientGroup
		if err := runtime.DefaultUnstructuredConverter.FromUnstructured(u.Object, &g); err != nil {
			return fmt.Errorf("decode client group %s/%s: %w", namespace, name, err)
		}
		problems, err := r.Checker.CheckGroup(ctx, &g)
		if err != nil {
			return fmt.Errorf("check client group %s/%s: %w", namespace, name, err)
		}
		if len(problems) > 0 {
			msgs := make([]string, 0, len(problems))
			for _, p := range problems {
				msgs = append(msgs, p.Message)
			}
			sort.Strings(msgs)
			r.Events.Warn(u, problems[0].Reason, strings.Join(msgs, "; "))
		} else {
			r.Events.OK(u, ReasonMembersValid, "every member is valid")
		}
		if err := r.writeStatus(ctx, u, &g, problems); err != nil {
			return err
		}
	}
	if r.Policies == nil {
		return nil
	}
	return r.Policies.ReconcileReferencing(ctx, GroupKind, namespace, name)
}

// writeStatus stores the group's desired status when it changed.
func (r *GroupReconciler) writeStatus(ctx context.Context, u *unstructured.Unstructured, g *v1alpha1.ClientGroup, problems []Problem) error {
	pols, err := listPolicies(ctx, r.Store)
	if err != nil {
		return err
	}
	probs := make([]clientgroups.Problem, 0, len(problems))
	for _, p := range problems {
		probs = append(probs, clientgroups.Problem{Reason: p.Reason, Message: p.Message})
	}
	now := time.Now
	if r.Now != nil {
		now = r.Now
	}
	desired := clientgroups.DesiredStatus(g, probs, clientgroups.Referencing(g, pols), now())
	if !clientgroups.Changed(g.Status, desired) {
		return nil
	}
	// a group that policies start or stop selecting: one Normal Event per
	// change of the stored condition (restarts find it stored)
	was := meta.FindStatusCondition(g.Status.Conditions, clientgroups.TypeReferenced)
	if c := meta.FindStatusCondition(desired.Conditions, clientgroups.TypeReferenced); c != nil && (was == nil || was.Status != c.Status || was.Message != c.Message) {
		r.Events.Normal(u, c.Reason, c.Message)
	}
	m, err := runtime.DefaultUnstructuredConverter.ToUnstructured(&desired)
	if err != nil {
		return fmt.Errorf("encode status of client group %s/%s: %w", g.Namespace, g.Name, err)
	}
	u.Object["status"] = m
	if _, err := r.Store.UpdateStatus(ctx, u); err != nil {
		return fmt.Errorf("update status of client group %s/%s: %w", g.Namespace, g.Name, err)
	}
	return nil
}

// PolicyChanged reconciles the groups a policy names now or named when
// their status was written, so status.policies follows policy edits and
// deletions.
func (r *GroupReconciler) PolicyChanged(ctx context.Context, namespace, name string) error {
	self := namespace + "/" + name
	var refs []string
	u, err := r.Store.Get(ctx, Kind, namespace, name)
	switch {
	case errors.Is(err, store.ErrNotFound):
	case err != nil:
		return fmt.Errorf("get policy %s: %w", self, err)
	default:
		raw, _, _ := unstructured.NestedStringSlice(u.Object, "spec", "clientGroupRefs")
		for _, g := range raw {
			if !strings.Contains(g, "/") {
				g = namespace + "/" + g
			}
			refs = append(refs, g)
		}
	}
	groups, err := store.ListTyped[v1alpha1.ClientGroup](ctx, r.Store, GroupKind, "")
	if err != nil {
		return err
	}
	var errs []error
	for i := range groups {
		g := &groups[i]
		if slices.Contains(refs, g.Namespace+"/"+g.Name) || slices.Contains(g.Status.Policies, self) {
			if err := r.reconcileGroup(ctx, g.Namespace, g.Name); err != nil {
				errs = append(errs, err)
			}
		}
	}
	return errors.Join(errs...)
}

// reconcileGroup is Reconcile without re-checking the policies.
func (r *GroupReconciler) reconcileGroup(ctx context.Context, namespace, name string) error {
	c := *r
	c.Policies = nil
	return c.Reconcile(ctx, namespace, name)
}

func listPolicies(ctx context.Context, st store.Store) ([]v1alpha1.Policy, error) {
	return store.ListTyped[v1alpha1.Policy](ctx, st, Kind, "")
}
