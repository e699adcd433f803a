package store

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"reflect"
	"strconv"
	"time"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/util/uuid"
)

// applyAttempts bounds how often an apply without a version precondition
// re-reads and retries after losing a write race.
const applyAttempts = 5

// New returns the Store every caller uses: it enforces manager ownership,
// versions, generation, defaulting and validation (through admit), the size
// cap and the zone rules, and keeps objects in driver.
func New(driver Driver, admit Admitter) Store {
	return &managed{d: driver, admit: admit, now: time.Now}
}

type managed struct {
	d     Driver
	admit Admitter
	now   func() time.Time
}

// OwnerOf returns the manager recorded on obj; an object without the
// annotation was written straight to the cluster.
func OwnerOf(obj *unstructured.Unstructured) Manager {
	if m, ok := obj.GetAnnotations()[ManagerAnnotation]; ok && m != "" {
		return Manager(m)
	}
	return ManagerKubernetes
}

func checkOwner(stored *unstructured.Unstructured, m Manager) error {
	if owner := OwnerOf(stored); owner != m {
		return &ManagedByError{Owner: owner}
	}
	return nil
}

func (s *managed) Get(ctx context.Context, kind, namespace, name string) (*unstructured.Unstructured, error) {
	return s.d.Get(ctx, Key{Kind: kind, Namespace: namespace, Name: name})
}

func (s *managed) List(ctx context.Context, opts ListOptions) (ListResult, error) {
	if opts.Kind == "" {
		return ListResult{}, fmt.Errorf("%w: list needs a kind", ErrInvalid)
	}
	if opts.Limit < 0 {
		return ListResult{}, fmt.Errorf("%w: negative limit", ErrInvalid)
	}
	return s.d.List(ctx, opts)
}

func (s *managed) Watch(ctx context.Context, opts WatchOptions) (<-chan Event, error) {
	return s.d.Watch(ctx, opts)
}

func (s *managed) Close() error { return s.d.Close() }

// normalize deep-copies obj through JSON so that numbers and maps compare
// alike whether an object came from a file, the API or Go code.
func normalize(obj *unstructured.Unstructured) (*unstructured.Unstructured, int, error) {
	b, err := json.Marshal(obj.Object)
	if err != nil {
		return nil, 0, fmt.Errorf("%w: encode: %v", ErrInvalid, err)
	}
	if len(b) > MaxObjectBytes {
		return nil, len(b), fmt.Errorf("%w: %d bytes, the limit is %d", ErrTooLarge, len(b), MaxObjectBytes)
	}
	out := &unstructured.Unstructured{}
	if err := out.UnmarshalJSON(b); err != nil {
		return nil, 0, fmt.Errorf("%w: %v", ErrInvalid, err)
	}
	return out, len(b), nil
}

func (s *managed) Apply(ctx context.Context, obj *unstructured.Unstructured, opts ApplyOptions) (ApplyResult, error) {
	if opts.Manager == "" {
		return ApplyResult{}, fmt.Errorf("%w: apply needs a manager", ErrInvalid)
	}
	if obj == nil || obj.GetKind() == "" || obj.GetName() == "" {
		return ApplyResult{}, fmt.Errorf("%w: metadata.name: Required value: kind and name are required", ErrInvalid)
	}
	// Without a precondition the caller asked for last-write-wins, so a
	// lost race is retried on a fresh read.
	return retryConflict(ctx, opts.ResourceVersion == "", func() (ApplyResult, error) { return s.applyOnce(ctx, obj, opts) })
}

// retryConflict runs once until it does not lose a write race
// (ErrConflict), at most applyAttempts times, when retry is set: the
// caller gave no version, so it asked for whatever is stored now.
func retryConflict[T any](ctx context.Context, retry bool, once func() (T, error)) (T, error) {
	for attempt := 1; ; attempt++ {
		res, err := once()
		if retry && errors.Is(err, ErrConflict) && attempt < applyAttempts && ctx.Err() == nil {
			continue
		}
		return res, err
	}
}

