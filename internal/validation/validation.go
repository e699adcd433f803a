// Package validation admits objects of every kind of service.io/v1alpha1 in
// process, the way a kube-apiserver with the service's CRDs installed does:
// the same structural defaults, OpenAPI schema checks, list-type checks, CEL
// rules (transition rules included) and metadata rules, with the same messages.
// Unknown fields are reported (like kubectl --validate=strict) instead of
// being pruned silently. The schemas are the generated CRDs embedded by package
// config/crd, so the sqlite and kube store drivers accept and refuse the same
// objects.
package validation

import (
	"context"
	"encoding/json"
	"fmt"
	"io/fs"
	"path"
	"sort"
	"strings"

	apiextensionsinternal "k8s.io/apiextensions-apiserver/pkg/apis/apiextensions"
	apiextensionsv1 "k8s.io/apiextensions-apiserver/pkg/apis/apiextensions/v1"
	structuralschema "k8s.io/apiextensions-apiserver/pkg/apiserver/schema"
	structuraldefaulting "k8s.io/apiextensions-apiserver/pkg/apiserver/schema/defaulting"
	schemaobjectmeta "k8s.io/apiextensions-apiserver/pkg/apiserver/schema/objectmeta"
	structuralpruning "k8s.io/apiextensions-apiserver/pkg/apiserver/schema/pruning"
	apiservervalidation "k8s.io/apiextensions-apiserver/pkg/apiserver/validation"
	"k8s.io/apiextensions-apiserver/pkg/crdserverscheme"
	"k8s.io/apiextensions-apiserver/pkg/registry/customresource"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apimachinery/pkg/util/validation/field"
	"sigs.k8s.io/yaml"

	"github.com/svcdns/svc/config/crd"
)

// Group and Version of every kind the validator knows.
const (
	Group   = "service.io"
	Version = "v1alpha1"
)

// APIVersion is the apiVersion every object carries.
const APIVersion = Group + "/" + Version

// Column is one additional printer column of a kind (kubectl get).
type Column struct {
	Name        string
	Type        string // string, integer, number, boolean, date
	Format      string
	JSONPath    string
	Description string
	Priority    int32 // 0: shown by default; higher: only with -o wide
}

// KindInfo describes one kind.
type KindInfo struct {
	Kind       string
	ListKind   string
	Plural     string // resource name, e.g. "dnszones"
	Singular   string
	ShortNames []string
	Namespaced bool
	// Internal kinds (LocalUser, APIToken, ...) are never installed as CRDs.
	Internal bool
	// HasStatus reports a status subresource.
	HasStatus bool
	Columns   []Column
}

// Validator admits objects of every kind. It is safe for concurrent use; its
// schemas and CEL programs are built once by New.
type Validator struct {
	kinds   map[string]*kind // by Kind
	aliases map[string]string
	order   []string
}

type kind struct {
	info       KindInfo
	structural *structuralschema.Structural
	strategy   strategy
}

// strategy is the part of the apiserver's custom resource strategy we call.
type strategy interface {
	Validate(ctx context.Context, obj runtime.Object) field.ErrorList
	ValidateUpdate(ctx context.Context, obj, old runtime.Object) field.ErrorList
}

// New builds a validator from the embedded CRDs (config/crd bases and internal).
func New() (*Validator, error) {
	v := &Validator{kinds: map[string]*kind{}, aliases: map[string]string{}}
	for _, src := range []struct {
		fsys     fs.FS
		dir      string
		internal bool
	}{{crd.Bases, "bases", false}, {crd.Internal, "internal", true}} {
		files, err := fs.Glob(src.fsys, path.Join(src.dir, "*.yaml"))
		if err != nil {
			return nil, fmt.Errorf("listing embedded CRDs: %w", err)
		}
		for _, f := range files {
			data, err := fs.ReadFile(src.fsys, f)
			if err != nil {
				return nil, fmt.Errorf("reading %s: %w", f, err)
			}
			if err := v.add(data, src.internal); err != nil {
				return nil, fmt.Errorf("loading %s: %w", f, err)
			}
		}
	}
	sort.Strings(v.order)
	return v, nil
}

