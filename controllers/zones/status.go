// Package zones writes the status of DNSZone and DNSRecordSet objects from
// what the data plane's compile step (dataplane/authority) makes of them: the
// serial and record counts a zone is served with, and for a record set the
// names it holds and every record that is not served, with the reason. The
// SQLite node feeds it the table it serves; the Kubernetes operator compiles
// the same objects with the same code (Evaluate), so both drivers report one
// truth.
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
	"github.com/svcdns/svc/dataplane/authority"
	"github.com/svcdns/svc/internal/store"
)

// Condition types and reasons written here.
const (
	ConditionReady    = "Ready"
	ConditionDegraded = "Degraded"

	ReasonServing         = "Serving"
	ReasonNotCompiled     = "NotCompiled"
	ReasonUnsynced        = "Unsynced"
	ReasonInvalidRecords  = "InvalidRecords"
	ReasonPartiallyServed = "PartiallyServed"
	ReasonAllServed       = "AllServed"
	ReasonInvalidFields   = "InvalidFields"
)

// Compiled is what the compile step knows about one zone.
type Compiled struct {
	Serial  int64
	Records int64
	Synced  bool
}

// Result is one compile step's outcome, indexed for status.
type Result struct {
	Zones    map[string]Compiled            // by DNSZone name
	Problems map[string][]authority.Problem // by Key
}

// Key indexes problems: "Kind/namespace/name".
func Key(kind, namespace, name string) string { return kind + "/" + namespace + "/" + name }

// FromCompile indexes a compiled table and its problems.
func FromCompile(t *authority.Table, problems []authority.Problem) Result {
	r := Result{Zones: map[string]Compiled{}, Problems: map[string][]authority.Problem{}}
	if t != nil {
		for _, zi := range t.Zones() {
			r.Zones[zi.Object] = Compiled{Serial: int64(zi.Serial), Records: int64(zi.Records), Synced: zi.Synced}
		}
	}
	for _, p := range problems {
		k := Key(p.Kind, p.Namespace, p.Name)
		r.Problems[k] = append(r.Problems[k], p)
	}
	return r
}

// Evaluate compiles zones and sets the way the data plane does (serials
// assigned by s, then authority.Compile) and indexes the outcome. zones and
// sets are not modified.
func Evaluate(s *Serials, zones []v1alpha1.DNSZone, sets []v1alpha1.DNSRecordSet, now time.Time) Result {
	own := make([]v1alpha1.DNSZone, len(zones))
	copy(own, zones) // Assign replaces spec.soa on its copies, never in place
	s.Assign(own, sets)
	t, problems := authority.Compile(own, sets, now)
	return FromCompile(t, problems)
}

// ZoneStatus is the desired status of a zone. refused counts the record sets
// that name the zone but are not served (namespace not allowed).
func ZoneStatus(z *v1alpha1.DNSZone, c Compiled, found bool, recordSets, refused int64, problems []authority.Problem, old []metav1.Condition, now time.Time) v1alpha1.DNSZoneStatus {
	st := v1alpha1.DNSZoneStatus{ObservedGeneration: z.Generation, RecordSets: recordSets}
	cond := metav1.Condition{Type: ConditionReady, Status: metav1.ConditionTrue, Reason: ReasonServing,
		Message: fmt.Sprintf("serial %d, %d records from %d record sets", c.Serial, c.Records, recordSets)}
	if refused > 0 {
		cond.Message += fmt.Sprintf("; %d record sets refused (see their status)", refused)
	}
	switch {
	case !found:
		cond.Status, cond.Reason, cond.Message = metav1.ConditionFalse, ReasonNotCompiled, "the zone is not served"
		if len(problems) > 0 {
			cond.Message += ": " + problemList(problems)
		}
	case !c.Synced:
		cond.Status, cond.Reason, cond.Message = metav1.ConditionFalse, ReasonUnsynced, "the node's view of the store is stale; the zone answers SERVFAIL"
	default:
		st.Serial, st.Records = c.Serial, c.Records
	}
	st.Conditions = setCondition(old, cond, z.Generation, now)
	deg := metav1.Condition{Type: ConditionDegraded, Status: metav1.ConditionFalse, Reason: ReasonAllServed, Message: "every field of the zone is served"}
	if found && len(problems) > 0 {
		deg.Status, deg.Reason, deg.Message = metav1.ConditionTrue, ReasonInvalidFields, problemList(problems)
	}
	st.Conditions = setCondition(st.Conditions, deg, z.Generation, now)
	return st
}

// RecordSetStatus is the desired status of a record set from the compile
// step's problems with it.
func RecordSetStatus(rs *v1alpha1.DNSRecordSet, problems []authority.Problem, old []metav1.Condition, now time.Time) v1alpha1.DNSRecordSetStatus {
	names := map[string]bool{}
	for _, ep := range rs.Spec.Endpoints {
		names[strings.ToLower(strings.TrimSuffix(ep.DNSName, "."))] = true
	}
	st := v1alpha1.DNSRecordSetStatus{Names: len(names), ObservedGeneration: rs.Generation, Publications: rs.Status.Publications}
	ready := metav1.Condition{Type: ConditionReady, Status: metav1.ConditionTrue, Reason: ReasonServing,
		Message: fmt.Sprintf("%d names served in zone %s", len(names), rs.Spec.ZoneRef.Name)}
	deg := metav1.Condition{Type: ConditionDegraded, Status: metav1.ConditionFalse, Reason: ReasonAllServed, Message: "every record is served"}
	if whole := refusal(problems); whole != nil {
		// Nothing of the set is served: the zone is missing, a forward zone,
		// or does not admit the set's namespace.
		st.Names = 0
		ready.Status, ready.Reason, ready.Message = metav1.ConditionFalse, whole.Code, whole.Reason
		deg.Reason, deg.Message = whole.Code, "nothing of the record set is served"
	} else if len(problems) > 0 {
		total, dropped := droppedTargets(rs, problems)
		msg := fmt.Sprintf("%d of %d records not served: %s", dropped, total, problemList(problems))
		ready.Status, ready.Reason, ready.Message = metav1.ConditionFalse, ReasonInvalidRecords, msg
		if dropped < total {
			deg.Status, deg.Reason, deg.Message = metav1.ConditionTrue, ReasonPartiallyServed, msg
		} else {
			deg.Reason, deg.Message = ReasonInvalidRecords, "no record of the record set is served"
		}
	}
	st.Conditions = setCondition(old, ready, rs.Generation, now)
	st.Conditions = setCondition(st.Conditions, deg, rs.Generation, now)
	return st
}

