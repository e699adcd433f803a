package kube_test

import (
	"fmt"
	"reflect"
	"strings"
	"testing"

	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/svcdns/svc/internal/settings"
)

// containerPorts maps the first container's port names to their ports (and
// protocol) in a workload.
func containerPorts(t *testing.T, o *unstructured.Unstructured) map[string]map[string]any {
	t.Helper()
	cs, _, _ := unstructured.NestedSlice(o.Object, "spec", "template", "spec", "containers")
	if len(cs) == 0 {
		t.Fatalf("%s %s has no containers", o.GetKind(), o.GetName())
	}
	ps, _, _ := unstructured.NestedSlice(cs[0].(map[string]any), "ports")
	out := map[string]map[string]any{}
	for _, p := range ps {
		pm := p.(map[string]any)
		out[pm["name"].(string)] = pm
	}
	return out
}

// probePort resolves the port of a container's probe (named or numeric).
func probePort(t *testing.T, o *unstructured.Unstructured, probe string) string {
	t.Helper()
	cs, _, _ := unstructured.NestedSlice(o.Object, "spec", "template", "spec", "containers")
	p, ok, _ := unstructured.NestedFieldNoCopy(cs[0].(map[string]any), probe, "httpGet", "port")
	if !ok {
		t.Fatalf("%s %s: no %s", o.GetKind(), o.GetName(), probe)
	}
	if name, isName := p.(string); isName {
		cp, ok := containerPorts(t, o)[name]
		if !ok {
			t.Fatalf("%s %s: %s names port %q, which the container does not declare", o.GetKind(), o.GetName(), probe, name)
		}
		return fmt.Sprint(cp["containerPort"])
	}
	return fmt.Sprint(p)
}

func loadSettings(t *testing.T, objs []*unstructured.Unstructured) settings.Listeners {
	t.Helper()
	return renderedListeners(t, find(t, objs, "ConfigMap", "service-config"))
}

// TestChartPortsReachSettings renders non-default ports.*: the settings
// file the pods load binds exactly the ports the containers declare and the
// probes, Services, peers and scrape annotation use (before, only the
// probes moved and the process kept 8081).
func TestChartPortsReachSettings(t *testing.T) {
	for _, tc := range []struct {
		name string
		set  []string
		want map[string]string // port name -> number
	}{
		{"defaults", nil, map[string]string{"dns": "53", "api": "8080", "ops": "8081", "internal": "8082", "metrics": "9153"}},
		{"moved", []string{"--set", "ports.dns=5353,ports.api=9080,ports.ops=9081,ports.internal=9082,ports.metrics=9154"},
			map[string]string{"dns": "5353", "api": "9080", "ops": "9081", "internal": "9082", "metrics": "9154"}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			objs := render(t, tc.set...)
			l := loadSettings(t, objs)
			bound := map[string]string{"api": l.API.Address, "ops": l.Ops.Address, "internal": l.Internal.Address, "metrics": l.Metrics.Address}
			if len(l.DNS) != 1 {
				t.Fatalf("rendered DNS listeners %+v, want one", l.DNS)
			}
			bound["dns"] = l.DNS[0].Address
			for name, port := range tc.want {
				if got := bound[name]; got != "0.0.0.0:"+port {
					t.Errorf("settings bind %s on %q, want 0.0.0.0:%s", name, got, port)
				}
			}
			if p := l.DNS[0].Protocols; len(p) != 2 {
				t.Errorf("DNS listener protocols %v, want udp and tcp", p)
			}
			for _, w := range []*unstructured.Unstructured{find(t, objs, "DaemonSet", "service-dataplane"), find(t, objs, "Deployment", "service-operator")} {
				ports := containerPorts(t, w)
				for name, port := range map[string]string{"dns-udp": tc.want["dns"], "dns-tcp": tc.want["dns"], "api": tc.want["api"],
					"ops": tc.want["ops"], "internal": tc.want["internal"], "metrics": tc.want["metrics"]} {
					if got := fmt.Sprint(ports[name]["containerPort"]); got != port {
						t.Errorf("%s containerPort %s = %s, the settings bind %s", w.GetKind(), name, got, port)
					}
				}
				for _, probe := range []string{"livenessProbe", "readinessProbe"} {
					if got := probePort(t, w, probe); got != tc.want["ops"] {
						t.Errorf("%s %s on %s, the ops listener binds %s", w.GetKind(), probe, got, tc.want["ops"])
					}
				}
				if got, _, _ := unstructured.NestedString(w.Object, "spec", "template", "metadata", "annotations", "prometheus.io/port"); got != tc.want["metrics"] {
					t.Errorf("%s prometheus.io/port %q, metrics bind %s", w.GetKind(), got, tc.want["metrics"])
				}
			}
			cs, _, _ := unstructured.NestedSlice(find(t, objs, "DaemonSet", "service-dataplane").Object, "spec", "template", "spec", "containers")
			env, _, _ := unstructured.NestedSlice(cs[0].(map[string]any), "env")
			var peers string
			for _, e := range env {
				if e.(map[string]any)["name"] == "SERVICE_INTERNAL_PEERS" {
					peers = fmt.Sprint(e.(map[string]any)["value"])
				}
			}
			if !strings.HasSuffix(peers, ":"+tc.want["internal"]) {
				t.Errorf("SERVICE_INTERNAL_PEERS %q, the internal listeners bind %s", peers, tc.want["internal"])
			}
			dryRun(t, objs)
		})
	}
}