// ParseCRD decodes one CustomResourceDefinition manifest.
func ParseCRD(data []byte) (*apiextensionsv1.CustomResourceDefinition, error) {
	var c apiextensionsv1.CustomResourceDefinition
	if err := yaml.UnmarshalStrict(data, &c); err != nil {
		return nil, fmt.Errorf("decoding CRD: %w", err)
	}
	return &c, nil
}

func (v *Validator) add(data []byte, internal bool) error {
	c, err := ParseCRD(data)
	if err != nil {
		return err
	}
	var ver *apiextensionsv1.CustomResourceDefinitionVersion
	for i := range c.Spec.Versions {
		if c.Spec.Versions[i].Name == Version {
			ver = &c.Spec.Versions[i]
		}
	}
	if c.Spec.Group != Group || ver == nil || ver.Schema == nil || ver.Schema.OpenAPIV3Schema == nil {
		return fmt.Errorf("CRD %s has no %s schema", c.Name, APIVersion)
	}

	// The same conversions the apiserver's CRD handler makes (customresource_handler.go).
	internalValidation := &apiextensionsinternal.CustomResourceValidation{}
	if err := apiextensionsv1.Convert_v1_CustomResourceValidation_To_apiextensions_CustomResourceValidation(ver.Schema, internalValidation, nil); err != nil {
		return fmt.Errorf("converting schema of %s: %w", c.Name, err)
	}
	s, err := structuralschema.NewStructural(internalValidation.OpenAPIV3Schema)
	if err != nil {
		return fmt.Errorf("schema of %s is not structural: %w", c.Name, err)
	}
	s = s.DeepCopy()
	if err := structuraldefaulting.PruneDefaults(s); err != nil {
		return fmt.Errorf("pruning defaults of %s: %w", c.Name, err)
	}
	schemaValidator, _, err := apiservervalidation.NewSchemaValidator(internalValidation.OpenAPIV3Schema)
	if err != nil {
		return fmt.Errorf("schema validator of %s: %w", c.Name, err)
	}
	var statusSpec *apiextensionsinternal.CustomResourceSubresourceStatus
	var statusValidator apiservervalidation.SchemaValidator
	if ver.Subresources != nil && ver.Subresources.Status != nil {
		statusSpec = &apiextensionsinternal.CustomResourceSubresourceStatus{}
		if st, ok := internalValidation.OpenAPIV3Schema.Properties["status"]; ok {
			if statusValidator, _, err = apiservervalidation.NewSchemaValidator(&st); err != nil {
				return fmt.Errorf("status validator of %s: %w", c.Name, err)
			}
		}
	}
	gvk := schema.GroupVersionKind{Group: Group, Version: Version, Kind: c.Spec.Names.Kind}
	namespaced := c.Spec.Scope == apiextensionsv1.NamespaceScoped
	st := customresource.NewStrategy(crdserverscheme.NewUnstructuredObjectTyper(), namespaced, gvk,
		schemaValidator, statusValidator, s, statusSpec, nil, nil)

	info := KindInfo{
		Kind:       c.Spec.Names.Kind,
		ListKind:   c.Spec.Names.ListKind,
		Plural:     c.Spec.Names.Plural,
		Singular:   c.Spec.Names.Singular,
		ShortNames: append([]string(nil), c.Spec.Names.ShortNames...),
		Namespaced: namespaced,
		Internal:   internal,
		HasStatus:  statusSpec != nil,
	}
	for _, col := range ver.AdditionalPrinterColumns {
		info.Columns = append(info.Columns, Column{
			Name: col.Name, Type: col.Type, Format: col.Format, JSONPath: col.JSONPath,
			Description: col.Description, Priority: col.Priority,
		})
	}
	if _, dup := v.kinds[info.Kind]; dup {
		return fmt.Errorf("kind %s defined twice", info.Kind)
	}
	v.kinds[info.Kind] = &kind{info: info, structural: s, strategy: st}
	v.order = append(v.order, info.Kind)
	for _, alias := range append([]string{info.Kind, info.Plural, info.Singular}, info.ShortNames...) {
		a := strings.ToLower(alias)
		if prev, ok := v.aliases[a]; ok && prev != info.Kind {
			return fmt.Errorf("name %q of %s is already a name of %s", alias, info.Kind, prev)
		}
		v.aliases[a] = info.Kind
	}
	return nil
}

