package kubenode_test

import (
	"encoding/json"
	"net/http"
	"strings"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/svcdns/svc/internal/node"
	"github.com/svcdns/svc/test/nodetest"
)

// setting reads one nested key of GET /settings.
func setting(t *testing.T, api *apiClient, path ...string) any {
	t.Helper()
	a := api.do("GET /settings", "/settings", nil, "")
	if a.code != http.StatusOK {
		t.Fatalf("GET /settings: %s", a)
	}
	var v any
	if err := json.Unmarshal(a.body, &v); err != nil {
		t.Fatal(err)
	}
	for _, p := range path {
		m, _ := v.(map[string]any)
		v = m[p]
	}
	return v
}

// TestSettingsSharedAcrossKubeNodes: on Kubernetes, PATCH /settings served
// by one data-plane node reaches every node through the chart's settings
// ConfigMap, with the chart's RBAC (issue #23 item 7): the other running
// node applies it within seconds, a node started later starts with it, and
// removing an override (null) reaches every node too.
func TestSettingsSharedAcrossKubeNodes(t *testing.T) {
	c := needEnv(t)
	_, dpKC := installChartRBAC(t, c)
	tokenEnv := "SERVICE_BOOTSTRAP_TOKEN=" + chartBootstrapToken
	n1 := startNode(t, "dp-settings-1", node.RoleDataplane, dpKC, tokenEnv)
	n2 := startNode(t, "dp-settings-2", node.RoleDataplane, dpKC, tokenEnv)
	api1, api2 := newAPIClient(t, n1, chartBootstrapToken), newAPIClient(t, n2, chartBootstrapToken)

	api1.write("PATCH /settings", "/settings", map[string]any{"cache": map[string]any{"maxEntries": 4321}, "blocking": map[string]any{"blockTTL": "3m"}},
		"application/merge-patch+json", http.StatusOK)
	if got := setting(t, api1, "cache", "maxEntries"); got != float64(4321) {
		t.Fatalf("node 1 cache.maxEntries = %v right after its PATCH, want 4321", got)
	}
	start := time.Now()
	nodetest.Eventually(t, 10*time.Second, "node 2 applies the cluster settings", func() bool {
		return setting(t, api2, "cache", "maxEntries") == float64(4321) && setting(t, api2, "blocking", "blockTTL") == "3m"
	})
	t.Logf("node 2 had the change %s after node 1 answered", time.Since(start).Round(time.Millisecond))

	var cm corev1.ConfigMap
	if err := c.Get(t.Context(), client.ObjectKey{Namespace: node.DefaultNamespace, Name: chartRelease + "-settings"}, &cm); err != nil {
		t.Fatalf("the chart's settings ConfigMap: %v", err)
	}
	if !strings.Contains(cm.Data["settings.yaml"], "maxEntries: 4321") {
		t.Errorf("ConfigMap settings.yaml = %q, want cache.maxEntries 4321 in it", cm.Data["settings.yaml"])
	}

	// A node that starts now starts with the cluster settings.
	n3 := startNode(t, "dp-settings-3", node.RoleDataplane, dpKC, tokenEnv)
	if got := setting(t, newAPIClient(t, n3, chartBootstrapToken), "blocking", "blockTTL"); got != "3m" {
		t.Errorf("node started after the PATCH: blocking.blockTTL = %v, want 3m", got)
	}

	// An invalid value is refused and stored nowhere.
	if a := api2.do("PATCH /settings", "/settings", map[string]any{"cache": map[string]any{"maxEntries": -1}}, "application/merge-patch+json"); a.code != http.StatusBadRequest || !strings.Contains(string(a.body), "cache.maxEntries") {
		t.Errorf("invalid PATCH = %s, want 400 naming cache.maxEntries", a)
	}

	// null removes the override everywhere; node 2 serves this one.
	api2.write("PATCH /settings", "/settings", map[string]any{"cache": map[string]any{"maxEntries": nil}}, "application/merge-patch+json", http.StatusOK)
	nodetest.Eventually(t, 10*time.Second, "node 1 back to the default cache.maxEntries", func() bool {
		return setting(t, api1, "cache", "maxEntries") == float64(200000)
	})
	if got := setting(t, api1, "blocking", "blockTTL"); got != "3m" {
		t.Errorf("node 1 blocking.blockTTL = %v after another key was removed, want 3m kept", got)
	}
	// The package's nodes share the apiserver: no cluster settings left.
	api1.write("PATCH /settings", "/settings", map[string]any{"blocking": nil, "cache": nil}, "application/merge-patch+json", http.StatusOK)
}
