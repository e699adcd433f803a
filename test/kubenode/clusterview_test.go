package kubenode_test

import (
	"encoding/json"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	coordinationv1 "k8s.io/api/coordination/v1"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/tools/clientcmd"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/svcdns/svc/internal/node"
	"github.com/svcdns/svc/test/kube/kubeenv"
	"github.com/svcdns/svc/test/nodetest"
	"github.com/svcdns/svc/test/proc"
)

// viewLease is the node Lease duration of these nodes: a node that stops
// renewing is listed not ready within it (plus one GET).
const viewLease = 3 * time.Second

// startViewNode runs a node with a short node Lease and a short operator
// election, so the test sees expiry and take-over in seconds.
func startViewNode(t *testing.T, name, role, kc string) *testNode {
	t.Helper()
	return &testNode{nodetest.Start(t, nodetest.Name(name), nodetest.Role(role),
		nodetest.KubeStore(20*time.Second, 30*time.Second), nodetest.NodeLease(viewLease),
		nodetest.Lease(node.LeaseTimings{Duration: 4 * time.Second, RenewDeadline: 3 * time.Second, RetryPeriod: 500 * time.Millisecond}),
		nodetest.Env("KUBECONFIG="+kc, "SERVICE_ENCRYPTION_KEY="+encryptionKey, "SERVICE_NAMESPACE="+node.DefaultNamespace,
			"SERVICE_BOOTSTRAP_TOKEN="+chartBootstrapToken))}
}

// viaProxy is the kubeconfig kc with the apiserver reached through addr.
func viaProxy(t *testing.T, kc, addr string) string {
	t.Helper()
	cfg, err := clientcmd.LoadFromFile(kc)
	if err != nil {
		t.Fatal(err)
	}
	for _, c := range cfg.Clusters {
		c.Server = "https://" + addr
	}
	p := filepath.Join(t.TempDir(), "kubeconfig")
	if err := clientcmd.WriteToFile(*cfg, p); err != nil {
		t.Fatal(err)
	}
	return p
}

type viewNode struct {
	Name                string   `json:"name"`
	Version             string   `json:"version"`
	Ready               *bool    `json:"ready"`
	Leader              bool     `json:"leader"`
	Role                string   `json:"role"`
	Serial              uint64   `json:"serial"`
	SnapshotAgeSeconds  *float64 `json:"snapshotAgeSeconds"`
	HeartbeatAgeSeconds *float64 `json:"heartbeatAgeSeconds"`
	Error               string   `json:"error"`
	Address             string   `json:"address"`
}

type viewCluster struct {
	Driver    string `json:"driver"`
	Epoch     int64  `json:"epoch"`
	Nodes     int64  `json:"nodes"`
	Node      string `json:"node"`
	ClusterID string `json:"clusterID"`
	Leader    string `json:"leader"`
}

func nodesOf(t *testing.T, api *apiClient) map[string]viewNode {
	t.Helper()
	a := api.do("GET /nodes", "/nodes", nil, "")
	if a.code != http.StatusOK {
		t.Fatalf("GET /nodes: %s", a)
	}
	var page struct{ Items []viewNode }
	if err := json.Unmarshal(a.body, &page); err != nil {
		t.Fatal(err)
	}
	out := map[string]viewNode{}
	for _, n := range page.Items {
		out[n.Name] = n
	}
	return out
}

func clusterOf(t *testing.T, api *apiClient) viewCluster {
	t.Helper()
	a := api.do("GET /cluster", "/cluster", nil, "")
	if a.code != http.StatusOK {
		t.Fatalf("GET /cluster: %s", a)
	}
	var ci viewCluster
	if err := json.Unmarshal(a.body, &ci); err != nil {
		t.Fatal(err)
	}
	return ci
}

func isReady(n viewNode) bool { return n.Ready != nil && *n.Ready }

var (
	svcBinOnce sync.Once
	svcBin     string
	svcBinErr  error
)