// Kinds lists every kind, sorted by Kind.
func (v *Validator) Kinds() []KindInfo {
	out := make([]KindInfo, 0, len(v.order))
	for _, k := range v.order {
		out = append(out, v.kinds[k].info)
	}
	return out
}

// KindInfo resolves a kind name, plural or singular resource name or short
// name, case-insensitively ("DNSZone", "dnszones", "zone", "bl").
func (v *Validator) KindInfo(name string) (KindInfo, bool) {
	k, ok := v.aliases[strings.ToLower(name)]
	if !ok {
		return KindInfo{}, false
	}
	return v.kinds[k].info, true
}

// Admit defaults obj in place and validates it against its kind's schema;
// old is the stored object on update (nil on create) for transition rules.
// A refusal is an *apierrors.StatusError (reason Invalid) naming kind, name and
// every failing field path with the apiserver's message; callers wrap it with
// store.ErrInvalid. Unknown fields refuse the object before anything else, as
// the apiserver's strict field validation does.
func (v *Validator) Admit(ctx context.Context, obj, old *unstructured.Unstructured) error {
	if obj == nil || obj.Object == nil {
		return apierrors.NewBadRequest("no object")
	}
	kindName := obj.GetKind()
	k, ok := v.kinds[kindName]
	if !ok {
		return apierrors.NewBadRequest(fmt.Sprintf("unknown kind %q of %s", kindName, APIVersion))
	}
	gk := schema.GroupKind{Group: Group, Kind: kindName}
	name := nameOf(obj)
	if obj.GetAPIVersion() != APIVersion {
		return apierrors.NewInvalid(gk, name, field.ErrorList{
			field.Invalid(field.NewPath("apiVersion"), obj.GetAPIVersion(), "must be "+APIVersion)})
	}
	if old != nil && (old.GetKind() != kindName || old.Object == nil) {
		return fmt.Errorf("admitting %s %q: stored object is a %q", kindName, name, old.GetKind())
	}
	// Objects built in Go may hold int, []string and the like; the schema code
	// (like the apiserver) expects what its JSON decoder makes: int64, float64,
	// []interface{}, map[string]interface{}.
	if err := canonicalize(obj); err != nil {
		return apierrors.NewBadRequest(fmt.Sprintf("%s %q: %v", kindName, name, err))
	}
	if old != nil {
		old = &unstructured.Unstructured{Object: old.Object} // canonicalize makes a new map
		if err := canonicalize(old); err != nil {
			return fmt.Errorf("admitting %s %q: stored object: %w", kindName, name, err)
		}
	}

	// Unknown fields: what the apiserver's decoder would prune, found on a copy.
	if errs := unknownFields(obj, k.structural); len(errs) > 0 {
		return apierrors.NewInvalid(gk, name, errs)
	}

	// Decoding: drop nulls of non-nullable fields, then apply defaults.
	structuraldefaulting.PruneNonNullableNullsWithoutDefaults(obj.Object, k.structural)
	structuraldefaulting.Default(obj.Object, k.structural)

	var errs field.ErrorList
	if old == nil {
		errs = k.strategy.Validate(ctx, obj)
	} else {
		o := old
		structuraldefaulting.PruneNonNullableNullsWithoutDefaults(o.Object, k.structural)
		structuraldefaulting.Default(o.Object, k.structural)
		// The apiserver carries system fields over from the stored object
		// (rest.BeforeUpdate); do the same on a copy so a client that omits
		// them is not refused for "changing" them.
		n := obj.DeepCopy()
		carrySystemFields(n, o)
		errs = k.strategy.ValidateUpdate(ctx, n, o)
	}
	// What the data plane would refuse, with its own parse (semantic.go).
	sem := semantic(kindName, obj)
	if old != nil && len(sem) > 0 {
		sem = Ratchet(sem, semantic(kindName, old))
	}
	errs = mergeSemantic(errs, sem)
	if len(errs) > 0 {
		return apierrors.NewInvalid(gk, name, errs)
	}
	return nil
}

