// Package policies is the Policy reconciler: it reports unknown catalogue
// ids as condition Degraded (reasons UnknownService, UnknownCategory) and
// writes Ready. The decision is a pure function; Reconcile gathers and
// writes status only when it changed.
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
	"k8s.io/apimachinery/pkg/runtime"

	"github.com/svcdns/svc/api/v1alpha1"
	"github.com/svcdns/svc/internal/store"
)

// Kind is the stored kind.
const Kind = "Policy"

// Reasons.
const (
	ReasonUnknownService  = "UnknownService"
	ReasonUnknownCategory = "UnknownCategory"
	ReasonAsExpected      = "AsExpected"
	ReasonAccepted        = "Accepted"
)

// Catalogue is what the reconciler asks of the services catalogue
// (dataplane/catalogue.Catalogue satisfies it; the node passes the current one).
type Catalogue interface {
	HasService(id string) bool
	HasCategory(id string) bool
}

// DesiredStatus computes the status of a policy.
func DesiredStatus(p *v1alpha1.Policy, cat Catalogue, now time.Time) v1alpha1.PolicyStatus {
	st := v1alpha1.PolicyStatus{ObservedGeneration: p.Generation, Conditions: append([]metav1.Condition(nil), p.Status.Conditions...)}
	var svcs, cats []string
	for _, id := range append(append([]string(nil), p.Spec.BlockedServices...), p.Spec.AllowedServices...) {
		if !cat.HasService(id) {
			svcs = append(svcs, id)
		}
	}
	for _, id := range p.Spec.BlockedCategories {
		if !cat.HasCategory(id) {
			cats = append(cats, id)
		}
	}
	sort.Strings(svcs)
	sort.Strings(cats)
	ts := metav1.NewTime(now.UTC().Truncate(time.Second))
	set := func(typ string, s metav1.ConditionStatus, reason, msg string) {
		meta.SetStatusCondition(&st.Conditions, metav1.Condition{Type: typ, Status: s, Reason: reason, Message: msg,
			ObservedGeneration: p.Generation, LastTransitionTime: ts})
	}
	set("Ready", metav1.ConditionTrue, ReasonAccepted, "policy compiled")
	switch {
	case len(svcs) > 0:
		msg := "unknown services (ignored): " + strings.Join(svcs, ", ")
		if len(cats) > 0 {
			msg += "; unknown categories (ignored): " + strings.Join(cats, ", ")
		}
		set("Degraded", metav1.ConditionTrue, ReasonUnknownService, msg)
	case len(cats) > 0:
		set("Degraded", metav1.ConditionTrue, ReasonUnknownCategory, "unknown categories (ignored): "+strings.Join(cats, ", "))
	default:
		set("Degraded", metav1.ConditionFalse, ReasonAsExpected, "")
	}
	return st
}

// Reconciler writes Policy status.
type Reconciler struct {
	Store     store.Store
	Catalogue func() Catalogue
	Now       func() time.Time
}

// Reconcile updates one policy's status; it reports whether it wrote.
func (r *Reconciler) Reconcile(ctx context.Context, namespace, name string) (bool, error) {
	u, err := r.Store.Get(ctx, Kind, namespace, name)
	if errors.Is(err, store.ErrNotFound) {
		return false, nil
	}
	if err != nil {
		return false, fmt.Errorf("get policy %s/%s: %w", namespace, name, err)
	}
	var p v1alpha1.Policy
	if err := runtime.DefaultUnstructuredConverter.FromUnstructured(u.Object, &p); err != nil {
		return false, fmt.Errorf("decode policy %s/%s: %w", namespace, name, err)
	}
	now := time.Now
	if r.Now != nil {
		now = r.Now
	}
	desired := DesiredStatus(&p, r.Catalogue(), now())
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
