package validation

import (
	"context"
	"errors"
	"os"
	"reflect"
	"regexp"
	"slices"
	"sort"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/go-logr/logr"
	apiextensionsinternal "k8s.io/apiextensions-apiserver/pkg/apis/apiextensions"
	apiextensionsv1 "k8s.io/apiextensions-apiserver/pkg/apis/apiextensions/v1"
	crdvalidation "k8s.io/apiextensions-apiserver/pkg/apis/apiextensions/validation"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/client-go/dynamic"
	"sigs.k8s.io/controller-runtime/pkg/envtest"
	ctrllog "sigs.k8s.io/controller-runtime/pkg/log"

	"github.com/svcdns/svc/config/crd"
)

var (
	sharedOnce sync.Once
	sharedV    *Validator
	sharedErr  error
)

func newValidator(t testing.TB) *Validator {
	t.Helper()
	sharedOnce.Do(func() { sharedV, sharedErr = New() })
	if sharedErr != nil {
		t.Fatal(sharedErr)
	}
	return sharedV
}

func TestKindInfo(t *testing.T) {
	v := newValidator(t)
	for _, tc := range []struct {
		name, kind string
	}{
		{"dnszone", "DNSZone"}, {"zones", "DNSZone"}, {"ZONE", "DNSZone"}, {"DNSZone", "DNSZone"},
		{"rrset", "DNSRecordSet"}, {"dnsrecordsets", "DNSRecordSet"},
		{"bl", "BlockList"}, {"lists", "BlockList"}, {"list", "BlockList"}, {"blocklists", "BlockList"},
		{"cg", "ClientGroup"}, {"clientgroups", "ClientGroup"},
		{"pol", "Policy"}, {"policies", "Policy"}, {"policy", "Policy"},
		{"unblockrequests", "UnblockRequest"}, {"UnblockRequest", "UnblockRequest"},
		{"localusers", "LocalUser"}, {"apitoken", "APIToken"}, {"serviceaccounts", "ServiceAccount"},
		{"rolebindings", "RoleBinding"}, {"identityproviders", "IdentityProvider"},
		{"nope", ""}, {"", ""},
	} {
		info, ok := v.KindInfo(tc.name)
		if ok != (tc.kind != "") || info.Kind != tc.kind {
			t.Errorf("KindInfo(%q) = %q, %v; want %q", tc.name, info.Kind, ok, tc.kind)
		}
	}

	type want struct {
		plural     string
		short      []string
		namespaced bool
		internal   bool
		status     bool
		columns    []string // NAME=type:jsonPath
	}
	ready := `READY=string:.status.conditions[?(@.type=="Ready")].status`
	wants := map[string]want{
		"DNSZone":          {plural: "dnszones", short: []string{"zone", "zones", "dnszone"}, status: true},
		"DNSRecordSet":     {plural: "dnsrecordsets", short: []string{"rrset", "rrsets", "dnsrecordset"}, namespaced: true, status: true, columns: []string{"ZONE=string:.spec.zoneRef.name", "NAMES=integer:.status.names", ready, "AGE=date:.metadata.creationTimestamp"}},
		"BlockList":        {plural: "blocklists", short: []string{"blocklist", "list", "lists", "bl"}, namespaced: true, status: true, columns: []string{"MODE=string:.spec.mode", "ENTRIES=integer:.status.entries", "LAST-FETCH=date:.status.lastFetched", ready}},
		"ClientGroup":      {plural: "clientgroups", short: []string{"cg", "clientgroup"}, namespaced: true, status: true, columns: []string{"MEMBERS=integer:.status.members", "POLICIES=string:.status.policies", ready, "AGE=date:.metadata.creationTimestamp"}},
		"Policy":           {plural: "policies", short: []string{"pol", "policy"}, namespaced: true, status: true, columns: []string{"GROUPS=string:.spec.clientGroupRefs", "PRIORITY=integer:.spec.priority", ready}},
		"UnblockRequest":   {plural: "unblockrequests", namespaced: true},
		"LocalUser":        {plural: "localusers", internal: true, status: true},
		"APIToken":         {plural: "apitokens", internal: true, status: true},
		"ServiceAccount":   {plural: "serviceaccounts", internal: true, namespaced: true},
		"RoleBinding":      {plural: "rolebindings", internal: true},
		"IdentityProvider": {plural: "identityproviders", internal: true},
	}
	var kinds []string
	for _, info := range v.Kinds() {
		kinds = append(kinds, info.Kind)
		w, ok := wants[info.Kind]
		if !ok {
			t.Errorf("unexpected kind %s", info.Kind)
			continue
		}
		if info.Plural != w.plural || !slices.Equal(info.ShortNames, w.short) || info.Namespaced != w.namespaced || info.Internal != w.internal || info.HasStatus != w.status {
			t.Errorf("%s: got %+v, want %+v", info.Kind, info, w)
		}
		if w.columns != nil {
			var got []string
			for _, c := range info.Columns {
				got = append(got, c.Name+"="+c.Type+":"+c.JSONPath)
			}
			if !slices.Equal(got, w.columns) {
				t.Errorf("%s columns: got %q, want %q", info.Kind, got, w.columns)
			}
		}
	}
	if len(kinds) != len(wants) || !sort.StringsAreSorted(kinds) {
		t.Errorf("Kinds() = %v, want the %d kinds sorted", kinds, len(wants))
	}
}

