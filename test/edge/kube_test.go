package edge

import (
	"fmt"
	"net"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	authorizationv1 "k8s.io/api/authorization/v1"
	corev1 "k8s.io/api/core/v1"
	discoveryv1 "k8s.io/api/discovery/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/rest"
	"k8s.io/client-go/tools/clientcmd"
	clientcmdapi "k8s.io/client-go/tools/clientcmd/api"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/yaml"

	"github.com/svcdns/svc/internal/edge"
	"github.com/svcdns/svc/test/fakeupstream"
	"github.com/svcdns/svc/test/freeport"
	"github.com/svcdns/svc/test/kube/kubeenv"
	"github.com/svcdns/svc/test/nodetest"
)

const kubeNS = "dns" // helmTemplate's --namespace

// hostAddress is an IPv4 address of this host that is neither loopback
// nor link-local: EndpointSlices refuse both, and traffic to it stays on
// the host.
func hostAddress() string {
	addrs, err := net.InterfaceAddrs()
	if err != nil {
		return ""
	}
	for _, a := range addrs {
		if n, ok := a.(*net.IPNet); ok {
			if ip := n.IP.To4(); ip != nil && !ip.IsLoopback() && !ip.IsLinkLocalUnicast() {
				return ip.String()
			}
		}
	}
	return ""
}

// chartEdgeRBAC applies the ServiceAccount, Role and RoleBinding the chart
// renders for the edge, in kubeNS; it returns the ServiceAccount's name.
func chartEdgeRBAC(t *testing.T, c client.Client) string {
	t.Helper()
	out, err := helmTemplate(t, "--set", "edge.enabled=true", "--set", "edge.image=example/svc-edge:1")
	if err != nil {
		t.Fatalf("helm template: %v\n%s", err, out)
	}
	sa := ""
	for _, doc := range strings.Split(out, "\n---") {
		u := &unstructured.Unstructured{}
		if err := yaml.Unmarshal([]byte(doc), &u.Object); err != nil {
			t.Fatalf("%v\n%s", err, doc)
		}
		if len(u.Object) == 0 || !strings.HasSuffix(u.GetName(), "-edge") {
			continue
		}
		switch u.GetKind() {
		case "ServiceAccount", "Role", "RoleBinding":
		default:
			continue
		}
		if u.GetKind() == "ServiceAccount" {
			sa = u.GetName()
		}
		u.SetNamespace(kubeNS)
		if err := c.Patch(t.Context(), u, client.Apply, client.FieldOwner("edge-test"), client.ForceOwnership); err != nil {
			t.Fatalf("apply %s %s: %v", u.GetKind(), u.GetName(), err)
		}
	}
	if sa == "" {
		t.Fatalf("the chart renders no edge ServiceAccount:\n%s", out)
	}
	return sa
}

// impersonating is cfg acting as ServiceAccount sa of kubeNS (the
// apiserver adds the ServiceAccount groups).
func impersonating(cfg *rest.Config, sa string) *rest.Config {
	c := rest.CopyConfig(cfg)
	c.Impersonate = rest.ImpersonationConfig{UserName: "system:serviceaccount:" + kubeNS + ":" + sa}
	return c
}

// impersonatingKubeconfig writes a kubeconfig acting as ServiceAccount sa.
func impersonatingKubeconfig(t *testing.T, cfg *rest.Config, sa string) string {
	t.Helper()
	kc := clientcmdapi.NewConfig()
	kc.Clusters["envtest"] = &clientcmdapi.Cluster{Server: cfg.Host, CertificateAuthorityData: cfg.CAData}
	kc.AuthInfos["edge"] = &clientcmdapi.AuthInfo{ClientCertificateData: cfg.CertData, ClientKeyData: cfg.KeyData, Token: cfg.BearerToken,
		Impersonate: "system:serviceaccount:" + kubeNS + ":" + sa}
	kc.Contexts["envtest"] = &clientcmdapi.Context{Cluster: "envtest", AuthInfo: "edge"}
	kc.CurrentContext = "envtest"
	p := filepath.Join(t.TempDir(), "kubeconfig")
	if err := clientcmd.WriteToFile(*kc, p); err != nil {
		t.Fatal(err)
	}
	return p
}

