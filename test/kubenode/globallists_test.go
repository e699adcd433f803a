package kubenode_test

import (
	"strings"
	"testing"
	"time"

	"github.com/miekg/dns"

	"github.com/svcdns/svc/internal/node"
	"github.com/svcdns/svc/test/nodetest"
)

// TestPolicyGlobalListsKube: the global list rule of issue 18 on a real
// apiserver. A team's global list reaches the clients of the team's own
// policy (before: a matched client got its policy's lists only); a policy
// excluding a list that is not global is Degraded NotGlobalList from the
// operator; when the list turns global the exclusion takes effect and the
// condition clears, without touching the policy.
func TestPolicyGlobalListsKube(t *testing.T) {
	c := needEnv(t)
	kc := kubeconfig(t, env.Config, "")
	startNode(t, "gl-op", node.RoleOperator, kc)
	dp := startNode(t, "gl-dp", node.RoleDataplane, kc)
	deleteObjects(t, c, [3]string{"Policy", "team", "gl-home"}, [3]string{"ClientGroup", "team", "gl-local"},
		[3]string{"BlockList", "team", "gl-ads"}, [3]string{"BlockList", "team", "gl-private"})
	list := func(name, extra string) string {
		return `apiVersion: service.io/v1alpha1
kind: BlockList
metadata: {name: ` + name + `, namespace: team}
spec:
  response: nxdomain
` + extra + `  sources:
    - {name: s, inline: ["||` + name + `.example^"]}
`
	}
	apply(t, c, list("gl-ads", "")+"---\n"+list("gl-private", "  global: false\n")+`---
apiVersion: service.io/v1alpha1
kind: ClientGroup
metadata: {name: gl-local, namespace: team}
spec:
  addresses: [127.0.0.0/8]
---
apiVersion: service.io/v1alpha1
kind: Policy
metadata: {name: gl-home, namespace: team}
spec:
  clientGroupRefs: [gl-local]
  excludeListRefs: [gl-private]
`)
	nodetest.Eventually(t, 30*time.Second, "the team's global list blocks for its policy's clients", func() bool {
		return dp.rcode("x.gl-ads.example") == dns.RcodeNameError
	})
	if rc := dp.rcode("x.gl-private.example"); rc == dns.RcodeNameError {
		t.Fatal("a global: false list no policy names blocks")
	}
	nodetest.Eventually(t, 30*time.Second, "Degraded NotGlobalList naming the list", func() bool {
		s, r, msg := condition(c, "Policy", "team", "gl-home", "Degraded")
		return s == "True" && r == "NotGlobalList" && strings.Contains(msg, "team/gl-private")
	})
	if s, _, _ := condition(c, "Policy", "team", "gl-home", "Ready"); s != "True" {
		t.Errorf("Ready %s, want True (the rest of the policy applies)", s)
	}
	// the list turns global: the policy opts out of it, and the condition clears
	apply(t, c, list("gl-private", "  global: true\n"))
	nodetest.Eventually(t, 30*time.Second, "Degraded cleared once the list is global", func() bool {
		s, r, _ := condition(c, "Policy", "team", "gl-home", "Degraded")
		return s == "False" && r == "AsExpected"
	})
	if rc := dp.rcode("y.gl-private.example"); rc == dns.RcodeNameError {
		t.Fatal("the policy's clients get a global list it excludes")
	}
}
