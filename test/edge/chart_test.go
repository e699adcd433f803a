package edge

import (
	"bytes"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	"sigs.k8s.io/yaml"

	"github.com/svcdns/svc/test/kube/kubeenv"
)

// helmTemplate renders the chart with the testenv's helm.
func helmTemplate(t *testing.T, args ...string) (string, error) {
	t.Helper()
	if r := kubeenv.SkipReason(); r != "" {
		t.Skip(r)
	}
	chart := filepath.Join(kubeenv.RepoRoot(), "charts", "service")
	cmd := exec.CommandContext(t.Context(), filepath.Join(kubeenv.Assets(), "helm"), append([]string{"template", "r", chart, "--namespace", "dns"}, args...)...)
	cmd.Env = append(os.Environ(), "HELM_CACHE_HOME="+t.TempDir(), "HELM_CONFIG_HOME="+t.TempDir(), "HELM_DATA_HOME="+t.TempDir())
	var out, errb bytes.Buffer
	cmd.Stdout, cmd.Stderr = &out, &errb
	err := cmd.Run()
	return out.String() + errb.String(), err
}

type obj struct {
	Kind     string `json:"kind"`
	Metadata struct {
		Name string `json:"name"`
	} `json:"metadata"`
	Spec  map[string]any   `json:"spec"`
	Rules []map[string]any `json:"rules"`
}

// TestChartEdge: edge.enabled renders a Deployment running `svc edge run`
// on the dns Service's EndpointSlices with the PROXY secret, a Service
// keeping client addresses (externalTrafficPolicy Local) and a Role that
// only lists EndpointSlices; off by default; no image is a clear error.
func TestChartEdge(t *testing.T) {
	def, err := helmTemplate(t)
	if err != nil {
		t.Fatalf("default render: %v\n%s", err, def)
	}
	if strings.Contains(def, "r-edge") {
		t.Error("the default render has edge objects")
	}
	if out, err := helmTemplate(t, "--set", "edge.enabled=true"); err == nil || !strings.Contains(out, "edge.image") {
		t.Errorf("edge without image: %v\n%s", err, out)
	}
	out, err := helmTemplate(t, "--set", "edge.enabled=true", "--set", "edge.image=example/svc-edge:1", "--set", "proxyProtocol.secretName=pp")
	if err != nil {
		t.Fatalf("%v\n%s", err, out)
	}
	found := map[string]obj{}
	for _, doc := range strings.Split(out, "\n---") {
		var o obj
		if err := yaml.Unmarshal([]byte(doc), &o); err != nil {
			t.Fatalf("%v\n%s", err, doc)
		}
		if strings.HasSuffix(o.Metadata.Name, "-edge") {
			found[o.Kind] = o
		}
	}
	for _, k := range []string{"Deployment", "Service", "ServiceAccount", "Role", "RoleBinding"} {
		if _, ok := found[k]; !ok {
			t.Errorf("no %s r-edge", k)
		}
	}
	b, _ := yaml.Marshal(found["Deployment"].Spec)
	for _, want := range []string{"--backends-from=kubernetes", "--backends=dns/r-dns", "--proxy-protocol-secret-file=/etc/service/proxy/secret", "/healthz/ready", "SERVICE_ENCRYPTION_KEY_FILE"} {
		if !strings.Contains(string(b), want) {
			t.Errorf("edge Deployment lacks %q:\n%s", want, b)
		}
	}
	if found["Service"].Spec["externalTrafficPolicy"] != "Local" {
		t.Errorf("edge Service: externalTrafficPolicy %v, want Local", found["Service"].Spec["externalTrafficPolicy"])
	}
	rules := found["Role"].Rules
	if len(rules) != 1 || !slices.Equal(toStrings(rules[0]["resources"]), []string{"endpointslices"}) || !slices.Equal(toStrings(rules[0]["verbs"]), []string{"list"}) {
		t.Errorf("edge Role: %v, want list endpointslices only", rules)
	}
}

func toStrings(v any) []string {
	var out []string
	for _, x := range v.([]any) {
		out = append(out, x.(string))
	}
	return out
}
