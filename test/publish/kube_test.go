package publish_test

import (
	"bytes"
	"context"
	"errors"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/miekg/dns"
	authenticationv1 "k8s.io/api/authentication/v1"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/types"
	utilyaml "k8s.io/apimachinery/pkg/util/yaml"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/tools/clientcmd"
	clientcmdapi "k8s.io/client-go/tools/clientcmd/api"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/svcdns/svc/api/v1alpha1"
	"github.com/svcdns/svc/internal/node"
	"github.com/svcdns/svc/test/kube/kubeenv"
	"github.com/svcdns/svc/test/nodetest"
)

const encryptionKey = "00112233445566778899aabbccddeeff00112233445566778899aabbccddeeff"

var (
	env    *kubeenv.Env
	envErr error
	envMu  sync.Once
)

// TestMain stops the control plane if a test started one.
func TestMain(m *testing.M) {
	code := m.Run()
	if env != nil {
		if err := env.Stop(); err != nil {
			code = 1
		}
	}
	os.Exit(code)
}

func needEnv(t *testing.T) *kubeenv.Env {
	t.Helper()
	if reason := kubeenv.SkipReason(); reason != "" {
		t.Skip(reason)
	}
	envMu.Do(func() {
		if env, envErr = kubeenv.Start(); envErr != nil {
			return
		}
		envErr = env.Namespaces(context.Background(), node.DefaultNamespace)
	})
	if envErr != nil {
		t.Fatal(envErr)
	}
	return env
}

// TestPublishKubeStore: on Kubernetes the operator leader publishes and
// writes status.publications; its state lives in a ConfigMap, so a record
// set deleted while no operator runs is removed by the next one.
func TestPublishKubeStore(t *testing.T) {
	e := needEnv(t)
	c, err := client.New(e.Config, client.Options{})
	if err != nil {
		t.Fatal(err)
	}
	k := startKnot(t)
	k.update(t, "other.pub.test. 300 IN A 203.0.113.5")
	kubeenv.Apply(t, c, zoneYAML+webYAML(
		`{dnsName: kw, recordType: A, targets: [192.0.2.41]}`,
		`{dnsName: kpublic, recordType: A, targets: [198.51.100.41], service: {view: public}}`,
	))
	// The nodes run with the chart's ServiceAccounts: the operator's RBAC
	// must let it write status and its state ConfigMaps.
	kcs := installChartRBAC(t, e, c)
	cfg := nodetest.ExtraYAML(publishYAML(t, k))
	start := func(name, role string) *nodetest.Node {
		return nodetest.Start(t, nodetest.Name(name), nodetest.Role(role), nodetest.KubeStore(20*time.Second, 30*time.Second), cfg,
			nodetest.Env("KUBECONFIG="+kcs[role], "SERVICE_ENCRYPTION_KEY="+encryptionKey, "SERVICE_NAMESPACE="+node.DefaultNamespace))
	}
	op := start("pub-op", node.RoleOperator)
	dp := start("pub-dp", node.RoleDataplane)

	eventuallyEqual(t, "kw A at knot", func() []string { return answers(k.addr, "kw.pub.test", dns.TypeA) }, []string{"192.0.2.41"})
	eventuallyEqual(t, "kpublic A at knot", func() []string { return answers(k.addr, "kpublic.pub.test", dns.TypeA) }, []string{"198.51.100.41"})
	eventuallyEqual(t, "kw A at the data plane", func() []string { return answers(dp.DNSAddr("tcp"), "kw.pub.test", dns.TypeA) }, []string{"192.0.2.41"})
	if r, err := exchange(dp.DNSAddr("tcp"), "kpublic.pub.test.", dns.TypeA); err != nil || len(r.Answer) != 0 {
		t.Errorf("the data plane answers the view: public endpoint: %v %v", r, err)
	}
	var last []v1alpha1.Publication
	nodetest.Eventually(t, wait, "status.publications Programmed", func() bool {
		last = kubePublications(t, c, "web")
		return len(last) == 1 && last[0].State == "Programmed" && strings.Contains(last[0].Message, "2 RRsets in zone pub.test")
	})
	var cm corev1.ConfigMap
	if err := c.Get(t.Context(), types.NamespacedName{Namespace: node.DefaultNamespace, Name: "service-publish-public-dns"}, &cm); err != nil {
		t.Fatalf("state ConfigMap: %v", err)
	}
	if s := cm.Data["state.json"]; !strings.Contains(s, "kw.pub.test.") {
		t.Errorf("state ConfigMap holds %q", s)
	}

	// No operator runs while the record set goes away; the next leader
	// removes what the last one published, from the ConfigMap.
	op.Stop()
	u := &unstructured.Unstructured{}
	u.SetAPIVersion("service.io/v1alpha1")
	u.SetKind("DNSRecordSet")
	u.SetNamespace("default")
	u.SetName("web")
	if err := c.Delete(t.Context(), u); err != nil {
		t.Fatal(err)
	}
	start("pub-op2", node.RoleOperator)
	eventuallyEqual(t, "kw A at knot after the deletion", func() []string { return answers(k.addr, "kw.pub.test", dns.TypeA) }, []string{})
	eventuallyEqual(t, "kpublic A at knot after the deletion", func() []string { return answers(k.addr, "kpublic.pub.test", dns.TypeA) }, []string{})
	if got := answers(k.addr, "other.pub.test", dns.TypeA); !slices.Equal(got, []string{"203.0.113.5"}) {
		t.Errorf("another writer's record: %v", got)
	}
}

