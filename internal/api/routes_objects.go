package api

import (
	"context"
	"encoding/json"
	"errors"
	"net/http"
	"strconv"
	"strings"

	"github.com/danielgtaylor/huma/v2"
	jsonpatch "github.com/evanphx/json-patch/v5"
	"github.com/svcdns/svc/internal/auth"
	"github.com/svcdns/svc/internal/store"
	"github.com/svcdns/svc/internal/validation"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/labels"
)

// exposedInternal are internal kinds served under /objects; LocalUser and
// APIToken are not (they carry password and token hashes).
var exposedInternal = map[string]bool{auth.KindRoleBinding: true, auth.KindServiceAccount: true, auth.KindIdentityProv: true}

// kindsServed returns the kinds /objects and /apply serve, in a stable order.
func kindsServed(v KindRegistry) []validation.KindInfo {
	var out []validation.KindInfo
	for _, k := range v.Kinds() {
		if !k.Internal || exposedInternal[k.Kind] {
			out = append(out, k)
		}
	}
	return out
}

// zoneScoped kinds are authorized at the scope of their zone.
func zoneScoped(kind string) bool {
	return kind == store.KindDNSZone || kind == store.KindDNSRecordSet
}

// zoneOf returns the zone an object belongs to.
func zoneOf(obj *unstructured.Unstructured) string {
	switch obj.GetKind() {
	case store.KindDNSZone:
		return obj.GetName()
	case store.KindDNSRecordSet:
		z, _, _ := unstructured.NestedString(obj.Object, "spec", "zoneRef", "name")
		return z
	}
	return ""
}

// checkObject authorizes verb on one object at its zone's scope.
func (s *Server) checkObject(ctx context.Context, ki validation.KindInfo, verb string, obj *unstructured.Unstructured) *Error {
	perm := ki.Plural + "." + verb
	scope := auth.ClusterScope
	if zoneScoped(ki.Kind) {
		if z := zoneOf(obj); z != "" {
			scope = auth.ZoneScope(z)
		}
	}
	st := state(ctx)
	d := s.authz.Authorize(ctx, st.principal, perm, scope)
	if !d.Allowed {
		return errForbidden(perm)
	}
	if st.decision == "" || st.decision == auth.PathLocal {
		st.decision = d.Path
	}
	return nil
}

// ObjectBody is a Kubernetes-shaped object.
type ObjectBody = map[string]any

type listObjectsIn struct {
	Namespace     string `query:"namespace" maxLength:"253" doc:"only this namespace (namespaced kinds)"`
	LabelSelector string `query:"labelSelector" maxLength:"1024"`
	Limit         int    `query:"limit" minimum:"0" maximum:"1000" doc:"page size; 0 means 500"`
	Continue      string `query:"continue" maxLength:"1024"`
}

type listObjectsOut struct{ Body *ListBody[ObjectBody] }

// ClusterObjectParams address one cluster-scoped object (exported so that
// huma reads the fields of structs embedding it).
type ClusterObjectParams struct {
	Name    string `path:"name" maxLength:"253"`
	IfMatch string `header:"If-Match" maxLength:"128" doc:"resourceVersion the write expects"`
}

// NamespacedObjectParams address one namespaced object.
type NamespacedObjectParams struct {
	Namespace string `path:"namespace" maxLength:"253"`
	Name      string `path:"name" maxLength:"253"`
	IfMatch   string `header:"If-Match" maxLength:"128" doc:"resourceVersion the write expects"`
}

type objectOut struct{ Body ObjectBody }

// objectWriteOut is the answer of PUT and PATCH. Warning carries the notes
// of the write (see ApplyNote) as RFC 7234 warnings, the way the Kubernetes
// API sends them: 299 - "text".
type objectWriteOut struct {
	Warning []string `header:"Warning" doc:"why an accepted object is not (fully) in effect"`
	Body    ObjectBody
}

