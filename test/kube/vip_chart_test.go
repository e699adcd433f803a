package kube_test

import (
	"slices"
	"strings"
	"testing"

	authorizationv1 "k8s.io/api/authorization/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/client-go/kubernetes"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/svcdns/svc/test/kube/kubeenv"
)

// vipValues turn on svc vip run in the data-plane pods (docs/vip.md).
const vipValues = "dataplane.hostNetwork=true,vip.enabled=true,vip.image=example.org/svc-vip:1,vip.hmacSecretName=vrrp," +
	"vip.addresses={dns-a=192.0.2.53/24@eth0#53,dns-b=192.0.2.54/24@eth0#54}"

// TestChartVIP: off by default (no container, no Role, DNS on 0.0.0.0);
// on, the data-plane pods get a vip container, the only one with NET_ADMIN
// and NET_RAW, the DNS listeners bind each VIP besides every address, the apiserver
// accepts every object, and the data plane may list pods and create Events
// in its namespace only. Missing values fail the render naming the value.
func TestChartVIP(t *testing.T) {
	containers := func(objs []*unstructured.Unstructured) []any {
		cs, _, _ := unstructured.NestedSlice(find(t, objs, "DaemonSet", "service-dataplane").Object, "spec", "template", "spec", "containers")
		return cs
	}
	off := render(t, "--set", "dataplane.hostNetwork=true")
	if n := len(containers(off)); n != 1 {
		t.Errorf("default data-plane pod has %d containers, want 1", n)
	}
	for _, o := range off {
		if strings.Contains(o.GetName(), "vip") {
			t.Errorf("default render has %s %s", o.GetKind(), o.GetName())
		}
	}

	on := render(t, "--set", vipValues)
	var vip map[string]any
	for _, c := range containers(on) {
		cm := c.(map[string]any)
		caps, _, _ := unstructured.NestedStringSlice(cm, "securityContext", "capabilities", "add")
		if cm["name"] == "vip" {
			vip = cm
			if !slices.Equal(caps, []string{"NET_ADMIN", "NET_RAW"}) {
				t.Errorf("vip container adds %v, want NET_ADMIN and NET_RAW", caps)
			}
			continue
		}
		if slices.Contains(caps, "NET_ADMIN") || slices.Contains(caps, "NET_RAW") {
			t.Errorf("container %s adds %v", cm["name"], caps)
		}
	}
	if vip == nil {
		t.Fatal("vip.enabled renders no vip container")
	}
	args, _, _ := unstructured.NestedStringSlice(vip, "args")
	for _, want := range []string{"--peers-from=kubernetes", "--vip=dns-a=192.0.2.53/24@eth0#53", "--hmac-key-file=/run/secrets/vrrp/vrrp_hmac_{vrid}", "--dns=127.0.0.1:53"} {
		if !slices.Contains(args, want) {
			t.Errorf("vip args %v lack %s", args, want)
		}
	}
	var dns []string
	for _, l := range loadSettings(t, on).DNS {
		dns = append(dns, l.Address)
	}
	if !slices.Equal(dns, []string{"0.0.0.0:53", "192.0.2.53:53", "192.0.2.54:53"}) {
		t.Errorf("DNS listeners with VIPs: %v, want every address and each VIP", dns)
	}
	dryRun(t, on)

	// RBAC: list pods and create Events in the release namespace only.
	ctx := t.Context()
	if err := env.Namespaces(ctx, ns, "elsewhere"); err != nil {
		t.Fatal(err)
	}
	c := crClient(t)
	// a fresh rendering: the dry run filled in the objects it sent
	rbac := render(t, "--set", vipValues)
	for _, o := range rbac {
		switch o.GetKind() {
		case "ServiceAccount", "Role", "RoleBinding":
			o.SetNamespace(ns)
		case "ClusterRole", "ClusterRoleBinding":
		default:
			continue
		}
		if err := c.Patch(ctx, o, client.Apply, client.FieldOwner("chart-test"), client.ForceOwnership); err != nil {
			t.Fatalf("apply %s %s: %v", o.GetKind(), o.GetName(), err)
		}
	}
	t.Cleanup(func() {
		for _, o := range rbac {
			if strings.HasSuffix(o.GetName(), "-vip") && (o.GetKind() == "Role" || o.GetKind() == "RoleBinding") {
				_ = c.Delete(ctx, o)
			}
		}
	})
	cs := kubernetes.NewForConfigOrDie(env.Config)
	for _, ch := range []struct {
		verb, group, resource, namespace string
		allow                            bool
	}{
		{"list", "", "pods", ns, true},
		{"list", "", "pods", "elsewhere", false},
		{"delete", "", "pods", ns, false},
		{"create", "events.k8s.io", "events", ns, true},
		{"create", "events.k8s.io", "events", "elsewhere", false},
	} {
		got := kubeenv.AccessReview(ctx, t, cs, authorizationv1.SubjectAccessReviewSpec{
			User: "system:serviceaccount:" + ns + ":service-dataplane", Groups: []string{"system:serviceaccounts", "system:authenticated"},
			ResourceAttributes: &authorizationv1.ResourceAttributes{Verb: ch.verb, Group: ch.group, Resource: ch.resource, Namespace: ch.namespace},
		}, ch.allow)
		if got != ch.allow {
			t.Errorf("dataplane %s %s in %s: allowed=%v, want %v", ch.verb, ch.resource, ch.namespace, got, ch.allow)
		}
	}

	for set, want := range map[string]string{
		"vip.enabled=true": "dataplane.hostNetwork",
		"vip.enabled=true,dataplane.hostNetwork=true":                                                   "vip.image",
		"vip.enabled=true,dataplane.hostNetwork=true,vip.image=x,vip.addresses={a=192.0.2.1/24@eth0#1}": "vip.hmacSecretName",
	} {
		out, err := helmRun(t, "template", "service", chartDir(), "--set", set)
		if err == nil || !strings.Contains(string(out), want) {
			t.Errorf("--set %s: %v, want a refusal naming %s\n%s", set, err, want, tail(out))
		}
	}
}
