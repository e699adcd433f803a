package kubenode_test

import (
	"bytes"
	"context"
	"crypto/tls"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/http/cookiejar"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"sort"
	"strings"
	"testing"
	"time"

	"github.com/miekg/dns"
	authenticationv1 "k8s.io/api/authentication/v1"
	corev1 "k8s.io/api/core/v1"
	rbacv1 "k8s.io/api/rbac/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime/schema"
	utilyaml "k8s.io/apimachinery/pkg/util/yaml"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/tools/clientcmd"
	clientcmdapi "k8s.io/client-go/tools/clientcmd/api"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/svcdns/svc/internal/node"
	"github.com/svcdns/svc/test/kube/kubeenv"
	"github.com/svcdns/svc/test/nodetest"
)

// The chart's release name in these tests: its objects are service-*.
const chartRelease = "service"

// chartBootstrapToken is the admin API token the data plane installs from
// SERVICE_BOOTSTRAP_TOKEN.
const chartBootstrapToken = "svc_rbacchart001_AAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAA"

// renderChartRBAC renders the chart's ServiceAccounts and RBAC with the
// test helm binary, as `helm template` would for an install into the
// service namespace.
func renderChartRBAC(t *testing.T) []*unstructured.Unstructured {
	t.Helper()
	chart := filepath.Join(kubeenv.RepoRoot(), "charts", "service")
	cmd := exec.CommandContext(t.Context(), filepath.Join(kubeenv.Assets(), "helm"), "template", chartRelease, chart,
		"--namespace", node.DefaultNamespace, "--show-only", "templates/serviceaccounts.yaml", "--show-only", "templates/rbac.yaml",
		"--show-only", "templates/settings.yaml")
	cmd.Env = append(os.Environ(), "HELM_CACHE_HOME="+t.TempDir(), "HELM_CONFIG_HOME="+t.TempDir(), "HELM_DATA_HOME="+t.TempDir())
	var out, errb bytes.Buffer
	cmd.Stdout, cmd.Stderr = &out, &errb
	if err := cmd.Run(); err != nil {
		t.Fatalf("helm template: %v\n%s", err, errb.String())
	}
	var objs []*unstructured.Unstructured
	dec := utilyaml.NewYAMLOrJSONDecoder(&out, 4096)
	for {
		u := &unstructured.Unstructured{}
		if err := dec.Decode(&u.Object); errors.Is(err, io.EOF) {
			break
		} else if err != nil {
			t.Fatal(err)
		}
		switch u.GetKind() {
		case "ServiceAccount", "ClusterRole", "ClusterRoleBinding", "Role", "RoleBinding", "ConfigMap":
			objs = append(objs, u)
		case "":
		default:
			t.Fatalf("unexpected %s in the chart's RBAC templates", u.GetKind())
		}
	}
	if len(objs) < 8 {
		t.Fatalf("the chart renders %d RBAC objects, want ServiceAccounts, ClusterRoles, Roles and their bindings", len(objs))
	}
	return objs
}

// installChartRBAC applies the rendered RBAC to the apiserver (removed when
// the test ends) and returns kubeconfigs that authenticate as the chart's
// operator and data-plane ServiceAccounts with TokenRequest tokens.
func installChartRBAC(t *testing.T, c client.Client) (operatorKC, dataplaneKC string) {
	t.Helper()
	ctx := t.Context()
	for _, o := range renderChartRBAC(t) {
		if o.GetKind() == "ServiceAccount" || o.GetKind() == "Role" || o.GetKind() == "RoleBinding" || o.GetKind() == "ConfigMap" {
			o.SetNamespace(node.DefaultNamespace) // helm install sets the release namespace
		}
		if err := c.Patch(ctx, o, client.Apply, client.FieldOwner("helm"), client.ForceOwnership); err != nil {
			t.Fatalf("apply %s %s: %v", o.GetKind(), o.GetName(), err)
		}
		t.Cleanup(func() {
			if err := c.Delete(context.Background(), o); err != nil && !apierrors.IsNotFound(err) {
				t.Errorf("remove %s %s: %v", o.GetKind(), o.GetName(), err)
			}
		})
	}
	cs := kubernetes.NewForConfigOrDie(env.Config)
	token := func(sa string) string {
		exp := int64(3600)
		tr, err := cs.CoreV1().ServiceAccounts(node.DefaultNamespace).CreateToken(ctx, sa,
			&authenticationv1.TokenRequest{Spec: authenticationv1.TokenRequestSpec{ExpirationSeconds: &exp}}, metav1.CreateOptions{})
		if err != nil {
			t.Fatalf("token for %s: %v", sa, err)
		}
		return tr.Status.Token
	}
	return tokenKubeconfig(t, token(chartRelease+"-operator")), tokenKubeconfig(t, token(chartRelease+"-dataplane"))
}

