package externaldns_test

import (
	"bytes"
	"io"
	"path/filepath"
	"strings"
	"testing"

	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	rbacv1 "k8s.io/api/rbac/v1"
	"k8s.io/apimachinery/pkg/util/yaml"
	sigsyaml "sigs.k8s.io/yaml"

	"github.com/svcdns/svc/test/kube/kubeenv"
	"github.com/svcdns/svc/test/proc"
)

// The chart with the example values runs the webhook in the operator pods
// and external-dns beside it, calling it over loopback, with read access to
// its sources; the data plane gets neither. Without the values nothing of
// it is rendered.
func TestChartExampleValues(t *testing.T) {
	if reason := kubeenv.SkipReason(); reason != "" {
		t.Skip(reason)
	}
	helm := filepath.Join(kubeenv.Assets(), "helm")
	chart := filepath.Join(kubeenv.RepoRoot(), "charts", "service")
	r := proc.Run(t, nil, "", helm, "template", "svc", chart, "--namespace", "service-system", "-f", filepath.Join(chart, "examples", "external-dns-values.yaml"))
	if r.Code != 0 {
		t.Fatalf("helm template: %s", r.Stderr)
	}
	var (
		operator, dataplane []corev1.Container
		config              string
		role                *rbacv1.ClusterRole
		bound               bool
	)
	dec := yaml.NewYAMLOrJSONDecoder(strings.NewReader(r.Stdout), 4096)
	for {
		var raw map[string]any
		if err := dec.Decode(&raw); err == io.EOF {
			break
		} else if err != nil {
			t.Fatal(err)
		}
		b, _ := sigsyaml.Marshal(raw)
		switch raw["kind"] {
		case "Deployment":
			var d appsv1.Deployment
			_ = sigsyaml.Unmarshal(b, &d)
			if strings.HasSuffix(d.Name, "-operator") {
				operator = d.Spec.Template.Spec.Containers
			}
		case "DaemonSet":
			var d appsv1.DaemonSet
			_ = sigsyaml.Unmarshal(b, &d)
			dataplane = d.Spec.Template.Spec.Containers
		case "ConfigMap":
			var cm corev1.ConfigMap
			_ = sigsyaml.Unmarshal(b, &cm)
			if strings.HasSuffix(cm.Name, "-config") {
				config = cm.Data["service.yaml"]
			}
		case "ClusterRole":
			var cr rbacv1.ClusterRole
			_ = sigsyaml.Unmarshal(b, &cr)
			if strings.HasSuffix(cr.Name, "-external-dns") {
				role = &cr
			}
		case "ClusterRoleBinding":
			var crb rbacv1.ClusterRoleBinding
			_ = sigsyaml.Unmarshal(b, &crb)
			if crb.RoleRef.Name == "svc-external-dns" && len(crb.Subjects) == 1 && crb.Subjects[0].Name == "svc-operator" {
				bound = true
			}
		}
	}
	var sidecar *corev1.Container
	for i := range operator {
		if operator[i].Name == "external-dns" {
			sidecar = &operator[i]
		}
	}
	if sidecar == nil {
		t.Fatalf("operator pod without an external-dns container: %v", operator)
	}
	if args := strings.Join(sidecar.Args, " "); !strings.Contains(args, "--provider=webhook") || !strings.Contains(args, "--webhook-provider-url=http://127.0.0.1:8888") {
		t.Errorf("external-dns args: %s", args)
	}
	for _, c := range dataplane {
		if c.Name == "external-dns" {
			t.Error("the data-plane pods run external-dns too")
		}
	}
	for _, want := range []string{"enabled: true", "address: 127.0.0.1:8888", "- example.com"} {
		if !strings.Contains(config, want) {
			t.Errorf("service.yaml lacks %q:\n%s", want, config)
		}
	}
	if role == nil || !bound {
		t.Fatalf("no ClusterRole svc-external-dns bound to svc-operator (role %v, bound %v)", role != nil, bound)
	}
	var reads []string
	for _, rule := range role.Rules {
		reads = append(reads, rule.Resources...)
	}
	for _, want := range []string{"services", "ingresses", "dnsendpoints", "endpointslices"} {
		if !strings.Contains(" "+strings.Join(reads, " ")+" ", " "+want+" ") {
			t.Errorf("ClusterRole lacks %s: %v", want, reads)
		}
	}

	// Off by default.
	r = proc.Run(t, nil, "", helm, "template", "svc", chart, "--namespace", "service-system")
	if r.Code != 0 {
		t.Fatalf("helm template: %s", r.Stderr)
	}
	if bytes.Contains([]byte(r.Stdout), []byte("external-dns:v")) || strings.Contains(r.Stdout, "externalDNS:") {
		t.Error("the default values render external-dns")
	}
}
