// Package kubenode_test runs whole nodes (node.Run in process) against a
// real apiserver (envtest): the kube store driver, the operator and data-plane
// roles, list bodies copied by digest, outages and ServiceAccount tokens.
package kubenode_test

import (
	"context"
	"fmt"
	"os"
	"testing"
	"time"

	"github.com/miekg/dns"
	"k8s.io/client-go/rest"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/svcdns/svc/internal/node"
	"github.com/svcdns/svc/test/kube/kubeenv"
	"github.com/svcdns/svc/test/nodetest"
)

var (
	env  *kubeenv.Env
	skip string
)

const encryptionKey = "00112233445566778899aabbccddeeff00112233445566778899aabbccddeeff"

func TestMain(m *testing.M) {
	if skip = kubeenv.SkipReason(); skip != "" {
		os.Exit(m.Run())
	}
	var err error
	if env, err = kubeenv.Start(); err != nil {
		fmt.Fprintln(os.Stderr, err)
		os.Exit(1)
	}
	if err := env.Namespaces(context.Background(), node.DefaultNamespace, "team"); err != nil {
		fmt.Fprintln(os.Stderr, err)
		os.Exit(1)
	}
	code := m.Run()
	if err := env.Stop(); err != nil {
		fmt.Fprintln(os.Stderr, "stop envtest:", err)
	}
	os.Exit(code)
}

func needEnv(t *testing.T) client.Client {
	t.Helper()
	if skip != "" {
		t.Skip(skip)
	}
	c, err := client.New(env.Config, client.Options{})
	if err != nil {
		t.Fatal(err)
	}
	return c
}

// kubeconfig writes a kubeconfig for cfg, optionally through another host
// (the cutting proxy).
func kubeconfig(t *testing.T, cfg *rest.Config, host string) string {
	t.Helper()
	return kubeenv.Kubeconfig(t, cfg, host)
}

// testNode is a node of these tests; it is stopped when the test ends.
type testNode struct{ *nodetest.Node }

// startNode runs a node named name on the kube store in the role, with the
// kubeconfig, the shared encryption key and extra environment.
func startNode(t *testing.T, name, role, kubeconfigPath string, environ ...string) *testNode {
	t.Helper()
	return &testNode{nodetest.Start(t, nodetest.Name(name), nodetest.Role(role),
		nodetest.KubeStore(20*time.Second, 3*time.Second),
		nodetest.ExtraYAML("blocking:\n  allowLocalListURLs: true\n"),
		nodetest.Env("KUBECONFIG="+kubeconfigPath, "SERVICE_ENCRYPTION_KEY="+encryptionKey, "SERVICE_NAMESPACE="+node.DefaultNamespace),
		nodetest.Env(environ...))}
}

// query asks the node over UDP; nil on a transport error.
func (tn *testNode) query(name string, qtype uint16) *dns.Msg {
	r, err := tn.Exchange("udp", 500*time.Millisecond, name, qtype)
	if err != nil {
		return nil
	}
	return r
}

func (tn *testNode) answersA(name, want string) bool {
	r := tn.query(name, dns.TypeA)
	if r == nil || r.Rcode != dns.RcodeSuccess {
		return false
	}
	for _, rr := range r.Answer {
		if a, ok := rr.(*dns.A); ok && a.A.String() == want {
			return true
		}
	}
	return false
}

func (tn *testNode) rcode(name string) int {
	r := tn.query(name, dns.TypeA)
	if r == nil {
		return -1
	}
	return r.Rcode
}

// apply server-side applies YAML documents as `kubectl apply
// --server-side` would (field manager kubectl).
func apply(t *testing.T, c client.Client, docs string) {
	t.Helper()
	kubeenv.Apply(t, c, docs)
}
