package kubenode_test

import (
	"context"
	"crypto/tls"
	"encoding/json"
	"fmt"
	"github.com/svcdns/svc/test/kube/kubeenv"
	"io"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/miekg/dns"
	authenticationv1 "k8s.io/api/authentication/v1"
	corev1 "k8s.io/api/core/v1"
	rbacv1 "k8s.io/api/rbac/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/client-go/kubernetes"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/svcdns/svc/internal/node"
	"github.com/svcdns/svc/test/nodetest"
)

func ready(c client.Client, kind, ns, name string) bool {
	u := &unstructured.Unstructured{}
	u.SetGroupVersionKind(schema.GroupVersionKind{Group: "service.io", Version: "v1alpha1", Kind: kind})
	if err := c.Get(context.Background(), client.ObjectKey{Namespace: ns, Name: name}, u); err != nil {
		return false
	}
	conds, _, _ := unstructured.NestedSlice(u.Object, "status", "conditions")
	for _, c := range conds {
		m, _ := c.(map[string]any)
		if m["type"] == "Ready" && m["status"] == "True" {
			return true
		}
	}
	return false
}

func zoneDocs(zone, host, ip string) string {
	return fmt.Sprintf(`apiVersion: service.io/v1alpha1
kind: DNSZone
metadata: {name: %[1]s}
spec:
  defaultTTL: 300
  nameServers: [ns1.%[1]s.]
---
apiVersion: service.io/v1alpha1
kind: DNSRecordSet
metadata: {name: %[1]s-hosts, namespace: default}
spec:
  zoneRef: {name: %[1]s}
  endpoints:
    - {dnsName: %[2]s, recordType: A, targets: [%[3]s]}
`, zone, host, ip)
}

// (a) objects applied as kubectl would are served by a data-plane node and
// get Ready status from an operator node.
func TestApplyServeAndStatus(t *testing.T) {
	c := needEnv(t)
	kc := kubeconfig(t, env.Config, "")
	op := startNode(t, "op-a", node.RoleOperator, kc)
	dp := startNode(t, "dp-a", node.RoleDataplane, kc, "SERVICE_INTERNAL_PEERS="+op.Addrs.Internal)
	if len(op.Addrs.DNS) != 0 || op.Addrs.API != "" {
		t.Fatalf("operator node has DNS %v / API %q listeners", op.Addrs.DNS, op.Addrs.API)
	}
	apply(t, c, zoneDocs("a.test", "www.a.test", "192.0.2.1"))
	nodetest.Eventually(t, 2*time.Second, "data plane answers www.a.test", func() bool { return dp.answersA("www.a.test", "192.0.2.1") })
	nodetest.Eventually(t, 30*time.Second, "operator writes Ready", func() bool {
		return ready(c, "DNSZone", "", "a.test") && ready(c, "DNSRecordSet", "default", "a.test-hosts")
	})
	if !dp.Ready() {
		t.Fatal("data plane not ready")
	}
}