// builtSvc builds cmd/svc once for the package (the CLI is tested as
// users run it).
func builtSvc(t *testing.T) string {
	t.Helper()
	svcBinOnce.Do(func() {
		dir, err := os.MkdirTemp("", "svc-kubenode-bin-")
		if err != nil {
			svcBinErr = err
			return
		}
		svcBin = filepath.Join(dir, "svc")
		out, err := exec.Command("go", "build", "-o", svcBin, "github.com/svcdns/svc/cmd/svc").CombinedOutput()
		if err != nil {
			svcBinErr = err
			t.Logf("go build: %s", out)
		}
	})
	if svcBinErr != nil {
		t.Fatalf("building svc: %v", svcBinErr)
	}
	t.Cleanup(func() { _ = os.RemoveAll(filepath.Dir(svcBin)) })
	return svcBin
}

// TestClusterViewKube: on Kubernetes, with the chart's RBAC, GET /nodes and
// GET /cluster on one data-plane node show every node (the operator and
// two data-plane nodes) with readiness, role, serial, snapshot age and
// version, the leader (the holder of the operator's Lease) and the epoch
// (its transitions), and the namespace's UID as clusterID; `svc nodes`
// prints them (issue #23 item 8). A node cut from the apiserver is listed
// not ready once its node Lease expires; a stopped node at once, and the
// next operator takes the lead with the epoch one higher.
func TestClusterViewKube(t *testing.T) {
	c := needEnv(t)
	ctx := t.Context()
	opKC, dpKC := installChartRBAC(t, c)
	host := strings.TrimSuffix(strings.TrimPrefix(env.Config.Host, "https://"), "/")
	cut := kubeenv.NewProxy(t, host)

	op := startViewNode(t, "op-view-1", node.RoleOperator, opKC)
	dp1 := startViewNode(t, "dp-view-1", node.RoleDataplane, dpKC)
	startViewNode(t, "dp-view-2", node.RoleDataplane, viaProxy(t, dpKC, cut.Addr))
	t.Cleanup(func() {
		for _, n := range []string{"op-view-1", "op-view-2", "dp-view-1", "dp-view-2"} {
			_ = c.Delete(ctx, &coordinationv1.Lease{ObjectMeta: metav1.ObjectMeta{Namespace: node.DefaultNamespace, Name: "service-node-" + n}})
		}
	})
	api := newAPIClient(t, dp1, chartBootstrapToken)

	start := time.Now()
	var nodes map[string]viewNode
	nodetest.Eventually(t, 20*time.Second, "GET /nodes lists the operator and both data-plane nodes ready, the operator leading", func() bool {
		nodes = nodesOf(t, api)
		for _, n := range []string{"op-view-1", "dp-view-1", "dp-view-2"} {
			if !isReady(nodes[n]) {
				return false
			}
		}
		return nodes["op-view-1"].Leader
	})
	t.Logf("all three listed ready with the leader %s after the nodes started", time.Since(start).Round(time.Millisecond))
	for name, role := range map[string]string{"op-view-1": "operator", "dp-view-1": "dataplane", "dp-view-2": "dataplane"} {
		n := nodes[name]
		if n.Role != role || n.Version == "" || n.SnapshotAgeSeconds == nil {
			t.Errorf("%s = %+v, want role %s, a version and a snapshot age", name, n, role)
		}
		if role == "dataplane" && n.Serial == 0 {
			t.Errorf("%s serial 0, want the store revision of its snapshot", name)
		}
		if name != "dp-view-1" && n.HeartbeatAgeSeconds == nil {
			t.Errorf("%s has no heartbeatAgeSeconds", name)
		}
		if name != "op-view-1" && n.Leader {
			t.Errorf("%s listed as leader", name)
		}
	}

	var lease coordinationv1.Lease
	if err := c.Get(ctx, client.ObjectKey{Namespace: node.DefaultNamespace, Name: "service-operator"}, &lease); err != nil {
		t.Fatal(err)
	}
	var ns corev1.Namespace
	if err := c.Get(ctx, client.ObjectKey{Name: node.DefaultNamespace}, &ns); err != nil {
		t.Fatal(err)
	}
	ci := clusterOf(t, api)
	epoch := int64(*lease.Spec.LeaseTransitions)
	if ci.Driver != "kube" || ci.Leader != "op-view-1" || ci.Epoch != epoch || ci.ClusterID != string(ns.UID) || ci.Node != "dp-view-1" || ci.Nodes < 3 {
		t.Errorf("GET /cluster = %+v, want driver kube, leader op-view-1, epoch %d (the Lease's transitions), clusterID %s, node dp-view-1, nodes >= 3", ci, epoch, ns.UID)
	}

	// node= on the query log: dp-view-1 forwards to dp-view-2 at the
	// internal address its Lease records.
	qa := api.do("GET /queries", "/queries?node=dp-view-2", nil, "")
	if qa.code != http.StatusOK || !strings.Contains(string(qa.body), `"node":"dp-view-2"`) {
		t.Errorf("GET /queries?node=dp-view-2 on dp-view-1 = %s, want dp-view-2's log", qa)
	}
	if n := nodes["dp-view-2"]; n.Address == "" {
		t.Errorf("dp-view-2 listed without its internal address: %+v", n)
	}

	// The built CLI prints the same.
	r := proc.Run(t, []string{"HOME=" + t.TempDir(), "SERVICE_SERVER=https://" + dp1.Addrs.API, "SERVICE_TOKEN=" + chartBootstrapToken},
		"", builtSvc(t), "nodes", "--insecure-skip-tls-verify")
	if r.Code != 0 {
		t.Fatalf("svc nodes: exit %d\n%s%s", r.Code, r.Stdout, r.Stderr)
	}
	t.Logf("svc nodes:\n%s", r.Stdout)
	rows := map[string][]string{}
	for _, l := range strings.Split(r.Stdout, "\n") {
		if f := strings.Fields(l); len(f) > 3 {
			rows[f[0]] = f
		}
	}
	if h := rows["NAME"]; len(h) < 4 || h[1] != "READY" || h[2] != "LEADER" || h[3] != "ROLE" {
		t.Fatalf("svc nodes header = %v", h)
	}
	for name, want := range map[string]string{"op-view-1": "true true operator", "dp-view-1": "true false dataplane", "dp-view-2": "true false dataplane"} {
		if f := rows[name]; len(f) < 4 || strings.Join(f[1:4], " ") != want {
			t.Errorf("svc nodes row %s = %v, want READY LEADER ROLE %s", name, f, want)
		}
	}

	// dp-view-2 loses the apiserver: it cannot renew its Lease, and dp-view-1
	// lists it not ready once the Lease expired.
	cut.Cut()
	cutAt := time.Now()
	nodetest.Eventually(t, 4*viewLease, "dp-view-2 listed not ready after losing the apiserver", func() bool {
		n := nodesOf(t, api)["dp-view-2"]
		return n.Ready != nil && !*n.Ready && strings.Contains(n.Error, "no heartbeat")
	})
	took := time.Since(cutAt)
	t.Logf("dp-view-2 listed not ready %s after the cut (node Lease %s)", took.Round(time.Millisecond), viewLease)
	if n := nodesOf(t, api)["dp-view-1"]; !isReady(n) {
		t.Errorf("dp-view-1 = %+v, want still ready", n)
	}
	cut.Restore(t)
	nodetest.Eventually(t, 30*time.Second, "dp-view-2 ready again once the apiserver is back", func() bool {
		return isReady(nodesOf(t, api)["dp-view-2"])
	})

	// The operator stops: it is listed stopped at once, the Lease released
	// (no leader); the next replica leads with the epoch one higher.
	op.Stop()
	n := nodesOf(t, api)["op-view-1"]
	if n.Ready == nil || *n.Ready || !strings.HasPrefix(n.Error, "stopped at ") {
		t.Errorf("op-view-1 right after its stop = %+v, want not ready, error \"stopped at ...\"", n)
	}
	if ci := clusterOf(t, api); ci.Leader != "" {
		t.Errorf("leader right after the only operator stopped = %q, want none", ci.Leader)
	}
	startViewNode(t, "op-view-2", node.RoleOperator, opKC)
	nodetest.Eventually(t, 15*time.Second, "op-view-2 leads with the next epoch", func() bool {
		ci := clusterOf(t, api)
		return ci.Leader == "op-view-2" && ci.Epoch == epoch+1 && nodesOf(t, api)["op-view-2"].Leader
	})
}
