package kube_test

import (
	"bytes"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	apiextensionsv1 "k8s.io/apiextensions-apiserver/pkg/apis/apiextensions/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/client-go/discovery"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/yaml"

	"github.com/svcdns/svc/test/kube/kubeenv"
)

// kubeconfig writes an admin kubeconfig of the envtest apiserver for helm
// and kubectl.
func kubeconfig(t *testing.T) string {
	t.Helper()
	if skip != "" {
		t.Skip(skip)
	}
	return kubeenv.Kubeconfig(t, env.Config, "")
}

// kubectl runs the testenv's kubectl (kustomize built in) with kubeconfig
// from dir.
func kubectl(t *testing.T, kubeconfigPath, dir string, args ...string) ([]byte, error) {
	t.Helper()
	cmd := exec.CommandContext(t.Context(), filepath.Join(kubeenv.Assets(), "kubectl"), append([]string{"--kubeconfig", kubeconfigPath}, args...)...)
	cmd.Dir = dir
	var out bytes.Buffer
	cmd.Stdout, cmd.Stderr = &out, &out
	err := cmd.Run()
	return out.Bytes(), err
}

// serviceCRDs are the CRDs of config/crd/bases by name.
func serviceCRDs(t *testing.T) []string {
	t.Helper()
	files, _ := filepath.Glob(filepath.Join(kubeenv.RepoRoot(), "config", "crd", "bases", "*.yaml"))
	var names []string
	for _, f := range files {
		data, err := os.ReadFile(f)
		if err != nil {
			t.Fatal(err)
		}
		names = append(names, decode(t, data)[0].GetName())
	}
	return names
}

func getCRD(t *testing.T, c client.Client, name string) *apiextensionsv1.CustomResourceDefinition {
	t.Helper()
	crd := &apiextensionsv1.CustomResourceDefinition{}
	if err := c.Get(t.Context(), client.ObjectKey{Name: name}, crd); err != nil {
		t.Fatalf("get CRD %s: %v", name, err)
	}
	return crd
}

// copyChart copies the chart to a temporary directory.
func copyChart(t *testing.T) string {
	t.Helper()
	dst := filepath.Join(t.TempDir(), "service")
	if err := os.CopyFS(dst, os.DirFS(chartDir())); err != nil {
		t.Fatal(err)
	}
	return dst
}

// withoutRecordsColumn rewrites the DNSZone CRD file at path without the
// RECORDS column and without status.records: an older chart's CRD.
func withoutRecordsColumn(t *testing.T, path string) {
	t.Helper()
	data, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	crd := &apiextensionsv1.CustomResourceDefinition{}
	if err := yaml.Unmarshal(data, crd); err != nil {
		t.Fatal(err)
	}
	for i := range crd.Spec.Versions {
		v := &crd.Spec.Versions[i]
		v.AdditionalPrinterColumns = slices.DeleteFunc(v.AdditionalPrinterColumns, func(c apiextensionsv1.CustomResourceColumnDefinition) bool { return c.Name == "RECORDS" })
		st := v.Schema.OpenAPIV3Schema.Properties["status"]
		delete(st.Properties, "records")
		v.Schema.OpenAPIV3Schema.Properties["status"] = st
	}
	out, err := yaml.Marshal(crd)
	if err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(path, out, 0o644); err != nil {
		t.Fatal(err)
	}
}

// hasRecords: the served DNSZone CRD has the RECORDS column and the
// status.records field.
func hasRecords(t *testing.T, c client.Client) (column, field bool) {
	t.Helper()
	for _, v := range getCRD(t, c, "dnszones.service.io").Spec.Versions {
		for _, c := range v.AdditionalPrinterColumns {
			column = column || c.Name == "RECORDS"
		}
		_, f := v.Schema.OpenAPIV3Schema.Properties["status"].Properties["records"]
		field = field || f
	}
	return column, field
}

