// Package kuberestart_test runs nodes against a real kube-apiserver that is
// restarted under them (same etcd, same address and certificates), as in a
// control-plane upgrade, and against an etcd compacted meanwhile: the data
// plane must keep answering and follow changes afterwards, and an operator
// that lost its Lease must rejoin the election.
package kuberestart_test

import (
	"context"
	"fmt"
	"io"
	"net/http"
	"os"
	"strconv"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/miekg/dns"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/client-go/kubernetes"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/svcdns/svc/internal/node"
	"github.com/svcdns/svc/internal/store"
	"github.com/svcdns/svc/internal/store/kube"
	"github.com/svcdns/svc/test/kube/kubeenv"
	"github.com/svcdns/svc/test/nodetest"
)

var (
	env  *kubeenv.Env
	skip string
)

const encryptionKey = "00112233445566778899aabbccddeeff00112233445566778899aabbccddeeff"

func TestMain(m *testing.M) {
	if skip = kubeenv.SkipReason(); skip != "" {
		os.Exit(m.Run())
	}
	var err error
	if env, err = kubeenv.StartRestartable(); err != nil {
		fmt.Fprintln(os.Stderr, err)
		os.Exit(1)
	}
	if err := env.Namespaces(context.Background(), node.DefaultNamespace); err != nil {
		fmt.Fprintln(os.Stderr, err)
		os.Exit(1)
	}
	code := m.Run()
	if err := env.Stop(); err != nil {
		fmt.Fprintln(os.Stderr, "stop envtest:", err)
	}
	os.Exit(code)
}

func needEnv(t *testing.T) client.Client {
	t.Helper()
	if skip != "" {
		t.Skip(skip)
	}
	c, err := client.New(env.Config, client.Options{})
	if err != nil {
		t.Fatal(err)
	}
	return c
}

// startNode runs a node in role on the kube store of the test apiserver.
// maxAge is long: during these outages primary zones must keep answering.
func startNode(t *testing.T, name, role string, opts ...nodetest.Option) *nodetest.Node {
	t.Helper()
	return nodetest.Start(t, append([]nodetest.Option{nodetest.Name(name), nodetest.Role(role),
		nodetest.KubeStore(20*time.Second, 10*time.Minute),
		nodetest.Env("KUBECONFIG="+kubeenv.Kubeconfig(t, env.Config, ""), "SERVICE_ENCRYPTION_KEY="+encryptionKey, "SERVICE_NAMESPACE="+node.DefaultNamespace),
		nodetest.StopWithin(30 * time.Second),
	}, opts...)...)
}

func answersA(n *nodetest.Node, name, want string) bool {
	r, err := n.Exchange("udp", 500*time.Millisecond, name, dns.TypeA)
	if err != nil || r.Rcode != dns.RcodeSuccess {
		return false
	}
	for _, rr := range r.Answer {
		if a, ok := rr.(*dns.A); ok && a.A.String() == want {
			return true
		}
	}
	return false
}

func recordDoc(zone, name, host, ip string) string {
	return fmt.Sprintf(`apiVersion: service.io/v1alpha1
kind: DNSRecordSet
metadata: {name: %s, namespace: default}
spec:
  zoneRef: {name: %s}
  endpoints:
    - {dnsName: %s, recordType: A, targets: [%s]}
`, name, zone, host, ip)
}

func zoneDoc(zone string) string {
	return fmt.Sprintf(`apiVersion: service.io/v1alpha1
kind: DNSZone
metadata: {name: %[1]s}
spec:
  defaultTTL: 300
  nameServers: [ns1.%[1]s.]
`, zone)
}

// prober asks n for name every 100 ms until stopped and counts the queries
// that got no NOERROR answer with want.
type prober struct {
	sent, failed atomic.Int64
	stop         chan struct{}
	done         chan struct{}
}

func probe(n *nodetest.Node, name, want string) *prober {
	p := &prober{stop: make(chan struct{}), done: make(chan struct{})}
	go func() {
		defer close(p.done)
		t := time.NewTicker(100 * time.Millisecond)
		defer t.Stop()
		for {
			select {
			case <-p.stop:
				return
			case <-t.C:
			}
			p.sent.Add(1)
			if !answersA(n, name, want) {
				p.failed.Add(1)
			}
		}
	}()
	return p
}

