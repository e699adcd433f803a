package kubenode_test

import (
	"context"
	"encoding/json"
	"net"
	"net/http"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/miekg/dns"
	eventsv1 "k8s.io/api/events/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/client-go/kubernetes"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/svcdns/svc/internal/node"
	"github.com/svcdns/svc/test/nodetest"
)

// condition is status.conditions[type] of an object: status, reason, message.
func condition(c client.Client, kind, ns, name, typ string) (string, string, string) {
	u := &unstructured.Unstructured{}
	u.SetGroupVersionKind(schema.GroupVersionKind{Group: "service.io", Version: "v1alpha1", Kind: kind})
	if err := c.Get(context.Background(), client.ObjectKey{Namespace: ns, Name: name}, u); err != nil {
		return "", "", ""
	}
	conds, _, _ := unstructured.NestedSlice(u.Object, "status", "conditions")
	for _, x := range conds {
		m, _ := x.(map[string]any)
		if m["type"] == typ {
			s, _ := m["status"].(string)
			r, _ := m["reason"].(string)
			msg, _ := m["message"].(string)
			return s, r, msg
		}
	}
	return "", "", ""
}

// eventsFor are the events.k8s.io Events regarding kind ns/name.
func eventsFor(t *testing.T, cs kubernetes.Interface, kind, ns, name string) []eventsv1.Event {
	t.Helper()
	evs, err := cs.EventsV1().Events(ns).List(context.Background(), metav1.ListOptions{})
	if err != nil {
		t.Logf("list events: %v", err)
		return nil
	}
	var out []eventsv1.Event
	for _, e := range evs.Items {
		if e.Regarding.Kind == kind && e.Regarding.Name == name {
			out = append(out, e)
		}
	}
	return out
}

func hasEvent(evs []eventsv1.Event, typ, reason string) bool {
	for _, e := range evs {
		if e.Type == typ && e.Reason == reason {
			return true
		}
	}
	return false
}

func deleteObjects(t *testing.T, c client.Client, objs ...[3]string) {
	t.Cleanup(func() {
		for _, o := range objs {
			u := &unstructured.Unstructured{}
			u.SetGroupVersionKind(schema.GroupVersionKind{Group: "service.io", Version: "v1alpha1", Kind: o[0]})
			u.SetNamespace(o[1])
			u.SetName(o[2])
			if err := c.Delete(context.Background(), u); client.IgnoreNotFound(err) != nil {
				t.Errorf("delete %v: %v", o, err)
			}
		}
	})
}