// refusal is the whole-object refusal among problems, if any.
func refusal(problems []authority.Problem) *authority.Problem {
	for i := range problems {
		if problems[i].Code != "" {
			return &problems[i]
		}
	}
	return nil
}

// droppedTargets counts the records (targets) of enabled endpoints and how
// many of them the problems cover.
func droppedTargets(rs *v1alpha1.DNSRecordSet, problems []authority.Problem) (total, dropped int) {
	type tk struct{ ep, t int }
	gone := map[tk]bool{}
	for _, p := range problems {
		if p.Endpoint < 0 || p.Endpoint >= len(rs.Spec.Endpoints) {
			continue
		}
		if p.Target >= 0 {
			gone[tk{p.Endpoint, p.Target}] = true
			continue
		}
		for i := range rs.Spec.Endpoints[p.Endpoint].Targets {
			gone[tk{p.Endpoint, i}] = true
		}
	}
	for i, ep := range rs.Spec.Endpoints {
		if x := ep.Service; x != nil && (x.Disabled || x.View == "public") {
			continue
		}
		for j := range ep.Targets {
			total++
			if gone[tk{i, j}] {
				dropped++
			}
		}
	}
	return total, min(dropped, total)
}

// ProblemText is one problem as status and logs show it.
func ProblemText(p authority.Problem) string {
	switch {
	case p.Endpoint < 0:
		return p.Reason
	case p.Target < 0:
		return fmt.Sprintf("endpoint %d: %s", p.Endpoint, p.Reason)
	default:
		return fmt.Sprintf("endpoint %d target %d: %s", p.Endpoint, p.Target, p.Reason)
	}
}

func problemList(problems []authority.Problem) string {
	texts := make([]string, 0, len(problems))
	for _, p := range problems {
		texts = append(texts, ProblemText(p))
	}
	sort.Strings(texts)
	msg := strings.Join(texts, "; ")
	if len(msg) > 1000 {
		msg = msg[:1000] + "..."
	}
	return msg
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
	// Event, when set, is told about every Ready condition whose status or
	// reason changed with a write (the operator records a Kubernetes Event).
	Event func(obj *unstructured.Unstructured, ready metav1.Condition)
}

// Sync writes the status of every given zone and record set from res, the
// compile step's outcome for exactly these objects.
func (w *Writer) Sync(ctx context.Context, zones []v1alpha1.DNSZone, sets []v1alpha1.DNSRecordSet, res Result) error {
	now := w.Now()
	perZone, refused := map[string]int64{}, map[string]int64{}
	members := map[string][]*v1alpha1.DNSRecordSet{}
	for i := range sets {
		rs := &sets[i]
		z := rs.Spec.ZoneRef.Name
		members[z] = append(members[z], rs)
		if r := refusal(res.Problems[Key("DNSRecordSet", rs.Namespace, rs.Name)]); r != nil && r.Code == authority.CodeNamespaceNotAllowed {
			refused[z]++
			continue
		}
		perZone[z]++
	}
	var errs []error
	for i := range zones {
		z := &zones[i]
		c, found := res.Zones[z.Name]
		desired := ZoneStatus(z, c, found, perZone[z.Name], refused[z.Name], res.Problems[Key("DNSZone", "", z.Name)], z.Status.Conditions, now)
		if found && c.Synced {
			// Every record set naming the zone counts (as in Serials), so
			// admitting a refused one changes the digest too.
			desired.SerialDigest = ContentDigest(z, members[z.Name])
		}
		if !reflect.DeepEqual(normalizeTimes(z.Status), normalizeTimes(desired)) {
			if err := w.write(ctx, z, &desired, z.Status.Conditions, desired.Conditions); err != nil {
				errs = append(errs, err)
			}
		}
	}
	for i := range sets {
		rs := &sets[i]
		desired := RecordSetStatus(rs, res.Problems[Key("DNSRecordSet", rs.Namespace, rs.Name)], rs.Status.Conditions, now)
		if !reflect.DeepEqual(normalizeTimes(rs.Status), normalizeTimes(desired)) {
			if err := w.write(ctx, rs, &desired, rs.Status.Conditions, desired.Conditions); err != nil {
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

func (w *Writer) write(ctx context.Context, obj runtime.Object, status any, before, after []metav1.Condition) error {
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
	if w.Event != nil {
		prev, next := find(before, ConditionReady), find(after, ConditionReady)
		if next != nil && (prev == nil || prev.Status != next.Status || prev.Reason != next.Reason) {
			w.Event(u, *next)
		}
	}
	return nil
}

func find(conds []metav1.Condition, typ string) *metav1.Condition {
	for i := range conds {
		if conds[i].Type == typ {
			return &conds[i]
		}
	}
	return nil
}