// TestChartRefusesConflictingPorts: two listeners on one port, or a
// listener address under settings (which would leave the probes and
// containerPorts behind), are refused at render time with the fix.
func TestChartRefusesConflictingPorts(t *testing.T) {
	for _, tc := range []struct{ set, want string }{
		{"ports.ops=8080", "ports.api and ports.ops are both 8080"},
		{"ports.metrics=53", "ports.dns and ports.metrics are both 53"},
		{"settings.listeners.ops.address=0.0.0.0:9999", "settings.listeners.ops.address is set by the chart: use ports.ops"},
		{"settings.listeners.dns[0].address=0.0.0.0:53", "settings.listeners.dns is set by the chart: use ports.dns"},
		{"dataplane.hostPort.enabled=true,dataplane.hostNetwork=true", "dataplane.hostPort.enabled cannot be combined with dataplane.hostNetwork"},
	} {
		out, err := helmRun(t, "template", "service", chartDir(), "--set", tc.set)
		if err == nil || !strings.Contains(string(out), tc.want) {
			t.Errorf("--set %s: err %v, output %q; want a refusal saying %q", tc.set, err, tail(out), tc.want)
		}
	}
	// settings that are not listener addresses still reach the file
	l := loadSettings(t, render(t, "--set", "settings.listeners.api.tls.auto=off"))
	if l.API.TLS.Auto != "off" || l.API.Address != "0.0.0.0:8080" {
		t.Errorf("settings.listeners.api.tls.auto=off rendered %+v", l.API)
	}
}

func tail(b []byte) string {
	s := strings.TrimSpace(string(b))
	if len(s) > 600 {
		s = "..." + s[len(s)-600:]
	}
	return s
}