func (s *managed) applyOnce(ctx context.Context, in *unstructured.Unstructured, opts ApplyOptions) (ApplyResult, error) {
	w, res, err := s.prepare(ctx, in, opts)
	if err != nil || w == nil || opts.DryRun {
		return res, err
	}
	out, err := s.d.Write(ctx, []Write{*w})
	if err != nil {
		return ApplyResult{}, fmt.Errorf("apply %s: %w", w.Key, err)
	}
	return ApplyResult{Result: res.Result, ResourceVersion: out[0].GetResourceVersion(), Object: out[0]}, nil
}

// prepare runs every check of an apply and returns the write it needs (nil
// when the object is unchanged) with the result it will have.
func (s *managed) prepare(ctx context.Context, in *unstructured.Unstructured, opts ApplyOptions) (*Write, ApplyResult, error) {
	key := KeyOf(in)
	stored, err := s.d.Get(ctx, key)
	if err != nil && !errors.Is(err, ErrNotFound) {
		return nil, ApplyResult{}, fmt.Errorf("apply %s: %w", key, err)
	}
	if stored == nil && opts.ResourceVersion != "" {
		return nil, ApplyResult{}, fmt.Errorf("apply %s: %w: object does not exist", key, ErrPrecondition)
	}
	if stored != nil {
		if opts.ResourceVersion != "" && opts.ResourceVersion != stored.GetResourceVersion() {
			return nil, ApplyResult{}, fmt.Errorf("apply %s: %w: resourceVersion %s, stored %s", key, ErrPrecondition, opts.ResourceVersion, stored.GetResourceVersion())
		}
		if err := checkOwner(stored, opts.Manager); err != nil {
			return nil, ApplyResult{}, err
		}
	}

	obj, _, err := normalize(in)
	if err != nil {
		return nil, ApplyResult{}, fmt.Errorf("apply %s: %w", key, err)
	}
	// Only what the caller owns is taken from the input; the rest of metadata
	// belongs to the store.
	next := &unstructured.Unstructured{Object: map[string]any{
		"apiVersion": obj.GetAPIVersion(),
		"kind":       obj.GetKind(),
	}}
	if spec, ok := obj.Object["spec"]; ok {
		next.Object["spec"] = spec
	}
	// Kinds without spec (e.g. internal kinds holding data) keep their other
	// top-level fields too.
	for k, v := range obj.Object {
		if k != "metadata" && k != "status" && k != "apiVersion" && k != "kind" && k != "spec" {
			next.Object[k] = v
		}
	}
	next.SetName(obj.GetName())
	next.SetNamespace(obj.GetNamespace())
	if l := obj.GetLabels(); len(l) > 0 {
		next.SetLabels(l)
	}
	ann := obj.GetAnnotations()
	if ann == nil {
		ann = map[string]string{}
	}
	ann[ManagerAnnotation] = string(opts.Manager)
	next.SetAnnotations(ann)

	if s.admit != nil {
		if err := s.admit.Admit(ctx, next, stored); err != nil {
			if errors.Is(err, ErrInvalid) {
				return nil, ApplyResult{}, fmt.Errorf("apply %s: %w", key, err)
			}
			// Both stay reachable: errors.Is(ErrInvalid) for the class,
			// errors.As for the validator's own error (field causes).
			return nil, ApplyResult{}, fmt.Errorf("apply %s: %w: %w", key, ErrInvalid, err)
		}
		// The admitter may not take the object's ownership away.
		ann := next.GetAnnotations()
		if ann == nil {
			ann = map[string]string{}
		}
		ann[ManagerAnnotation] = string(opts.Manager)
		next.SetAnnotations(ann)
	}

	if stored != nil && sameContent(stored, next) {
		return nil, ApplyResult{Result: Unchanged, ResourceVersion: stored.GetResourceVersion(), Object: stored}, nil
	}

	w := Write{Key: key, Object: next}
	if stored == nil {
		w.Op = OpCreate
		next.SetUID(uuid.NewUUID())
		next.SetCreationTimestamp(metav1.NewTime(s.now().UTC().Truncate(time.Second)))
		next.SetGeneration(1)
	} else {
		w.Op = OpUpdate
		w.ResourceVersion = stored.GetResourceVersion()
		next.SetUID(stored.GetUID())
		next.SetCreationTimestamp(stored.GetCreationTimestamp())
		gen := stored.GetGeneration()
		if !reflect.DeepEqual(stored.Object["spec"], next.Object["spec"]) || gen == 0 {
			gen++
		}
		next.SetGeneration(gen)
		if st, ok := stored.Object["status"]; ok {
			next.Object["status"] = st
		}
	}
	if _, _, err := normalize(next); err != nil {
		return nil, ApplyResult{}, fmt.Errorf("apply %s: %w", key, err)
	}
	res := Updated
	if stored == nil {
		res = Created
	}
	if opts.DryRun && stored != nil {
		next.SetResourceVersion(stored.GetResourceVersion())
	}
	return &w, ApplyResult{Result: res, ResourceVersion: next.GetResourceVersion(), Object: next}, nil
}