// warningHeaders formats notes as Warning header values.
func warningHeaders(notes []string) []string {
	out := make([]string, 0, len(notes))
	for _, n := range notes {
		out = append(out, "299 - "+strconv.Quote(n))
	}
	return out
}

type putClusterIn struct {
	ClusterObjectParams
	Body ObjectBody
}

type putNsIn struct {
	NamespacedObjectParams
	Body ObjectBody
}

type patchClusterIn struct {
	ClusterObjectParams
	RawBody []byte `doc:"JSON merge patch (RFC 7386)"`
}

type patchNsIn struct {
	NamespacedObjectParams
	RawBody []byte `doc:"JSON merge patch (RFC 7386)"`
}

// BatchDeleteInputBody names objects to delete.
type BatchDeleteInputBody struct {
	Names     []string `json:"names" minItems:"1" maxItems:"1000"`
	Namespace string   `json:"namespace,omitempty" maxLength:"253"`
}

type batchDeleteIn struct{ Body BatchDeleteInputBody }

type batchDeleteOut struct{ Body *ListBody[ApplyResult] }

func (s *Server) registerObjectRoutes() {
	for _, ki := range kindsServed(s.kinds) {
		ki := ki
		res := ki.Plural
		tags := []string{"objects"}
		readAccess := clusterPerm(res + ".read")
		writeAccess := clusterPerm(res + ".write")
		deleteAccess := clusterPerm(res + ".delete")
		if zoneScoped(ki.Kind) {
			readAccess, writeAccess, deleteAccess = anyScope(res+".read"), anyScope(res+".write"), anyScope(res+".delete")
		}
		register(s, huma.Operation{OperationID: "list-" + res, Method: http.MethodGet, Path: "/objects/" + res, Summary: "List " + ki.Kind + " objects", Tags: tags},
			readAccess, func(ctx context.Context, in *listObjectsIn) (*listObjectsOut, error) {
				return s.listObjects(ctx, ki, in)
			})
		register(s, huma.Operation{OperationID: "batch-delete-" + res, Method: http.MethodPost, Path: "/objects/" + res + "/batch-delete", Summary: "Delete several " + ki.Kind + " objects", Tags: tags},
			deleteAccess, func(ctx context.Context, in *batchDeleteIn) (*batchDeleteOut, error) {
				return s.batchDelete(ctx, ki, in)
			})
		one := huma.Operation{Tags: tags, MaxBodyBytes: maxObjectBody, Errors: []int{http.StatusNotFound, http.StatusConflict, http.StatusPreconditionFailed}}
		op := func(id, method, path, sum string) huma.Operation {
			o := one
			o.OperationID, o.Method, o.Path, o.Summary = id+"-"+ki.Singular, method, path, sum+" one "+ki.Kind
			return o
		}
		if ki.Namespaced {
			p := "/objects/" + res + "/{namespace}/{name}"
			register(s, op("get", http.MethodGet, p, "Get"), readAccess, func(ctx context.Context, in *NamespacedObjectParams) (*objectOut, error) {
				return s.getObject(ctx, ki, in.Namespace, in.Name)
			})
			register(s, op("put", http.MethodPut, p, "Create or replace"), writeAccess, func(ctx context.Context, in *putNsIn) (*objectWriteOut, error) {
				return s.putObject(ctx, ki, in.Namespace, in.Name, in.IfMatch, in.Body)
			})
			register(s, op("patch", http.MethodPatch, p, "Merge-patch"), writeAccess, func(ctx context.Context, in *patchNsIn) (*objectWriteOut, error) {
				return s.patchObject(ctx, ki, in.Namespace, in.Name, in.IfMatch, in.RawBody)
			})
			register(s, op("delete", http.MethodDelete, p, "Delete"), deleteAccess, func(ctx context.Context, in *NamespacedObjectParams) (*emptyOut, error) {
				return s.deleteObject(ctx, ki, in.Namespace, in.Name, in.IfMatch)
			})
			continue
		}
		p := "/objects/" + res + "/{name}"
		register(s, op("get", http.MethodGet, p, "Get"), readAccess, func(ctx context.Context, in *ClusterObjectParams) (*objectOut, error) {
			return s.getObject(ctx, ki, "", in.Name)
		})
		register(s, op("put", http.MethodPut, p, "Create or replace"), writeAccess, func(ctx context.Context, in *putClusterIn) (*objectWriteOut, error) {
			return s.putObject(ctx, ki, "", in.Name, in.IfMatch, in.Body)
		})
		register(s, op("patch", http.MethodPatch, p, "Merge-patch"), writeAccess, func(ctx context.Context, in *patchClusterIn) (*objectWriteOut, error) {
			return s.patchObject(ctx, ki, "", in.Name, in.IfMatch, in.RawBody)
		})
		register(s, op("delete", http.MethodDelete, p, "Delete"), deleteAccess, func(ctx context.Context, in *ClusterObjectParams) (*emptyOut, error) {
			return s.deleteObject(ctx, ki, "", in.Name, in.IfMatch)
		})
	}
}