// (b) two operators and two data planes: the lease moves when the leader
// stops; only the leader fetches a list URL; both data planes block.
func TestLeaderFetchesFollowersCopy(t *testing.T) {
	c := needEnv(t)
	kc := kubeconfig(t, env.Config, "")
	var hits atomic.Int32
	lists := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, _ *http.Request) {
		hits.Add(1)
		fmt.Fprintln(w, "blocked.example")
		fmt.Fprintln(w, "||ads.example^")
	}))
	defer lists.Close()

	ops := []*testNode{startNode(t, "op-1", node.RoleOperator, kc), startNode(t, "op-2", node.RoleOperator, kc)}
	peers := "SERVICE_INTERNAL_PEERS=" + ops[0].Addrs.Internal + "," + ops[1].Addrs.Internal
	dps := []*testNode{startNode(t, "dp-1", node.RoleDataplane, kc, peers), startNode(t, "dp-2", node.RoleDataplane, kc, peers)}

	leader := -1
	nodetest.Eventually(t, 40*time.Second, "an operator is elected", func() bool {
		for i, o := range ops {
			if o.Log.Contains("operator: elected leader") {
				leader = i
				return true
			}
		}
		return false
	})
	cs := kubernetes.NewForConfigOrDie(env.Config)
	lease, err := cs.CoordinationV1().Leases(node.DefaultNamespace).Get(t.Context(), "service-operator", metav1.GetOptions{})
	if err != nil {
		t.Fatal(err)
	}
	holder := *lease.Spec.HolderIdentity
	ops[leader].Stop()
	other := ops[1-leader]
	nodetest.Eventually(t, 30*time.Second, "the lease moves to the other operator", func() bool {
		l, err := cs.CoordinationV1().Leases(node.DefaultNamespace).Get(t.Context(), "service-operator", metav1.GetOptions{})
		return err == nil && l.Spec.HolderIdentity != nil && *l.Spec.HolderIdentity != holder && other.Log.Contains("operator: elected leader")
	})

	apply(t, c, fmt.Sprintf(`apiVersion: service.io/v1alpha1
kind: BlockList
metadata: {name: remote, namespace: default}
spec:
  sources:
    - name: web
      url: %s/list.txt
---
apiVersion: service.io/v1alpha1
kind: ClientGroup
metadata: {name: everyone-local, namespace: default}
spec:
  addresses: [127.0.0.0/8]
---
apiVersion: service.io/v1alpha1
kind: Policy
metadata: {name: home, namespace: default}
spec:
  clientGroupRefs: [everyone-local]
  blockListRefs: [remote]
  blockMode: nxdomain
  blockTTL: 1m
`, lists.URL))
	for _, dp := range dps {
		nodetest.Eventually(t, 30*time.Second, dp.Name+" blocks blocked.example", func() bool {
			return dp.rcode("blocked.example") == dns.RcodeNameError && dp.rcode("x.ads.example") == dns.RcodeNameError
		})
		if !dp.Log.Contains("list body copied from peer") {
			t.Errorf("%s did not copy the body from a peer", dp.Name)
		}
	}
	time.Sleep(time.Second)
	if n := hits.Load(); n != 1 {
		t.Fatalf("list URL fetched %d times, want once (by the leader only)", n)
	}
}

// (c) the apiserver cut: DNS keeps answering; past maxAge the node is not
// ready and primary zones answer SERVFAIL; it recovers without restart.
func TestAPIServerOutage(t *testing.T) {
	c := needEnv(t)
	host := strings.TrimSuffix(strings.TrimPrefix(env.Config.Host, "https://"), "/")
	p := kubeenv.NewProxy(t, host)
	dp := startNode(t, "dp-c", node.RoleDataplane, kubeconfig(t, env.Config, "https://"+p.Addr))
	apply(t, c, zoneDocs("c.test", "www.c.test", "192.0.2.3"))
	nodetest.Eventually(t, 5*time.Second, "answers www.c.test", func() bool { return dp.answersA("www.c.test", "192.0.2.3") })
	nodetest.Eventually(t, 5*time.Second, "ready", dp.Ready)

	p.Cut()
	cutAt := time.Now()
	if !dp.answersA("www.c.test", "192.0.2.3") {
		t.Fatal("no answer right after the cut")
	}
	nodetest.Eventually(t, 15*time.Second, "not ready and SERVFAIL past maxAge", func() bool {
		return !dp.Ready() && dp.rcode("www.c.test") == dns.RcodeServerFailure
	})
	if d := time.Since(cutAt); d < 2*time.Second {
		t.Fatalf("stale after %s, before maxAge 3s", d)
	}
	p.Restore(t)
	nodetest.Eventually(t, 60*time.Second, "recovers after the apiserver returns", func() bool {
		return dp.Ready() && dp.answersA("www.c.test", "192.0.2.3")
	})
}

