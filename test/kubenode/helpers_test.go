// Package kubenode_test runs whole nodes (node.Run in process) against a
// real apiserver (envtest): the kube store driver, the operator and data-plane
// roles, list bodies copied by digest, outages and ServiceAccount tokens.
package kubenode_test

import (
	"context"
	"fmt"
	"io"
	"net/http"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/miekg/dns"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/util/yaml"
	"k8s.io/client-go/rest"
	"k8s.io/client-go/tools/clientcmd"
	clientcmdapi "k8s.io/client-go/tools/clientcmd/api"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/svcdns/svc/internal/node"
	"github.com/svcdns/svc/test/kube/kubeenv"
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
	if host == "" {
		host = cfg.Host
	}
	kc := clientcmdapi.NewConfig()
	kc.Clusters["envtest"] = &clientcmdapi.Cluster{Server: host, CertificateAuthorityData: cfg.CAData}
	kc.AuthInfos["admin"] = &clientcmdapi.AuthInfo{ClientCertificateData: cfg.CertData, ClientKeyData: cfg.KeyData, Token: cfg.BearerToken}
	kc.Contexts["envtest"] = &clientcmdapi.Context{Cluster: "envtest", AuthInfo: "admin"}
	kc.CurrentContext = "envtest"
	p := filepath.Join(t.TempDir(), "kubeconfig")
	if err := clientcmd.WriteToFile(*kc, p); err != nil {
		t.Fatal(err)
	}
	return p
}

const nodeConfig = `
node:
  name: %NAME%
  dataDir: %DATA%
  lameduck: 200ms
store:
  driver: kube
  kube:
    startupTimeout: 20s
    snapshot:
      maxAge: 3s
listeners:
  dns:
    - address: 127.0.0.1:0
      protocols: [udp, tcp]
  api:
    address: 127.0.0.1:0
  ops:
    address: 127.0.0.1:0
  metrics:
    address: 127.0.0.1:0
  internal:
    address: 127.0.0.1:0
  blockPage:
    http: ""
blocking:
  allowLocalListURLs: true
upstreams:
  groups:
    default:
      servers: [127.0.0.1:1]
      timeout: 200ms
objectsDir: %OBJ%
auth:
  adminSocket:
    path: %DATA%/service.sock
`

// logBuffer keeps a node's log for the test to search.
type logBuffer struct {
	t    *testing.T
	name string
	mu   sync.Mutex
	b    strings.Builder
	done bool // the test ended: stragglers are not logged
}

func (l *logBuffer) Write(p []byte) (int, error) {
	l.mu.Lock()
	defer l.mu.Unlock()
	l.b.Write(p)
	if !l.done {
		l.t.Log(l.name + ": " + strings.TrimSpace(string(p)))
	}
	return len(p), nil
}

func (l *logBuffer) contains(s string) bool {
	l.mu.Lock()
	defer l.mu.Unlock()
	return strings.Contains(l.b.String(), s)
}

type testNode struct {
	name    string
	addrs   node.Addrs
	log     *logBuffer
	cancel  context.CancelFunc
	done    chan error
	stopped bool
}

// startNode runs node.Run in process with the role and extra environment.
func startNode(t *testing.T, name, role, kubeconfigPath string, environ ...string) *testNode {
	t.Helper()
	dir := t.TempDir()
	obj := filepath.Join(dir, "objects.d")
	if err := os.MkdirAll(obj, 0o755); err != nil {
		t.Fatal(err)
	}
	cfg := strings.NewReplacer("%NAME%", name, "%DATA%", filepath.Join(dir, "data"), "%OBJ%", obj).Replace(nodeConfig)
	cfgPath := filepath.Join(dir, "service.yaml")
	if err := os.WriteFile(cfgPath, []byte(cfg), 0o644); err != nil {
		t.Fatal(err)
	}
	tn := &testNode{name: name, log: &logBuffer{t: t, name: name}, done: make(chan error, 1)}
	ctx, cancel := context.WithCancel(context.Background())
	tn.cancel = cancel
	ready := make(chan node.Addrs, 1)
	environ = append([]string{"KUBECONFIG=" + kubeconfigPath, "SERVICE_ENCRYPTION_KEY=" + encryptionKey, "SERVICE_NAMESPACE=" + node.DefaultNamespace}, environ...)
	go func() {
		tn.done <- node.Run(ctx, node.Options{
			ConfigPath: cfgPath, ConfigExplicit: true, Environ: environ, Role: role,
			Stderr: tn.log, Ready: func(a node.Addrs) { ready <- a },
		})
	}()
	select {
	case tn.addrs = <-ready:
	case err := <-tn.done:
		t.Fatalf("node %s stopped before it was ready: %v", name, err)
	case <-time.After(60 * time.Second):
		t.Fatalf("node %s not ready within 60s", name)
	}
	t.Cleanup(tn.stop)
	return tn
}

func (tn *testNode) stop() {
	if tn.stopped {
		return
	}
	tn.stopped = true
	tn.cancel()
	select {
	case <-tn.done:
	case <-time.After(15 * time.Second):
		tn.log.t.Errorf("node %s did not stop within 15s", tn.name)
	}
	tn.log.mu.Lock()
	tn.log.done = true
	tn.log.mu.Unlock()
}

func (tn *testNode) udp() string {
	for _, a := range tn.addrs.DNS {
		if strings.HasPrefix(a, "udp/") {
			return strings.TrimPrefix(a, "udp/")
		}
	}
	return ""
}

// query asks the node over UDP; nil on a transport error.
func (tn *testNode) query(name string, qtype uint16) *dns.Msg {
	c := &dns.Client{Net: "udp", Timeout: 500 * time.Millisecond}
	m := new(dns.Msg)
	m.SetQuestion(dns.Fqdn(name), qtype)
	r, _, err := c.Exchange(m, tn.udp())
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

func (tn *testNode) ready() bool {
	resp, err := http.Get("http://" + tn.addrs.Ops + "/healthz/ready")
	if err != nil {
		return false
	}
	defer resp.Body.Close()
	_, _ = io.Copy(io.Discard, resp.Body)
	return resp.StatusCode == http.StatusOK
}

func eventually(t *testing.T, d time.Duration, what string, cond func() bool) {
	t.Helper()
	deadline := time.Now().Add(d)
	for time.Now().Before(deadline) {
		if cond() {
			return
		}
		time.Sleep(50 * time.Millisecond)
	}
	t.Fatalf("%s: not true within %s", what, d)
}

// apply server-side applies YAML documents as `kubectl apply
// --server-side` would (field manager kubectl).
func apply(t *testing.T, c client.Client, docs string) {
	t.Helper()
	dec := yaml.NewYAMLOrJSONDecoder(strings.NewReader(docs), 4096)
	for {
		u := &unstructured.Unstructured{}
		if err := dec.Decode(&u.Object); err == io.EOF {
			return
		} else if err != nil {
			t.Fatal(err)
		}
		if len(u.Object) == 0 {
			continue
		}
		if err := c.Patch(t.Context(), u, client.Apply, client.FieldOwner("kubectl"), client.ForceOwnership); err != nil {
			t.Fatalf("apply %s %s: %v", u.GetKind(), u.GetName(), err)
		}
	}
}
