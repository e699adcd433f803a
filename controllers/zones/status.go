// Package zones writes the status of DNSZone and DNSRecordSet objects from what
// the node compiled: the serial and record counts a zone is served with, and for
// a record set the names it holds and every record that could not be served.
package zones

import (
	"context"
	"errors"
	"fmt"
	"reflect"
	"sort"
	"strings"
	"time"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime"

	"github.com/svcdns/svc/api/v1alpha1"
	"github.com/svcdns/svc/internal/store"
)

// Compiled is what the node's compile step knows about one zone.
type Compiled struct {
	Serial  int64
	Records int64
	Synced  bool
}

// Problem is one record the compile step skipped.
type Problem struct {
	Kind, Namespace, Name string
	Message               string
}

// ZoneStatus is the desired status of a zone.
func ZoneStatus(z *v1alpha1.DNSZone, c Compiled, found bool, recordSets int64, old []metav1.Condition, now time.Time) v1alpha1.DNSZoneStatus {
	st := v1alpha1.DNSZoneStatus{ObservedGeneration: z.Generation, RecordSets: recordSets}
	cond := metav1.Condition{Type: "Ready", Status: metav1.ConditionTrue, Reason: "Serving",
		Message: fmt.Sprintf("serial %d, %d records from %d record sets", c.Serial, c.Records, recordSets)}
	switch {
	case !found:
		cond.Status, cond.Reason, cond.Message = metav1.ConditionFalse, "NotCompiled", "the zone is not in the served snapshot; see the node log"
	case !c.Synced:
		cond.Status, cond.Reason, cond.Message = metav1.ConditionFalse, "Unsynced", "the node's view of the store is stale; the zone answers SERVFAIL"
	default:
		st.Serial, st.Records = c.Serial, c.Records
	}
	st.Conditions = setCondition(old, cond, z.Generation, now)
	return st
}

// RecordSetStatus is the desired status of a record set.
func RecordSetStatus(rs *v1alpha1.DNSRecordSet, zoneExists bool, problems []string, old []metav1.Condition, now time.Time) v1alpha1.DNSRecordSetStatus {
	names := map[string]bool{}
	for _, ep := range rs.Spec.Endpoints {
		names[strings.ToLower(strings.TrimSuffix(ep.DNSName, "."))] = true
	}
	st := v1alpha1.DNSRecordSetStatus{Names: len(names), ObservedGeneration: rs.Generation, Publications: rs.Status.Publications}
	cond := metav1.Condition{Type: "Ready", Status: metav1.ConditionTrue, Reason: "Serving", Message: fmt.Sprintf("%d names served in zone %s", len(names), rs.Spec.ZoneRef.Name)}
	switch {
	case !zoneExists:
		cond.Status, cond.Reason, cond.Message = metav1.ConditionFalse, "ZoneNotFound", fmt.Sprintf("zone %s does not exist", rs.Spec.ZoneRef.Name)
	case len(problems) > 0:
		sort.Strings(problems)
		msg := strings.Join(problems, "; ")
		if len(msg) > 1000 {
			msg = msg[:1000] + "..."
		}
		cond.Status, cond.Reason, cond.Message = metav1.ConditionFalse, "InvalidRecords", fmt.Sprintf("%d records not served: %s", len(problems), msg)
	}
	st.Conditions = setCondition(old, cond, rs.Generation, now)
	return st
}

// setCondition replaces the condition of cond's type, keeping its transition
// time when the status did not change.
func setCondition(old []metav1.Condition, cond metav1.Condition, gen int64, now time.Time) []metav1.Condition {
	cond.ObservedGeneration = gen
	cond.LastTransitionTime = metav1.NewTime(now.UTC().Truncate(time.Second))
	out := make([]metav1.Condition, 0, len(old)+1)
	for _, c := range old {
		if c.Type == cond.Type {
			if c.Status == cond.Status {
				cond.LastTransitionTime = c.LastTransitionTime
			}
			continue
		}
		out = append(out, c)
	}
	return append(out, cond)
}

// Writer writes statuses through the store, only when they changed.
type Writer struct {
	Store store.Store
	Now   func() time.Time
}

// Sync writes the status of every given zone and record set. compiled is keyed
// by zone object name, problems by "Kind/namespace/name".
func (w *Writer) Sync(ctx context.Context, zones []v1alpha1.DNSZone, sets []v1alpha1.DNSRecordSet, compiled map[string]Compiled, problems map[string][]string) error {
	now := w.Now()
	perZone := map[string]int64{}
	for i := range sets {
		perZone[sets[i].Spec.ZoneRef.Name]++
	}
	exists := map[string]bool{}
	var errs []error
	for i := range zones {
		z := &zones[i]
		exists[z.Name] = true
		c, found := compiled[z.Name]
		desired := ZoneStatus(z, c, found, perZone[z.Name], z.Status.Conditions, now)
		if !reflect.DeepEqual(normalizeTimes(z.Status), normalizeTimes(desired)) {
			if err := w.write(ctx, z, &desired); err != nil {
				errs = append(errs, err)
			}
		}
	}
	for i := range sets {
		rs := &sets[i]
		desired := RecordSetStatus(rs, exists[rs.Spec.ZoneRef.Name], problems["DNSRecordSet/"+rs.Namespace+"/"+rs.Name], rs.Status.Conditions, now)
		if !reflect.DeepEqual(normalizeTimes(rs.Status), normalizeTimes(desired)) {
			if err := w.write(ctx, rs, &desired); err != nil {
				errs = append(errs, err)
			}
		}
	}
	if len(errs) > 0 {
		return fmt.Errorf("write status: %w", errors.Join(errs...)) // callers test for store.ErrClosed and conflicts
	}
	return nil
}

// normalizeTimes drops sub-second precision so a re-read status compares equal.
func normalizeTimes[T any](v T) map[string]any {
	m, _ := runtime.DefaultUnstructuredConverter.ToUnstructured(&v)
	return m
}

func (w *Writer) write(ctx context.Context, obj runtime.Object, status any) error {
	m, err := runtime.DefaultUnstructuredConverter.ToUnstructured(obj)
	if err != nil {
		return err
	}
	st, err := runtime.DefaultUnstructuredConverter.ToUnstructured(status)
	if err != nil {
		return err
	}
	u := &unstructured.Unstructured{Object: m}
	u.SetAPIVersion(v1alpha1.GroupVersion.String())
	u.Object["status"] = st
	if _, err := w.Store.UpdateStatus(ctx, u); err != nil {
		return fmt.Errorf("status of %s %s/%s: %w", u.GetKind(), u.GetNamespace(), u.GetName(), err)
	}
	return nil
}