// TestPolicyTenancy: the takeover of issue 17 on a real apiserver. A
// tenant's Policy with empty clientGroupRefs (every client) at priority
// 1000, and one selecting another namespace's ClientGroup, are refused:
// not served, Ready=False with the reason, and a Warning Event. The
// service's own namespace keeps global policies.
func TestPolicyTenancy(t *testing.T) {
	c := needEnv(t)
	cs := kubernetes.NewForConfigOrDie(env.Config)
	if err := env.Namespaces(t.Context(), "intruder"); err != nil {
		t.Fatal(err)
	}
	kc := kubeconfig(t, env.Config, "")
	startNode(t, "ten-op", node.RoleOperator, kc)
	dp := startNode(t, "ten-dp", node.RoleDataplane, kc)
	deleteObjects(t, c,
		[3]string{"Policy", "team", "ten-home"}, [3]string{"ClientGroup", "team", "ten-local"},
		[3]string{"Policy", "intruder", "takeover"}, [3]string{"Policy", "intruder", "steal"},
		[3]string{"Policy", node.DefaultNamespace, "ten-platform"})

	apply(t, c, `apiVersion: service.io/v1alpha1
kind: ClientGroup
metadata: {name: ten-local, namespace: team}
spec:
  addresses: [127.0.0.0/8]
---
apiVersion: service.io/v1alpha1
kind: Policy
metadata: {name: ten-home, namespace: team}
spec:
  priority: 100
  clientGroupRefs: [ten-local]
  rewrites:
    - {name: bank.example.com, targets: [192.0.2.10]}
---
apiVersion: service.io/v1alpha1
kind: Policy
metadata: {name: takeover, namespace: intruder}
spec:
  priority: 1000
  rewrites:
    - {name: bank.example.com, targets: [203.0.113.66]}
---
apiVersion: service.io/v1alpha1
kind: Policy
metadata: {name: steal, namespace: intruder}
spec:
  priority: 900
  clientGroupRefs: [team/ten-local]
  rewrites:
    - {name: bank.example.com, targets: [203.0.113.67]}
---
apiVersion: service.io/v1alpha1
kind: Policy
metadata: {name: ten-platform, namespace: `+node.DefaultNamespace+`}
spec:
  priority: 1
  rewrites:
    - {name: intranet.example.com, targets: [192.0.2.80]}
`)
	nodetest.Eventually(t, 30*time.Second, "refusals in Policy status", func() bool {
		s1, r1, _ := condition(c, "Policy", "intruder", "takeover", "Ready")
		s2, r2, _ := condition(c, "Policy", "intruder", "steal", "Ready")
		return s1 == "False" && r1 == "GlobalPolicyNotAllowed" && s2 == "False" && r2 == "ForeignClientGroup"
	})
	_, _, msg := condition(c, "Policy", "intruder", "takeover", "Ready")
	if !strings.Contains(msg, "blocking.globalPolicyNamespaces") || !strings.Contains(msg, node.DefaultNamespace) {
		t.Errorf("takeover message does not say how to fix it: %s", msg)
	}
	_, _, msg = condition(c, "Policy", "intruder", "steal", "Ready")
	if !strings.Contains(msg, "team/ten-local") {
		t.Errorf("steal message does not name the foreign group: %s", msg)
	}
	nodetest.Eventually(t, 30*time.Second, "the platform's global policy and the team's policy are Ready", func() bool {
		return ready(c, "Policy", node.DefaultNamespace, "ten-platform") && ready(c, "Policy", "team", "ten-home")
	})
	nodetest.Eventually(t, 20*time.Second, "Warning Events on the refused policies", func() bool {
		return hasEvent(eventsFor(t, cs, "Policy", "intruder", "takeover"), "Warning", "GlobalPolicyNotAllowed") &&
			hasEvent(eventsFor(t, cs, "Policy", "intruder", "steal"), "Warning", "ForeignClientGroup")
	})
	// the data plane serves the team's rewrite, never the intruder's
	nodetest.Eventually(t, 20*time.Second, "team rewrite served", func() bool { return dp.answersA("bank.example.com", "192.0.2.10") })
	for range 5 {
		if dp.answersA("bank.example.com", "203.0.113.66") || dp.answersA("bank.example.com", "203.0.113.67") {
			t.Fatal("the intruder's rewrite is served")
		}
	}
	code, body := adminGet(t, dp, "/api/v1/policies/intruder/takeover/state")
	if code != http.StatusOK || !strings.Contains(string(body), "GlobalPolicyNotAllowed") || !strings.Contains(string(body), `"effective":false`) {
		t.Errorf("state of the refused policy: %d %s", code, body)
	}
}

// TestPolicyDanglingRefs: a Policy naming a BlockList and a ClientGroup that
// do not exist is Ready=False naming them (the data plane's compile), with
// a Warning Event; creating them makes it Ready with a Normal Event,
// without touching the Policy.
func TestPolicyDanglingRefs(t *testing.T) {
	c := needEnv(t)
	cs := kubernetes.NewForConfigOrDie(env.Config)
	kc := kubeconfig(t, env.Config, "")
	startNode(t, "dang-op", node.RoleOperator, kc)
	deleteObjects(t, c, [3]string{"Policy", "team", "dangling"}, [3]string{"ClientGroup", "team", "dang-kids"},
		[3]string{"BlockList", "team", "dang-list"})
	apply(t, c, `apiVersion: service.io/v1alpha1
kind: Policy
metadata: {name: dangling, namespace: team}
spec:
  clientGroupRefs: [dang-kids]
  blockListRefs: [dang-list]
`)
	nodetest.Eventually(t, 30*time.Second, "Ready=False naming the missing refs", func() bool {
		s, r, msg := condition(c, "Policy", "team", "dangling", "Ready")
		return s == "False" && (r == "UnknownClientGroup" || r == "UnknownList") &&
			strings.Contains(msg, "team/dang-kids") && strings.Contains(msg, "team/dang-list")
	})
	nodetest.Eventually(t, 20*time.Second, "a Warning Event on the policy", func() bool {
		evs := eventsFor(t, cs, "Policy", "team", "dangling")
		return hasEvent(evs, "Warning", "UnknownClientGroup") || hasEvent(evs, "Warning", "UnknownList")
	})
	apply(t, c, `apiVersion: service.io/v1alpha1
kind: ClientGroup
metadata: {name: dang-kids, namespace: team}
spec:
  addresses: [192.0.2.0/24]
---
apiVersion: service.io/v1alpha1
kind: BlockList
metadata: {name: dang-list, namespace: team}
spec:
  sources:
    - {name: s, inline: ["||dang.example^"]}
`)
	nodetest.Eventually(t, 30*time.Second, "Ready once the refs exist", func() bool { return ready(c, "Policy", "team", "dangling") })
	nodetest.Eventually(t, 20*time.Second, "a Normal Event on recovery", func() bool {
		return hasEvent(eventsFor(t, cs, "Policy", "team", "dangling"), "Normal", "Accepted")
	})
}