// tokenKubeconfig writes a kubeconfig with the bearer token and the
// apiserver's CA: no client certificate, so only the token's RBAC applies.
func tokenKubeconfig(t *testing.T, token string) string {
	t.Helper()
	kc := clientcmdapi.NewConfig()
	kc.Clusters["envtest"] = &clientcmdapi.Cluster{Server: env.Config.Host, CertificateAuthorityData: env.Config.CAData}
	kc.AuthInfos["chart"] = &clientcmdapi.AuthInfo{Token: token}
	kc.Contexts["envtest"] = &clientcmdapi.Context{Cluster: "envtest", AuthInfo: "chart"}
	kc.CurrentContext = "envtest"
	p := filepath.Join(t.TempDir(), "kubeconfig")
	if err := clientcmd.WriteToFile(*kc, p); err != nil {
		t.Fatal(err)
	}
	return p
}

// apiClient calls the REST API of a node and remembers which routes (method
// and path template) it exercised.
type apiClient struct {
	t       *testing.T
	node    *testNode
	hc      *http.Client
	token   string
	csrf    string
	covered map[string]bool
	seq     int
	lastID  string
}

func newAPIClient(t *testing.T, n *testNode, token string) *apiClient {
	jar, _ := cookiejar.New(nil)
	return &apiClient{t: t, node: n, token: token, covered: map[string]bool{},
		hc: &http.Client{Timeout: 30 * time.Second, Jar: jar, Transport: &http.Transport{TLSClientConfig: &tls.Config{InsecureSkipVerify: true}}}}
}

type apiAnswer struct {
	code int
	body []byte
	id   string
}

func (a apiAnswer) String() string { return fmt.Sprintf("%d %s", a.code, a.body) }

// errorKey is error.key of an error body.
func (a apiAnswer) errorKey() string {
	var e struct {
		Error struct{ Key string } `json:"error"`
	}
	_ = json.Unmarshal(a.body, &e)
	return e.Error.Key
}

// do sends one request: route is "METHOD /template", path the concrete path
// (with query), body JSON (or raw bytes with contentType).
func (c *apiClient) do(route, path string, body any, contentType string) apiAnswer {
	c.t.Helper()
	method, _, _ := strings.Cut(route, " ")
	c.covered[route] = true
	var rd io.Reader
	switch b := body.(type) {
	case nil:
	case []byte:
		rd = bytes.NewReader(b)
	case string:
		rd = strings.NewReader(b)
	default:
		j, err := json.Marshal(b)
		if err != nil {
			c.t.Fatal(err)
		}
		rd = bytes.NewReader(j)
		if contentType == "" {
			contentType = "application/json"
		}
	}
	req, err := http.NewRequest(method, "https://"+c.node.Addrs.API+"/api/v1"+path, rd)
	if err != nil {
		c.t.Fatal(err)
	}
	if contentType != "" {
		req.Header.Set("Content-Type", contentType)
	}
	if c.token != "" {
		req.Header.Set("Authorization", "Bearer "+c.token)
	}
	if c.csrf != "" {
		req.Header.Set("X-Service-CSRF", c.csrf)
	}
	c.seq++
	id := fmt.Sprintf("chartrbac-%d-%d", time.Now().UnixNano()%1e9, c.seq)
	req.Header.Set("X-Request-ID", id)
	resp, err := c.hc.Do(req)
	if err != nil {
		c.t.Fatalf("%s %s: %v", method, path, err)
	}
	defer resp.Body.Close()
	b, _ := io.ReadAll(io.LimitReader(resp.Body, 4<<20))
	c.lastID = id
	return apiAnswer{code: resp.StatusCode, body: b, id: id}
}

// write sends a write that must succeed (one of the wanted statuses; 2xx
// by default) and never answers 5xx.
func (c *apiClient) write(route, path string, body any, contentType string, want ...int) apiAnswer {
	c.t.Helper()
	a := c.do(route, path, body, contentType)
	ok := a.code >= 200 && a.code < 300
	if len(want) > 0 {
		ok = slices.Contains(want, a.code)
	}
	if !ok || a.code >= 500 && a.code != http.StatusNotImplemented {
		c.t.Fatalf("%s (%s): %s", route, path, a)
	}
	return a
}

// results asserts that a list of ApplyResults holds no refusal.
func (c *apiClient) results(what string, a apiAnswer) {
	c.t.Helper()
	var l struct {
		Items []struct{ Kind, Name, Result, Error string }
	}
	if err := json.Unmarshal(a.body, &l); err != nil {
		c.t.Fatalf("%s: %v: %s", what, err, a.body)
	}
	for _, it := range l.Items {
		if it.Result == "error" {
			c.t.Fatalf("%s: %s %s refused: %s", what, it.Kind, it.Name, it.Error)
		}
	}
}