func (s *Server) listObjects(ctx context.Context, ki validation.KindInfo, in *listObjectsIn) (*listObjectsOut, error) {
	sel := labels.Everything()
	if in.LabelSelector != "" {
		var err error
		if sel, err = labels.Parse(in.LabelSelector); err != nil {
			return nil, errInvalid("labelSelector: %v", err)
		}
	}
	limit := in.Limit
	if limit == 0 {
		limit = 500
	}
	ns := in.Namespace
	if !ki.Namespaced {
		ns = ""
	}
	res, err := s.deps.Store.List(ctx, store.ListOptions{Kind: ki.Kind, Namespace: ns, Selector: sel, Limit: limit, Continue: in.Continue})
	if err != nil {
		if errors.Is(err, store.ErrInvalid) {
			return nil, errInvalid("continue: %v", err)
		}
		return nil, fromError(err)
	}
	allZones, zones := true, []string(nil)
	if zoneScoped(ki.Kind) {
		allZones, zones = s.authz.AllowedZones(ctx, state(ctx).principal, ki.Plural+".read")
	}
	out := &ListBody[ObjectBody]{Items: make([]ObjectBody, 0, len(res.Items)), Continue: res.Continue}
	for _, o := range res.Items {
		if !allZones && !contains(zones, zoneOf(o)) {
			continue
		}
		out.Items = append(out.Items, o.Object)
	}
	return &listObjectsOut{Body: out}, nil
}

func contains(l []string, v string) bool {
	for _, x := range l {
		if x == v {
			return true
		}
	}
	return false
}

func (s *Server) getObject(ctx context.Context, ki validation.KindInfo, ns, name string) (*objectOut, error) {
	obj, err := s.deps.Store.Get(ctx, ki.Kind, ns, name)
	if err != nil {
		return nil, fromError(err)
	}
	if e := s.checkObject(ctx, ki, "read", obj); e != nil {
		return nil, e
	}
	return &objectOut{Body: obj.Object}, nil
}

func unquoteETag(v string) string {
	v = strings.TrimPrefix(strings.TrimSpace(v), "W/")
	return strings.Trim(v, `"`)
}