// TestChartUpgradeUpdatesCRDs installs for real (no --wait) and upgrades:
//  1. on an apiserver without the CRDs, `helm install --dry-run=server`
//     of the chart passes;
//  2. the previous chart layout (0.1.0: CRDs in crds/, which Helm creates
//     once and never updates), with a DNSZone CRD lacking the RECORDS
//     column and status.records, installs; `helm upgrade --take-ownership`
//     with this chart (the documented procedure) adopts and updates the
//     CRDs;
//  3. from then on a plain `helm upgrade` updates them (shown by going
//     back to an old CRD and forward again);
//  4. `helm uninstall` keeps the CRDs and the objects in them.
func TestChartUpgradeUpdatesCRDs(t *testing.T) {
	if skip != "" {
		t.Skip(skip)
	}
	// 1. a cluster without the CRDs: its own control plane, so the
	// package's other tests keep theirs
	bare, err := kubeenv.StartWithoutCRDs()
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = bare.Stop() })
	kc := kubeenv.Kubeconfig(t, bare.Config, "")
	ctx := t.Context()
	const release, relNS = "upg", "upgrade-test"
	h := func(args ...string) []byte {
		t.Helper()
		return helm(t, append(args, "--kubeconfig", kc)...)
	}
	c, err := client.New(bare.Config, client.Options{})
	if err != nil {
		t.Fatal(err)
	}
	names := serviceCRDs(t)
	for _, n := range names {
		err := c.Get(ctx, client.ObjectKey{Name: n}, &apiextensionsv1.CustomResourceDefinition{})
		if !apierrors.IsNotFound(err) {
			t.Fatalf("the bare control plane has CRD %s (%v): the test does not start from a cluster without them", n, err)
		}
	}
	out := h("install", release, chartDir(), "-n", relNS, "--create-namespace", "--dry-run=server")
	for _, n := range names {
		if !bytes.Contains(out, []byte("name: "+n)) {
			t.Errorf("helm install --dry-run=server does not show CRD %s", n)
		}
	}

	// 2. the previous layout
	old := copyChart(t)
	if err := os.Rename(filepath.Join(old, "files", "crds"), filepath.Join(old, "crds")); err != nil {
		t.Fatal(err)
	}
	if err := os.Remove(filepath.Join(old, "templates", "crds.yaml")); err != nil {
		t.Fatal(err)
	}
	withoutRecordsColumn(t, filepath.Join(old, "crds", "service.io_dnszones.yaml"))
	setChartVersion(t, old, "0.1.0")
	h("install", release, old, "-n", relNS, "--create-namespace")
	t.Cleanup(func() {
		_, _ = helmRun(t, "uninstall", release, "-n", relNS, "--kubeconfig", kc)
	})
	if col, field := hasRecords(t, c); col || field {
		t.Fatalf("the old chart installed RECORDS column %v, status.records %v: the test chart is not old", col, field)
	}
	zone := &unstructured.Unstructured{Object: map[string]any{"apiVersion": "service.io/v1alpha1", "kind": "DNSZone",
		"metadata": map[string]any{"name": "upgrade.test"}, "spec": map[string]any{"type": "primary"}}}
	waitFor(t, "DNSZone served", func() bool {
		err := c.Create(ctx, zone.DeepCopy())
		return err == nil || apierrors.IsAlreadyExists(err)
	})

	// a plain upgrade cannot adopt CRDs that crds/ created: that is why the
	// procedure says --take-ownership
	// (docs/kubernetes.md quotes the error)
	if out, err := helmRun(t, "upgrade", release, chartDir(), "-n", relNS, "--kubeconfig", kc); err == nil {
		t.Error("helm upgrade adopted the crds/ CRDs without --take-ownership: docs/kubernetes.md says it fails")
	} else if !strings.Contains(string(out), "CustomResourceDefinition") || !strings.Contains(string(out), "invalid ownership metadata") {
		t.Fatalf("helm upgrade failed for another reason than the CRDs' ownership: %v\n%s", err, tail(out))
	}
	h("upgrade", release, chartDir(), "-n", relNS, "--take-ownership")
	if col, field := hasRecords(t, c); !col || !field {
		t.Fatalf("after helm upgrade the DNSZone CRD has RECORDS column %v, status.records %v; want both", col, field)
	}
	for _, n := range names {
		crd := getCRD(t, c, n)
		if crd.Annotations["meta.helm.sh/release-name"] != release || crd.Annotations["helm.sh/resource-policy"] != "keep" {
			t.Errorf("CRD %s after the upgrade: annotations %v, want the release's and resource-policy keep", n, crd.Annotations)
		}
	}

	// 3. later upgrades need nothing special
	older := copyChart(t)
	withoutRecordsColumn(t, filepath.Join(older, "files", "crds", "service.io_dnszones.yaml"))
	h("upgrade", release, older, "-n", relNS)
	if col, field := hasRecords(t, c); col || field {
		t.Fatalf("upgrading to a chart without the column left it (column %v, field %v): the CRDs are not the chart's", col, field)
	}
	h("upgrade", release, chartDir(), "-n", relNS)
	if col, field := hasRecords(t, c); !col || !field {
		t.Fatalf("a plain helm upgrade did not update the CRD (column %v, field %v)", col, field)
	}

	// 4. uninstall keeps the CRDs and the zone
	h("uninstall", release, "-n", relNS)
	for _, n := range names {
		getCRD(t, c, n)
	}
	if err := c.Get(ctx, client.ObjectKey{Name: "upgrade.test"}, zone.DeepCopy()); err != nil {
		t.Errorf("the DNSZone did not survive helm uninstall: %v", err)
	}
	_ = c.Delete(ctx, zone)
}