// writeRoutes lists every route of the node's OpenAPI document that is not
// a read ("METHOD /template").
func (c *apiClient) writeRoutes() []string {
	c.t.Helper()
	a := c.do("GET /openapi.json", "/openapi.json", nil, "")
	if a.code != http.StatusOK {
		c.t.Fatalf("openapi.json: %s", a)
	}
	var doc struct {
		Paths map[string]map[string]json.RawMessage `json:"paths"`
	}
	if err := json.Unmarshal(a.body, &doc); err != nil {
		c.t.Fatal(err)
	}
	var out []string
	for p, ops := range doc.Paths {
		for m := range ops {
			switch m = strings.ToUpper(m); m {
			case http.MethodPost, http.MethodPut, http.MethodPatch, http.MethodDelete:
				out = append(out, m+" "+p)
			}
		}
	}
	sort.Strings(out)
	return out
}

// adminSocket calls a route of the node's admin socket (as root or the
// service's own user, who are admitted).
func adminSocket(t *testing.T, n *testNode, path string, body any) apiAnswer {
	t.Helper()
	sock := filepath.Join(n.Dir, "data", "service.sock")
	hc := &http.Client{Timeout: 30 * time.Second, Transport: &http.Transport{DialContext: func(ctx context.Context, _, _ string) (net.Conn, error) {
		return (&net.Dialer{}).DialContext(ctx, "unix", sock)
	}}}
	j, _ := json.Marshal(body)
	resp, err := hc.Post("http://admin/admin/v1/"+path, "application/json", bytes.NewReader(j))
	if err != nil {
		t.Fatalf("admin socket %s: %v", path, err)
	}
	defer resp.Body.Close()
	b, _ := io.ReadAll(resp.Body)
	return apiAnswer{code: resp.StatusCode, body: b}
}

var serviceGV = schema.GroupVersion{Group: "service.io", Version: "v1alpha1"}

// onAPIServer reports whether an object of the API exists on the apiserver:
// a custom resource, or the Secret an internal kind is kept in.
func onAPIServer(c client.Client, kind, ns, name string) bool {
	switch kind {
	case "RoleBinding", "ServiceAccount", "IdentityProvider":
		var l corev1.SecretList
		if err := c.List(context.Background(), &l, client.InNamespace(node.DefaultNamespace), client.MatchingLabels{"service.io/kind": kind}); err != nil {
			return false
		}
		for _, s := range l.Items {
			if s.Annotations["service.io/name"] == name && s.Annotations["service.io/namespace"] == ns {
				return true
			}
		}
		return false
	}
	u := &unstructured.Unstructured{}
	u.SetGroupVersionKind(serviceGV.WithKind(kind))
	return c.Get(context.Background(), client.ObjectKey{Namespace: ns, Name: name}, u) == nil
}

// servedKind is one kind of /objects with a valid body for a name.
type servedKind struct {
	kind, plural, namespace string
	spec                    func(name string) map[string]any
}

func (k servedKind) path(name string) (template, path string) {
	if k.namespace == "" {
		return "/objects/" + k.plural + "/{name}", "/objects/" + k.plural + "/" + name
	}
	return "/objects/" + k.plural + "/{namespace}/{name}", "/objects/" + k.plural + "/" + k.namespace + "/" + name
}

func (k servedKind) object(name string) map[string]any {
	md := map[string]any{"name": name}
	if k.namespace != "" {
		md["namespace"] = k.namespace
	}
	return map[string]any{"apiVersion": serviceGV.String(), "kind": k.kind, "metadata": md, "spec": k.spec(name)}
}

const rbacZone = "rbac.test"

// teamAndDefault lets a zone take record sets of the namespaces the test
// writes: team (its objects) and default (the records routes' default).
var teamAndDefault = map[string]any{"from": "Names", "names": []any{"default", "team"}}

// servedKinds are every kind the API writes, with bodies that reference the
// zone, block list and client group the test applies first.
var servedKinds = []servedKind{
	{"DNSZone", "dnszones", "", func(name string) map[string]any {
		return map[string]any{"zoneName": name + ".zones.test", "nameServers": []any{"ns1." + name + ".zones.test."}}
	}},
	{"DNSRecordSet", "dnsrecordsets", "team", func(name string) map[string]any {
		return map[string]any{"zoneRef": map[string]any{"name": rbacZone},
			"endpoints": []any{map[string]any{"dnsName": name + "." + rbacZone, "recordType": "A", "targets": []any{"192.0.2.20"}}}}
	}},
	{"BlockList", "blocklists", "team", func(string) map[string]any {
		return map[string]any{"sources": []any{map[string]any{"name": "inline", "format": "domains", "inline": []any{"other.example"}}}}
	}},
	{"ClientGroup", "clientgroups", "team", func(string) map[string]any {
		return map[string]any{"addresses": []any{"198.51.100.0/24"}}
	}},
	{"Policy", "policies", "team", func(string) map[string]any {
		return map[string]any{"clientGroupRefs": []any{"lab"}, "blockListRefs": []any{"ads"}, "priority": 5}
	}},
	{"UnblockRequest", "unblockrequests", "team", func(string) map[string]any {
		return map[string]any{"domain": "bad.example", "reason": "test", "list": "team/ads", "scope": "groups", "groups": []any{"lab"}, "match": "exact", "duration": "1h",
			"requester": map[string]any{"ip": "127.0.0.1"}}
	}},
	{"RoleBinding", "rolebindings", "", func(name string) map[string]any {
		return map[string]any{"subject": map[string]any{"kind": "Group", "name": name}, "role": "viewer"}
	}},
	{"ServiceAccount", "serviceaccounts", node.DefaultNamespace, func(string) map[string]any {
		return map[string]any{"description": "chart RBAC test"}
	}},
	{"IdentityProvider", "identityproviders", "", func(name string) map[string]any {
		return map[string]any{"id": name, "displayName": "Test SSO", "issuerURL": "https://login.invalid", "clientID": "service", "clientSecretFile": "/run/secrets/oidc"}
	}},
}

