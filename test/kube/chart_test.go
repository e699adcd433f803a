// Package kube_test checks the Helm chart and the kustomize manifests on a
// real apiserver (envtest).
package kube_test

import (
	"bytes"
	"errors"
	"flag"
	"fmt"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"

	authorizationv1 "k8s.io/api/authorization/v1"
	"k8s.io/apimachinery/pkg/api/equality"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	utilyaml "k8s.io/apimachinery/pkg/util/yaml"
	"k8s.io/client-go/kubernetes"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/svcdns/svc/test/kube/kubeenv"
)

var update = flag.Bool("update", false, "rewrite config/rbac and config/manager from the chart")

var (
	env  *kubeenv.Env
	skip string
)

const ns = "service-system"

func TestMain(m *testing.M) {
	flag.Parse()
	if skip = kubeenv.SkipReason(); skip != "" {
		os.Exit(m.Run())
	}
	var err error
	if env, err = kubeenv.Start(); err != nil {
		fmt.Fprintln(os.Stderr, err)
		os.Exit(1)
	}
	code := m.Run()
	if err := env.Stop(); err != nil {
		fmt.Fprintln(os.Stderr, "stop envtest:", err)
	}
	os.Exit(code)
}

func chartDir() string { return filepath.Join(kubeenv.RepoRoot(), "charts", "service") }

func helm(t *testing.T, args ...string) []byte {
	t.Helper()
	out, err := helmRun(t, args...)
	if err != nil {
		t.Fatalf("helm %s: %v\n%s", strings.Join(args, " "), err, out)
	}
	return out
}

// helmRun runs the testenv's helm with its own cache and config, returning
// stdout and stderr together.
func helmRun(t *testing.T, args ...string) ([]byte, error) {
	t.Helper()
	if skip != "" {
		t.Skip(skip)
	}
	cmd := exec.CommandContext(t.Context(), filepath.Join(kubeenv.Assets(), "helm"), args...)
	cmd.Env = append(os.Environ(), "HELM_CACHE_HOME="+t.TempDir(), "HELM_CONFIG_HOME="+t.TempDir(), "HELM_DATA_HOME="+t.TempDir())
	var out, errb bytes.Buffer
	cmd.Stdout, cmd.Stderr = &out, &errb
	err := cmd.Run()
	return append(out.Bytes(), errb.Bytes()...), err
}

func render(t *testing.T, extra ...string) []*unstructured.Unstructured {
	t.Helper()
	out := helm(t, append([]string{"template", "service", chartDir(), "--namespace", ns}, extra...)...)
	return decode(t, out)
}

func decode(t *testing.T, data []byte) []*unstructured.Unstructured {
	t.Helper()
	var objs []*unstructured.Unstructured
	dec := utilyaml.NewYAMLOrJSONDecoder(bytes.NewReader(data), 4096)
	for {
		u := &unstructured.Unstructured{}
		if err := dec.Decode(&u.Object); err != nil {
			if errors.Is(err, io.EOF) {
				return objs
			}
			t.Fatal(err)
		}
		if len(u.Object) > 0 {
			objs = append(objs, u)
		}
	}
}

func TestLint(t *testing.T) {
	helm(t, "lint", chartDir(), "--strict")
	helm(t, "lint", chartDir(), "--set", "dataplane.hostNetwork=true,metrics.serviceMonitor.enabled=true,encryptionKey.existingSecret=mine")
	helm(t, "lint", chartDir(), "--strict", "--set", "tls.secretName=dns-tls")
}

