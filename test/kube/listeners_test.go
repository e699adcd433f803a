package kube_test

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"reflect"
	"sort"
	"testing"

	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"

	"github.com/svcdns/svc/internal/settings"
)

// TestChartEncryptedDNS renders the chart with tls.secretName: the data
// plane gets the DoT, DoQ, DoH and DoH3 ports and the Secret mounted as a
// directory (the kubelet's updates reach it), the dns Service carries the
// ports, the operator gets neither, and the rendered settings file loads
// with the listeners pointing at the mounted files. A listener turned off
// disappears from all three; the apiserver accepts every object.
func TestChartEncryptedDNS(t *testing.T) {
	allPorts := []string{"doh/443/TCP", "doh3/443/UDP", "doq/853/UDP", "dot/853/TCP"}
	for _, tc := range []struct {
		name  string
		set   string
		ports []string
	}{
		{"all", "tls.secretName=dns-tls", allPorts},
		{"no-doq", "tls.secretName=dns-tls,tls.doq.enabled=false,tls.doh.path=/q", []string{"doh/443/TCP", "doh3/443/UDP", "dot/853/TCP"}},
		{"off", "tls.doq.enabled=true", nil},
	} {
		t.Run(tc.name, func(t *testing.T) {
			objs := render(t, "--set", tc.set)
			ds, op, svc, cm := find(t, objs, "DaemonSet", "service-dataplane"), find(t, objs, "Deployment", "service-operator"),
				find(t, objs, "Service", "service-dns"), find(t, objs, "ConfigMap", "service-config")

			if got := tlsPorts(t, ds, "spec", "template", "spec", "containers"); !reflect.DeepEqual(got, tc.ports) {
				t.Errorf("data plane container ports %v, want %v", got, tc.ports)
			}
			if got := tlsPorts(t, op, "spec", "template", "spec", "containers"); got != nil {
				t.Errorf("operator container ports %v, want none", got)
			}
			if got := tlsPorts(t, svc, "spec"); !reflect.DeepEqual(got, tc.ports) {
				t.Errorf("dns Service ports %v, want %v", got, tc.ports)
			}
			mount, secret := secretVolume(ds, "tls")
			if tc.ports == nil {
				if mount != nil || secret != nil {
					t.Errorf("no tls.secretName, yet a tls volume: %v %v", mount, secret)
				}
			} else {
				if secret["secretName"] != "dns-tls" || mount == nil || mount["mountPath"] != "/etc/service/tls" || mount["subPath"] != nil {
					t.Errorf("tls volume: secret %v mount %v; want dns-tls at /etc/service/tls without subPath", secret, mount)
				}
			}
			if m, s := secretVolume(op, "tls"); m != nil || s != nil {
				t.Errorf("operator mounts the certificate: %v %v", m, s)
			}

			l := renderedListeners(t, cm)
			files := settings.TLSFiles{CertFile: "/etc/service/tls/tls.crt", KeyFile: "/etc/service/tls/tls.key"}
			var got []string
			for _, x := range l.DoT {
				got = append(got, fmt.Sprintf("dot %s %v", x.Address, x.TLS == files))
			}
			for _, x := range l.DoQ {
				got = append(got, fmt.Sprintf("doq %s %v", x.Address, x.TLS == files))
			}
			for _, x := range l.DoH {
				got = append(got, fmt.Sprintf("doh %s %v %s", x.Address, x.TLS == files, x.Path))
			}
			for _, x := range l.DoH3 {
				got = append(got, fmt.Sprintf("doh3 %s %v %s", x.Address, x.TLS == files, x.Path))
			}
			sort.Strings(got)
			var want []string
			switch tc.name {
			case "all":
				want = []string{"doh 0.0.0.0:443 true /dns-query", "doh3 0.0.0.0:443 true /dns-query", "doq 0.0.0.0:853 true", "dot 0.0.0.0:853 true"}
			case "no-doq":
				want = []string{"doh 0.0.0.0:443 true /q", "doh3 0.0.0.0:443 true /q", "dot 0.0.0.0:853 true"}
			}
			if !reflect.DeepEqual(got, want) {
				t.Errorf("rendered listeners %q, want %q", got, want)
			}
			if len(l.DNS) != 1 || l.DNS[0].Address != "0.0.0.0:53" {
				t.Errorf("plain DNS listeners changed: %+v", l.DNS)
			}
			dryRun(t, objs)
		})
	}
}

