package kubenode_test

import (
	"context"
	"encoding/json"
	"net/http"
	"strings"
	"testing"
	"time"

	eventsv1 "k8s.io/api/events/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/svcdns/svc/internal/node"
	"github.com/svcdns/svc/test/nodetest"
)

// TestUnblockReconcilerOnKube: with the chart's RBAC, the operator's
// UnblockRequest reconciler gives a request written with kubectl its
// expiry; the data plane's API approves it for 3 seconds (the allow entry
// lands in the namespace's list on the apiserver); when the time is up the
// operator removes the entry, expires the request and records an Event.
func TestUnblockReconcilerOnKube(t *testing.T) {
	c := needEnv(t)
	opKC, dpKC := installChartRBAC(t, c)
	op := startNode(t, "op-unblock", node.RoleOperator, opKC)
	dp := startNode(t, "dp-unblock", node.RoleDataplane, dpKC, "SERVICE_INTERNAL_PEERS="+op.Addrs.Internal,
		"SERVICE_BOOTSTRAP_TOKEN="+chartBootstrapToken)
	api := newAPIClient(t, dp, chartBootstrapToken)
	t.Cleanup(func() { deleteServiceObjects(c, "team") })

	apply(t, c, `apiVersion: service.io/v1alpha1
kind: UnblockRequest
metadata: {name: kube-ads, namespace: team}
spec:
  domain: ads.kube.example
  reason: needed for work
  requester: {ip: 192.0.2.7}
`)
	get := func(kind, name string) *unstructured.Unstructured {
		u := &unstructured.Unstructured{}
		u.SetGroupVersionKind(serviceGV.WithKind(kind))
		if err := c.Get(context.Background(), client.ObjectKey{Namespace: "team", Name: name}, u); err != nil {
			return nil
		}
		return u
	}
	field := func(u *unstructured.Unstructured, path ...string) string {
		if u == nil {
			return ""
		}
		s, _, _ := unstructured.NestedString(u.Object, path...)
		return s
	}
	nodetest.Eventually(t, 30*time.Second, "the operator gives the kubectl request its expiry", func() bool {
		u := get("UnblockRequest", "kube-ads")
		return field(u, "status", "phase") == "pending" && field(u, "status", "expiresAt") != ""
	})

	a := api.write("POST /unblockrequests/{namespace}/{name}/approve", "/unblockrequests/team/kube-ads/approve",
		map[string]any{"duration": "3s", "comment": "for the demo"}, "", http.StatusOK)
	if !strings.Contains(string(a.body), `"entry":"team/unblocked"`) {
		t.Fatalf("approve: %s", a)
	}
	bl := get("BlockList", "unblocked")
	if bl == nil || !strings.Contains(mustJSON(t, bl.Object), `"request":"team/kube-ads"`) {
		t.Fatalf("the allow entry is not on the apiserver: %v", bl)
	}

	start := time.Now()
	nodetest.Eventually(t, 30*time.Second, "the operator ends the timed approval", func() bool {
		return field(get("UnblockRequest", "kube-ads"), "status", "phase") == "expired"
	})
	t.Logf("timed approval (3s) expired by the operator %s after the approval answered", time.Since(start).Round(100*time.Millisecond))
	if bl := get("BlockList", "unblocked"); bl == nil || strings.Contains(mustJSON(t, bl.Object), "kube-ads") {
		t.Fatalf("the ended approval's entry is still in the list: %v", bl)
	}
	nodetest.Eventually(t, 15*time.Second, "an ApprovalEnded Event for the request", func() bool {
		var evs eventsv1.EventList
		if err := c.List(context.Background(), &evs, client.InNamespace("team")); err != nil {
			return false
		}
		for _, e := range evs.Items {
			if e.Regarding.Kind == "UnblockRequest" && e.Regarding.Name == "kube-ads" && e.Reason == "ApprovalEnded" {
				return true
			}
		}
		return false
	})
}

func mustJSON(t *testing.T, v any) string {
	t.Helper()
	b, err := json.Marshal(v)
	if err != nil {
		t.Fatal(err)
	}
	return string(b)
}