// TestBlockListTenancyAndEvents: a BlockList in namespace intruder naming a
// ConfigMap of kube-system is refused (status reason, Warning Event) and
// nothing of the ConfigMap is served or shown by the entries API; a
// BlockList with an unreachable URL is Ready=False with one Warning Event.
func TestBlockListTenancyAndEvents(t *testing.T) {
	c := needEnv(t)
	cs := kubernetes.NewForConfigOrDie(env.Config)
	if err := env.Namespaces(t.Context(), "intruder"); err != nil {
		t.Fatal(err)
	}
	kc := kubeconfig(t, env.Config, "")
	startNode(t, "bl-op", node.RoleOperator, kc)
	dp := startNode(t, "bl-dp", node.RoleDataplane, kc)
	deleteObjects(t, c, [3]string{"BlockList", "intruder", "peek"}, [3]string{"BlockList", "team", "dead-url"})
	t.Cleanup(func() {
		_ = cs.CoreV1().ConfigMaps("kube-system").Delete(context.Background(), "private-hosts", metav1.DeleteOptions{})
	})
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	dead := "http://" + l.Addr().String() + "/list.txt"
	l.Close() // nothing listens there any more

	apply(t, c, `apiVersion: v1
kind: ConfigMap
metadata: {name: private-hosts, namespace: kube-system}
data:
  hosts: "secret-db.internal.example"
---
apiVersion: service.io/v1alpha1
kind: BlockList
metadata: {name: peek, namespace: intruder}
spec:
  response: nxdomain
  sources:
    - name: private
      configMapRef: {name: private-hosts, namespace: kube-system}
---
apiVersion: service.io/v1alpha1
kind: BlockList
metadata: {name: dead-url, namespace: team}
spec:
  sources:
    - {name: remote, url: "`+dead+`"}
`)
	nodetest.Eventually(t, 30*time.Second, "peek refused in status", func() bool {
		s, r, msg := condition(c, "BlockList", "intruder", "peek", "Ready")
		return s == "False" && r == "ConfigMapNamespaceNotAllowed" && strings.Contains(msg, "own namespace only")
	})
	if d := sourceDigest(c, "intruder", "peek", "private"); d != "" {
		t.Errorf("status carries a digest of kube-system's ConfigMap: %s", d)
	}
	nodetest.Eventually(t, 30*time.Second, "dead-url Ready=False", func() bool {
		s, r, _ := condition(c, "BlockList", "team", "dead-url", "Ready")
		return s == "False" && r == "SourceFailed"
	})
	nodetest.Eventually(t, 20*time.Second, "Warning Events on both lists", func() bool {
		return hasEvent(eventsFor(t, cs, "BlockList", "intruder", "peek"), "Warning", "ConfigMapNamespaceNotAllowed") &&
			hasEvent(eventsFor(t, cs, "BlockList", "team", "dead-url"), "Warning", "SourceFailed")
	})
	// status writes trigger more reconciles; none may repeat the Event
	time.Sleep(2 * time.Second)
	for _, e := range eventsFor(t, cs, "BlockList", "team", "dead-url") {
		if e.Series != nil && e.Series.Count > 1 {
			t.Errorf("event %s repeated %d times", e.Reason, e.Series.Count)
		}
	}

	// the entries view of the data plane shows nothing of the ConfigMap
	code, body := adminGet(t, dp, "/api/v1/blocklists/intruder/peek/sources/private/entries")
	var page struct {
		Items      []struct{ Value string }
		RulesKnown bool
	}
	if err := json.Unmarshal(body, &page); err != nil || code != http.StatusOK {
		t.Fatalf("entries: %d %s %v", code, body, err)
	}
	if page.RulesKnown || strings.Contains(string(body), "secret-db") {
		t.Fatalf("entries API shows kube-system's ConfigMap: %s", body)
	}
	// and the (unreferenced, so global) list blocks nothing it would have read
	if rc := dp.rcode("secret-db.internal.example"); rc == dns.RcodeNameError {
		t.Fatal("the data plane serves rules read from kube-system's ConfigMap")
	}
}