func find(t *testing.T, objs []*unstructured.Unstructured, kind, name string) *unstructured.Unstructured {
	t.Helper()
	for _, o := range objs {
		if o.GetKind() == kind && o.GetName() == name {
			return o
		}
	}
	t.Fatalf("the chart renders no %s %s", kind, name)
	return nil
}

// tlsPorts lists the encrypted-DNS ports (name/port/protocol) of a Service
// (path to its spec) or of the containers at path.
func tlsPorts(t *testing.T, o *unstructured.Unstructured, path ...string) []string {
	t.Helper()
	var ports []any
	if path[len(path)-1] == "containers" {
		cs, _, _ := unstructured.NestedSlice(o.Object, path...)
		for _, c := range cs {
			p, _, _ := unstructured.NestedSlice(c.(map[string]any), "ports")
			ports = append(ports, p...)
		}
	} else {
		ports, _, _ = unstructured.NestedSlice(o.Object, append(path, "ports")...)
	}
	var out []string
	for _, p := range ports {
		pm := p.(map[string]any)
		switch pm["name"] {
		case "dot", "doq", "doh", "doh3":
			n := pm["containerPort"]
			if n == nil {
				n = pm["port"]
			}
			out = append(out, fmt.Sprintf("%v/%v/%v", pm["name"], n, pm["protocol"]))
		}
	}
	sort.Strings(out)
	return out
}

// secretVolume: the mount of volume name in the first container and the
// volume's secret source (nil, nil without one).
func secretVolume(o *unstructured.Unstructured, name string) (mount, secret map[string]any) {
	cs, _, _ := unstructured.NestedSlice(o.Object, "spec", "template", "spec", "containers")
	ms, _, _ := unstructured.NestedSlice(cs[0].(map[string]any), "volumeMounts")
	for _, m := range ms {
		if m.(map[string]any)["name"] == name {
			mount = m.(map[string]any)
		}
	}
	vs, _, _ := unstructured.NestedSlice(o.Object, "spec", "template", "spec", "volumes")
	for _, v := range vs {
		if v.(map[string]any)["name"] == name {
			secret, _, _ = unstructured.NestedMap(v.(map[string]any), "secret")
		}
	}
	return mount, secret
}

// renderedListeners loads the chart's rendered settings file as the node
// does and returns its listeners.
func renderedListeners(t *testing.T, cm *unstructured.Unstructured) settings.Listeners {
	t.Helper()
	data, _, _ := unstructured.NestedString(cm.Object, "data", "service.yaml")
	path := filepath.Join(t.TempDir(), "service.yaml")
	if err := os.WriteFile(path, []byte(data), 0o644); err != nil {
		t.Fatal(err)
	}
	m, err := settings.Load(context.Background(), settings.Options{ConfigPath: path, ConfigPathExplicit: true})
	if err != nil {
		t.Fatalf("rendered settings do not load: %v\n%s", err, data)
	}
	return m.Current().Listeners
}

// TestChartProxyProtocol renders proxyProtocol.from and .secretName: the
// rendered settings carry the peers and the secret file, the data plane
// mounts only the Secret's "secret" key there, the operator nothing, and
// the apiserver accepts every object.
func TestChartProxyProtocol(t *testing.T) {
	objs := render(t, "--set", "proxyProtocol.from={10.0.0.0/8,192.168.1.5/32}", "--set", "proxyProtocol.secretName=lb-secret")
	ds, op, cm := find(t, objs, "DaemonSet", "service-dataplane"), find(t, objs, "Deployment", "service-operator"), find(t, objs, "ConfigMap", "service-config")
	l := renderedListeners(t, cm)
	if got := fmt.Sprint(l.ProxyProtocolFrom); got != "[10.0.0.0/8 192.168.1.5/32]" || l.ProxyProtocolSecretFile != "/etc/service/proxy/secret" {
		t.Errorf("rendered PROXY settings: from %s, secret file %q", got, l.ProxyProtocolSecretFile)
	}
	mount, secret := secretVolume(ds, "proxy-secret")
	if mount == nil || mount["mountPath"] != "/etc/service/proxy" || secret == nil || secret["secretName"] != "lb-secret" ||
		fmt.Sprint(secret["items"]) != "[map[key:secret path:secret]]" {
		t.Errorf("data plane secret volume: mount %v, secret %v", mount, secret)
	}
	if mount, secret := secretVolume(op, "proxy-secret"); mount != nil || secret != nil {
		t.Errorf("the operator mounts the PROXY secret: %v %v", mount, secret)
	}
	dryRun(t, objs)
}