func setChartVersion(t *testing.T, dir, version string) {
	t.Helper()
	p := filepath.Join(dir, "Chart.yaml")
	data, err := os.ReadFile(p)
	if err != nil {
		t.Fatal(err)
	}
	var lines []string
	for _, l := range strings.Split(string(data), "\n") {
		if strings.HasPrefix(l, "version:") {
			l = "version: " + version
		}
		lines = append(lines, l)
	}
	if err := os.WriteFile(p, []byte(strings.Join(lines, "\n")), 0o644); err != nil {
		t.Fatal(err)
	}
}

// waitFor polls cond every 100 ms for up to 60 s (a CRD becomes served
// within seconds; the margin is for a CI machine running every package).
func waitFor(t *testing.T, what string, cond func() bool) {
	t.Helper()
	deadline := time.Now().Add(60 * time.Second)
	for !cond() {
		if time.Now().After(deadline) {
			t.Fatalf("timed out waiting for %s", what)
		}
		time.Sleep(100 * time.Millisecond)
	}
}

// TestCRDCategories: every kind is in the service-dns category, so
// `kubectl get service-dns` lists them all, and keeps its short names.
func TestCRDCategories(t *testing.T) {
	if skip != "" {
		t.Skip(skip)
	}
	dc := discovery.NewDiscoveryClientForConfigOrDie(env.Config)
	var rl *metav1.APIResourceList
	waitFor(t, "service.io discovery", func() bool {
		var err error
		rl, err = dc.ServerResourcesForGroupVersion("service.io/v1alpha1")
		return err == nil
	})
	short := map[string][]string{"policies": {"pol", "policy"}, "dnszones": {"zone"}, "dnsrecordsets": {"rrset"}, "clientgroups": {"cg"}, "blocklists": {"bl"}}
	kinds := 0
	for _, r := range rl.APIResources {
		if strings.Contains(r.Name, "/") {
			continue
		}
		kinds++
		if !slices.Contains(r.Categories, "service-dns") {
			t.Errorf("%s.service.io categories %v: `kubectl get service-dns` misses it", r.Name, r.Categories)
		}
		for _, s := range short[r.Name] {
			if !slices.Contains(r.ShortNames, s) {
				t.Errorf("%s lost short name %s (has %v)", r.Name, s, r.ShortNames)
			}
		}
	}
	if kinds != len(serviceCRDs(t)) {
		t.Errorf("discovery lists %d service.io kinds, config/crd/bases has %d", kinds, len(serviceCRDs(t)))
	}
	// what a user types
	kc := kubeconfig(t)
	if err := env.Namespaces(t.Context(), "cat-test"); err != nil {
		t.Fatal(err)
	}
	pol := &unstructured.Unstructured{Object: map[string]any{"apiVersion": "service.io/v1alpha1", "kind": "ClientGroup",
		"metadata": map[string]any{"name": "office", "namespace": "cat-test"}, "spec": map[string]any{}}}
	if err := crClient(t).Create(t.Context(), pol); err != nil && !apierrors.IsAlreadyExists(err) {
		t.Fatal(err)
	}
	out, err := kubectl(t, kc, t.TempDir(), "get", "service-dns", "-A", "-o", "name")
	if err != nil || !strings.Contains(string(out), "clientgroup.service.io/office") {
		t.Errorf("kubectl get service-dns -A: %v\n%s", err, out)
	}
}