// ApplyBatch applies objs and deletes dels, all or nothing: the SQLite
// driver writes them in one transaction; the Kubernetes driver checks every
// version before the first write (as DeleteZone). Each object gets the
// checks of Apply (ownership, admission, size); opts.ResourceVersion is not
// used (each write is conditional on the version read). A delete of an
// object that is gone is skipped. A lost race re-reads and retries.
func (s *managed) ApplyBatch(ctx context.Context, objs []*unstructured.Unstructured, dels []Key, opts ApplyOptions) ([]ApplyResult, error) {
	if opts.Manager == "" {
		return nil, fmt.Errorf("%w: apply needs a manager", ErrInvalid)
	}
	if opts.ResourceVersion != "" {
		return nil, fmt.Errorf("%w: a batch takes no resourceVersion", ErrInvalid)
	}
	for _, obj := range objs {
		if obj == nil || obj.GetKind() == "" || obj.GetName() == "" {
			return nil, fmt.Errorf("%w: metadata.name: Required value: kind and name are required", ErrInvalid)
		}
	}
	return retryConflict(ctx, true, func() ([]ApplyResult, error) { return s.applyBatchOnce(ctx, objs, dels, opts) })
}

func (s *managed) applyBatchOnce(ctx context.Context, objs []*unstructured.Unstructured, dels []Key, opts ApplyOptions) ([]ApplyResult, error) {
	results := make([]ApplyResult, len(objs))
	writes := make([]Write, 0, len(objs)+len(dels))
	at := make([]int, 0, len(objs)) // writes[j] stores objs[at[j]]
	for i, obj := range objs {
		w, res, err := s.prepare(ctx, obj, opts)
		if err != nil {
			return nil, err
		}
		results[i] = res
		if w != nil {
			writes = append(writes, *w)
			at = append(at, i)
		}
	}
	for _, k := range dels {
		stored, err := s.d.Get(ctx, k)
		if errors.Is(err, ErrNotFound) {
			continue
		}
		if err != nil {
			return nil, fmt.Errorf("delete %s: %w", k, err)
		}
		if err := checkOwner(stored, opts.Manager); err != nil {
			return nil, err
		}
		writes = append(writes, Write{Op: OpDelete, Key: k, ResourceVersion: stored.GetResourceVersion()})
	}
	if opts.DryRun || len(writes) == 0 {
		return results, nil
	}
	out, err := s.d.Write(ctx, writes)
	if err != nil {
		return nil, fmt.Errorf("apply batch: %w", err)
	}
	for j, i := range at {
		results[i].ResourceVersion, results[i].Object = out[j].GetResourceVersion(), out[j]
	}
	return results, nil
}

// sameContent reports whether an apply would change nothing the caller owns.
func sameContent(stored, next *unstructured.Unstructured) bool {
	if !reflect.DeepEqual(stored.Object["spec"], next.Object["spec"]) {
		return false
	}
	if !equalStringMaps(stored.GetLabels(), next.GetLabels()) || !equalStringMaps(stored.GetAnnotations(), next.GetAnnotations()) {
		return false
	}
	for k, v := range next.Object {
		if k == "metadata" || k == "status" || k == "spec" {
			continue
		}
		if !reflect.DeepEqual(stored.Object[k], v) {
			return false
		}
	}
	for k := range stored.Object {
		if _, ok := next.Object[k]; !ok && k != "metadata" && k != "status" {
			return false
		}
	}
	return true
}