// TestEmbeddedCRDsAreValid runs the apiserver's CRD validation on every embedded
// manifest: the internal ones are never sent to an apiserver, so this is where
// a rule too costly or a schema not structural would show.
func TestEmbeddedCRDsAreValid(t *testing.T) {
	for _, src := range []struct {
		name string
		dir  string
	}{{"bases", "bases"}, {"internal", "internal"}} {
		fsys := crd.Bases
		if src.name == "internal" {
			fsys = crd.Internal
		}
		entries, err := fsys.ReadDir(src.dir)
		if err != nil {
			t.Fatal(err)
		}
		for _, e := range entries {
			data, err := fsys.ReadFile(src.dir + "/" + e.Name())
			if err != nil {
				t.Fatal(err)
			}
			c, err := ParseCRD(data)
			if err != nil {
				t.Fatal(err)
			}
			var in apiextensionsinternal.CustomResourceDefinition
			if err := apiextensionsv1.Convert_v1_CustomResourceDefinition_To_apiextensions_CustomResourceDefinition(c, &in, nil); err != nil {
				t.Fatal(err)
			}
			// Accepted names are set by the apiserver's naming controller.
			in.Status.AcceptedNames = in.Spec.Names
			in.Status.StoredVersions = []string{Version}
			if errs := crdvalidation.ValidateCustomResourceDefinition(context.Background(), &in); len(errs) > 0 {
				t.Errorf("%s/%s: %v", src.name, e.Name(), errs.ToAggregate())
			}
		}
	}
}

// verdict is what a validator said: the sorted field paths of a refusal, and
// the admitted object.
type verdict struct {
	fields []string
	obj    *unstructured.Unstructured
	err    error
}

var unknownFieldRE = regexp.MustCompile(`unknown field "([^"]+)"`)

func fieldsOf(err error) []string {
	var out []string
	var se *apierrors.StatusError
	if errors.As(err, &se) && se.ErrStatus.Details != nil {
		for _, c := range se.ErrStatus.Details.Causes {
			f := c.Field
			if f == "" || f == "<nil>" {
				f = "<root>"
			}
			out = append(out, f)
		}
	}
	for _, m := range unknownFieldRE.FindAllStringSubmatch(err.Error(), -1) {
		out = append(out, m[1])
	}
	if len(out) == 0 {
		out = []string{"<unparsed: " + err.Error() + ">"}
	}
	sort.Strings(out)
	return slices.Compact(out)
}

func (c pcase) objects(t testing.TB, b map[string]map[string]any) (obj, old *unstructured.Unstructured) {
	base, ok := b[c.kind]
	if !ok {
		t.Fatalf("no base object of kind %s", c.kind)
	}
	if c.update {
		old = build(base, c.oldEdits)
		return build(old.Object, c.edits), old
	}
	return build(base, c.edits), nil
}

func admitLocal(t *testing.T, v *Validator, c pcase, obj, old *unstructured.Unstructured) verdict {
	t.Helper()
	ctx := context.Background()
	if old != nil {
		if err := v.Admit(ctx, old, nil); err != nil {
			t.Fatalf("stored object refused: %v", err)
		}
	}
	if err := v.Admit(ctx, obj, old); err != nil {
		return verdict{fields: fieldsOf(err), err: err}
	}
	return verdict{obj: obj}
}