// canonicalize replaces obj's content with its JSON round trip.
func canonicalize(obj *unstructured.Unstructured) error {
	data, err := json.Marshal(obj.Object)
	if err != nil {
		return fmt.Errorf("encoding object: %w", err)
	}
	var c unstructured.Unstructured
	if err := c.UnmarshalJSON(data); err != nil {
		return fmt.Errorf("decoding object: %w", err)
	}
	obj.Object = c.Object
	return nil
}

func nameOf(obj *unstructured.Unstructured) string {
	if n, ok, _ := unstructured.NestedString(obj.Object, "metadata", "name"); ok {
		return n
	}
	return ""
}

// unknownFields reports every field the schema does not declare, in metadata
// and elsewhere, by the apiserver's own pruning on a copy of obj.
func unknownFields(obj *unstructured.Unstructured, s *structuralschema.Structural) field.ErrorList {
	c := obj.DeepCopy()
	var paths []string
	if _, _, metaUnknown, err := schemaobjectmeta.GetObjectMetaWithOptions(c.Object, schemaobjectmeta.ObjectMetaOptions{ReturnUnknownFieldPaths: true}); err == nil {
		paths = append(paths, metaUnknown...)
	}
	// metadata and type meta are handled above and by validation, not the schema.
	delete(c.Object, "metadata")
	paths = append(paths, structuralpruning.PruneWithOptions(c.Object, s, true, structuralschema.UnknownFieldPathOptions{TrackUnknownFieldPaths: true})...)
	sort.Strings(paths)
	var errs field.ErrorList
	for _, p := range paths {
		errs = append(errs, field.Forbidden(fieldPath(p), "unknown field"))
	}
	return errs
}

// fieldPath turns a pruning path ("spec.sources[0].foo") into a field.Path that
// prints the same.
func fieldPath(p string) *field.Path {
	var fp *field.Path
	for _, part := range strings.Split(p, ".") {
		name, idx, _ := strings.Cut(part, "[")
		if fp == nil {
			fp = field.NewPath(name)
		} else {
			fp = fp.Child(name)
		}
		for idx != "" {
			var i int
			var rest string
			if _, err := fmt.Sscanf(idx, "%d]", &i); err != nil {
				fp = fp.Key(strings.TrimSuffix(idx, "]"))
				break
			}
			fp = fp.Index(i)
			_, rest, _ = strings.Cut(idx, "[")
			idx = rest
		}
	}
	return fp
}

func carrySystemFields(obj, old *unstructured.Unstructured) {
	if obj.GetUID() == "" {
		obj.SetUID(old.GetUID())
	}
	if ts := old.GetCreationTimestamp(); !ts.IsZero() {
		obj.SetCreationTimestamp(ts)
	}
	// Preconditions are the store's business; an update without a version is
	// not a schema error here.
	if obj.GetResourceVersion() == "" {
		obj.SetResourceVersion(old.GetResourceVersion())
	}
	if obj.GetResourceVersion() == "" {
		obj.SetResourceVersion("0")
	}
	obj.SetGeneration(old.GetGeneration())
	if obj.GetDeletionTimestamp() == nil {
		obj.SetDeletionTimestamp(old.GetDeletionTimestamp())
	}
}
