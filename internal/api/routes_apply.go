package api

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"net/http"

	"github.com/danielgtaylor/huma/v2"
	"github.com/svcdns/svc/internal/store"
	"github.com/svcdns/svc/internal/validation"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
)

// applyIn has no body field: the handler streams the body itself
// (applybody.go) so that huma does not read all of it first.
type applyIn struct{}

type applyOut struct{ Body *ListBody[ApplyResult] }

// maxApplyObjects bounds one apply request.
const maxApplyObjects = 1000

func (s *Server) registerApplyRoute() {
	register(s, huma.Operation{OperationID: "apply", Method: http.MethodPost, Path: "/apply", Summary: "Apply one or several objects",
		Description: "Objects are applied with manager api. With several objects all are checked first; when one is refused nothing is applied and error.objects lists the refusals.",
		Tags:        []string{"objects"}, MaxBodyBytes: maxBulkBody,
		RequestBody: &huma.RequestBody{Required: true, Content: map[string]*huma.MediaType{"application/octet-stream": {
			Schema: &huma.Schema{Type: "string", Format: "binary"}}}},
		Errors: []int{http.StatusConflict, http.StatusRequestEntityTooLarge}},
		anyScope("objects.apply"), s.apply)
}

func refusal(r ApplyResult, e *Error) ApplyResult {
	r.Result, r.Error, r.ErrorKey, r.Hint = "error", e.Detail.Message, e.Detail.Key, e.Detail.Hint
	return r
}

func (s *Server) apply(ctx context.Context, in *applyIn) (*applyOut, error) {
	items, e := s.applyBody(ctx)
	if e != nil {
		return nil, e
	}
	type pending struct {
		ki  validation.KindInfo
		obj *unstructured.Unstructured
		old *unstructured.Unstructured // stored version, nil on create
		idx int                        // in items and results
	}
	var todo []pending
	var refused []ApplyResult
	results := make([]ApplyResult, len(items))
	seen := map[string]bool{}
	// Check everything first so that nothing is half-applied.
	for i, m := range items {
		obj := &unstructured.Unstructured{Object: m}
		r := ApplyResult{Kind: obj.GetKind(), Name: obj.GetName(), Namespace: obj.GetNamespace()}
		old, e := s.checkApply(ctx, obj)
		var ki validation.KindInfo
		if e == nil {
			ki, _ = s.kindFor(obj.GetKind())
			key := store.KeyOf(obj).String()
			if seen[key] {
				e = errInvalid("%s appears twice", key)
			}
			seen[key] = true
		}
		if e != nil {
			results[i] = refusal(r, e)
			refused = append(refused, results[i])
			continue
		}
		results[i] = r
		todo = append(todo, pending{ki: ki, obj: obj, old: old, idx: i})
	}
	// Checks against other objects (the zone of a record set, the
	// catalogue) see the objects of this apply as if already stored.
	batch := make(map[string]*unstructured.Unstructured, len(todo))
	for _, p := range todo {
		batch[store.KeyOf(p.obj).String()] = p.obj
	}
	inBatch := func(kind, ns, name string) *unstructured.Unstructured {
		return batch[store.Key{Kind: kind, Namespace: ns, Name: name}.String()]
	}
	for _, p := range todo {
		// Against its zone first: a record's message then names the
		// zone's names; the admitter (schema, then the data plane's parse
		// without the zone) comes second, as it does in the store.
		notes, e := s.checkContext(ctx, p.obj, inBatch)
		if e == nil && s.deps.Admitter != nil {
			if err := s.deps.Admitter.Admit(ctx, p.obj.DeepCopy(), p.old); err != nil {
				e = newErr(http.StatusBadRequest, KeyInvalid, err.Error(), "")
			}
		}
		if e != nil {
			results[p.idx] = refusal(results[p.idx], e)
			refused = append(refused, results[p.idx])
			continue
		}
		results[p.idx].Warnings = notes
	}
	if len(refused) > 0 {
		first := refused[0]
		status := http.StatusBadRequest
		switch first.ErrorKey {
		case KeyManagedBy, KeyConflict:
			status = http.StatusConflict
		case KeyForbidden:
			status = http.StatusForbidden
		case KeyTooLarge:
			status = http.StatusRequestEntityTooLarge
		}
		msg := first.Error
		if len(items) > 1 {
			msg = fmt.Sprintf("%d of %d objects refused, nothing applied; first: %s %s: %s", len(refused), len(items), first.Kind, first.Name, first.Error)
		}
		e := newErr(status, first.ErrorKey, msg, first.Hint)
		if first.ErrorKey == KeyForbidden {
			if perm, ok := s.writePerm(first.Kind); ok {
				e.Detail.Missing = perm
			}
		}
		if len(items) > 1 {
			e.Detail.Objects = refused
		}
		return nil, e
	}
	out := &ListBody[ApplyResult]{Items: make([]ApplyResult, 0, len(todo))}
	for _, p := range todo {
		res, err := s.deps.Store.Apply(ctx, p.obj, store.ApplyOptions{Manager: store.ManagerAPI, ResourceVersion: p.obj.GetResourceVersion()})
		r := results[p.idx]
		auditObject(ctx, "apply", r.Kind, r.Namespace, r.Name, resultOf(res, err))
		if err != nil {
			if len(todo) == 1 {
				return nil, fromError(err)
			}
			e := fromError(err)
			if e.serverFault {
				// The answer is 200 with this refusal inside: the request's
				// log line still carries the cause.
				noteAnswer(ctx, e)
			}
			out.Items = append(out.Items, refusal(r, e))
			continue
		}
		r.Result, r.ResourceVersion = string(res.Result), res.ResourceVersion
		out.Items = append(out.Items, r)
		s.afterWrite(r.Kind)
	}
	// Whom lists and policies reach, asked once everything is stored so
	// that objects of one apply (a list and the policy opting out of it)
	// see each other.
	for i := range out.Items {
		r := &out.Items[i]
		if r.Result == "error" {
			continue
		}
		for _, p := range todo {
			if q := results[p.idx]; q.Kind == r.Kind && q.Namespace == r.Namespace && q.Name == r.Name {
				r.Notes = s.audienceNotes(ctx, p.obj)
			}
		}
	}
	return &applyOut{Body: out}, nil
}