// TestChartSchema: values.schema.json refuses bad values at lint and
// template time, naming the value (before, operator.replicas=abc passed
// lint and dry run and failed at install, leaving a Secret behind).
func TestChartSchema(t *testing.T) {
	bad := []struct{ set, path string }{
		{"operator.replicas=abc", "operator/replicas"},
		{"operator.replicas=-1", "operator/replicas"},
		{"operator.replica=2", "operator"},
		{"operator.podAntiAffinity=maybe", "operator/podAntiAffinity"},
		{"operator.topologySpreadConstraints[0].whenUnsatisfiable=Sometimes", "operator/topologySpreadConstraints/0/whenUnsatisfiable"},
		{"operator.topologySpreadConstraints[0].maxSkew=0", "operator/topologySpreadConstraints/0/maxSkew"},
		{"operator.pdb.minAvailable=half", "operator/pdb/minAvailable"},
		{"operator.priorityClassName=Not_A_Name", "operator/priorityClassName"},
		{"dataplane.hostNetwork=yes", "dataplane/hostNetwork"},
		{"dataplane.hostPort.port=70000", "dataplane/hostPort/port"},
		{"dataplane.nodeLocal.address=node-local", "dataplane/nodeLocal/address"},
		{"dataplane.nodeLocal.extraAddresses={10.96.0.10,10.96.0.10}", "dataplane/nodeLocal/extraAddresses"},
		{"dataplane.resources.limits.memory=lots", "dataplane/resources/limits/memory"},
		{"dataplane.tolerations[0].operator=Maybe", "dataplane/tolerations/0/operator"},
		{"ports.ops=0", "ports/ops"},
		{"ports.dns=65536", "ports/dns"},
		{"ports.api=http", "ports/api"},
		{"service.dns.type=External", "service/dns/type"},
		{"image.pullPolicy=Sometimes", "image/pullPolicy"},
		{"image.repository=", "image/repository"},
		{"tls.doh.path=dns-query", "tls/doh/path"},
		{"tls.dot.port=853a", "tls/dot/port"},
		{"tls.secretName=Bad_Name", "tls/secretName"},
		{"proxyProtocol.from={load-balancer}", "proxyProtocol/from/0"},
		{"encryptionKey.value=short", "encryptionKey/value"},
		{"crds.install=maybe", "crds/install"},
		{"networkPolicy.enabled=on", "networkPolicy/enabled"},
		{"networkPolicy.api.from[0].podSelector.labels.app=x", "networkPolicy/api/from/0/podSelector"},
		{"networkPolicy.metrics.from[0].ipBlock.cidr=everyone", "networkPolicy/metrics/from/0/ipBlock/cidr"},
		{"metrics.serviceMonitor.interval=often", "metrics/serviceMonitor/interval"},
		{"unknown=1", "unknown"},
	}
	for _, tc := range bad {
		for _, cmd := range []string{"template", "lint"} {
			args := []string{cmd, chartDir(), "--set", tc.set}
			if cmd == "template" {
				args = append([]string{cmd, "service"}, args[1:]...)
			}
			out, err := helmRun(t, args...)
			if err == nil {
				t.Errorf("helm %s --set %s: accepted", cmd, tc.set)
				continue
			}
			if !strings.Contains(string(out), "schema") || !strings.Contains(string(out), tc.path) {
				t.Errorf("helm %s --set %s refused without naming %s:\n%s", cmd, tc.set, tc.path, tail(out))
			}
		}
	}
	for _, set := range []string{
		"operator.replicas=3,operator.podAntiAffinity=hard,operator.pdb.minAvailable=50%",
		"operator.topologySpreadConstraints=null",
		"dataplane.hostPort.enabled=true,dataplane.hostPort.port=1053",
		"dataplane.nodeLocal.enabled=true,dataplane.nodeLocal.extraAddresses={10.96.0.10,fd00::a}",
		"networkPolicy.enabled=true,networkPolicy.api.from[0].namespaceSelector.matchLabels.team=web,networkPolicy.metrics.from[0].ipBlock.cidr=10.0.0.0/8",
		"encryptionKey.value=" + strings.Repeat("ab", 32),
		"proxyProtocol.from={10.0.0.0/8,192.168.1.5,fd00::/8}",
		"operator.priorityClassName=dns-critical,dataplane.priorityClassName=system-node-critical",
		"settings.logging.level=debug",
	} {
		if out, err := helmRun(t, "template", "service", chartDir(), "--set", set); err != nil {
			t.Errorf("helm template --set %s refused: %v\n%s", set, err, tail(out))
		}
	}
}

// podSpec returns spec.template.spec of a workload.
func podSpec(o *unstructured.Unstructured) map[string]any {
	s, _, _ := unstructured.NestedMap(o.Object, "spec", "template", "spec")
	return s
}

