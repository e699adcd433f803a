package vip

import (
	"context"
	"log/slog"
	"net/netip"
	"os"
	"slices"
	"strings"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/kubernetes"

	"github.com/svcdns/svc/test/kube/kubeenv"
)

// TestKubePeersAndEvents against a real apiserver: the peers are the host
// IPs of the data-plane pods of the namespace (not other pods, not pods
// without a host IP yet), and the fifo reader records each state change as
// an Event on its pod and in the state file.
func TestKubePeersAndEvents(t *testing.T) {
	if r := kubeenv.SkipReason(); r != "" {
		if os.Getenv("CI") != "" {
			t.Fatal(r)
		}
		t.Skip(r)
	}
	env, err := kubeenv.Start()
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = env.Stop() })
	ctx := t.Context()
	const ns = "vip-peers"
	if err := env.Namespaces(ctx, ns, "other"); err != nil {
		t.Fatal(err)
	}
	cs := kubernetes.NewForConfigOrDie(env.Config)
	pod := func(namespace, name, component, hostIP string) {
		p := &corev1.Pod{
			ObjectMeta: metav1.ObjectMeta{Name: name, Namespace: namespace, Labels: map[string]string{"app.kubernetes.io/component": component}},
			Spec:       corev1.PodSpec{Containers: []corev1.Container{{Name: "c", Image: "example.org/x"}}},
		}
		p, err := cs.CoreV1().Pods(namespace).Create(ctx, p, metav1.CreateOptions{})
		if err != nil {
			t.Fatal(err)
		}
		if hostIP != "" {
			p.Status.HostIP = hostIP
			p.Status.Phase = corev1.PodRunning
			if _, err := cs.CoreV1().Pods(namespace).UpdateStatus(ctx, p, metav1.UpdateOptions{}); err != nil {
				t.Fatal(err)
			}
		}
	}
	pod(ns, "dp-1", "dataplane", "10.0.0.2")
	pod(ns, "dp-2", "dataplane", "10.0.0.1")
	pod(ns, "dp-pending", "dataplane", "")
	pod(ns, "op-1", "operator", "10.0.0.9")
	pod("other", "dp-elsewhere", "dataplane", "10.0.0.8")

	t.Setenv("KUBECONFIG", kubeenv.Kubeconfig(t, env.Config, ""))
	t.Setenv("POD_NAMESPACE", ns)
	t.Setenv("POD_NAME", "dp-1")
	src, err := KubePeers("")
	if err != nil {
		t.Fatal(err)
	}
	peers, err := src(ctx)
	if err != nil {
		t.Fatal(err)
	}
	slices.SortFunc(peers, func(a, b netip.Addr) int { return a.Compare(b) })
	if want := addrs("10.0.0.1", "10.0.0.2"); !slices.Equal(peers, want) {
		t.Errorf("peers %v, want %v", peers, want)
	}
	if _, err := KubePeers("/app=(bad"); err == nil {
		t.Error("a bad selector is accepted")
	}

	runDir := t.TempDir()
	rec := KubeEvents(slog.New(slog.NewTextHandler(t.Output(), nil))) // a refused Event is logged here
	if rec == nil {
		t.Fatal("no Event recorder with POD_NAME and POD_NAMESPACE set")
	}
	lines := `INSTANCE "svc_dns-a" BACKUP 200
INSTANCE "svc_dns-a" MASTER 200
INSTANCE "svc_dns-a" FAULT 0
`
	if err := ReadFifo(ctx, slog.New(slog.DiscardHandler), runDir, strings.NewReader(lines), rec); err != nil {
		t.Fatal(err)
	}
	st, err := ReadState(runDir)
	if err != nil || st.Instances["svc_dns-a"].State != "FAULT" || st.Transitions != 3 {
		t.Errorf("state after the notifies: %+v %v, want FAULT after 3 transitions", st, err)
	}
	var got []string
	for deadline := time.Now().Add(10 * time.Second); time.Now().Before(deadline); time.Sleep(100 * time.Millisecond) {
		evs, err := cs.EventsV1().Events(ns).List(context.Background(), metav1.ListOptions{})
		if err != nil {
			t.Fatal(err)
		}
		got = got[:0]
		for _, e := range evs.Items {
			if e.Regarding.Name == "dp-1" && e.Regarding.Kind == "Pod" {
				got = append(got, e.Type+" "+e.Reason+" "+e.Note)
			}
		}
		if len(got) == 3 {
			break
		}
	}
	slices.Sort(got)
	want := []string{
		"Normal VRRPBackup dns-a: unknown (no notify yet) -> BACKUP (priority 200) on dp-1",
		"Normal VRRPMaster dns-a: BACKUP -> MASTER (priority 200) on dp-1",
		"Warning VRRPFault dns-a: MASTER -> FAULT (priority 0) on dp-1",
	}
	if !slices.Equal(got, want) {
		t.Errorf("Events on the pod:\n%s\nwant:\n%s", strings.Join(got, "\n"), strings.Join(want, "\n"))
	}
}