func (s *Server) writePerm(kind string) (string, bool) {
	ki, ok := s.kindFor(kind)
	if !ok {
		return "", false
	}
	return ki.Plural + ".write", true
}

// checkApply validates one object of an apply: kind, identity, permission
// and ownership. It returns the stored version (nil on create) for the
// admitter, which apply runs after the checks against other objects.
func (s *Server) checkApply(ctx context.Context, obj *unstructured.Unstructured) (*unstructured.Unstructured, *Error) {
	if av := obj.GetAPIVersion(); av != validation.APIVersion {
		return nil, errInvalid("apiVersion: %q is not %s", av, validation.APIVersion)
	}
	ki, ok := s.kindFor(obj.GetKind())
	if !ok {
		return nil, errInvalid("kind: %q cannot be applied", obj.GetKind())
	}
	if obj.GetName() == "" {
		return nil, errInvalid("metadata.name: required")
	}
	if ki.Namespaced && obj.GetNamespace() == "" {
		obj.SetNamespace("default")
	}
	if !ki.Namespaced && obj.GetNamespace() != "" {
		return nil, errInvalid("metadata.namespace: %s is cluster-scoped", ki.Kind)
	}
	if b, err := json.Marshal(obj.Object); err != nil || len(b) > store.MaxObjectBytes {
		return nil, newErr(http.StatusRequestEntityTooLarge, KeyTooLarge, fmt.Sprintf("%s %s is larger than 1.5 MiB", ki.Kind, obj.GetName()), "split the object")
	}
	if e := s.checkObject(ctx, ki, "write", obj); e != nil {
		return nil, e
	}
	old, err := s.deps.Store.Get(ctx, ki.Kind, obj.GetNamespace(), obj.GetName())
	switch {
	case err == nil:
		if owner := store.OwnerOf(old); owner != store.ManagerAPI {
			return nil, fromError(&store.ManagedByError{Owner: owner})
		}
		if zoneScoped(ki.Kind) {
			if e := s.checkObject(ctx, ki, "write", old); e != nil {
				return nil, e
			}
		}
	case errors.Is(err, store.ErrNotFound):
		old = nil
	default:
		return nil, fromError(err)
	}
	return old, nil
}