// TestChartRBACWriteRoutes runs the operator and the data plane with the
// chart's own RBAC (tokens of its ServiceAccounts, as `helm template`
// renders them) and exercises every write route of the REST API: none
// answers 5xx, each write lands on the apiserver (and in DNS answers where
// it changes them), and the operator writes status with its credentials.
// Then the data plane's role loses a verb: the API answers 403 forbidden
// naming the Kubernetes permission and the fix, and logs the cause.
func TestChartRBACWriteRoutes(t *testing.T) {
	c := needEnv(t)
	opKC, dpKC := installChartRBAC(t, c)
	const adminPassword = "chart-rbac-admin-pw-1"
	op := startNode(t, "op-rbac", node.RoleOperator, opKC)
	dp := startNode(t, "dp-rbac", node.RoleDataplane, dpKC, "SERVICE_INTERNAL_PEERS="+op.Addrs.Internal,
		"SERVICE_BOOTSTRAP_TOKEN="+chartBootstrapToken, "SERVICE_ADMIN_PASSWORD="+adminPassword)
	api := newAPIClient(t, dp, chartBootstrapToken)
	// The package's tests share the apiserver: this test's policies (its
	// client group holds 127.0.0.1, every test's client) must not outlive it.
	t.Cleanup(func() { deleteServiceObjects(c, "team") })

	// --- objects through /apply: a zone with records, a block list, a
	// client group (this test's client) and a policy joining them.
	a := api.write("POST /apply", "/apply", []any{
		map[string]any{"apiVersion": "service.io/v1alpha1", "kind": "DNSZone", "metadata": map[string]any{"name": rbacZone},
			"spec": map[string]any{"nameServers": []any{"ns1." + rbacZone + "."}, "recordSetNamespaces": teamAndDefault}},
		map[string]any{"apiVersion": "service.io/v1alpha1", "kind": "DNSRecordSet", "metadata": map[string]any{"name": "web", "namespace": "team"},
			"spec": map[string]any{"zoneRef": map[string]any{"name": rbacZone},
				"endpoints": []any{map[string]any{"dnsName": "www." + rbacZone, "recordType": "A", "targets": []any{"192.0.2.10"}}}}},
		map[string]any{"apiVersion": "service.io/v1alpha1", "kind": "BlockList", "metadata": map[string]any{"name": "ads", "namespace": "team"},
			"spec": map[string]any{"sources": []any{map[string]any{"name": "inline", "format": "domains", "inline": []any{"ads.example"}}}}},
		map[string]any{"apiVersion": "service.io/v1alpha1", "kind": "ClientGroup", "metadata": map[string]any{"name": "lab", "namespace": "team"},
			"spec": map[string]any{"addresses": []any{"127.0.0.1/32"}}},
		map[string]any{"apiVersion": "service.io/v1alpha1", "kind": "Policy", "metadata": map[string]any{"name": "lab", "namespace": "team"},
			"spec": map[string]any{"clientGroupRefs": []any{"lab"}, "blockListRefs": []any{"ads"}, "priority": 10}},
	}, "")
	api.results("apply", a)
	for _, o := range [][3]string{{"DNSZone", "", rbacZone}, {"DNSRecordSet", "team", "web"}, {"BlockList", "team", "ads"}, {"ClientGroup", "team", "lab"}, {"Policy", "team", "lab"}} {
		if !onAPIServer(c, o[0], o[1], o[2]) {
			t.Fatalf("applied %s %s/%s is not on the apiserver", o[0], o[1], o[2])
		}
	}
	nodetest.Eventually(t, 10*time.Second, "www."+rbacZone+" answered", func() bool { return dp.answersA("www."+rbacZone, "192.0.2.10") })

	// --- the operator writes status with its chart credentials
	nodetest.Eventually(t, 30*time.Second, "operator writes Ready on the zone and the record set", func() bool {
		return ready(c, "DNSZone", "", rbacZone) && ready(c, "DNSRecordSet", "team", "web")
	})
	nodetest.Eventually(t, 30*time.Second, "operator writes BlockList and Policy status", func() bool {
		return hasStatus(c, "BlockList", "team", "ads") && hasStatus(c, "Policy", "team", "lab")
	})

	// --- records, import, notify
	api.write("POST /zones/{zone}/records", "/zones/"+rbacZone+"/records", map[string]any{"name": "api", "type": "A", "targets": []any{"192.0.2.11"}}, "")
	if !onAPIServer(c, "DNSRecordSet", "default", "api-"+rbacZone) {
		t.Fatal("records added through the API are not on the apiserver")
	}
	nodetest.Eventually(t, 10*time.Second, "added record answered", func() bool { return dp.answersA("api."+rbacZone, "192.0.2.11") })
	api.write("DELETE /zones/{zone}/records", "/zones/"+rbacZone+"/records?name=api&type=A", nil, "")
	nodetest.Eventually(t, 10*time.Second, "removed record gone", func() bool { return dp.rcode("api."+rbacZone) == dns.RcodeNameError })
	api.write("POST /zones/{zone}/import", "/zones/"+rbacZone+"/import?namespace=team", "imp 60 IN A 192.0.2.12\n", "text/dns")
	nodetest.Eventually(t, 10*time.Second, "imported record answered", func() bool { return dp.answersA("imp."+rbacZone, "192.0.2.12") })
	api.write("POST /zones/{zone}/notify", "/zones/"+rbacZone+"/notify", nil, "")

	// --- block-list entries: an added entry blocks for this client (the
	// policy's client group is 127.0.0.1); switching it off unblocks.
	entries := "/blocklists/team/ads/sources/inline/entries"
	a = api.write("POST /blocklists/{namespace}/{name}/sources/{source}/entries", entries, map[string]any{"values": []any{"tracker.example"}}, "")
	var created struct{ Items []struct{ ID, Value string } }
	if err := json.Unmarshal(a.body, &created); err != nil {
		t.Fatalf("entries create: %v %s", err, a.body)
	}
	entryID := ""
	for _, it := range created.Items {
		if it.Value == "tracker.example" {
			entryID = it.ID
		}
	}
	if entryID == "" {
		t.Fatalf("entries create: tracker.example not listed: %s", a.body)
	}
	waitBlocked(t, c, dp, "tracker.example", true, "added entry blocks")
	api.write("PATCH /blocklists/{namespace}/{name}/sources/{source}/entries", entries, map[string]any{"ids": []any{entryID}, "op": "disable"}, "")
	waitBlocked(t, c, dp, "tracker.example", false, "disabled entry no longer blocks")
	// entries across lists: an entry for this client's group (team/lab) blocks it
	api.write("POST /entries", "/entries", map[string]any{"action": "block", "namespace": "team", "list": "ads",
		"values": []any{"group-only.example"}, "groups": []any{"lab"}}, "")
	waitBlocked(t, c, dp, "group-only.example", true, "entry for group lab blocks")
	// the operator writes ClientGroup status (clientgroups/status)
	nodetest.Eventually(t, 20*time.Second, "ClientGroup team/lab status written", func() bool {
		s, r, _ := condition(c, "ClientGroup", "team", "lab", "Referenced")
		return s == "True" && r == "SelectedByPolicies"
	})
	// Only the operator leader fetches lists: a designed 501, not a 500.
	if a := api.write("POST /blocklists/{namespace}/{name}/refresh", "/blocklists/team/ads/refresh", nil, "", http.StatusAccepted, http.StatusNotImplemented); a.code == http.StatusNotImplemented && a.errorKey() != "not_implemented" {
		t.Fatalf("refresh on the data plane: %s", a)
	}

	// --- unblock requests (UnblockRequest and BlockList writes): one is
	// approved for everyone, which writes an allow entry into the
	// namespace's list "unblocked", and the blocked name is answered; the
	// other is denied.
	ur := func(name string) map[string]any {
		return map[string]any{"apiVersion": "service.io/v1alpha1", "kind": "UnblockRequest", "metadata": map[string]any{"name": name, "namespace": "team"},
			"spec": map[string]any{"domain": "ads.example", "reason": "needed for work", "list": "team/ads"}}
	}
	api.results("apply unblock requests", api.write("POST /apply", "/apply", []any{ur("ads-ok"), ur("ads-no")}, ""))
	api.write("POST /unblockrequests/{namespace}/{name}/approve", "/unblockrequests/team/ads-ok/approve", map[string]any{"scope": "everyone"}, "")
	if !onAPIServer(c, "BlockList", "team", "unblocked") {
		t.Fatal("the approval's allow list is not on the apiserver")
	}
	waitBlocked(t, c, dp, "ads.example", false, "approved name answered")
	api.write("POST /unblockrequests/{namespace}/{name}/deny", "/unblockrequests/team/ads-no/deny", map[string]any{"comment": "not this one"}, "")

	// --- local users (LocalUser Secrets): create, change groups, disable,
	// enable, reset the password, delete.
	api.write("POST /iam/users", "/iam/users", map[string]any{"name": "rbac-user", "password": "rbac user password 1", "groups": []any{"team-ops"}}, "")
	api.write("PATCH /iam/users/{name}", "/iam/users/rbac-user", map[string]any{"groups": []any{"team-ops", "auditors"}}, "")
	api.write("POST /iam/users/{name}/disable", "/iam/users/rbac-user/disable", nil, "")
	api.write("POST /iam/users/{name}/enable", "/iam/users/rbac-user/enable", nil, "")
	api.write("POST /iam/users/{name}/reset-password", "/iam/users/rbac-user/reset-password", map[string]any{"revokeTokens": true}, "")
	api.write("DELETE /iam/users/{name}", "/iam/users/rbac-user", nil, "")

	// --- every kind through /objects: create (PUT), merge-patch, delete,
	// batch-delete; each lands on (and leaves) the apiserver.
	for _, k := range servedKinds {
		tmpl, p := k.path("rbac-put")
		api.write("PUT "+tmpl, p, k.object("rbac-put"), "")
		if !onAPIServer(c, k.kind, k.namespace, "rbac-put") {
			t.Fatalf("PUT %s: not on the apiserver", k.kind)
		}
		api.write("PATCH "+tmpl, p, `{"metadata":{"labels":{"patched":"yes"}}}`, "application/merge-patch+json")
		api.write("DELETE "+tmpl, p, nil, "")
		if onAPIServer(c, k.kind, k.namespace, "rbac-put") {
			t.Fatalf("DELETE %s: still on the apiserver", k.kind)
		}
		_, pb := k.path("rbac-batch")
		api.write("PUT "+tmpl, pb, k.object("rbac-batch"), "")
		a := api.write("POST /objects/"+k.plural+"/batch-delete", "/objects/"+k.plural+"/batch-delete", map[string]any{"names": []any{"rbac-batch"}, "namespace": k.namespace}, "")
		api.results("batch-delete "+k.kind, a)
		if onAPIServer(c, k.kind, k.namespace, "rbac-batch") {
			t.Fatalf("batch-delete %s: still on the apiserver", k.kind)
		}
	}

	// --- DNS and node routes (no apiserver writes, but served here)
	api.write("POST /dns/query", "/dns/query", map[string]any{"name": "www." + rbacZone, "type": "A"}, "")
	api.write("POST /dns/blocking", "/dns/blocking", map[string]any{"blocking": false, "duration": "1m"}, "")
	api.write("POST /dns/blocking", "/dns/blocking", map[string]any{"blocking": true}, "")
	api.write("POST /cache/flush", "/cache/flush", map[string]any{}, "")
	// Cluster settings live in the chart's ConfigMap (settingsshared_test.go).
	api.write("PATCH /settings", "/settings", map[string]any{"blocking": map[string]any{"blockTTL": "30s"}}, "application/merge-patch+json", http.StatusOK)
	api.write("PATCH /node/config", "/node/config", map[string]any{"log": map[string]any{"queries": true}}, "application/merge-patch+json", http.StatusOK, http.StatusNoContent, http.StatusConflict, http.StatusBadRequest)

	// --- tokens (Secrets in the service namespace): a created token
	// authenticates; a revoked one no longer does.
	a = api.write("POST /auth/tokens", "/auth/tokens", map[string]any{"description": "chart rbac", "expiresIn": "1h"}, "")
	var tok struct{ ID, Token string }
	if err := json.Unmarshal(a.body, &tok); err != nil || tok.Token == "" {
		t.Fatalf("token create: %v %s", err, a.body)
	}
	if a := newAPIClient(t, dp, tok.Token).do("GET /auth/me", "/auth/me", nil, ""); a.code != http.StatusOK {
		t.Fatalf("created token: %s", a)
	}
	api.write("DELETE /auth/tokens/{id}", "/auth/tokens/"+tok.ID, nil, "")
	nodetest.Eventually(t, 10*time.Second, "revoked token refused", func() bool {
		return newAPIClient(t, dp, tok.Token).do("GET /auth/me", "/auth/me", nil, "").code == http.StatusUnauthorized
	})

	// --- local login, password change (LocalUser Secrets), logout
	sess := newAPIClient(t, dp, "")
	sess.covered = api.covered
	a = sess.write("POST /auth/login", "/auth/login", map[string]any{"username": "admin", "password": adminPassword}, "")
	var me struct{ CSRF string }
	_ = json.Unmarshal(a.body, &me)
	sess.csrf = me.CSRF
	a = sess.write("POST /auth/password", "/auth/password", map[string]any{"currentPassword": adminPassword, "newPassword": adminPassword + "-new"}, "")
	_ = json.Unmarshal(a.body, &me) // the session is renewed with a new CSRF token
	sess.csrf = me.CSRF
	sess.write("POST /auth/logout", "/auth/logout", nil, "")
	sess.csrf = ""
	sess.write("POST /auth/login", "/auth/login", map[string]any{"username": "admin", "password": adminPassword + "-new"}, "")

	// --- a backup's users restored (LocalUser Secrets): created without a
	// password (the backup held no hash), then unchanged on a second restore.
	restore := map[string]any{"items": []any{map[string]any{"username": "restored", "groups": []any{"team-ops"}}}}
	a = api.write("POST /backup/users", "/backup/users", restore, "")
	if !strings.Contains(string(a.body), `"result":"created"`) || !strings.Contains(string(a.body), `"needsPassword":true`) {
		t.Fatalf("users restore: %s", a.body)
	}
	if a = api.write("POST /backup/users", "/backup/users", restore, ""); !strings.Contains(string(a.body), `"result":"unchanged"`) {
		t.Fatalf("second users restore: %s", a.body)
	}

	// --- the admin socket's writes (Secrets too)
	if a := adminSocket(t, dp, "create-token", map[string]any{"description": "break glass"}); a.code != http.StatusCreated {
		t.Fatalf("admin socket create-token: %s", a)
	}
	if a := adminSocket(t, dp, "reset-password", map[string]any{"username": "ops", "create": true}); a.code != http.StatusOK {
		t.Fatalf("admin socket reset-password: %s", a)
	}

	// --- zone delete, last: the zone and its record sets leave the
	// apiserver and the names stop resolving.
	api.write("DELETE /zones/{zone}", "/zones/"+rbacZone, nil, "")
	nodetest.Eventually(t, 10*time.Second, "deleted zone gone from the apiserver", func() bool {
		return !onAPIServer(c, "DNSZone", "", rbacZone) && !onAPIServer(c, "DNSRecordSet", "team", "web")
	})
	nodetest.Eventually(t, 10*time.Second, "deleted zone no longer answered", func() bool { return !dp.answersA("www."+rbacZone, "192.0.2.10") })

	// Every write route of the API was exercised.
	var missed []string
	for _, r := range api.writeRoutes() {
		if !api.covered[r] {
			missed = append(missed, r)
		}
	}
	if len(missed) > 0 {
		t.Fatalf("write routes not exercised under the chart's RBAC: %s", strings.Join(missed, ", "))
	}

	// --- negative: the data plane's ClusterRole loses "create" on the
	// service.io kinds. Adding records to a new record set is then refused
	// with 403 forbidden naming the Kubernetes permission and the fix (not
	// a 500), and the request's log line carries the cause at ERROR.
	api.write("PUT /objects/dnszones/{name}", "/objects/dnszones/neg.test", servedKind{kind: "DNSZone", spec: func(string) map[string]any {
		return map[string]any{"nameServers": []any{"ns1.neg.test."}, "recordSetNamespaces": teamAndDefault}
	}}.object("neg.test"), "")
	setDataplaneVerbs(t, c, "get", "list", "watch", "update", "delete")
	var refused apiAnswer
	negSet, attempt := "", 0
	nodetest.Eventually(t, 15*time.Second, "records write refused once the role lost create", func() bool {
		// A new record set each attempt: one that lands before the
		// apiserver's RBAC cache has the change creates its set, and
		// adding to an existing set needs only update (CI saw exactly
		// that: every later attempt answered 200).
		attempt++
		negSet = fmt.Sprintf("neg%d", attempt)
		refused = api.do("POST /zones/{zone}/records", "/zones/neg.test/records", map[string]any{"name": "x", "type": "A", "targets": []any{"192.0.2.30"}, "recordSet": negSet, "namespace": "team"}, "")
		if refused.code >= 500 {
			t.Fatalf("a refused write answered %s", refused)
		}
		return refused.code == http.StatusForbidden
	})
	var body struct {
		Error struct{ Key, Message, Hint, Missing string } `json:"error"`
	}
	if err := json.Unmarshal(refused.body, &body); err != nil {
		t.Fatal(err)
	}
	want := "create dnsrecordsets.service.io in namespace team"
	if body.Error.Key != "forbidden" || !strings.Contains(body.Error.Missing, want) || !strings.Contains(body.Error.Message, want) ||
		!strings.Contains(body.Error.Message, "system:serviceaccount:"+node.DefaultNamespace+":"+chartRelease+"-dataplane") ||
		!strings.Contains(body.Error.Hint, "rbac.yaml") {
		t.Fatalf("refusal does not name the permission, the account and the fix: %s", refused.body)
	}
	logged := `level=ERROR msg="api request" node=dp-rbac role=dataplane component=api request_id=` + refused.id + ` method=POST path=/api/v1/zones/neg.test/records status=403`
	nodetest.Eventually(t, 5*time.Second, "the refusal is logged at ERROR under its request id", func() bool { return dp.Log.Contains(logged) })
	if !dp.Log.Contains(`cannot create resource \"dnsrecordsets\" in API group \"service.io\" in the namespace \"team\"`) {
		t.Fatal("the log does not carry the apiserver's refusal")
	}
	if onAPIServer(c, "DNSRecordSet", "team", negSet) {
		t.Fatal("a refused write landed")
	}

	// Given the verb back, the same write lands.
	setDataplaneVerbs(t, c, "get", "list", "watch", "create", "update", "delete")
	nodetest.Eventually(t, 15*time.Second, "records write allowed again", func() bool {
		a := api.do("POST /zones/{zone}/records", "/zones/neg.test/records", map[string]any{"name": "x", "type": "A", "targets": []any{"192.0.2.30"}, "recordSet": negSet, "namespace": "team"}, "")
		if a.code >= 500 {
			t.Fatalf("answered %s", a)
		}
		return a.code < 300
	})
	nodetest.Eventually(t, 10*time.Second, "record of the restored role answered", func() bool { return dp.answersA("x.neg.test", "192.0.2.30") })
}