// TestCRDsMatchGenerated: the chart's CRDs (charts/service/files/crds,
// rendered by templates/crds.yaml so upgrades update them) are the
// generated ones, all of them, and nothing is left in crds/, which Helm
// would install alongside the templates and never update.
func TestCRDsMatchGenerated(t *testing.T) {
	if _, err := os.Stat(filepath.Join(chartDir(), "crds")); err == nil {
		t.Fatal("charts/service/crds exists: the CRDs live in charts/service/files/crds (templates/crds.yaml renders them so helm upgrade updates them); move the files there and delete crds/")
	}
	bases := filepath.Join(kubeenv.RepoRoot(), "config", "crd", "bases")
	files, _ := filepath.Glob(filepath.Join(bases, "*.yaml"))
	chartFiles, _ := filepath.Glob(filepath.Join(chartDir(), "files", "crds", "*.yaml"))
	if len(files) == 0 || len(files) != len(chartFiles) {
		t.Fatalf("config/crd/bases has %d CRDs, the chart %d: copy config/crd/bases/*.yaml to charts/service/files/crds/", len(files), len(chartFiles))
	}
	for _, f := range files {
		want, _ := os.ReadFile(f)
		got, err := os.ReadFile(filepath.Join(chartDir(), "files", "crds", filepath.Base(f)))
		if err != nil || !bytes.Equal(got, want) {
			t.Fatalf("charts/service/files/crds/%s drifted from config/crd/bases: copy it again", filepath.Base(f))
		}
	}
	// and the rendered templates carry them unchanged but for the chart's
	// labels and the keep annotation
	rendered := map[string]*unstructured.Unstructured{}
	for _, o := range render(t) {
		if o.GetKind() == "CustomResourceDefinition" {
			rendered[o.GetName()] = o
		}
	}
	if len(rendered) != len(files) {
		t.Fatalf("the chart renders %d CRDs, config/crd/bases has %d", len(rendered), len(files))
	}
	for _, f := range files {
		data, _ := os.ReadFile(f)
		want := decode(t, data)[0]
		got := rendered[want.GetName()]
		if got == nil {
			t.Fatalf("the chart does not render %s", want.GetName())
		}
		if got.GetAnnotations()["helm.sh/resource-policy"] != "keep" || got.GetLabels()["app.kubernetes.io/managed-by"] != "Helm" {
			t.Errorf("%s: annotations %v labels %v, want helm.sh/resource-policy: keep and the chart's labels", got.GetName(), got.GetAnnotations(), got.GetLabels())
		}
		if !equality.Semantic.DeepEqual(got.Object["spec"], want.Object["spec"]) {
			t.Errorf("the rendered %s differs from %s", got.GetName(), f)
		}
	}
	for _, o := range render(t, "--set", "crds.install=false") {
		if o.GetKind() == "CustomResourceDefinition" {
			t.Errorf("crds.install=false renders %s", o.GetName())
		}
	}
	for _, o := range render(t, "--set", "crds.keep=false") {
		if _, keep := o.GetAnnotations()["helm.sh/resource-policy"]; o.GetKind() == "CustomResourceDefinition" && keep {
			t.Errorf("crds.keep=false, yet %s is kept", o.GetName())
		}
	}
}

func crClient(t *testing.T) client.Client {
	t.Helper()
	c, err := client.New(env.Config, client.Options{})
	if err != nil {
		t.Fatal(err)
	}
	return c
}

// TestServerSideDryRun applies every rendered object with a server-side dry
// run: the real apiserver validates them.
func TestServerSideDryRun(t *testing.T) {
	kinds := dryRun(t, render(t, "--set", "dataplane.hostNetwork=true"))
	for _, k := range []string{"CustomResourceDefinition", "Deployment", "DaemonSet", "Service", "ServiceAccount", "ClusterRole", "Role", "PodDisruptionBudget", "ConfigMap", "Secret"} {
		if kinds[k] == 0 {
			t.Errorf("the chart renders no %s", k)
		}
	}
}

// dryRun applies objs with a server-side dry run (the real apiserver
// validates them) and counts them by kind.
func dryRun(t *testing.T, objs []*unstructured.Unstructured) map[string]int {
	t.Helper()
	if err := env.Namespaces(t.Context(), ns); err != nil {
		t.Fatal(err)
	}
	c := crClient(t)
	kinds := map[string]int{}
	for _, o := range objs {
		kinds[o.GetKind()]++
		if o.GetNamespace() == "" && o.GetKind() != "CustomResourceDefinition" && !strings.HasPrefix(o.GetKind(), "Cluster") {
			o.SetNamespace(ns)
		}
		if err := c.Patch(t.Context(), o, client.Apply, client.DryRunAll, client.FieldOwner("chart-test"), client.ForceOwnership); err != nil {
			t.Fatalf("%s %s refused: %v", o.GetKind(), o.GetName(), err)
		}
	}
	return kinds
}