func kubePublications(t *testing.T, c client.Client, name string) []v1alpha1.Publication {
	t.Helper()
	u := &unstructured.Unstructured{}
	u.SetAPIVersion("service.io/v1alpha1")
	u.SetKind("DNSRecordSet")
	if err := c.Get(t.Context(), types.NamespacedName{Namespace: "default", Name: name}, u); err != nil {
		return nil
	}
	var rs v1alpha1.DNSRecordSet
	if runtime.DefaultUnstructuredConverter.FromUnstructured(u.Object, &rs) != nil {
		return nil
	}
	return rs.Status.Publications
}

// installChartRBAC applies the chart's ServiceAccounts and RBAC (helm
// template, as test/kubenode does) and returns kubeconfigs with
// TokenRequest tokens of the operator and data-plane ServiceAccounts, by
// role.
func installChartRBAC(t *testing.T, e *kubeenv.Env, c client.Client) map[string]string {
	t.Helper()
	ctx := t.Context()
	cmd := exec.CommandContext(ctx, filepath.Join(kubeenv.Assets(), "helm"), "template", "service", filepath.Join(kubeenv.RepoRoot(), "charts", "service"),
		"--namespace", node.DefaultNamespace, "--show-only", "templates/serviceaccounts.yaml", "--show-only", "templates/rbac.yaml")
	cmd.Env = append(os.Environ(), "HELM_CACHE_HOME="+t.TempDir(), "HELM_CONFIG_HOME="+t.TempDir(), "HELM_DATA_HOME="+t.TempDir())
	var out, errb bytes.Buffer
	cmd.Stdout, cmd.Stderr = &out, &errb
	if err := cmd.Run(); err != nil {
		t.Fatalf("helm template: %v\n%s", err, errb.String())
	}
	dec := utilyaml.NewYAMLOrJSONDecoder(&out, 4096)
	for {
		u := &unstructured.Unstructured{}
		if err := dec.Decode(&u.Object); errors.Is(err, io.EOF) {
			break
		} else if err != nil {
			t.Fatal(err)
		}
		if u.GetKind() == "" {
			continue
		}
		if u.GetKind() == "ServiceAccount" || u.GetKind() == "Role" || u.GetKind() == "RoleBinding" {
			u.SetNamespace(node.DefaultNamespace)
		}
		if err := c.Patch(ctx, u, client.Apply, client.FieldOwner("helm"), client.ForceOwnership); err != nil {
			t.Fatalf("apply %s %s: %v", u.GetKind(), u.GetName(), err)
		}
		t.Cleanup(func() {
			if err := c.Delete(context.Background(), u); err != nil && !apierrors.IsNotFound(err) {
				t.Errorf("remove %s %s: %v", u.GetKind(), u.GetName(), err)
			}
		})
	}
	cs := kubernetes.NewForConfigOrDie(e.Config)
	kcs := map[string]string{}
	for role, sa := range map[string]string{node.RoleOperator: "service-operator", node.RoleDataplane: "service-dataplane"} {
		exp := int64(3600)
		tr, err := cs.CoreV1().ServiceAccounts(node.DefaultNamespace).CreateToken(ctx, sa,
			&authenticationv1.TokenRequest{Spec: authenticationv1.TokenRequestSpec{ExpirationSeconds: &exp}}, metav1.CreateOptions{})
		if err != nil {
			t.Fatalf("token for %s: %v", sa, err)
		}
		kc := clientcmdapi.NewConfig()
		kc.Clusters["envtest"] = &clientcmdapi.Cluster{Server: e.Config.Host, CertificateAuthorityData: e.Config.CAData}
		kc.AuthInfos["chart"] = &clientcmdapi.AuthInfo{Token: tr.Status.Token}
		kc.Contexts["envtest"] = &clientcmdapi.Context{Cluster: "envtest", AuthInfo: "chart"}
		kc.CurrentContext = "envtest"
		p := filepath.Join(t.TempDir(), "kubeconfig")
		if err := clientcmd.WriteToFile(*kc, p); err != nil {
			t.Fatal(err)
		}
		kcs[role] = p
	}
	return kcs
}
