package edge

import (
	"net/netip"
	"testing"

	corev1 "k8s.io/api/core/v1"
	discoveryv1 "k8s.io/api/discovery/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/kubernetes/fake"
)

// TestKubeReadyEndpointsOnly: the backends are the ready, not terminating
// endpoints of the Service's slices, on the port named dns-udp, named after
// their pods; other Services' slices are ignored.
func TestKubeReadyEndpointsOnly(t *testing.T) {
	yes, no := true, false
	port, name := int32(53), "dns-udp"
	slice := func(svc, n string, eps ...discoveryv1.Endpoint) *discoveryv1.EndpointSlice {
		return &discoveryv1.EndpointSlice{
			ObjectMeta:  metav1.ObjectMeta{Name: n, Namespace: "dns", Labels: map[string]string{discoveryv1.LabelServiceName: svc}},
			AddressType: discoveryv1.AddressTypeIPv4,
			Ports:       []discoveryv1.EndpointPort{{Name: &name, Port: &port}},
			Endpoints:   eps,
		}
	}
	ep := func(ip, pod string, ready, terminating *bool) discoveryv1.Endpoint {
		return discoveryv1.Endpoint{Addresses: []string{ip}, TargetRef: &corev1.ObjectReference{Name: pod},
			Conditions: discoveryv1.EndpointConditions{Ready: ready, Terminating: terminating}}
	}
	cs := fake.NewClientset(
		slice("svc-dns", "a", ep("10.0.0.2", "dp-b", &yes, nil), ep("10.0.0.1", "dp-a", nil, nil), ep("10.0.0.3", "dp-c", &no, nil)),
		slice("svc-dns", "b", ep("10.0.0.4", "dp-d", &yes, &yes)),
		slice("other", "c", ep("10.0.0.9", "x", &yes, nil)),
	)
	k := &Kube{Client: cs, Namespace: "dns", Service: "svc-dns", Port: 5353}
	got, err := k.Backends(t.Context())
	if err != nil {
		t.Fatal(err)
	}
	want := []Backend{
		{Name: "dp-a", Address: netip.MustParseAddrPort("10.0.0.1:53")},
		{Name: "dp-b", Address: netip.MustParseAddrPort("10.0.0.2:53")},
	}
	if len(got) != len(want) || got[0] != want[0] || got[1] != want[1] {
		t.Errorf("backends %v, want %v", got, want)
	}
}