func equalStringMaps(a, b map[string]string) bool {
	if len(a) != len(b) {
		return false
	}
	for k, v := range a {
		if w, ok := b[k]; !ok || w != v {
			return false
		}
	}
	return true
}

func (s *managed) UpdateStatus(ctx context.Context, obj *unstructured.Unstructured) (*unstructured.Unstructured, error) {
	if obj == nil {
		return nil, fmt.Errorf("%w: nil object", ErrInvalid)
	}
	key := KeyOf(obj)
	stored, err := s.d.Get(ctx, key)
	if err != nil {
		return nil, fmt.Errorf("update status %s: %w", key, err)
	}
	if rv := obj.GetResourceVersion(); rv != "" && rv != stored.GetResourceVersion() {
		return nil, fmt.Errorf("update status %s: %w: resourceVersion %s, stored %s", key, ErrConflict, rv, stored.GetResourceVersion())
	}
	in, _, err := normalize(obj)
	if err != nil {
		return nil, fmt.Errorf("update status %s: %w", key, err)
	}
	next := stored.DeepCopy()
	st, ok := in.Object["status"]
	if ok {
		next.Object["status"] = st
	} else {
		delete(next.Object, "status")
	}
	if reflect.DeepEqual(stored.Object["status"], next.Object["status"]) {
		return stored, nil
	}
	if _, _, err := normalize(next); err != nil {
		return nil, fmt.Errorf("update status %s: %w", key, err)
	}
	out, err := s.d.Write(ctx, []Write{{Op: OpUpdate, Key: key, Object: next, ResourceVersion: stored.GetResourceVersion()}})
	if err != nil {
		return nil, fmt.Errorf("update status %s: %w", key, err)
	}
	return out[0], nil
}

func (s *managed) Delete(ctx context.Context, kind, namespace, name string, opts DeleteOptions) error {
	// Without a precondition the caller asked to delete whatever is
	// stored: a write that raced (the operator updating the status) is
	// retried on a fresh read.
	_, err := retryConflict(ctx, opts.ResourceVersion == "", func() (struct{}, error) {
		return struct{}{}, s.deleteOnce(ctx, kind, namespace, name, opts)
	})
	return err
}

func (s *managed) deleteOnce(ctx context.Context, kind, namespace, name string, opts DeleteOptions) error {
	key := Key{Kind: kind, Namespace: namespace, Name: name}
	stored, err := s.d.Get(ctx, key)
	if err != nil {
		return fmt.Errorf("delete %s: %w", key, err)
	}
	if opts.ResourceVersion != "" && opts.ResourceVersion != stored.GetResourceVersion() {
		return fmt.Errorf("delete %s: %w: resourceVersion %s, stored %s", key, ErrPrecondition, opts.ResourceVersion, stored.GetResourceVersion())
	}
	if opts.Manager != "" {
		if err := checkOwner(stored, opts.Manager); err != nil {
			return err
		}
	}
	if kind == KindDNSZone {
		if IsDefaultZone(stored) {
			return fmt.Errorf("delete %s: %w", key, ErrDefaultZone)
		}
		sets, err := s.zoneRecordSets(ctx, name)
		if err != nil {
			return fmt.Errorf("delete %s: %w", key, err)
		}
		if len(sets) > 0 {
			return fmt.Errorf("delete %s: %w (%d record sets)", key, ErrZoneNotEmpty, len(sets))
		}
	}
	if _, err := s.d.Write(ctx, []Write{{Op: OpDelete, Key: key, ResourceVersion: stored.GetResourceVersion()}}); err != nil {
		return fmt.Errorf("delete %s: %w", key, err)
	}
	return nil
}