// setDataplaneVerbs replaces the verbs of the chart's data-plane
// ClusterRole rule on the service.io kinds.
func setDataplaneVerbs(t *testing.T, c client.Client, verbs ...string) {
	t.Helper()
	var cr rbacv1.ClusterRole
	if err := c.Get(t.Context(), client.ObjectKey{Name: chartRelease + "-dataplane"}, &cr); err != nil {
		t.Fatal(err)
	}
	found := false
	for i, r := range cr.Rules {
		if slices.Contains(r.APIGroups, "service.io") {
			cr.Rules[i].Verbs = verbs
			found = true
		}
	}
	if !found {
		t.Fatal("the data-plane ClusterRole has no service.io rule")
	}
	if err := c.Update(t.Context(), &cr); err != nil {
		t.Fatal(err)
	}
}

// hasStatus reports whether an object carries status conditions.
func hasStatus(c client.Client, kind, ns, name string) bool {
	u := &unstructured.Unstructured{}
	u.SetGroupVersionKind(serviceGV.WithKind(kind))
	if err := c.Get(context.Background(), client.ObjectKey{Namespace: ns, Name: name}, u); err != nil {
		return false
	}
	conds, _, _ := unstructured.NestedSlice(u.Object, "status", "conditions")
	return len(conds) > 0
}

