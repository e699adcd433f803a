package policies

import (
	"context"
	"errors"
	"fmt"
	"sort"
	"strings"

	"k8s.io/apimachinery/pkg/runtime"

	"github.com/svcdns/svc/api/v1alpha1"
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

// GroupReconciler reports ClientGroup problems. ClientGroup has no status
// subresource (the interface spec lists none), so problems show as Events
// on the group and, for the policies that select it, in their status; every
// change of a group re-checks the policies that name it.
type GroupReconciler struct {
	Store    store.Store
	Checker  GroupChecker
	Events   *events.Reporter
	Policies *Reconciler
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
	}
	if r.Policies == nil {
		return nil
	}
	return r.Policies.ReconcileReferencing(ctx, GroupKind, namespace, name)
}
