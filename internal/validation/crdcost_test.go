package validation

import (
	"context"
	"io/fs"
	"path"
	"testing"

	apiextensionsinternal "k8s.io/apiextensions-apiserver/pkg/apis/apiextensions"
	apiextensionsv1 "k8s.io/apiextensions-apiserver/pkg/apis/apiextensions/v1"
	crdvalidation "k8s.io/apiextensions-apiserver/pkg/apis/apiextensions/validation"

	"github.com/svcdns/svc/config/crd"
)

// TestCRDsPassAPIServerValidation runs the apiserver's own CRD validation on
// every shipped CRD: structural schema, CEL compilation and the CEL cost
// budget (a CRD whose rules could cost too much at the list bounds is refused
// at install, so the rules on 1000 endpoints must stay cheap).
func TestCRDsPassAPIServerValidation(t *testing.T) {
	files, err := fs.Glob(crd.Bases, path.Join("bases", "*.yaml"))
	if err != nil || len(files) == 0 {
		t.Fatalf("no embedded CRDs: %v", err)
	}
	for _, f := range files {
		data, err := fs.ReadFile(crd.Bases, f)
		if err != nil {
			t.Fatal(err)
		}
		v1, err := ParseCRD(data)
		if err != nil {
			t.Fatalf("%s: %v", f, err)
		}
		apiextensionsv1.SetObjectDefaults_CustomResourceDefinition(v1)
		var in apiextensionsinternal.CustomResourceDefinition
		if err := apiextensionsv1.Convert_v1_CustomResourceDefinition_To_apiextensions_CustomResourceDefinition(v1, &in, nil); err != nil {
			t.Fatalf("%s: %v", f, err)
		}
		if errs := crdvalidation.ValidateCustomResourceDefinition(context.Background(), &in); len(errs) > 0 {
			t.Errorf("%s is refused by the apiserver's CRD validation: %v", f, errs.ToAggregate())
		}
	}
}