// blocked reports whether the node blocks name for this client (the block
// lists' default answer: NXDOMAIN or an unspecified address).
// waitBlocked waits up to 15s for name's verdict on n to be want; on a
// timeout it shows the last answer and the lists of namespace team as the
// apiserver has them, so a failure in CI says which side lagged.
func waitBlocked(t *testing.T, c client.Client, n *testNode, name string, want bool, what string) {
	t.Helper()
	if nodetest.Within(15*time.Second, func() bool { return blocked(n, name) == want }) {
		return
	}
	last := "no answer"
	if r := n.query(name, dns.TypeA); r != nil {
		last = r.String()
	}
	var lists unstructured.UnstructuredList
	lists.SetGroupVersionKind(serviceGV.WithKind("BlockListList"))
	_ = c.List(context.Background(), &lists, client.InNamespace("team"))
	var dump strings.Builder
	for _, l := range lists.Items {
		b, _ := json.Marshal(map[string]any{"name": l.GetName(), "rv": l.GetResourceVersion(), "spec": l.Object["spec"], "status": l.Object["status"]})
		dump.Write(b)
		dump.WriteByte('\n')
	}
	t.Fatalf("%s: not true within 15s\nlast answer for %s:\n%s\nblock lists in team:\n%s", what, name, last, dump.String())
}

func blocked(n *testNode, name string) bool {
	r := n.query(name, dns.TypeA)
	if r == nil {
		return false
	}
	if r.Rcode == dns.RcodeNameError {
		return true
	}
	for _, rr := range r.Answer {
		if a, ok := rr.(*dns.A); ok && a.A.IsUnspecified() {
			return true
		}
	}
	return false
}

// deleteServiceObjects deletes every service.io object of the namespace
// (Policies, ClientGroups, BlockLists, DNSRecordSets, UnblockRequests).
func deleteServiceObjects(c client.Client, ns string) {
	for _, kind := range []string{"Policy", "ClientGroup", "BlockList", "DNSRecordSet", "UnblockRequest"} {
		u := &unstructured.Unstructured{}
		u.SetGroupVersionKind(serviceGV.WithKind(kind))
		_ = c.DeleteAllOf(context.Background(), u, client.InNamespace(ns))
	}
}