func checkVerdict(t *testing.T, who string, c pcase, got verdict) {
	t.Helper()
	if c.want == "" {
		if got.err != nil {
			t.Errorf("%s refused a valid object: %v", who, got.err)
			return
		}
		for p, want := range c.defaults {
			val, ok := lookup(got.obj.Object, p)
			if !ok || !reflect.DeepEqual(normalize(val), normalize(want)) {
				t.Errorf("%s: %s = %#v (set %v), want default %#v", who, p, val, ok, want)
			}
		}
		return
	}
	if got.err == nil {
		t.Errorf("%s accepted an object that must be refused at %s", who, c.want)
		return
	}
	if !slices.Contains(got.fields, c.want) {
		t.Errorf("%s refused at %v, want %s: %v", who, got.fields, c.want, got.err)
	}
}

func lookup(obj map[string]any, p string) (any, bool) {
	var cur any = obj
	for _, part := range pathParts(p) {
		switch k := part.(type) {
		case string:
			m, ok := cur.(map[string]any)
			if !ok {
				return nil, false
			}
			if cur, ok = m[k]; !ok {
				return nil, false
			}
		case int:
			s, ok := cur.([]any)
			if !ok || k >= len(s) {
				return nil, false
			}
			cur = s[k]
		}
	}
	return cur, true
}

// normalize makes numbers comparable across JSON decoders.
func normalize(v any) any {
	switch n := v.(type) {
	case int:
		return int64(n)
	case float64:
		return int64(n)
	}
	return v
}

func TestAdmitLocal(t *testing.T) {
	v := newValidator(t)
	b := bases(t)
	for _, c := range append(parityCases(), localCases()...) {
		t.Run(c.name, func(t *testing.T) {
			obj, old := c.objects(t, b)
			checkVerdict(t, "in-process", c, admitLocal(t, v, c, obj, old))
		})
	}
}

func TestAdmitErrorNamesKindNameAndField(t *testing.T) {
	v := newValidator(t)
	b := bases(t)
	obj := build(b["BlockList"], []edit{set("spec.mode", "deny")})
	err := v.Admit(context.Background(), obj, nil)
	// The second error is the apiserver's own: CEL rules wait for a valid object.
	want := `BlockList.service.io "ads" is invalid: [spec.mode: Unsupported value: "deny": supported values: "block", "allow", <nil>: Invalid value: null: some validation rules were not checked because the object was invalid; correct the existing errors to complete validation]`
	if err == nil || err.Error() != want {
		t.Fatalf("Admit error\n got %v\nwant %s", err, want)
	}
	obj = build(b["Policy"], []edit{set("spec.colour", "red"), set("metadata.bogus", 1)})
	err = v.Admit(context.Background(), obj, nil)
	want = `Policy.service.io "kids-school-nights" is invalid: [metadata.bogus: Forbidden: unknown field, spec.colour: Forbidden: unknown field]`
	if err == nil || err.Error() != want {
		t.Fatalf("Admit error\n got %v\nwant %s", err, want)
	}
	for _, tc := range []struct {
		obj  *unstructured.Unstructured
		want string
	}{
		{build(b["Policy"], []edit{set("kind", "Nope")}), `unknown kind "Nope"`},
		{build(b["Policy"], []edit{set("apiVersion", "service.io/v1")}), `apiVersion: Invalid value: "service.io/v1": must be service.io/v1alpha1`},
	} {
		if err := v.Admit(context.Background(), tc.obj, nil); err == nil || !strings.Contains(err.Error(), tc.want) {
			t.Errorf("Admit: got %v, want %q", err, tc.want)
		}
	}
}

// TestSamplesAreValid admits every manifest of config/samples.
func TestSamplesAreValid(t *testing.T) {
	v := newValidator(t)
	s := samples(t)
	for _, info := range v.Kinds() {
		if info.Internal {
			continue
		}
		obj, ok := s[info.Kind]
		if !ok {
			t.Errorf("config/samples has no %s", info.Kind)
			continue
		}
		if err := v.Admit(context.Background(), &unstructured.Unstructured{Object: obj}, nil); err != nil {
			t.Errorf("sample %s: %v", info.Kind, err)
		}
	}
}