// prepare checks an object sent for kind ki and fills its identity.
func prepare(ki validation.KindInfo, body map[string]any, ns, name string) (*unstructured.Unstructured, error) {
	obj := &unstructured.Unstructured{Object: body}
	if obj.Object == nil {
		return nil, errInvalid("body: an object is required")
	}
	if av := obj.GetAPIVersion(); av != "" && av != validation.APIVersion {
		return nil, errInvalid("apiVersion: %q is not %s", av, validation.APIVersion)
	}
	if k := obj.GetKind(); k != "" && k != ki.Kind {
		return nil, errInvalid("kind: %q is not %s", k, ki.Kind)
	}
	if m, ok := body["metadata"]; ok {
		if _, ok := m.(map[string]any); !ok {
			return nil, errInvalid("metadata: must be an object")
		}
	}
	if n := obj.GetName(); n != "" && n != name {
		return nil, errInvalid("metadata.name: %q does not match the path's %q", n, name)
	}
	if ki.Namespaced {
		if n := obj.GetNamespace(); n != "" && n != ns {
			return nil, errInvalid("metadata.namespace: %q does not match the path's %q", n, ns)
		}
	} else if obj.GetNamespace() != "" {
		return nil, errInvalid("metadata.namespace: %s is cluster-scoped", ki.Kind)
	}
	obj.SetAPIVersion(validation.APIVersion)
	obj.SetKind(ki.Kind)
	obj.SetName(name)
	if ki.Namespaced {
		obj.SetNamespace(ns)
	}
	return obj, nil
}

func (s *Server) putObject(ctx context.Context, ki validation.KindInfo, ns, name, ifMatch string, body map[string]any) (*objectWriteOut, error) {
	obj, err := prepare(ki, body, ns, name)
	if err != nil {
		return nil, err
	}
	if e := s.checkObject(ctx, ki, "write", obj); e != nil {
		return nil, e
	}
	rv := obj.GetResourceVersion()
	if ifMatch != "" {
		rv = unquoteETag(ifMatch)
	}
	if old, err := s.deps.Store.Get(ctx, ki.Kind, ns, name); err == nil && zoneScoped(ki.Kind) {
		// Moving an object between zones needs the right in both.
		if e := s.checkObject(ctx, ki, "write", old); e != nil {
			return nil, e
		}
	}
	notes, e := s.checkContext(ctx, obj, nil)
	if e != nil {
		return nil, e
	}
	var res store.ApplyResult
	err = retryUnconditional(rv != "", func() error {
		res, err = s.deps.Store.Apply(ctx, obj.DeepCopy(), store.ApplyOptions{Manager: store.ManagerAPI, ResourceVersion: rv})
		return err
	})
	auditObject(ctx, "apply", ki.Kind, ns, name, resultOf(res, err))
	if err != nil {
		return nil, fromError(err)
	}
	s.afterWrite(ki.Kind)
	return &objectWriteOut{Body: res.Object.Object, Warning: warningHeaders(notes)}, nil
}

func resultOf(res store.ApplyResult, err error) string {
	if err != nil {
		return "error"
	}
	return string(res.Result)
}

// afterWrite drops caches fed by the written kind.
func (s *Server) afterWrite(kind string) {
	if kind == auth.KindRoleBinding {
		s.bindings.invalidate()
	}
}

// writeAttempts bounds re-reads after losing a write race.
const writeAttempts = 5