type endpoint struct {
	pod, ip            string
	ready, terminating bool
}

// applySlice creates or replaces an EndpointSlice of Service svc with the
// DNS port named as the chart's dns Service names it.
func applySlice(t *testing.T, cs kubernetes.Interface, name, svc string, port int, eps ...endpoint) {
	t.Helper()
	pn, pp, proto := "dns-udp", int32(port), corev1.ProtocolUDP
	tn, tp := "dns-tcp", int32(port)
	tproto := corev1.ProtocolTCP
	sl := &discoveryv1.EndpointSlice{
		ObjectMeta:  metav1.ObjectMeta{Name: name, Namespace: kubeNS, Labels: map[string]string{discoveryv1.LabelServiceName: svc}},
		AddressType: discoveryv1.AddressTypeIPv4,
		Ports:       []discoveryv1.EndpointPort{{Name: &pn, Port: &pp, Protocol: &proto}, {Name: &tn, Port: &tp, Protocol: &tproto}},
	}
	for _, e := range eps {
		sl.Endpoints = append(sl.Endpoints, discoveryv1.Endpoint{
			Addresses:  []string{e.ip},
			Conditions: discoveryv1.EndpointConditions{Ready: &e.ready, Terminating: &e.terminating},
			TargetRef:  &corev1.ObjectReference{Kind: "Pod", Namespace: kubeNS, Name: e.pod},
		})
	}
	ctx := t.Context()
	if old, err := cs.DiscoveryV1().EndpointSlices(kubeNS).Get(ctx, name, metav1.GetOptions{}); err == nil {
		sl.ResourceVersion = old.ResourceVersion
		if _, err := cs.DiscoveryV1().EndpointSlices(kubeNS).Update(ctx, sl, metav1.UpdateOptions{}); err != nil {
			t.Fatal(err)
		}
		return
	}
	if _, err := cs.DiscoveryV1().EndpointSlices(kubeNS).Create(ctx, sl, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
}

func backendNames(bs []edge.Backend) []string {
	var out []string
	for _, b := range bs {
		out = append(out, b.Name+"="+b.Address.String())
	}
	return out
}

// TestEdgeBackendsFromKubernetes runs the edge's Kubernetes source on a
// real kube-apiserver with the credentials the chart gives the edge (its
// ServiceAccount, Role and RoleBinding, impersonated): the ready endpoints
// of the data-plane Service's EndpointSlices are the backends, followed
// as endpoints are added, turn not ready or terminating, and slices are
// deleted; `svc edge run --backends-from kubernetes` applies them to
// dnsdist; a ServiceAccount without the Role is refused with a clear
// error.
func TestEdgeBackendsFromKubernetes(t *testing.T) {
	if r := kubeenv.SkipReason(); r != "" {
		t.Skip(r)
	}
	if _, err := exec.LookPath("dnsdist"); err != nil {
		t.Fatal("dnsdist not found: hack/install-test-deps.sh installs it (Debian package dnsdist)")
	}
	env, err := kubeenv.Start()
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = env.Stop() })
	if err := env.Namespaces(t.Context(), kubeNS); err != nil {
		t.Fatal(err)
	}
	admin := kubernetes.NewForConfigOrDie(env.Config)
	c, err := client.New(env.Config, client.Options{})
	if err != nil {
		t.Fatal(err)
	}
	sa := chartEdgeRBAC(t, c)
	if !kubeenv.AccessReview(t.Context(), t, admin, authorizationv1.SubjectAccessReviewSpec{
		User: "system:serviceaccount:" + kubeNS + ":" + sa, Groups: []string{"system:serviceaccounts", "system:serviceaccounts:" + kubeNS, "system:authenticated"},
		ResourceAttributes: &authorizationv1.ResourceAttributes{Namespace: kubeNS, Verb: "list", Group: "discovery.k8s.io", Resource: "endpointslices"},
	}, true) {
		t.Fatalf("%s may not list endpointslices in %s 10 s after the chart's RBAC was applied", sa, kubeNS)
	}
	const svc = "r-dns" // the chart's data-plane Service (--backends=dns/r-dns)
	port := freeport.UDPTCP(t)

	t.Run("the Kubernetes source as the chart's ServiceAccount", func(t *testing.T) {
		src := &edge.Kube{Client: kubernetes.NewForConfigOrDie(impersonating(env.Config, sa)), Namespace: kubeNS, Service: svc, Port: 5353}
		list := func() []string {
			t.Helper()
			bs, err := src.Backends(t.Context())
			if err != nil {
				t.Fatalf("as %s: %v", sa, err)
			}
			return backendNames(bs)
		}
		if got := list(); len(got) != 0 {
			t.Errorf("no slices yet: %v", got)
		}
		applySlice(t, admin, "src-a", svc, port,
			endpoint{"pod-a", "10.1.0.1", true, false}, endpoint{"pod-b", "10.1.0.2", false, false}, endpoint{"pod-c", "10.1.0.3", true, true})
		applySlice(t, admin, "other-service", "r-api", port, endpoint{"api-0", "10.1.0.9", true, false})
		want := []string{fmt.Sprintf("pod-a=10.1.0.1:%d", port)}
		if got := list(); !slices.Equal(got, want) {
			t.Errorf("ready, not ready and terminating endpoints: %v, want only the ready one %v", got, want)
		}
		applySlice(t, admin, "src-a", svc, port,
			endpoint{"pod-a", "10.1.0.1", true, false}, endpoint{"pod-b", "10.1.0.2", true, false})
		applySlice(t, admin, "src-b", svc, port, endpoint{"pod-d", "10.1.0.4", true, false})
		want = []string{fmt.Sprintf("pod-a=10.1.0.1:%d", port), fmt.Sprintf("pod-b=10.1.0.2:%d", port), fmt.Sprintf("pod-d=10.1.0.4:%d", port)}
		if got := list(); !slices.Equal(got, want) {
			t.Errorf("pod-b ready, a second slice: %v, want %v", got, want)
		}
		applySlice(t, admin, "src-a", svc, port,
			endpoint{"pod-a", "10.1.0.1", false, false}, endpoint{"pod-b", "10.1.0.2", true, false})
		if err := admin.DiscoveryV1().EndpointSlices(kubeNS).Delete(t.Context(), "src-b", metav1.DeleteOptions{}); err != nil {
			t.Fatal(err)
		}
		want = []string{fmt.Sprintf("pod-b=10.1.0.2:%d", port)}
		if got := list(); !slices.Equal(got, want) {
			t.Errorf("pod-a not ready, src-b deleted: %v, want %v", got, want)
		}
		for _, n := range []string{"src-a", "other-service"} {
			if err := admin.DiscoveryV1().EndpointSlices(kubeNS).Delete(t.Context(), n, metav1.DeleteOptions{}); err != nil {
				t.Fatal(err)
			}
		}
		if got := list(); len(got) != 0 {
			t.Errorf("all slices deleted: %v", got)
		}

		// A ServiceAccount the chart's Role is not bound to is refused, and
		// the error says what to grant.
		other := &edge.Kube{Client: kubernetes.NewForConfigOrDie(impersonating(env.Config, "other")), Namespace: kubeNS, Service: svc, Port: 5353}
		_, err := other.Backends(t.Context())
		if err == nil {
			t.Fatal("a ServiceAccount without the edge Role listed EndpointSlices")
		}
		for _, want := range []string{"forbidden", "system:serviceaccount:dns:other", "list", "endpointslices", "Role"} {
			if !strings.Contains(err.Error(), want) {
				t.Errorf("refusal %q does not mention %q", err, want)
			}
		}
	})

	t.Run("svc edge run follows the EndpointSlices", func(t *testing.T) {
		host := hostAddress()
		if host == "" {
			t.Skip("this host has no IPv4 address besides loopback and link-local; EndpointSlices refuse those")
		}
		portA, portB := int(fakeupstream.BehindProxy(t, host, "192.0.2.21").Port()), int(fakeupstream.BehindProxy(t, host, "192.0.2.22").Port())
		applySlice(t, admin, "run-a", svc, portA, endpoint{"node-a", host, true, false})
		kubeconfig := impersonatingKubeconfig(t, env.Config, sa)
		listen, consolePort, apiPort := freeport.UDPTCP(t), freeport.UDPTCP(t), freeport.UDPTCP(t)
		edgeAddr := fmt.Sprintf("127.0.0.1:%d", listen)
		e := startEdgeEnv(t, []string{"KUBECONFIG=" + kubeconfig}, "--backends-from", "kubernetes", "--backends", kubeNS+"/"+svc,
			"--poll-zones=false", "--listen", edgeAddr, "--console", fmt.Sprintf("127.0.0.1:%d", consolePort), "--api", fmt.Sprintf("127.0.0.1:%d", apiPort),
			"--health-address", "127.0.0.1:0", "--config-dir", t.TempDir(),
			"--zone-poll", "200ms", "--debounce", "300ms", "--drain", "100ms", "--stop-timeout", "5s", "--require-backends", "1")
		nodetest.Eventually(t, 30*time.Second, "edge ready with node-a", func() bool {
			r := e.ready(t)
			return r.Ready && r.BackendsUp == 1
		})
		answers := func(n int) map[string]int {
			got := map[string]int{}
			for i := range n {
				got[outcome(ask(adult, edgeAddr, fmt.Sprintf("k%d-%d.example.", time.Now().UnixNano(), i)))]++
			}
			return got
		}
		if got := answers(10); got["192.0.2.21"] != 10 {
			t.Errorf("with node-a only: %v", got)
		}

		// An endpoint in a new slice becomes a backend.
		applySlice(t, admin, "run-b", svc, portB, endpoint{"node-b", host, true, false})
		nodetest.Eventually(t, 15*time.Second, "node-b added", func() bool {
			return strings.Contains(e.Log(), `msg="edge: backend added" backend=node-b `) && e.ready(t).BackendsUp == 2
		})
		nodetest.Eventually(t, 10*time.Second, "node-b answering", func() bool { return answers(20)["192.0.2.22"] > 0 })

		// Not ready: out of the rotation, no query fails.
		applySlice(t, admin, "run-a", svc, portA, endpoint{"node-a", host, false, false})
		nodetest.Eventually(t, 15*time.Second, "node-a removed", func() bool {
			return strings.Contains(e.Log(), `msg="edge: backend removed" backend=node-a `)
		})
		if got := answers(20); got["192.0.2.22"] != 20 {
			t.Errorf("with node-a not ready: %v, want all from node-b", got)
		}

		// node-b's slice deleted: no backend left, the edge turns not ready.
		if err := admin.DiscoveryV1().EndpointSlices(kubeNS).Delete(t.Context(), "run-b", metav1.DeleteOptions{}); err != nil {
			t.Fatal(err)
		}
		nodetest.Eventually(t, 15*time.Second, "node-b removed", func() bool {
			return strings.Contains(e.Log(), `msg="edge: backend removed" backend=node-b `)
		})
		nodetest.Eventually(t, 10*time.Second, "edge not ready without backends", func() bool {
			r := e.ready(t)
			return !r.Ready && r.BackendsUp == 0
		})
		if n := strings.Count(e.Log(), `msg="edge: dnsdist started"`); n != 1 {
			t.Errorf("dnsdist started %d times: backend changes must not restart it", n)
		}
	})

	t.Run("svc edge run as a ServiceAccount without the Role", func(t *testing.T) {
		e := startEdgeEnv(t, []string{"KUBECONFIG=" + impersonatingKubeconfig(t, env.Config, "other")},
			"--backends-from", "kubernetes", "--backends", kubeNS+"/"+svc, "--poll-zones=false",
			"--listen", fmt.Sprintf("127.0.0.1:%d", freeport.UDPTCP(t)), "--console", fmt.Sprintf("127.0.0.1:%d", freeport.UDPTCP(t)),
			"--api", fmt.Sprintf("127.0.0.1:%d", freeport.UDPTCP(t)), "--health-address", "127.0.0.1:0", "--config-dir", t.TempDir(),
			"--zone-poll", "200ms", "--stop-timeout", "5s")
		nodetest.Eventually(t, 30*time.Second, "the refusal in the edge's log", func() bool {
			return strings.Contains(e.Log(), "forbidden") && strings.Contains(e.Log(), "endpointslices")
		})
		if r := e.ready(t); r.Ready {
			t.Errorf("ready without any backend: %+v", r)
		}
		if !strings.Contains(e.Log(), "Role") {
			t.Errorf("the refusal does not say which Role grants the access:\n%s", e.Log())
		}
	})
}