// TestChartScheduling: the operator replicas spread over nodes (soft
// anti-affinity by default, hard or none on request) and zones, both
// selecting the operator pods; priorityClassName reaches each component;
// the apiserver accepts every variant.
func TestChartScheduling(t *testing.T) {
	operatorSel := map[string]any{"app.kubernetes.io/name": "service", "app.kubernetes.io/instance": "service", "app.kubernetes.io/component": "operator"}
	for _, tc := range []struct {
		name, set, anti string
		spread          int
	}{
		{"defaults", "", "preferred", 1},
		{"hard", "operator.podAntiAffinity=hard", "required", 1},
		{"none", "operator.podAntiAffinity=none,operator.topologySpreadConstraints=null", "", 0},
		{"custom-spread", "operator.topologySpreadConstraints[0].maxSkew=2,operator.topologySpreadConstraints[0].topologyKey=kubernetes.io/hostname,operator.topologySpreadConstraints[0].whenUnsatisfiable=DoNotSchedule", "preferred", 1},
	} {
		t.Run(tc.name, func(t *testing.T) {
			args := []string{}
			if tc.set != "" {
				args = append(args, "--set", tc.set)
			}
			objs := render(t, args...)
			op := podSpec(find(t, objs, "Deployment", "service-operator"))
			var term map[string]any
			switch tc.anti {
			case "preferred":
				ts, _, _ := unstructured.NestedSlice(op, "affinity", "podAntiAffinity", "preferredDuringSchedulingIgnoredDuringExecution")
				if len(ts) == 1 {
					term, _, _ = unstructured.NestedMap(ts[0].(map[string]any), "podAffinityTerm")
				}
			case "required":
				ts, _, _ := unstructured.NestedSlice(op, "affinity", "podAntiAffinity", "requiredDuringSchedulingIgnoredDuringExecution")
				if len(ts) == 1 {
					term = ts[0].(map[string]any)
				}
			default:
				if op["affinity"] != nil {
					t.Errorf("podAntiAffinity=none, yet affinity %v", op["affinity"])
				}
			}
			if tc.anti != "" {
				sel, _, _ := unstructured.NestedMap(term, "labelSelector", "matchLabels")
				if term["topologyKey"] != "kubernetes.io/hostname" || !reflect.DeepEqual(sel, operatorSel) {
					t.Errorf("%s anti-affinity term %v, want hostname and the operator pods' labels", tc.anti, term)
				}
			}
			spread, _, _ := unstructured.NestedSlice(op, "topologySpreadConstraints")
			if len(spread) != tc.spread {
				t.Fatalf("topologySpreadConstraints %v, want %d", spread, tc.spread)
			}
			for _, c := range spread {
				sel, _, _ := unstructured.NestedMap(c.(map[string]any), "labelSelector", "matchLabels")
				if !reflect.DeepEqual(sel, operatorSel) {
					t.Errorf("spread constraint %v does not select the operator pods", c)
				}
			}
			if tc.name == "custom-spread" && (fmt.Sprint(spread[0].(map[string]any)["maxSkew"]) != "2" || spread[0].(map[string]any)["whenUnsatisfiable"] != "DoNotSchedule") {
				t.Errorf("custom spread rendered %v", spread[0])
			}
			if tc.name == "defaults" && (spread[0].(map[string]any)["topologyKey"] != "topology.kubernetes.io/zone" || spread[0].(map[string]any)["whenUnsatisfiable"] != "ScheduleAnyway") {
				t.Errorf("default spread %v, want zones, ScheduleAnyway", spread[0])
			}
			for _, w := range []*unstructured.Unstructured{find(t, objs, "Deployment", "service-operator"), find(t, objs, "DaemonSet", "service-dataplane")} {
				if pc := podSpec(w)["priorityClassName"]; pc != nil {
					t.Errorf("%s priorityClassName %v by default", w.GetKind(), pc)
				}
			}
			dryRun(t, objs)
		})
	}

	objs := render(t, "--set", "operator.priorityClassName=dns-operator,dataplane.priorityClassName=system-cluster-critical")
	if pc := podSpec(find(t, objs, "Deployment", "service-operator"))["priorityClassName"]; pc != "dns-operator" {
		t.Errorf("operator priorityClassName %v", pc)
	}
	ds := find(t, objs, "DaemonSet", "service-dataplane")
	if pc := podSpec(ds)["priorityClassName"]; pc != "system-cluster-critical" {
		t.Errorf("data plane priorityClassName %v", pc)
	}
	dryRun(t, objs)
	// What docs/kubernetes.md says about system-cluster-critical outside
	// kube-system, asked of the apiserver with the data plane's own pod.
	for _, namespace := range []string{ns, "kube-system"} {
		if err := dryRunPod(t, ds, namespace); err != nil {
			t.Errorf("a data-plane pod with system-cluster-critical in %s: %v", namespace, err)
		}
	}
}

// dryRunPod creates a pod from a workload's template with a server-side dry
// run in namespace (admission, including Priority, runs).
func dryRunPod(t *testing.T, w *unstructured.Unstructured, namespace string) error {
	t.Helper()
	tmpl, _, _ := unstructured.NestedMap(w.Object, "spec", "template")
	pod := &unstructured.Unstructured{Object: map[string]any{"apiVersion": "v1", "kind": "Pod", "metadata": tmpl["metadata"], "spec": tmpl["spec"]}}
	pod.SetName("dry-run-" + w.GetName())
	// no ServiceAccount there: this asks the Priority admission only
	unstructured.RemoveNestedField(pod.Object, "spec", "serviceAccountName")
	pod.SetNamespace(namespace)
	if err := env.Namespaces(t.Context(), namespace); err != nil {
		t.Fatal(err)
	}
	return crClient(t).Create(t.Context(), pod, client.DryRunAll)
}

