package api

import (
	"context"
	"errors"
	"fmt"
	"net/http"
	"strings"

	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apimachinery/pkg/util/validation/field"

	"github.com/svcdns/svc/api/v1alpha1"
	"github.com/svcdns/svc/internal/store"
	"github.com/svcdns/svc/internal/validation"
)

// Write-time checks that need other objects, after the admitter (schema and
// the data plane's own parse, internal/validation): a record set against its
// zone, a policy's service ids against the loaded catalogue. What is refused
// here would never be served; what is merely not served yet (a list a policy
// names that does not exist yet) is accepted with a warning in the apply
// result, so `svc apply` can say so and still succeed.

// Pending finds an object of the same write (a multi-object apply) by kind,
// namespace and name; nil when the write does not hold it. A record set
// applied with its zone is checked against that zone, and a policy applied
// with its lists is not warned about them.
type Pending func(kind, namespace, name string) *unstructured.Unstructured

// ApplyNote returns warnings about one object that is about to be written
// and passed every check: accepted, but not (fully) in effect, or in effect
// in a way the writer may not expect. Notes are sentences without a trailing
// period; the CLI prints each as "Warning: <note>".
type ApplyNote func(ctx context.Context, obj *unstructured.Unstructured, pending Pending) []string

// applyNotes are the notes every write through apply, PUT and the records
// routes collects. Add a kind's notes here.
func (s *Server) applyNotes() []ApplyNote {
	return []ApplyNote{s.recordSetNotes, s.policyNotes}
}

// checkContext runs the checks that need other objects and collects the
// notes. The error refuses the write (400 invalid, naming the field).
func (s *Server) checkContext(ctx context.Context, obj *unstructured.Unstructured, pending Pending) ([]string, *Error) {
	if pending == nil {
		pending = func(string, string, string) *unstructured.Unstructured { return nil }
	}
	errs := s.contextErrors(ctx, obj, pending)
	if len(errs) > 0 {
		// What the stored version already had is status, not a refusal
		// (validation.Ratchet): removing or changing other records works.
		if old, err := s.deps.Store.Get(ctx, obj.GetKind(), obj.GetNamespace(), obj.GetName()); err == nil {
			errs = validation.Ratchet(errs, s.contextErrors(ctx, old, pending))
		}
	}
	if len(errs) > 0 {
		err := apierrors.NewInvalid(schema.GroupKind{Group: validation.Group, Kind: obj.GetKind()}, obj.GetName(), errs)
		return nil, newErr(http.StatusBadRequest, KeyInvalid, err.Error(), "")
	}
	var notes []string
	for _, n := range s.applyNotes() {
		notes = append(notes, n(ctx, obj, pending)...)
	}
	return notes, nil
}

// contextErrors are the errors of obj against other objects.
func (s *Server) contextErrors(ctx context.Context, obj *unstructured.Unstructured, pending Pending) field.ErrorList {
	switch obj.GetKind() {
	case store.KindDNSRecordSet:
		var rs v1alpha1.DNSRecordSet
		if runtime.DefaultUnstructuredConverter.FromUnstructured(obj.Object, &rs) == nil {
			if z, ok := s.zoneOf(ctx, rs.Spec.ZoneRef.Name, pending); ok {
				return validation.RecordSetErrors(&rs, z)
			}
		}
	case "Policy":
		var p v1alpha1.Policy
		if runtime.DefaultUnstructuredConverter.FromUnstructured(obj.Object, &p) == nil {
			if services, categories, ok := s.catalogueIDs(ctx); ok {
				return validation.CatalogueErrors(&p.Spec, services, categories)
			}
		}
	}
	return nil
}

// zoneOf finds a DNSZone in the write or the store.
func (s *Server) zoneOf(ctx context.Context, name string, pending Pending) (*v1alpha1.DNSZone, bool) {
	u := pending(store.KindDNSZone, "", name)
	if u == nil {
		var err error
		if u, err = s.deps.Store.Get(ctx, store.KindDNSZone, "", name); err != nil {
			return nil, false
		}
	}
	var z v1alpha1.DNSZone
	if runtime.DefaultUnstructuredConverter.FromUnstructured(u.Object, &z) != nil {
		return nil, false
	}
	return &z, true
}

