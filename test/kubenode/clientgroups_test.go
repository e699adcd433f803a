package kubenode_test

import (
	"context"
	"encoding/json"
	"net"
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/miekg/dns"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/client-go/kubernetes"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/svcdns/svc/internal/api"
	"github.com/svcdns/svc/internal/node"
	"github.com/svcdns/svc/test/nodetest"
)

// blockedFrom asks the node over UDP from a loopback source address and
// reports whether the answer is the block answer (zeroIP: A 0.0.0.0).
func (tn *testNode) blockedFrom(from net.IP, name string) bool {
	c := &dns.Client{Net: "udp", Timeout: time.Second, Dialer: &net.Dialer{LocalAddr: &net.UDPAddr{IP: from}, Timeout: time.Second}}
	m := new(dns.Msg)
	m.SetQuestion(dns.Fqdn(name), dns.TypeA)
	r, _, err := c.Exchange(m, tn.DNSAddr("udp"))
	if err != nil {
		return false
	}
	for _, rr := range r.Answer {
		if a, ok := rr.(*dns.A); ok && a.A.IsUnspecified() {
			return true
		}
	}
	return false
}

// groupStatus reads status of a ClientGroup from the apiserver.
func groupStatus(c client.Client, ns, name string) map[string]any {
	u := &unstructured.Unstructured{}
	u.SetGroupVersionKind(schema.GroupVersionKind{Group: "service.io", Version: "v1alpha1", Kind: "ClientGroup"})
	if err := c.Get(context.Background(), client.ObjectKey{Namespace: ns, Name: name}, u); err != nil {
		return nil
	}
	st, _, _ := unstructured.NestedMap(u.Object, "status")
	return st
}

// TestClientGroupStatusAndGroupEntries on a real apiserver: the operator
// writes ClientGroup status (members, selecting policies, Ready,
// Referenced) and a Normal Event when a policy starts selecting a group;
// an entry added through POST /entries for one group is blocked for that
// group's client address and not for another group's, on the data plane.
func TestClientGroupStatusAndGroupEntries(t *testing.T) {
	c := needEnv(t)
	cs := kubernetes.NewForConfigOrDie(env.Config)
	ns := node.DefaultNamespace
	kc := kubeconfig(t, env.Config, "")
	startNode(t, "kge-op", node.RoleOperator, kc)
	dp := startNode(t, "kge-dp", node.RoleDataplane, kc)
	deleteObjects(t, c, [3]string{"ClientGroup", ns, "kge-kids"}, [3]string{"ClientGroup", ns, "kge-adults"},
		[3]string{"Policy", ns, "kge-school"}, [3]string{"BlockList", ns, "kge-deny"})
	apply(t, c, `apiVersion: service.io/v1alpha1
kind: ClientGroup
metadata: {name: kge-kids, namespace: `+ns+`}
spec:
  addresses: [127.0.0.2/32]
  names: [kid-laptop]
---
apiVersion: service.io/v1alpha1
kind: ClientGroup
metadata: {name: kge-adults, namespace: `+ns+`}
spec:
  addresses: [127.0.0.3/32]
`)
	nodetest.Eventually(t, 30*time.Second, "kge-adults Referenced=False NoPolicy", func() bool {
		s, r, _ := condition(c, "ClientGroup", ns, "kge-adults", "Referenced")
		return s == "False" && r == "NoPolicy"
	})
	apply(t, c, `apiVersion: service.io/v1alpha1
kind: Policy
metadata: {name: kge-school, namespace: `+ns+`}
spec:
  clientGroupRefs: [kge-kids]
`)
	start := time.Now()
	nodetest.Eventually(t, 30*time.Second, "kge-kids selected by kge-school in status", func() bool {
		s, r, _ := condition(c, "ClientGroup", ns, "kge-kids", "Referenced")
		return s == "True" && r == "SelectedByPolicies"
	})
	t.Logf("ClientGroup status followed the new Policy after %v", time.Since(start).Round(time.Millisecond))
	st := groupStatus(c, ns, "kge-kids")
	if st["members"] != int64(2) || st["addresses"] != int64(1) || st["names"] != int64(1) {
		t.Errorf("kge-kids status counts: %v", st)
	}
	if pols, _ := st["policies"].([]any); len(pols) != 1 || pols[0] != ns+"/kge-school" {
		t.Errorf("kge-kids status.policies: %v", st["policies"])
	}
	if s, r, msg := condition(c, "ClientGroup", ns, "kge-kids", "Ready"); s != "True" || r != "MembersValid" || msg != "2 members" {
		t.Errorf("kge-kids Ready: %s %s %s", s, r, msg)
	}
	nodetest.Eventually(t, 20*time.Second, "a Normal Event on kge-kids", func() bool {
		return hasEvent(eventsFor(t, cs, "ClientGroup", ns, "kge-kids"), "Normal", "SelectedByPolicies")
	})

	// An entry for kge-kids only, through the data plane's API.
	body, _ := json.Marshal(map[string]any{"action": "block", "namespace": ns, "list": "kge-deny",
		"values": []string{"games.kge.example"}, "groups": []string{"kge-kids"}})
	if code, b := adminPost(t, dp, "/api/v1/entries", "application/json", string(body)); code != http.StatusCreated {
		t.Fatalf("POST /entries: %d %s", code, b)
	}
	kids, adults := net.IPv4(127, 0, 0, 2), net.IPv4(127, 0, 0, 3)
	start = time.Now()
	nodetest.Eventually(t, 30*time.Second, "games.kge.example blocked for 127.0.0.2 (kge-kids)", func() bool {
		return dp.blockedFrom(kids, "games.kge.example")
	})
	t.Logf("group entry enforced %v after POST /entries", time.Since(start).Round(time.Millisecond))
	for range 3 {
		if dp.blockedFrom(adults, "games.kge.example") {
			t.Fatal("games.kge.example is blocked for 127.0.0.3 (kge-adults): the entry is for kge-kids only")
		}
	}
	code, b := adminGet(t, dp, "/api/v1/entries?action=block&list=kge-deny&namespace="+ns)
	var de api.DomainEntries
	if err := json.Unmarshal(b, &de); code != http.StatusOK || err != nil || len(de.Items) != 1 ||
		strings.Join(de.Items[0].Groups, ",") != ns+"/kge-kids" || len(de.Lists) != 1 || de.Lists[0].Action != "block" {
		t.Errorf("GET /entries: %d %s", code, b)
	}
	// An unknown group is refused with the fix.
	body, _ = json.Marshal(map[string]any{"action": "block", "namespace": ns, "list": "kge-deny", "values": []string{"x.kge.example"}, "groups": []string{"kge-kid"}})
	if code, b := adminPost(t, dp, "/api/v1/entries", "application/json", string(body)); code != http.StatusBadRequest || !strings.Contains(string(b), "kge-kids") {
		t.Errorf("unknown group: %d %s", code, b)
	}
}