// TestChartNetworkPolicy: off by default; when on, one policy per
// component: DNS (plain and encrypted) from anywhere, API and metrics from
// the configured peers only, internal from the release's pods only.
func TestChartNetworkPolicy(t *testing.T) {
	for _, o := range render(t) {
		if o.GetKind() == "NetworkPolicy" {
			t.Fatalf("NetworkPolicy %s rendered by default", o.GetName())
		}
	}
	apiPeer := map[string]any{"namespaceSelector": map[string]any{"matchLabels": map[string]any{"kubernetes.io/metadata.name": "ingress"}}}
	metricsPeer := map[string]any{"namespaceSelector": map[string]any{"matchLabels": map[string]any{"kubernetes.io/metadata.name": "monitoring"}}}
	release := map[string]any{"podSelector": map[string]any{"matchLabels": map[string]any{"app.kubernetes.io/name": "service", "app.kubernetes.io/instance": "service"}}}
	for _, tc := range []struct {
		name string
		set  []string
		// rules per component: "ports <- peers" (peers "*" for anyone)
		dataplane, operator []string
	}{
		{"closed", []string{"--set", "networkPolicy.enabled=true"},
			[]string{"dns-udp/UDP,dns-tcp/TCP <- *", "internal/TCP <- release"},
			[]string{"internal/TCP <- release"}},
		{"peers", []string{"--set", "networkPolicy.enabled=true,tls.secretName=dns-tls,tls.doq.enabled=false",
			"--set-json", `networkPolicy.api.from=[{"namespaceSelector":{"matchLabels":{"kubernetes.io/metadata.name":"ingress"}}}]`,
			"--set-json", `networkPolicy.metrics.from=[{"namespaceSelector":{"matchLabels":{"kubernetes.io/metadata.name":"monitoring"}}}]`},
			[]string{"dns-udp/UDP,dns-tcp/TCP,dot/TCP,doh/TCP,doh3/UDP <- *", "api/TCP <- api", "internal/TCP <- release", "metrics/TCP <- metrics"},
			[]string{"internal/TCP <- release", "metrics/TCP <- metrics"}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			objs := render(t, tc.set...)
			for comp, want := range map[string][]string{"dataplane": tc.dataplane, "operator": tc.operator} {
				np := find(t, objs, "NetworkPolicy", "service-"+comp)
				sel, _, _ := unstructured.NestedMap(np.Object, "spec", "podSelector", "matchLabels")
				if sel["app.kubernetes.io/component"] != comp || sel["app.kubernetes.io/instance"] != "service" {
					t.Errorf("%s policy selects %v", comp, sel)
				}
				types, _, _ := unstructured.NestedStringSlice(np.Object, "spec", "policyTypes")
				if !reflect.DeepEqual(types, []string{"Ingress"}) {
					t.Errorf("%s policyTypes %v, want Ingress only (egress stays open)", comp, types)
				}
				rules, _, _ := unstructured.NestedSlice(np.Object, "spec", "ingress")
				var got []string
				for _, r := range rules {
					rm := r.(map[string]any)
					var ports []string
					for _, p := range rm["ports"].([]any) {
						ports = append(ports, fmt.Sprintf("%v/%v", p.(map[string]any)["port"], p.(map[string]any)["protocol"]))
					}
					from := "*"
					if f, ok := rm["from"].([]any); ok {
						switch {
						case reflect.DeepEqual(f, []any{release}):
							from = "release"
						case reflect.DeepEqual(f, []any{apiPeer}):
							from = "api"
						case reflect.DeepEqual(f, []any{metricsPeer}):
							from = "metrics"
						default:
							from = fmt.Sprint(f)
						}
					}
					got = append(got, strings.Join(ports, ",")+" <- "+from)
				}
				if !reflect.DeepEqual(got, want) {
					t.Errorf("%s ingress %q, want %q", comp, got, want)
				}
			}
			// every named port exists on the pods it selects
			for _, comp := range []string{"dataplane", "operator"} {
				kind := map[string]string{"dataplane": "DaemonSet", "operator": "Deployment"}[comp]
				ports := containerPorts(t, find(t, objs, kind, "service-"+comp))
				rules, _, _ := unstructured.NestedSlice(find(t, objs, "NetworkPolicy", "service-"+comp).Object, "spec", "ingress")
				for _, r := range rules {
					for _, p := range r.(map[string]any)["ports"].([]any) {
						pm := p.(map[string]any)
						cp, ok := ports[pm["port"].(string)]
						if !ok || cp["protocol"] != pm["protocol"] {
							t.Errorf("%s policy allows port %v/%v, which its pods do not declare", comp, pm["port"], pm["protocol"])
						}
					}
				}
			}
			if kinds := dryRun(t, objs); kinds["NetworkPolicy"] != 2 {
				t.Errorf("%d NetworkPolicies, want 2", kinds["NetworkPolicy"])
			}
		})
	}
}

