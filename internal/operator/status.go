package operator

import (
	"context"
	"errors"
	"fmt"
	"reflect"
	"time"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime"

	"github.com/svcdns/svc/internal/store"
)

// eventRecorder is the part of the manager's recorder the status reconciler
// uses.
type eventRecorder interface {
	Eventf(regarding runtime.Object, related runtime.Object, eventtype, reason, action, note string, args ...any)
}

// statusReconciler writes the status of DNSZone and DNSRecordSet objects:
// observedGeneration, counts and a Ready condition, with an Event when Ready
// changes.
type statusReconciler struct {
	store  store.Store
	events eventRecorder
	now    func() time.Time
}

// zoneNotFoundRetry is how often a record set whose zone does not exist is
// looked at again.
const zoneNotFoundRetry = 15 * time.Second

func (r *statusReconciler) reconcileRecordSet(ctx context.Context, ns, name string) (time.Duration, error) {
	rs, err := r.store.Get(ctx, store.KindDNSRecordSet, ns, name)
	if errors.Is(err, store.ErrNotFound) {
		return 0, nil
	}
	if err != nil {
		return 0, err
	}
	eps, _, _ := unstructured.NestedSlice(rs.Object, "spec", "endpoints")
	names := map[string]bool{}
	for _, ep := range eps {
		if m, ok := ep.(map[string]any); ok {
			if n, _ := m["dnsName"].(string); n != "" {
				names[n] = true
			}
		}
	}
	zone, _, _ := unstructured.NestedString(rs.Object, "spec", "zoneRef", "name")
	cond := metav1.Condition{Type: "Ready", Status: metav1.ConditionTrue, Reason: "Accepted", Message: fmt.Sprintf("%d names in zone %s", len(names), zone)}
	var again time.Duration
	if _, err := r.store.Get(ctx, store.KindDNSZone, "", zone); errors.Is(err, store.ErrNotFound) {
		cond = metav1.Condition{Type: "Ready", Status: metav1.ConditionFalse, Reason: "ZoneNotFound", Message: fmt.Sprintf("zone %s does not exist", zone)}
		// Zone changes do not trigger record sets: look again for a zone
		// created after (or seen by the store after) its record sets.
		again = zoneNotFoundRetry
	}
	return again, r.write(ctx, rs, map[string]any{"names": int64(len(names))}, cond)
}

func (r *statusReconciler) reconcileZone(ctx context.Context, _, name string) (time.Duration, error) {
	zone, err := r.store.Get(ctx, store.KindDNSZone, "", name)
	if errors.Is(err, store.ErrNotFound) {
		return 0, nil
	}
	if err != nil {
		return 0, err
	}
	var sets, records int64
	opts := store.ListOptions{Kind: store.KindDNSRecordSet, Limit: 500}
	for {
		page, err := r.store.List(ctx, opts)
		if err != nil {
			return 0, err
		}
		for _, rs := range page.Items {
			if ref, _, _ := unstructured.NestedString(rs.Object, "spec", "zoneRef", "name"); ref == name {
				sets++
				records += int64(store.RecordCount(rs))
			}
		}
		if page.Continue == "" {
			break
		}
		opts.Continue = page.Continue
	}
	cond := metav1.Condition{Type: "Ready", Status: metav1.ConditionTrue, Reason: "Synced", Message: fmt.Sprintf("%d record sets, %d records", sets, records)}
	// Record set changes re-count on the zone's next reconcile.
	return time.Minute, r.write(ctx, zone, map[string]any{"recordSets": sets, "records": records}, cond)
}

// write sets fields, observedGeneration and cond on obj's status, writing
// only when something changed.
func (r *statusReconciler) write(ctx context.Context, obj *unstructured.Unstructured, fields map[string]any, cond metav1.Condition) error {
	next := obj.DeepCopy()
	st, _, _ := unstructured.NestedMap(next.Object, "status")
	if st == nil {
		st = map[string]any{}
	}
	for k, v := range fields {
		st[k] = v
	}
	gen := obj.GetGeneration()
	st["observedGeneration"] = gen
	cond.ObservedGeneration = gen
	conds, _ := st["conditions"].([]any)
	var prev map[string]any
	out := make([]any, 0, len(conds)+1)
	for _, c := range conds {
		if m, ok := c.(map[string]any); ok && m["type"] == cond.Type {
			prev = m
			continue
		}
		out = append(out, c)
	}
	transition := metav1.NewTime(r.now().UTC().Truncate(time.Second))
	changed := prev == nil || prev["status"] != string(cond.Status)
	if !changed {
		if t, ok := prev["lastTransitionTime"].(string); ok {
			if pt, err := time.Parse(time.RFC3339, t); err == nil {
				transition = metav1.NewTime(pt)
			}
		}
	}
	c, err := runtime.DefaultUnstructuredConverter.ToUnstructured(&metav1.Condition{
		Type: cond.Type, Status: cond.Status, Reason: cond.Reason, Message: cond.Message,
		ObservedGeneration: gen, LastTransitionTime: transition,
	})
	if err != nil {
		return err
	}
	st["conditions"] = append(out, c)
	next.Object["status"] = st
	norm, _ := runtime.DefaultUnstructuredConverter.ToUnstructured(next)
	if reflect.DeepEqual(normalize(obj.Object["status"]), normalize(norm["status"])) {
		return nil
	}
	if _, err := r.store.UpdateStatus(ctx, next); err != nil {
		return fmt.Errorf("status of %s: %w", store.KeyOf(obj), err)
	}
	if changed && r.events != nil {
		typ := "Normal"
		if cond.Status != metav1.ConditionTrue {
			typ = "Warning"
		}
		r.events.Eventf(obj, nil, typ, cond.Reason, "Reconcile", "%s", cond.Message)
	}
	return nil
}

// normalize makes int and int64 compare alike.
func normalize(v any) any {
	switch t := v.(type) {
	case map[string]any:
		out := make(map[string]any, len(t))
		for k, x := range t {
			out[k] = normalize(x)
		}
		return out
	case []any:
		out := make([]any, len(t))
		for i, x := range t {
			out[i] = normalize(x)
		}
		return out
	case int:
		return int64(t)
	case float64:
		return int64(t)
	}
	return v
}
