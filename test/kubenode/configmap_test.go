package kubenode_test

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"io"
	"net"
	"net/http"
	"path/filepath"
	"testing"
	"time"

	"github.com/miekg/dns"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/svcdns/svc/controllers/blocklists"
	"github.com/svcdns/svc/internal/node"
	"github.com/svcdns/svc/test/nodetest"
)

// sourceDigest is status.sources[name].digest of a BlockList.
func sourceDigest(c client.Client, ns, name, source string) string {
	u := &unstructured.Unstructured{}
	u.SetGroupVersionKind(schema.GroupVersionKind{Group: "service.io", Version: "v1alpha1", Kind: "BlockList"})
	if err := c.Get(context.Background(), client.ObjectKey{Namespace: ns, Name: name}, u); err != nil {
		return ""
	}
	srcs, _, _ := unstructured.NestedSlice(u.Object, "status", "sources")
	for _, s := range srcs {
		m, _ := s.(map[string]any)
		if m["name"] == source {
			d, _ := m["digest"].(string)
			return d
		}
	}
	return ""
}

func digestOf(data map[string]string) string {
	sum := sha256.Sum256([]byte(blocklists.ConfigMapBody(data)))
	return hex.EncodeToString(sum[:])
}

// TestConfigMapSource: a BlockList source read from a ConfigMap in the
// list's namespace is compiled by the operator (status digest) and by a data
// plane node reading the ConfigMap itself; an edit is picked up when the
// BlockList changes.
func TestConfigMapSource(t *testing.T) {
	c := needEnv(t)
	kc := kubeconfig(t, env.Config, "")
	startNode(t, "cm-op", node.RoleOperator, kc)
	dp := startNode(t, "cm-dp", node.RoleDataplane, kc)
	// the apiserver is shared: leave no policy that shadows other tests'
	t.Cleanup(func() {
		for _, kind := range []string{"Policy", "ClientGroup", "BlockList"} {
			u := &unstructured.Unstructured{}
			u.SetGroupVersionKind(schema.GroupVersionKind{Group: "service.io", Version: "v1alpha1", Kind: kind})
			u.SetNamespace("cmlists")
			u.SetName(map[string]string{"Policy": "cm-home", "ClientGroup": "cm-local", "BlockList": "from-cm"}[kind])
			if err := c.Delete(context.Background(), u); err != nil {
				t.Errorf("delete %s: %v", kind, err)
			}
		}
	})

	apply(t, c, `apiVersion: v1
kind: Namespace
metadata: {name: cmlists}
---
apiVersion: v1
kind: ConfigMap
metadata: {name: rules, namespace: cmlists}
data:
  a.txt: "cm-blocked.example"
  b.txt: "||cm-ads.example^\n"
---
apiVersion: service.io/v1alpha1
kind: BlockList
metadata: {name: from-cm, namespace: cmlists}
spec:
  sources:
    - name: cm
      configMapRef: {name: rules}
---
apiVersion: service.io/v1alpha1
kind: ClientGroup
metadata: {name: cm-local, namespace: cmlists}
spec:
  addresses: [127.0.0.0/8]
---
apiVersion: service.io/v1alpha1
kind: Policy
metadata: {name: cm-home, namespace: cmlists}
spec:
  priority: 100
  clientGroupRefs: [cm-local]
  blockListRefs: [from-cm]
  blockMode: nxdomain
  blockTTL: 1m
`)
	want := digestOf(map[string]string{"a.txt": "cm-blocked.example", "b.txt": "||cm-ads.example^\n"})
	nodetest.Eventually(t, 40*time.Second, "status digest of the configMapRef source", func() bool {
		return sourceDigest(c, "cmlists", "from-cm", "cm") == want
	})
	nodetest.Eventually(t, 30*time.Second, "the data plane blocks the ConfigMap's names", func() bool {
		return dp.rcode("cm-blocked.example") == dns.RcodeNameError && dp.rcode("x.cm-ads.example") == dns.RcodeNameError
	})
	if rc := dp.rcode("cm-other.example"); rc == dns.RcodeNameError {
		t.Fatalf("cm-other.example blocked before the edit")
	}
	// The REST entries view of the source lists the ConfigMap's rules, read
	// by this data-plane node with its own credentials.
	code, body := adminGet(t, dp, "/api/v1/blocklists/cmlists/from-cm/sources/cm/entries")
	var page struct {
		Items []struct {
			Kind, Value string
			Enabled     bool
		}
		RulesKnown bool
	}
	if err := json.Unmarshal(body, &page); err != nil || code != http.StatusOK {
		t.Fatalf("entries: %d %s %v", code, body, err)
	}
	var rules []string
	for _, it := range page.Items {
		if it.Kind == "rule" && it.Enabled {
			rules = append(rules, it.Value)
		}
	}
	if !page.RulesKnown || len(rules) != 2 {
		t.Fatalf("entries of the configMapRef source: known %v rules %q", page.RulesKnown, rules)
	}

	// edit the ConfigMap, then change the BlockList: both nodes re-read it
	apply(t, c, `apiVersion: v1
kind: ConfigMap
metadata: {name: rules, namespace: cmlists}
data:
  a.txt: "cm-other.example"
`)
	apply(t, c, `apiVersion: service.io/v1alpha1
kind: BlockList
metadata: {name: from-cm, namespace: cmlists, annotations: {touched: "1"}}
spec:
  sources:
    - name: cm
      configMapRef: {name: rules}
`)
	want = digestOf(map[string]string{"a.txt": "cm-other.example"})
	nodetest.Eventually(t, 30*time.Second, "status digest after the edit", func() bool {
		return sourceDigest(c, "cmlists", "from-cm", "cm") == want
	})
	nodetest.Eventually(t, 30*time.Second, "the data plane serves the edited list", func() bool {
		return dp.rcode("cm-other.example") == dns.RcodeNameError && dp.rcode("cm-blocked.example") != dns.RcodeNameError
	})
}

// adminGet sends a GET over the node's admin socket (the whole API, as the
// socket's peer).
func adminGet(t *testing.T, n *testNode, path string) (int, []byte) {
	t.Helper()
	sock := filepath.Join(n.Dir, "data", "service.sock")
	hc := &http.Client{Timeout: 10 * time.Second, Transport: &http.Transport{
		DialContext: func(ctx context.Context, _, _ string) (net.Conn, error) {
			var d net.Dialer
			return d.DialContext(ctx, "unix", sock)
		}}}
	resp, err := hc.Get("http://admin" + path)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	b, _ := io.ReadAll(io.LimitReader(resp.Body, 1<<20))
	return resp.StatusCode, b
}