// TestChartPort53 renders each way of serving port 53 on nodes: the pod
// network (default), hostPort, hostNetwork and nodeLocal; the settings bind
// what each promises, the pod spec asks for what it needs, and the apiserver
// accepts every object.
func TestChartPort53(t *testing.T) {
	for _, tc := range []struct {
		name        string
		set         string
		hostNetwork bool
		dnsBind     []string
		hostPort    string // hostPort of dns-udp and dns-tcp ("" none)
		hostIP      string
	}{
		{"pod-network", "", false, []string{"0.0.0.0:53"}, "", ""},
		{"hostPort", "dataplane.hostPort.enabled=true", false, []string{"0.0.0.0:53"}, "53", ""},
		{"hostPort-elsewhere", "dataplane.hostPort.enabled=true,dataplane.hostPort.port=1053", false, []string{"0.0.0.0:53"}, "1053", ""},
		{"hostNetwork", "dataplane.hostNetwork=true", true, []string{"0.0.0.0:53"}, "", ""},
		{"nodeLocal", "dataplane.nodeLocal.enabled=true", true, []string{"169.254.20.10:53"}, "", "169.254.20.10"},
		{"nodeLocal-extra", "dataplane.nodeLocal.enabled=true,dataplane.nodeLocal.address=169.254.53.53,dataplane.nodeLocal.extraAddresses={10.96.0.10,fd00::10},ports.dns=1053", true,
			[]string{"169.254.53.53:1053", "10.96.0.10:1053", "[fd00::10]:1053"}, "", "169.254.53.53"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			args := []string{}
			if tc.set != "" {
				args = append(args, "--set", tc.set)
			}
			objs := render(t, args...)
			var bound []string
			for _, d := range loadSettings(t, objs).DNS {
				bound = append(bound, d.Address)
				if len(d.Protocols) != 2 {
					t.Errorf("listener %s protocols %v, want udp and tcp", d.Address, d.Protocols)
				}
			}
			if !reflect.DeepEqual(bound, tc.dnsBind) {
				t.Errorf("DNS listeners bind %q, want %q", bound, tc.dnsBind)
			}
			ds := find(t, objs, "DaemonSet", "service-dataplane")
			spec := podSpec(ds)
			if hn, _ := spec["hostNetwork"].(bool); hn != tc.hostNetwork {
				t.Errorf("hostNetwork %v, want %v", hn, tc.hostNetwork)
			}
			if tc.hostNetwork && spec["dnsPolicy"] != "ClusterFirstWithHostNet" {
				t.Errorf("hostNetwork pod with dnsPolicy %v: it would resolve with the node's resolv.conf", spec["dnsPolicy"])
			}
			ports := containerPorts(t, ds)
			for _, name := range []string{"dns-udp", "dns-tcp"} {
				hp, hip := ports[name]["hostPort"], ports[name]["hostIP"]
				if (tc.hostPort == "" && hp != nil) || (tc.hostPort != "" && fmt.Sprint(hp) != tc.hostPort) {
					t.Errorf("%s hostPort %v, want %q", name, hp, tc.hostPort)
				}
				if (tc.hostIP == "" && hip != nil) || (tc.hostIP != "" && hip != tc.hostIP) {
					t.Errorf("%s hostIP %v, want %q", name, hip, tc.hostIP)
				}
			}
			for name, p := range ports {
				if name != "dns-udp" && name != "dns-tcp" && p["hostPort"] != nil {
					t.Errorf("port %s gets hostPort %v: only DNS should take a node port", name, p["hostPort"])
				}
			}
			if op := podSpec(find(t, objs, "Deployment", "service-operator")); op["hostNetwork"] != nil || containerPorts(t, find(t, objs, "Deployment", "service-operator"))["dns-udp"]["hostPort"] != nil {
				t.Errorf("the operator takes node ports: %v", op["hostNetwork"])
			}
			dryRun(t, objs)
		})
	}
}