// (d) a ServiceAccount token (audience service) authenticates to the API;
// SubjectAccessReview authorizes it: 403 without a binding, 200 with one.
func TestServiceAccountTokenAPI(t *testing.T) {
	c := needEnv(t)
	ctx := t.Context()
	cs := kubernetes.NewForConfigOrDie(env.Config)
	dp := startNode(t, "dp-d", node.RoleDataplane, kubeconfig(t, env.Config, ""))
	apply(t, c, zoneDocs("d.test", "www.d.test", "192.0.2.4"))
	nodetest.Eventually(t, 5*time.Second, "answers www.d.test", func() bool { return dp.answersA("www.d.test", "192.0.2.4") })

	if _, err := cs.CoreV1().ServiceAccounts("team").Create(ctx, &corev1.ServiceAccount{ObjectMeta: metav1.ObjectMeta{Name: "exporter"}}, metav1.CreateOptions{}); err != nil && !apierrors.IsAlreadyExists(err) {
		t.Fatal(err)
	}
	tr, err := cs.CoreV1().ServiceAccounts("team").CreateToken(ctx, "exporter", &authenticationv1.TokenRequest{
		Spec: authenticationv1.TokenRequestSpec{Audiences: []string{"service"}},
	}, metav1.CreateOptions{})
	if err != nil {
		t.Fatal(err)
	}
	if code := apiGet(t, dp, tr.Status.Token); code != http.StatusForbidden {
		t.Fatalf("token without a role binding: %d, want 403", code)
	}
	if code := apiGet(t, dp, tr.Status.Token[:len(tr.Status.Token)-4]+"AAAA"); code != http.StatusUnauthorized {
		t.Fatalf("tampered token: %d, want 401", code)
	}
	if _, err := cs.RbacV1().ClusterRoles().Create(ctx, &rbacv1.ClusterRole{
		ObjectMeta: metav1.ObjectMeta{Name: "service-records-read"},
		Rules: []rbacv1.PolicyRule{
			{APIGroups: []string{"service.io"}, Resources: []string{"records"}, Verbs: []string{"read", "write"}},
			{APIGroups: []string{"service.io"}, Resources: []string{"audit"}, Verbs: []string{"read"}},
		},
	}, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	if _, err := cs.RbacV1().ClusterRoleBindings().Create(ctx, &rbacv1.ClusterRoleBinding{
		ObjectMeta: metav1.ObjectMeta{Name: "exporter-records-read"},
		RoleRef:    rbacv1.RoleRef{APIGroup: "rbac.authorization.k8s.io", Kind: "ClusterRole", Name: "service-records-read"},
		Subjects:   []rbacv1.Subject{{Kind: "ServiceAccount", Namespace: "team", Name: "exporter"}},
	}, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	// a denial is cached for 30 s (spec); a fresh node sees the binding at once
	dp2 := startNode(t, "dp-d2", node.RoleDataplane, kubeconfig(t, env.Config, ""))
	nodetest.Eventually(t, 20*time.Second, "bound service account allowed", func() bool { return apiGet(t, dp2, tr.Status.Token) == http.StatusOK })

	// A write it is allowed by SubjectAccessReview lands in the audit trail
	// with the decision path "sar" and the service account as the actor.
	code, _ := apiDo(t, dp2, tr.Status.Token, http.MethodDelete, "/zones/d.test/records?name=gone.d.test&type=A")
	if code == http.StatusForbidden || code == http.StatusUnauthorized {
		t.Fatalf("records write through SAR: %d", code)
	}
	code, body := apiDo(t, dp2, tr.Status.Token, http.MethodGet, "/audit")
	if code != http.StatusOK {
		t.Fatalf("audit read: %d %s", code, body)
	}
	var page struct {
		Items []struct {
			Method, Path, Decision string
			Actor                  struct{ Kind, Name, Auth string }
		}
	}
	if err := json.Unmarshal(body, &page); err != nil {
		t.Fatal(err)
	}
	found := false
	for _, e := range page.Items {
		if e.Method == http.MethodDelete && e.Path == "/zones/{zone}/records" {
			found = true
			if e.Decision != "sar" || !strings.Contains(e.Actor.Name, "exporter") {
				t.Fatalf("audit event %+v, want decision sar by the exporter service account", e)
			}
		}
	}
	if !found {
		t.Fatalf("no audit event for the write: %s", body)
	}
}

// apiDo sends one request under /api/v1 with the bearer token.
func apiDo(t *testing.T, tn *testNode, token, method, path string) (int, []byte) {
	t.Helper()
	hc := &http.Client{Timeout: 10 * time.Second, Transport: &http.Transport{TLSClientConfig: &tls.Config{InsecureSkipVerify: true}}}
	req, _ := http.NewRequest(method, "https://"+tn.Addrs.API+"/api/v1"+path, nil)
	req.Header.Set("Authorization", "Bearer "+token)
	resp, err := hc.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	b, _ := io.ReadAll(io.LimitReader(resp.Body, 1<<20))
	return resp.StatusCode, b
}

// apiGet exports zone d.test with the bearer token.
func apiGet(t *testing.T, tn *testNode, token string) int {
	t.Helper()
	hc := &http.Client{Timeout: 10 * time.Second, Transport: &http.Transport{TLSClientConfig: &tls.Config{InsecureSkipVerify: true}}}
	req, _ := http.NewRequest(http.MethodGet, "https://"+tn.Addrs.API+"/api/v1/zones/d.test/export", nil)
	req.Header.Set("Authorization", "Bearer "+token)
	resp, err := hc.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	resp.Body.Close()
	return resp.StatusCode
}