func (s *Server) patchObject(ctx context.Context, ki validation.KindInfo, ns, name, ifMatch string, patch []byte) (*objectWriteOut, error) {
	var probe map[string]any
	if err := json.Unmarshal(patch, &probe); err != nil {
		return nil, errInvalid("body: a JSON merge patch object is required: %v", err)
	}
	if probe == nil {
		return nil, errInvalid("body: a JSON merge patch object is required")
	}
	var lastErr error
	for range writeAttempts {
		old, err := s.deps.Store.Get(ctx, ki.Kind, ns, name)
		if err != nil {
			return nil, fromError(err)
		}
		if e := s.checkObject(ctx, ki, "write", old); e != nil {
			return nil, e
		}
		if ifMatch != "" && unquoteETag(ifMatch) != old.GetResourceVersion() {
			return nil, fromError(store.ErrPrecondition)
		}
		oldJSON, err := json.Marshal(old.Object)
		if err != nil {
			return nil, fromError(err)
		}
		merged, err := jsonpatch.MergePatch(oldJSON, patch)
		if err != nil {
			return nil, errInvalid("body: %v", err)
		}
		var next map[string]any
		if err := json.Unmarshal(merged, &next); err != nil {
			return nil, errInvalid("body: %v", err)
		}
		obj, err := prepare(ki, next, ns, name)
		if err != nil {
			return nil, err
		}
		if e := s.checkObject(ctx, ki, "write", obj); e != nil {
			return nil, e
		}
		notes, e := s.checkContext(ctx, obj, nil)
		if e != nil {
			return nil, e
		}
		res, err := s.deps.Store.Apply(ctx, obj, store.ApplyOptions{Manager: store.ManagerAPI, ResourceVersion: old.GetResourceVersion()})
		if err == nil {
			auditObject(ctx, "patch", ki.Kind, ns, name, string(res.Result))
			s.afterWrite(ki.Kind)
			return &objectWriteOut{Body: res.Object.Object, Warning: warningHeaders(notes)}, nil
		}
		lastErr = err
		if ifMatch != "" || !(errors.Is(err, store.ErrPrecondition) || errors.Is(err, store.ErrConflict)) {
			break
		}
	}
	auditObject(ctx, "patch", ki.Kind, ns, name, "error")
	if errors.Is(lastErr, store.ErrPrecondition) && ifMatch == "" {
		return nil, newErr(http.StatusConflict, KeyConflict, "the object kept changing; every attempt lost", "retry")
	}
	return nil, fromError(lastErr)
}

func (s *Server) deleteObject(ctx context.Context, ki validation.KindInfo, ns, name, ifMatch string) (*emptyOut, error) {
	old, err := s.deps.Store.Get(ctx, ki.Kind, ns, name)
	if err != nil {
		return nil, fromError(err)
	}
	if e := s.checkObject(ctx, ki, "delete", old); e != nil {
		return nil, e
	}
	rv := unquoteETag(ifMatch)
	err = retryUnconditional(rv != "", func() error {
		return s.deps.Store.Delete(ctx, ki.Kind, ns, name, store.DeleteOptions{Manager: store.ManagerAPI, ResourceVersion: rv})
	})
	res := "deleted"
	if err != nil {
		res = "error"
	}
	auditObject(ctx, "delete", ki.Kind, ns, name, res)
	if err != nil {
		return nil, fromError(err)
	}
	s.afterWrite(ki.Kind)
	return &emptyOut{}, nil
}

// retryUnconditional runs a write the caller did not make conditional (no
// If-Match, no resourceVersion) again when it lost a race: on Kubernetes the
// operator's status writes change the resourceVersion the store read the
// object at, and such a write must not fail for it. Bounded; a conditional
// write is never retried.
func retryUnconditional(conditional bool, write func() error) error {
	var err error
	for range 5 {
		if err = write(); conditional || !errors.Is(err, store.ErrConflict) {
			return err
		}
	}
	return err
}

func (s *Server) batchDelete(ctx context.Context, ki validation.KindInfo, in *batchDeleteIn) (*batchDeleteOut, error) {
	ns := in.Body.Namespace
	if ki.Namespaced && ns == "" {
		return nil, errInvalid("namespace: required for %s", ki.Kind)
	}
	if !ki.Namespaced {
		ns = ""
	}
	out := &ListBody[ApplyResult]{Items: []ApplyResult{}}
	for _, name := range in.Body.Names {
		r := ApplyResult{Kind: ki.Kind, Name: name, Namespace: ns, Result: "deleted"}
		_, err := s.deleteObject(ctx, ki, ns, name, "")
		if err != nil {
			e := fromError(err)
			r.Result, r.Error, r.ErrorKey, r.Hint = "error", e.Detail.Message, e.Detail.Key, e.Detail.Hint
		}
		out.Items = append(out.Items, r)
	}
	return &batchDeleteOut{Body: out}, nil
}

// kindFor finds a served kind by Kind name.
func (s *Server) kindFor(kind string) (validation.KindInfo, bool) {
	for _, k := range kindsServed(s.kinds) {
		if k.Kind == kind {
			return k, true
		}
	}
	return validation.KindInfo{}, false
}
