package kube_test

import (
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	"sigs.k8s.io/yaml"

	"github.com/svcdns/svc/test/kube/kubeenv"
)

// TestKustomizeApply runs what docs/kubernetes.md documents, `kubectl apply
// -k config/default` after creating the namespace and the key Secret, as a
// server-side dry run against the real apiserver: every object is accepted
// (before, kustomize refused the CRD files outside its root and the missing
// key file).
func TestKustomizeApply(t *testing.T) {
	kc := kubeconfig(t)
	if err := env.Namespaces(t.Context(), ns); err != nil {
		t.Fatal(err)
	}
	root := kubeenv.RepoRoot()
	out, err := kubectl(t, kc, root, "apply", "-k", "config/default", "--dry-run=server")
	if err != nil {
		t.Fatalf("kubectl apply -k config/default --dry-run=server: %v\n%s", err, out)
	}
	for _, want := range append([]string{
		"namespace/service-system", "deployment.apps/service-operator", "daemonset.apps/service-dataplane",
		"configmap/service-config", "serviceaccount/service-operator", "service/service-dns",
	}, crdLines(t)...) {
		if !strings.Contains(string(out), want) {
			t.Errorf("kubectl apply -k config/default did not apply %s:\n%s", want, out)
		}
	}
}

func crdLines(t *testing.T) []string {
	var out []string
	for _, n := range serviceCRDs(t) {
		out = append(out, "customresourcedefinition.apiextensions.k8s.io/"+n)
	}
	return out
}

// TestKustomizeCRDList: config/crd/kustomization.yaml lists every file of
// config/crd/bases (make manifests adds files, not this list).
func TestKustomizeCRDList(t *testing.T) {
	root := kubeenv.RepoRoot()
	data, err := os.ReadFile(filepath.Join(root, "config", "crd", "kustomization.yaml"))
	if err != nil {
		t.Fatal(err)
	}
	var k struct{ Resources []string }
	if err := yaml.Unmarshal(data, &k); err != nil {
		t.Fatal(err)
	}
	files, _ := filepath.Glob(filepath.Join(root, "config", "crd", "bases", "*.yaml"))
	var want []string
	for _, f := range files {
		want = append(want, "bases/"+filepath.Base(f))
	}
	slices.Sort(k.Resources)
	if !slices.Equal(k.Resources, want) {
		t.Errorf("config/crd/kustomization.yaml lists %v, config/crd/bases has %v: list every file", k.Resources, want)
	}
}