// IsDefaultZone reports whether zone is the default zone ".".
func IsDefaultZone(zone *unstructured.Unstructured) bool {
	if zone.GetName() == DefaultZoneName {
		return true
	}
	zn, _, _ := unstructured.NestedString(zone.Object, "spec", "zoneName")
	return zn == "."
}

// zoneRecordSets lists every DNSRecordSet whose spec.zoneRef.name is zone.
func (s *managed) zoneRecordSets(ctx context.Context, zone string) ([]*unstructured.Unstructured, error) {
	var out []*unstructured.Unstructured
	opts := ListOptions{Kind: KindDNSRecordSet, Limit: 1000}
	for range 1 << 20 { // bounded: a million pages
		page, err := s.d.List(ctx, opts)
		if err != nil {
			return nil, fmt.Errorf("list record sets: %w", err)
		}
		for _, rs := range page.Items {
			if ref, _, _ := unstructured.NestedString(rs.Object, "spec", "zoneRef", "name"); ref == zone {
				out = append(out, rs)
			}
		}
		if page.Continue == "" {
			return out, nil
		}
		opts.Continue = page.Continue
	}
	return nil, errors.New("list record sets: too many pages")
}

// RecordCount is the number of records of a DNSRecordSet: the sum of its
// endpoints' targets.
func RecordCount(rs *unstructured.Unstructured) int {
	eps, _, _ := unstructured.NestedSlice(rs.Object, "spec", "endpoints")
	n := 0
	for _, ep := range eps {
		m, ok := ep.(map[string]any)
		if !ok {
			continue
		}
		if t, ok := m["targets"].([]any); ok {
			n += len(t)
		}
	}
	return n
}

func (s *managed) DeleteZone(ctx context.Context, name string, opts DeleteZoneOptions) (DeleteZoneResult, error) {
	// The caller gives no version: a zone or record set whose status
	// changed between the read and the delete is read again.
	return retryConflict(ctx, true, func() (DeleteZoneResult, error) { return s.deleteZoneOnce(ctx, name, opts) })
}

func (s *managed) deleteZoneOnce(ctx context.Context, name string, opts DeleteZoneOptions) (DeleteZoneResult, error) {
	key := Key{Kind: KindDNSZone, Name: name}
	zone, err := s.d.Get(ctx, key)
	if err != nil {
		return DeleteZoneResult{}, fmt.Errorf("delete zone %s: %w", name, err)
	}
	if IsDefaultZone(zone) {
		return DeleteZoneResult{}, fmt.Errorf("delete zone %s: %w", name, ErrDefaultZone)
	}
	if opts.Manager != "" {
		if err := checkOwner(zone, opts.Manager); err != nil {
			return DeleteZoneResult{}, err
		}
	}
	sets, err := s.zoneRecordSets(ctx, name)
	if err != nil {
		return DeleteZoneResult{}, fmt.Errorf("delete zone %s: %w", name, err)
	}
	var res DeleteZoneResult
	writes := make([]Write, 0, len(sets)+1)
	for _, rs := range sets {
		if opts.Manager != "" {
			if err := checkOwner(rs, opts.Manager); err != nil {
				return DeleteZoneResult{}, err
			}
		}
		res.RecordSets++
		res.Records += RecordCount(rs)
		writes = append(writes, Write{Op: OpDelete, Key: KeyOf(rs), ResourceVersion: rs.GetResourceVersion()})
	}
	if opts.DryRun {
		return res, nil
	}
	writes = append(writes, Write{Op: OpDelete, Key: key, ResourceVersion: zone.GetResourceVersion()})
	if _, err := s.d.Write(ctx, writes); err != nil {
		return DeleteZoneResult{}, fmt.Errorf("delete zone %s: %w", name, err)
	}
	return res, nil
}

// ParseVersion parses a resourceVersion; empty is 0.
func ParseVersion(rv string) (int64, error) {
	if rv == "" {
		return 0, nil
	}
	v, err := strconv.ParseInt(rv, 10, 64)
	if err != nil || v < 0 {
		return 0, fmt.Errorf("%w: resourceVersion %q is not a version", ErrInvalid, rv)
	}
	return v, nil
}