// TestLeastPrivilege installs the chart's RBAC and asks SubjectAccessReview
// what its ServiceAccounts may do.
func TestLeastPrivilege(t *testing.T) {
	objs := render(t)
	ctx := t.Context()
	if err := env.Namespaces(ctx, ns, "elsewhere"); err != nil {
		t.Fatal(err)
	}
	c := crClient(t)
	for _, o := range objs {
		switch o.GetKind() {
		case "ServiceAccount", "ClusterRole", "ClusterRoleBinding", "Role", "RoleBinding":
		default:
			continue
		}
		if o.GetKind() == "ServiceAccount" || o.GetKind() == "Role" || o.GetKind() == "RoleBinding" {
			o.SetNamespace(ns)
		}
		if err := c.Patch(ctx, o, client.Apply, client.FieldOwner("chart-test"), client.ForceOwnership); err != nil {
			t.Fatalf("apply %s %s: %v", o.GetKind(), o.GetName(), err)
		}
	}
	cs := kubernetes.NewForConfigOrDie(env.Config)
	type check struct {
		sa, verb, group, resource, sub, namespace string
		allow                                     bool
	}
	checks := []check{
		{"dataplane", "list", "service.io", "dnszones", "", "", true},
		{"dataplane", "watch", "service.io", "dnsrecordsets", "", "web", true},
		// the REST API's write routes: create, update (also behind PATCH
		// routes) and delete on every kind it serves; never patch or status
		{"dataplane", "create", "service.io", "dnszones", "", "", true},
		{"dataplane", "update", "service.io", "dnszones", "", "", true},
		{"dataplane", "delete", "service.io", "dnszones", "", "", true},
		{"dataplane", "create", "service.io", "dnsrecordsets", "", "web", true},
		{"dataplane", "update", "service.io", "blocklists", "", "web", true},
		{"dataplane", "delete", "service.io", "policies", "", "web", true},
		{"dataplane", "create", "service.io", "clientgroups", "", "web", true},
		{"dataplane", "delete", "service.io", "unblockrequests", "", "web", true},
		{"dataplane", "patch", "service.io", "dnszones", "", "", false},
		{"dataplane", "deletecollection", "service.io", "dnsrecordsets", "", "web", false},
		{"dataplane", "update", "service.io", "dnszones", "status", "", false},
		{"dataplane", "update", "service.io", "dnsrecordsets", "status", "web", false},
		{"dataplane", "patch", "service.io", "blocklists", "status", "web", false},
		{"dataplane", "create", "apiextensions.k8s.io", "customresourcedefinitions", "", "", false},
		{"dataplane", "list", "", "secrets", "", "", false},
		{"dataplane", "get", "", "secrets", "", ns, true},
		{"dataplane", "get", "", "secrets", "", "elsewhere", false},
		{"dataplane", "create", "authentication.k8s.io", "tokenreviews", "", "", true},
		{"dataplane", "create", "authorization.k8s.io", "subjectaccessreviews", "", "", true},
		// its node Lease (GET /nodes), in its namespace only; never delete
		{"dataplane", "create", "coordination.k8s.io", "leases", "", ns, true},
		{"dataplane", "update", "coordination.k8s.io", "leases", "", ns, true},
		{"dataplane", "delete", "coordination.k8s.io", "leases", "", ns, false},
		{"dataplane", "create", "coordination.k8s.io", "leases", "", "elsewhere", false},
		{"dataplane", "list", "", "namespaces", "", "", false},
		{"dataplane", "create", "events.k8s.io", "events", "", "web", false},
		{"dataplane", "list", "", "pods", "", ns, false},
		{"dataplane", "get", "", "configmaps", "", "web", true},
		{"dataplane", "list", "", "configmaps", "", "web", false},
		{"dataplane", "update", "", "configmaps", "", "web", false},
		{"operator", "update", "service.io", "dnsrecordsets", "status", "web", true},
		{"operator", "update", "service.io", "blocklists", "status", "web", true},
		{"operator", "create", "coordination.k8s.io", "leases", "", ns, true},
		{"operator", "create", "coordination.k8s.io", "leases", "", "elsewhere", false},
		{"operator", "create", "events.k8s.io", "events", "", "web", true},
		{"operator", "create", "", "secrets", "", ns, true},
		{"operator", "get", "", "secrets", "", "elsewhere", false},
		{"operator", "create", "authentication.k8s.io", "tokenreviews", "", "", true},
		{"operator", "impersonate", "", "users", "", "", false},
		{"operator", "list", "", "pods", "", "", false},
		{"operator", "get", "", "configmaps", "", "web", true},
		{"operator", "watch", "", "configmaps", "", "web", false},
		{"operator", "create", "", "configmaps", "", "web", false},
		{"operator", "create", "", "configmaps", "", ns, true}, // publish state
		{"operator", "delete", "", "configmaps", "", ns, false},
		{"operator", "delete", "apiextensions.k8s.io", "customresourcedefinitions", "", "", false},
		{"operator", "create", "rbac.authorization.k8s.io", "clusterrolebindings", "", "", false},
	}
	for _, ch := range checks {
		user := "system:serviceaccount:" + ns + ":service-" + ch.sa
		got := kubeenv.AccessReview(ctx, t, cs, authorizationv1.SubjectAccessReviewSpec{
			User:   user,
			Groups: []string{"system:serviceaccounts", "system:serviceaccounts:" + ns, "system:authenticated"},
			ResourceAttributes: &authorizationv1.ResourceAttributes{
				Verb: ch.verb, Group: ch.group, Resource: ch.resource, Subresource: ch.sub, Namespace: ch.namespace,
			},
		}, ch.allow)
		if got != ch.allow {
			t.Errorf("%s %s %s/%s in %q: allowed=%v, want %v", ch.sa, ch.verb, ch.resource, ch.sub, ch.namespace, got, ch.allow)
		}
	}
	// GET /cluster's clusterID is the release namespace's UID: both may get
	// that one namespace, no other.
	for _, ch := range []struct {
		sa, name string
		allow    bool
	}{{"dataplane", ns, true}, {"operator", ns, true}, {"dataplane", "elsewhere", false}, {"operator", "kube-system", false}} {
		got := kubeenv.AccessReview(ctx, t, cs, authorizationv1.SubjectAccessReviewSpec{
			User: "system:serviceaccount:" + ns + ":service-" + ch.sa, Groups: []string{"system:serviceaccounts", "system:authenticated"},
			ResourceAttributes: &authorizationv1.ResourceAttributes{Verb: "get", Resource: "namespaces", Name: ch.name},
		}, ch.allow)
		if got != ch.allow {
			t.Errorf("%s get namespace %s: allowed=%v, want %v", ch.sa, ch.name, got, ch.allow)
		}
	}
}