// catalogueIDs lists the ids of the loaded catalogue; false when none is
// loaded (then ids are not checked at write time; status reports them).
func (s *Server) catalogueIDs(ctx context.Context) (services, categories []string, ok bool) {
	if s.deps.Catalogue == nil {
		return nil, nil, false
	}
	svcs, err := s.deps.Catalogue.CatalogueServices(ctx)
	if err != nil || len(svcs) == 0 {
		return nil, nil, false
	}
	cats, err := s.deps.Catalogue.CatalogueCategories(ctx)
	if err != nil {
		return nil, nil, false
	}
	for _, sv := range svcs {
		services = append(services, sv.ID)
	}
	for _, c := range cats {
		categories = append(categories, c.ID)
	}
	return services, categories, true
}

// exists reports whether an object is in the write or the store; a store
// error counts as existing (no warning on a guess).
func (s *Server) exists(ctx context.Context, pending Pending, kind, ns, name string) bool {
	if pending(kind, ns, name) != nil {
		return true
	}
	_, err := s.deps.Store.Get(ctx, kind, ns, name)
	return !errors.Is(err, store.ErrNotFound)
}

// splitRef resolves "namespace/name" or a name in ns.
func splitRef(ns, ref string) (string, string) {
	if a, b, ok := strings.Cut(ref, "/"); ok {
		return a, b
	}
	return ns, ref
}

func (s *Server) recordSetNotes(ctx context.Context, obj *unstructured.Unstructured, pending Pending) []string {
	if obj.GetKind() != store.KindDNSRecordSet {
		return nil
	}
	zone, _, _ := unstructured.NestedString(obj.Object, "spec", "zoneRef", "name")
	z, ok := s.zoneOf(ctx, zone, pending)
	switch {
	case !ok && !s.exists(ctx, pending, store.KindDNSZone, "", zone):
		return []string{fmt.Sprintf("DNSRecordSet %s/%s: zone %q does not exist; its records are served once a DNSZone %s is applied", obj.GetNamespace(), obj.GetName(), zone, zone)}
	case ok && z.Spec.Type == "forward":
		return []string{fmt.Sprintf("DNSRecordSet %s/%s: zone %q is a forward zone; its records are not served", obj.GetNamespace(), obj.GetName(), zone)}
	case ok && !z.Spec.RecordSetNamespaces.Allows(namespaceOr(obj.GetNamespace())):
		return []string{fmt.Sprintf("DNSRecordSet %s/%s: zone %q does not admit namespace %q (its spec.recordSetNamespaces); the records are not served until it does",
			obj.GetNamespace(), obj.GetName(), zone, namespaceOr(obj.GetNamespace()))}
	}
	return nil
}

func namespaceOr(ns string) string {
	if ns == "" {
		return v1alpha1.DefaultRecordSetNamespace
	}
	return ns
}

func (s *Server) policyNotes(ctx context.Context, obj *unstructured.Unstructured, pending Pending) []string {
	if obj.GetKind() != "Policy" {
		return nil
	}
	var p v1alpha1.Policy
	if runtime.DefaultUnstructuredConverter.FromUnstructured(obj.Object, &p) != nil {
		return nil
	}
	var notes []string
	check := func(field, kind string, refs []string, effect string) {
		for _, r := range refs {
			ns, name := splitRef(p.Namespace, r)
			if !s.exists(ctx, pending, kind, ns, name) {
				notes = append(notes, fmt.Sprintf("Policy %s/%s: spec.%s names %s %s/%s, which does not exist; %s until it is created",
					p.Namespace, p.Name, field, kind, ns, name, effect))
			}
		}
	}
	check("clientGroupRefs", "ClientGroup", p.Spec.ClientGroupRefs, "no client matches through it")
	check("blockListRefs", "BlockList", p.Spec.BlockListRefs, "nothing is blocked through it")
	check("allowListRefs", "BlockList", p.Spec.AllowListRefs, "nothing is allowed through it")
	if s.deps.Catalogue != nil && len(p.Spec.BlockedServices)+len(p.Spec.BlockedCategories)+len(p.Spec.AllowedServices) > 0 {
		if _, _, ok := s.catalogueIDs(ctx); !ok {
			notes = append(notes, fmt.Sprintf("Policy %s/%s: no service catalogue is loaded on this node; its service ids are checked once one is (see the policy's status)", p.Namespace, p.Name))
		}
	}
	return notes
}
