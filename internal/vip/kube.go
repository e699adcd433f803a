package vip

import (
	"context"
	"fmt"
	"log/slog"
	"net/netip"
	"os"
	"strings"
	"time"

	corev1 "k8s.io/api/core/v1"
	eventsv1 "k8s.io/api/events/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/tools/clientcmd"
)

// DefaultPodSelector selects the chart's data-plane DaemonSet pods.
const DefaultPodSelector = "app.kubernetes.io/component=dataplane"

func kubeClient() (*kubernetes.Clientset, error) {
	rules := clientcmd.NewDefaultClientConfigLoadingRules()
	rc, err := clientcmd.NewNonInteractiveDeferredLoadingClientConfig(rules, nil).ClientConfig()
	if err != nil {
		return nil, fmt.Errorf("kubernetes client configuration (in a pod, or KUBECONFIG): %w", err)
	}
	return kubernetes.NewForConfig(rc)
}

// KubePeers are the host IPs of the pods spec selects: "NAMESPACE/SELECTOR",
// either part may be empty (namespace $POD_NAMESPACE, selector
// DefaultPodSelector). With hostNetwork the host IP is the node address
// keepalived sends from. Pods without a host IP yet are left out; pods not
// ready stay in (readiness must not reshuffle priorities, the track
// script handles a node whose DNS fails).
func KubePeers(spec string) (PeerSource, error) {
	ns, sel, _ := strings.Cut(spec, "/")
	if ns == "" {
		ns = os.Getenv("POD_NAMESPACE")
	}
	if ns == "" {
		return nil, fmt.Errorf("--peers-from kubernetes: no namespace: set POD_NAMESPACE or give kubernetes:NAMESPACE/SELECTOR")
	}
	if sel == "" {
		sel = DefaultPodSelector
	}
	if _, err := metav1.ParseToLabelSelector(sel); err != nil {
		return nil, fmt.Errorf("--peers-from kubernetes: selector %q: %w", sel, err)
	}
	var cs *kubernetes.Clientset
	return func(ctx context.Context) ([]netip.Addr, error) {
		if cs == nil {
			c, err := kubeClient()
			if err != nil {
				return nil, err
			}
			cs = c
		}
		ctx, cancel := context.WithTimeout(ctx, 10*time.Second)
		defer cancel()
		pods, err := cs.CoreV1().Pods(ns).List(ctx, metav1.ListOptions{LabelSelector: sel})
		if err != nil {
			return nil, fmt.Errorf("listing pods %s in %s: %w", sel, ns, err)
		}
		var out []netip.Addr
		for _, p := range pods.Items {
			if p.DeletionTimestamp != nil || p.Status.Phase == corev1.PodFailed || p.Status.Phase == corev1.PodSucceeded {
				continue
			}
			if a, err := netip.ParseAddr(p.Status.HostIP); err == nil {
				out = append(out, a)
			}
		}
		if len(out) == 0 {
			return nil, fmt.Errorf("no pod with a host IP matches %s in %s", sel, ns)
		}
		return out, nil
	}, nil
}

// KubeEvents records each state change as an Event on this pod when
// POD_NAME and POD_NAMESPACE are set (the chart sets them); otherwise nil.
// A failure to record is logged, never fatal: the fifo must keep draining.
func KubeEvents(log *slog.Logger) Recorder {
	pod, ns := os.Getenv("POD_NAME"), os.Getenv("POD_NAMESPACE")
	if pod == "" || ns == "" {
		return nil
	}
	cs, err := kubeClient()
	if err != nil {
		log.Warn("vip fifo: no Kubernetes Events", "err", err)
		return nil
	}
	return func(n Notify, prev InstanceState) {
		if !states[n.State] || n.State == prev.State {
			return
		}
		typ := corev1.EventTypeNormal
		if n.State == "FAULT" {
			typ = corev1.EventTypeWarning
		}
		now := time.Now()
		ev := &eventsv1.Event{
			ObjectMeta:          metav1.ObjectMeta{Name: fmt.Sprintf("%s.%x", pod, now.UnixNano()), Namespace: ns}, // as client-go's recorder names them
			EventTime:           metav1.NewMicroTime(now),
			ReportingController: "service.io/svc-vip",
			ReportingInstance:   pod,
			Action:              "VRRPTransition",
			Reason:              "VRRP" + strings.ToUpper(n.State[:1]) + strings.ToLower(n.State[1:]),
			Regarding:           corev1.ObjectReference{APIVersion: "v1", Kind: "Pod", Name: pod, Namespace: ns},
			Note:                fmt.Sprintf("%s: %s -> %s (priority %d) on %s", strings.TrimPrefix(n.Instance, "svc_"), orUnknown(prev.State), n.State, n.Priority, pod),
			Type:                typ,
		}
		ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
		defer cancel()
		if _, err := cs.EventsV1().Events(ns).Create(ctx, ev, metav1.CreateOptions{}); err != nil {
			log.Warn("vip fifo: recording the Event", "err", err)
		}
	}
}