// TestKustomizeMatchesChart keeps config/rbac and config/manager equal to
// the chart rendered with release name "service" (go test -update rewrites).
func TestKustomizeMatchesChart(t *testing.T) {
	root := kubeenv.RepoRoot()
	for _, f := range []struct{ path, template string }{
		{"config/rbac/rbac.yaml", "templates/serviceaccounts.yaml,templates/rbac.yaml"},
		{"config/manager/manager.yaml", "templates/configmap.yaml,templates/settings.yaml,templates/workloads.yaml,templates/services.yaml,templates/pdb.yaml"},
	} {
		var args []string
		for _, s := range strings.Split(f.template, ",") {
			args = append(args, "--show-only", s)
		}
		got := helm(t, append([]string{"template", "service", chartDir(), "--namespace", ns}, args...)...)
		got = append([]byte("# Generated from charts/service by test/kube (go test ./test/kube -update); do not edit.\n"), got...)
		path := filepath.Join(root, f.path)
		if *update {
			if err := os.MkdirAll(filepath.Dir(path), 0o755); err != nil {
				t.Fatal(err)
			}
			if err := os.WriteFile(path, got, 0o644); err != nil {
				t.Fatal(err)
			}
			continue
		}
		want, err := os.ReadFile(path)
		if err != nil || !bytes.Equal(got, want) {
			t.Errorf("%s drifted from the chart: go test ./test/kube -run Kustomize -update", f.path)
		}
	}
}