// TestParityWithKubeAPIServer runs the CRD-kind cases against a real
// kube-apiserver with config/crd/bases installed and demands the verdict and
// field path of the in-process validator.
func TestParityWithKubeAPIServer(t *testing.T) {
	if os.Getenv("KUBEBUILDER_ASSETS") == "" {
		t.Skip("KUBEBUILDER_ASSETS is unset: run `make test` or export KUBEBUILDER_ASSETS=$(hack/kube-testenv.sh)")
	}
	if testing.Short() {
		t.Skip("starts a kube-apiserver")
	}
	// controller-runtime logs through a process-wide logger; keep it quiet.
	ctrllog.SetLogger(logr.Discard())
	env := &envtest.Environment{
		CRDDirectoryPaths:     []string{"../../config/crd/bases"},
		ErrorIfCRDPathMissing: true,
		// The test machines are shared and busy: give the apiserver time.
		ControlPlaneStartTimeout: 3 * time.Minute,
		ControlPlaneStopTimeout:  time.Minute,
	}
	cfg, err := env.Start()
	if err != nil {
		t.Fatalf("starting envtest: %v", err)
	}
	t.Cleanup(func() {
		if err := env.Stop(); err != nil {
			t.Errorf("stopping envtest: %v", err)
		}
	})
	dyn, err := dynamic.NewForConfig(cfg)
	if err != nil {
		t.Fatal(err)
	}
	v := newValidator(t)
	b := bases(t)
	for _, c := range parityCases() {
		t.Run(c.name, func(t *testing.T) {
			obj, old := c.objects(t, b)
			local := admitLocal(t, v, c, obj.DeepCopy(), old)
			checkVerdict(t, "in-process", c, local)
			if c.localOnly != "" {
				t.Skip(c.localOnly)
			}
			remote := admitKube(t, dyn, v, c, obj, old)
			checkVerdict(t, "kube-apiserver", c, remote)
			if c.want != "" && local.err != nil && remote.err != nil && !slices.Equal(local.fields, remote.fields) {
				t.Errorf("field paths differ: in-process %v, kube-apiserver %v\n in-process: %v\n kube: %v", local.fields, remote.fields, local.err, remote.err)
			}
		})
	}
}

// admitKube sends a case to the apiserver: create, or create old then update;
// status cases of kinds with a status subresource go through /status.
func admitKube(t *testing.T, dyn dynamic.Interface, v *Validator, c pcase, obj, old *unstructured.Unstructured) verdict {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	info, _ := v.KindInfo(c.kind)
	var ri dynamic.ResourceInterface = dyn.Resource(schema.GroupVersionResource{Group: Group, Version: Version, Resource: info.Plural})
	if info.Namespaced {
		ri = dyn.Resource(schema.GroupVersionResource{Group: Group, Version: Version, Resource: info.Plural}).Namespace(obj.GetNamespace())
	}
	strict := metav1.CreateOptions{FieldValidation: "Strict"}
	t.Cleanup(func() {
		_ = ri.Delete(context.Background(), obj.GetName(), metav1.DeleteOptions{})
		if old != nil && old.GetName() != obj.GetName() {
			_ = ri.Delete(context.Background(), old.GetName(), metav1.DeleteOptions{})
		}
	})
	statusSub := c.status && info.HasStatus
	first := old
	if first == nil && statusSub {
		first = obj.DeepCopy()
		unstructured.RemoveNestedField(first.Object, "status")
	}
	if first == nil {
		got, err := ri.Create(ctx, obj, strict)
		if err != nil {
			return verdict{fields: fieldsOf(err), err: err}
		}
		return verdict{obj: got}
	}
	stored, err := ri.Create(ctx, first, strict)
	if err != nil {
		t.Fatalf("creating the stored object: %v", err)
	}
	next := obj.DeepCopy()
	next.SetResourceVersion(stored.GetResourceVersion())
	update := metav1.UpdateOptions{FieldValidation: "Strict"}
	var got *unstructured.Unstructured
	if statusSub {
		got, err = ri.UpdateStatus(ctx, next, update)
	} else {
		got, err = ri.Update(ctx, next, update)
	}
	if err != nil {
		return verdict{fields: fieldsOf(err), err: err}
	}
	return verdict{obj: got}
}
