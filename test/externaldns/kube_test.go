package externaldns_test

import (
	"strings"
	"testing"
	"time"

	"github.com/miekg/dns"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/svcdns/svc/internal/node"
	"github.com/svcdns/svc/test/kube/kubeenv"
	"github.com/svcdns/svc/test/nodetest"
)

const encryptionKey = "00112233445566778899aabbccddeeff00112233445566778899aabbccddeeff"

// On Kubernetes the operator serves the webhook and the data plane does not
// (one settings file reaches both); what the webhook writes is a
// DNSRecordSet custom resource owned by integration:external-dns, answered
// by the data-plane node.
func TestWebhookKubeStore(t *testing.T) {
	env := needEnv(t)
	c, err := client.New(env.Config, client.Options{})
	if err != nil {
		t.Fatal(err)
	}
	if err := env.Namespaces(t.Context(), node.DefaultNamespace); err != nil {
		t.Fatal(err)
	}
	kubeenv.Apply(t, c, `
apiVersion: service.io/v1alpha1
kind: DNSZone
metadata: {name: kube.test}
spec: {defaultTTL: 60}
`)
	kc := kubeenv.Kubeconfig(t, env.Config, "")
	webhook := nodetest.ExtraYAML(`
externalDNS:
  webhook:
    enabled: true
    address: 127.0.0.1:0
    healthAddress: ""
    zones: [kube.test]
`)
	start := func(name, role string) *nodetest.Node {
		return nodetest.Start(t, nodetest.Name(name), nodetest.Role(role), nodetest.KubeStore(20*time.Second, 30*time.Second), webhook,
			nodetest.Env("KUBECONFIG="+kc, "SERVICE_ENCRYPTION_KEY="+encryptionKey, "SERVICE_NAMESPACE="+node.DefaultNamespace))
	}
	op := start("xdns-op", node.RoleOperator)
	dp := start("xdns-dp", node.RoleDataplane)
	if op.Addrs.ExternalDNS == "" {
		t.Fatal("the operator does not serve the webhook")
	}
	if dp.Addrs.ExternalDNS != "" {
		t.Fatalf("the data plane serves the webhook on %s", dp.Addrs.ExternalDNS)
	}
	post(t, "http://"+op.Addrs.ExternalDNS, `{"create":[{"dnsName":"app.kube.test","targets":["192.0.2.77"],"recordType":"A","recordTTL":30}]}`)
	wantAnswers(t, dp, "app.kube.test.", dns.TypeA, "30 192.0.2.77")

	var list unstructured.UnstructuredList
	list.SetAPIVersion("service.io/v1alpha1")
	list.SetKind("DNSRecordSetList")
	if err := c.List(t.Context(), &list, client.InNamespace("default")); err != nil {
		t.Fatal(err)
	}
	found := false
	for _, u := range list.Items {
		if strings.HasPrefix(u.GetName(), "extdns-app-kube-test-") {
			found = true
			if m := u.GetAnnotations()["service.io/managed-by"]; m != "integration:external-dns" {
				t.Errorf("%s managed by %q", u.GetName(), m)
			}
		}
	}
	if !found {
		t.Fatalf("no DNSRecordSet extdns-app-kube-test-* in the apiserver (%d record sets)", len(list.Items))
	}
}