func (p *prober) finish() (sent, failed int64) {
	close(p.stop)
	<-p.done
	return p.sent.Load(), p.failed.Load()
}

// advanceEtcd writes an object no node watches, so etcd's revision moves
// past the versions the nodes' watches hold: a resume after the restart
// then starts before the new apiserver's watch cache (410 Gone).
func advanceEtcd(t *testing.T, name string) {
	t.Helper()
	cs := kubernetes.NewForConfigOrDie(env.Config)
	if _, err := cs.CoreV1().Namespaces().Create(t.Context(), &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: name}}, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
}

func restartAPIServer(t *testing.T, down time.Duration, compact bool) {
	t.Helper()
	if err := env.StopAPIServer(); err != nil {
		t.Fatalf("stop kube-apiserver: %v", err)
	}
	time.Sleep(down)
	if compact {
		if _, err := env.CompactEtcd(t.Context()); err != nil {
			t.Fatalf("compact etcd: %v", err)
		}
	}
	if err := env.StartAPIServer(); err != nil {
		t.Fatalf("start kube-apiserver again: %v", err)
	}
}

// The data plane keeps answering through apiserver restarts (the second with
// etcd compacted while the apiserver was down), never exits, and follows
// changes made after each restart.
func TestDataPlaneSurvivesAPIServerRestarts(t *testing.T) {
	c := needEnv(t)
	kubeenv.Apply(t, c, zoneDoc("restart.test")+"---\n"+recordDoc("restart.test", "base", "www.restart.test", "192.0.2.1"))
	dp := startNode(t, "dp", node.RoleDataplane)
	nodetest.Eventually(t, 10*time.Second, "answers www.restart.test", func() bool { return answersA(dp, "www.restart.test", "192.0.2.1") })

	p := probe(dp, "www.restart.test", "192.0.2.1")
	for i, compact := range []bool{false, true} {
		advanceEtcd(t, fmt.Sprintf("advance-%d", i))
		restartAPIServer(t, 5*time.Second, compact)
		if gone, err := dp.Exited(); gone {
			t.Fatalf("restart %d: the data plane exited: %v", i, err)
		}
		host, ip := fmt.Sprintf("after%d.restart.test", i), fmt.Sprintf("192.0.2.%d", 10+i)
		kubeenv.Apply(t, c, recordDoc("restart.test", fmt.Sprintf("after-%d", i), host, ip))
		nodetest.Eventually(t, 60*time.Second, "a record applied after restart "+fmt.Sprint(i)+" is served", func() bool { return answersA(dp, host, ip) })
		nodetest.Eventually(t, 30*time.Second, "ready again", dp.Ready)
	}
	sent, failed := p.finish()
	t.Logf("queries every 100 ms through 2 apiserver restarts: %d sent, %d failed", sent, failed)
	if failed != 0 {
		t.Errorf("%d of %d queries failed while the apiserver restarted", failed, sent)
	}
	if gone, err := dp.Exited(); gone {
		t.Fatalf("the data plane exited: %v", err)
	}
	// The resumes were refused (410) and answered by listing again: the
	// path the old code died on was taken.
	if !dp.Log.Contains("store watch ended; listing again") {
		t.Error("no watch was resumed by listing again: the restarts did not exercise the expired-watch path")
	}
}

func hasReady(c client.Client, kind, ns, name string) bool {
	u := &unstructured.Unstructured{}
	u.SetGroupVersionKind(schema.GroupVersionKind{Group: "service.io", Version: "v1alpha1", Kind: kind})
	if err := c.Get(context.Background(), client.ObjectKey{Namespace: ns, Name: name}, u); err != nil {
		return false
	}
	conds, _, _ := unstructured.NestedSlice(u.Object, "status", "conditions")
	for _, c := range conds {
		if m, _ := c.(map[string]any); m["type"] == "Ready" {
			return true
		}
	}
	return false
}