// objectCondition reads status.conditions[typ] of a namespaced object
// through the node's REST API (GET /api/v1/objects/{plural}/{ns}/{name}).
func objectCondition(t *testing.T, n *testNode, plural, ns, name, typ string) (string, string) {
	t.Helper()
	code, body := adminGet(t, n, "/api/v1/objects/"+plural+"/"+ns+"/"+name)
	if code != http.StatusOK {
		return "", ""
	}
	var o struct {
		Status struct {
			Conditions []struct{ Type, Status, Reason string }
		}
	}
	if err := json.Unmarshal(body, &o); err != nil {
		t.Fatalf("decode %s: %v", body, err)
	}
	for _, c := range o.Status.Conditions {
		if c.Type == typ {
			return c.Status, c.Reason
		}
	}
	return "", ""
}

// TestPolicyTenancySQLite: the same rules with the sqlite store, where
// "default" (the namespace of objects applied without one) keeps global
// policies: a policy of another namespace with empty clientGroupRefs is
// refused, a configMapRef to another namespace is refused, and a dangling
// reference turns Ready when the list and group appear.
func TestPolicyTenancySQLite(t *testing.T) {
	n := &testNode{nodetest.Start(t, nodetest.Name("ten-sqlite"), nodetest.Objects(map[string]string{"a.yaml": `apiVersion: service.io/v1alpha1
kind: Policy
metadata: {name: takeover, namespace: intruder}
spec:
  priority: 1000
  rewrites:
    - {name: bank.example.com, targets: [203.0.113.66]}
---
apiVersion: service.io/v1alpha1
kind: Policy
metadata: {name: home, namespace: default}
spec:
  priority: 1
  rewrites:
    - {name: bank.example.com, targets: [192.0.2.10]}
---
apiVersion: service.io/v1alpha1
kind: Policy
metadata: {name: dangling, namespace: default}
spec:
  priority: 0
  clientGroupRefs: [dkids]
  blockListRefs: [dlist]
---
apiVersion: service.io/v1alpha1
kind: BlockList
metadata: {name: peek, namespace: intruder}
spec:
  sources:
    - name: private
      configMapRef: {name: private-hosts, namespace: kube-system}
`}))}
	nodetest.Eventually(t, 20*time.Second, "statuses", func() bool {
		s1, r1 := objectCondition(t, n, "policies", "intruder", "takeover", "Ready")
		s2, r2 := objectCondition(t, n, "policies", "default", "dangling", "Ready")
		s3, r3 := objectCondition(t, n, "blocklists", "intruder", "peek", "Ready")
		s4, _ := objectCondition(t, n, "policies", "default", "home", "Ready")
		return s1 == "False" && r1 == "GlobalPolicyNotAllowed" && s2 == "False" && (r2 == "UnknownClientGroup" || r2 == "UnknownList") &&
			s3 == "False" && r3 == "ConfigMapNamespaceNotAllowed" && s4 == "True"
	})
	nodetest.Eventually(t, 10*time.Second, "the default namespace's global policy is served", func() bool {
		return n.answersA("bank.example.com", "192.0.2.10")
	})
	if n.answersA("bank.example.com", "203.0.113.66") {
		t.Fatal("the intruder's rewrite is served")
	}
	if err := os.WriteFile(filepath.Join(n.ObjectsDir, "b.yaml"), []byte(`apiVersion: service.io/v1alpha1
kind: ClientGroup
metadata: {name: dkids, namespace: default}
spec:
  addresses: [192.0.2.0/24]
---
apiVersion: service.io/v1alpha1
kind: BlockList
metadata: {name: dlist, namespace: default}
spec:
  sources:
    - {name: s, inline: ["||dlist.example^"]}
`), 0o644); err != nil {
		t.Fatal(err)
	}
	nodetest.Eventually(t, 20*time.Second, "dangling turns Ready once the list and group exist", func() bool {
		s, _ := objectCondition(t, n, "policies", "default", "dangling", "Ready")
		return s == "True"
	})
}