// Two operator replicas lose their Lease in apiserver outages longer than
// the lease, twice; each time one of them leads again and writes status, and
// both stay live.
func TestOperatorRejoinsAfterLosingLease(t *testing.T) {
	c := needEnv(t)
	lease := nodetest.Lease(node.LeaseTimings{Duration: 4 * time.Second, RenewDeadline: 3 * time.Second, RetryPeriod: 500 * time.Millisecond})
	ops := []*nodetest.Node{startNode(t, "op1", node.RoleOperator, lease), startNode(t, "op2", node.RoleOperator, lease)}
	kubeenv.Apply(t, c, zoneDoc("lease.test")+"---\n"+recordDoc("lease.test", "lease-0", "www.lease.test", "192.0.2.1"))
	nodetest.Eventually(t, 30*time.Second, "status from the first leader", func() bool { return hasReady(c, "DNSRecordSet", "default", "lease-0") })

	for i := 1; i <= 2; i++ {
		restartAPIServer(t, 8*time.Second, false)
		name := fmt.Sprintf("lease-%d", i)
		kubeenv.Apply(t, c, recordDoc("lease.test", name, fmt.Sprintf("www%d.lease.test", i), "192.0.2.2"))
		nodetest.Eventually(t, 90*time.Second, "status written after outage "+fmt.Sprint(i), func() bool { return hasReady(c, "DNSRecordSet", "default", name) })
		for _, op := range ops {
			if gone, err := op.Exited(); gone {
				t.Fatalf("outage %d: operator %s exited: %v", i, op.Name, err)
			}
			if !op.Live() {
				t.Fatalf("outage %d: operator %s not live", i, op.Name)
			}
		}
	}
	// controller-runtime's series are on the operator's metrics listener.
	resp, err := http.Get("http://" + ops[0].Addrs.Metrics + "/metrics")
	if err != nil {
		t.Fatal(err)
	}
	body, _ := io.ReadAll(resp.Body)
	resp.Body.Close()
	for _, want := range []string{"leader_election_master_status", "controller_runtime_reconcile_total", "workqueue_depth", "service_snapshot_build_seconds"} {
		if resp.StatusCode != http.StatusOK || !strings.Contains(string(body), want) {
			t.Errorf("operator /metrics (%d) has no %s: %.3000s", resp.StatusCode, want, body)
		}
	}
	lost := 0
	for _, op := range ops {
		if op.Log.Contains("rejoining the election") {
			lost++
		}
	}
	if lost == 0 {
		t.Error("no operator lost its Lease: the outages did not exercise the rejoin path")
	}
}

// TestSoakAPIServerRestarts restarts the apiserver SOAK_RESTARTS times in a
// row (every fifth with etcd compacted) under a data plane and two
// operators: DNS is asked every 100 ms throughout (goal: no failure) and
// after each restart a new record set must be served and get status.
// hack/soak-apiserver.sh runs it with 20; `make test` skips it.
func TestSoakAPIServerRestarts(t *testing.T) {
	rounds, _ := strconv.Atoi(os.Getenv("SOAK_RESTARTS"))
	if rounds <= 0 {
		t.Skip("set SOAK_RESTARTS (hack/soak-apiserver.sh)")
	}
	c := needEnv(t)
	lease := nodetest.Lease(node.LeaseTimings{Duration: 4 * time.Second, RenewDeadline: 3 * time.Second, RetryPeriod: 500 * time.Millisecond})
	kubeenv.Apply(t, c, zoneDoc("soak.test")+"---\n"+recordDoc("soak.test", "soak-base", "www.soak.test", "192.0.2.1"))
	dp := startNode(t, "dp", node.RoleDataplane)
	ops := []*nodetest.Node{startNode(t, "op1", node.RoleOperator, lease), startNode(t, "op2", node.RoleOperator, lease)}
	nodetest.Eventually(t, 10*time.Second, "answers www.soak.test", func() bool { return answersA(dp, "www.soak.test", "192.0.2.1") })

	p := probe(dp, "www.soak.test", "192.0.2.1")
	var worstServe, worstStatus time.Duration
	for i := 1; i <= rounds; i++ {
		advanceEtcd(t, fmt.Sprintf("soak-%d", i))
		restartAPIServer(t, 3*time.Second, i%5 == 0)
		up := time.Now()
		name, host := fmt.Sprintf("soak-%d", i), fmt.Sprintf("r%d.soak.test", i)
		kubeenv.Apply(t, c, recordDoc("soak.test", name, host, "192.0.2.2"))
		nodetest.Eventually(t, 60*time.Second, "served after restart "+fmt.Sprint(i), func() bool { return answersA(dp, host, "192.0.2.2") })
		worstServe = max(worstServe, time.Since(up))
		nodetest.Eventually(t, 90*time.Second, "status after restart "+fmt.Sprint(i), func() bool { return hasReady(c, "DNSRecordSet", "default", name) })
		worstStatus = max(worstStatus, time.Since(up))
		for _, n := range append([]*nodetest.Node{dp}, ops...) {
			if gone, err := n.Exited(); gone {
				t.Fatalf("restart %d: %s exited: %v", i, n.Name, err)
			}
		}
	}
	sent, failed := p.finish()
	t.Logf("SOAK: %d apiserver restarts: %d queries sent every 100 ms, %d failed; slowest new record served %s and given status %s after the apiserver was back",
		rounds, sent, failed, worstServe.Round(time.Millisecond), worstStatus.Round(time.Millisecond))
	if failed != 0 {
		t.Errorf("%d of %d queries failed", failed, sent)
	}
}

// TestStoreClosesDuringAPIServerOutage: a store opened or closed while the
// apiserver is down stops at once. client-go's streaming initial list
// (WatchListClient) slept out its retry backoff on "connection refused"
// (seconds, up to 30-60 s) without looking at the context and held a
// node's stop; the store's informers list and then watch, whose backoff
// ends with the context.
func TestStoreClosesDuringAPIServerOutage(t *testing.T) {
	needEnv(t)
	d, err := kube.Open(t.Context(), env.Config, kube.Options{EncryptionKey: []byte(encryptionKey[:32])})
	if err != nil {
		t.Fatal(err)
	}
	if err := env.StopAPIServer(); err != nil {
		t.Fatalf("stop kube-apiserver: %v", err)
	}
	t.Cleanup(func() {
		if err := env.StartAPIServer(); err != nil {
			t.Errorf("start kube-apiserver again: %v", err)
		}
	})
	// A node starting during the outage: its initial lists are refused
	// until the startup timeout; then it must stop without waiting for a
	// backoff sleep.
	const startup = 10 * time.Second
	start := time.Now()
	if _, err := kube.Open(t.Context(), env.Config, kube.Options{EncryptionKey: []byte(encryptionKey[:32]), StartupTimeout: startup}); err == nil {
		t.Fatal("opened a store with the apiserver down")
	}
	opened := time.Since(start)
	// A running node stopped well into the outage.
	time.Sleep(5 * time.Second)
	start = time.Now()
	err = d.Close()
	closed := time.Since(start)
	t.Logf("during an apiserver outage: a failed open returned after %v (startup timeout %v); a running store closed in %v",
		opened.Round(time.Millisecond), startup, closed.Round(time.Millisecond))
	if opened > startup+time.Second {
		t.Errorf("a failed open took %v, %v past its startup timeout", opened, opened-startup)
	}
	if err != nil || closed > 2*time.Second {
		t.Errorf("Close during an outage took %v: %v", closed, err)
	}
}

// TestStoreCatchesUpSoonAfterAPIServerRestart: after an outage long enough
// for client-go's reflector backoff to reach many seconds, a store's cache
// shows a change made once the apiserver is back within a few seconds, not
// after the reflector's last sleep (up to 30-60 s). The operator waits for
// its cache after each status write and the data plane serves from it, so
// that sleep was added to every change made after an apiserver upgrade.
func TestStoreCatchesUpSoonAfterAPIServerRestart(t *testing.T) {
	c := needEnv(t)
	d, err := kube.Open(t.Context(), env.Config, kube.Options{EncryptionKey: []byte(encryptionKey[:32])})
	if err != nil {
		t.Fatal(err)
	}
	defer d.Close()
	// Out long enough that the reflector's next sleep, had it kept its
	// default backoff, would be 13-26 s.
	restartAPIServer(t, 20*time.Second, false)
	up := time.Now()
	kubeenv.Apply(t, c, zoneDoc("catchup.test"))
	key := store.Key{Kind: "DNSZone", Name: "catchup.test"}
	nodetest.Eventually(t, 60*time.Second, "the store's cache shows a zone created after the restart", func() bool {
		_, err := d.Get(t.Context(), key)
		return err == nil
	})
	lag := time.Since(up)
	t.Logf("a zone created once the apiserver was back (after a 20 s outage) reached the store's cache in %v", lag.Round(time.Millisecond))
	if lag > 8*time.Second {
		t.Errorf("the store's cache showed a change %v after the apiserver was back; want under 8 s", lag.Round(time.Millisecond))
	}
}
