package node

import (
	"context"
	"fmt"
	"log/slog"
	"net"
	"os"
	"sort"
	"strconv"
	"strings"
	"sync"
	"time"

	coordinationv1 "k8s.io/api/coordination/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/fields"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/tools/cache"

	"github.com/svcdns/svc/internal/api"
	"github.com/svcdns/svc/internal/internalapi"
	"github.com/svcdns/svc/internal/kubewatch"
	"github.com/svcdns/svc/internal/operator"
)

// On Kubernetes every node (operator and data plane) holds a Lease of its
// own in the service namespace, renewed like the kubelet's node leases:
// GET /nodes lists them, so a node that stopped, was killed or lost the
// apiserver stays listed and turns not ready when its Lease expires.
const (
	// nodeLeaseLabel marks the node Leases (the operator's election Lease
	// has no such label).
	nodeLeaseLabel = "service.io/node-lease"
	// nodeLeasePrefix names a node's Lease: service-node-<node name>.
	nodeLeasePrefix = "service-node-"
	// operatorLeaseName is the operator's election Lease (operator.Options
	// default): its holder is the leader, its transitions the epoch.
	operatorLeaseName = "service-operator"
	// DefaultNodeLease is how long a node's Lease lasts without renewal;
	// it is renewed every quarter of it and at once when readiness changes.
	DefaultNodeLease = 40 * time.Second

	annRole     = "service.io/role"
	annVersion  = "service.io/version"
	annReady    = "service.io/ready"
	annSerial   = "service.io/serial"
	annSnapAge  = "service.io/snapshot-age-seconds"
	annStopped  = "service.io/stopped"
	annNotReady = "service.io/not-ready"
	annInternal = "service.io/internal-address"
)

// nodeLeases writes this node's Lease and reads everyone's.
type nodeLeases struct {
	cs       kubernetes.Interface
	ns, node string
	duration time.Duration
	status   func() internalapi.NodeStatus
	// why is the node's failing readiness checks (empty when ready).
	why     func() string
	started time.Time
	log     *slog.Logger

	// cache follows the namespace's Leases (nodes and the operator's), so
	// GET /nodes reads no apiserver; synced reports its first list.
	cache  cache.Store
	synced func() bool

	mu        sync.Mutex
	clusterID string // UID of the service namespace, once read
	idWarned  bool
	internal  string // address peers reach this node's internal listener at
}

// setInternal records where peers reach this node's internal listener
// (bound after the first heartbeat): the bound address, or with a wildcard
// host the address the pod's host name resolves to (the kubelet writes the
// pod IP for it into /etc/hosts).
func (l *nodeLeases) setInternal(bound string) {
	host, port, err := net.SplitHostPort(bound)
	if err != nil {
		return
	}
	if ip := net.ParseIP(host); ip == nil || ip.IsUnspecified() {
		h, _ := os.Hostname()
		addrs, _ := net.LookupHost(h)
		host = ""
		for _, a := range addrs {
			if ip := net.ParseIP(a); ip != nil && !ip.IsLoopback() {
				host = a
				break
			}
		}
		if host == "" {
			return
		}
	}
	l.mu.Lock()
	l.internal = net.JoinHostPort(host, port)
	l.mu.Unlock()
}

func (l *nodeLeases) internalAddr() string {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.internal
}

// address is where the named node's internal listener is, from its Lease.
func (l *nodeLeases) address(ctx context.Context, node string) (string, bool) {
	all, err := l.leases(ctx)
	if err != nil {
		return "", false
	}
	for _, le := range all {
		if le.Labels[nodeLeaseLabel] == "true" && ptrOr(le.Spec.HolderIdentity, "") == node {
			a := le.Annotations[annInternal]
			return a, a != ""
		}
	}
	return "", false
}

// watch fills the Lease cache until ctx ends.
func (l *nodeLeases) watch(ctx context.Context) {
	lw := cache.NewListWatchFromClient(l.cs.CoordinationV1().RESTClient(), "leases", l.ns, fields.Everything())
	store, ctrl := cache.NewInformerWithOptions(cache.InformerOptions{ListerWatcher: kubewatch.New(lw), ObjectType: &coordinationv1.Lease{},
		Handler: cache.ResourceEventHandlerFuncs{}})
	l.cache, l.synced = store, ctrl.HasSynced
	go ctrl.RunWithContext(ctx)
}

// leases is every Lease of the namespace: from the cache once it is
// synced, else listed.
func (l *nodeLeases) leases(ctx context.Context) ([]*coordinationv1.Lease, error) {
	if l.synced != nil && l.synced() {
		var out []*coordinationv1.Lease
		for _, o := range l.cache.List() {
			if le, ok := o.(*coordinationv1.Lease); ok {
				out = append(out, le)
			}
		}
		return out, nil
	}
	list, err := l.cs.CoordinationV1().Leases(l.ns).List(ctx, metav1.ListOptions{})
	if err != nil {
		return nil, &sharedError{err: fmt.Errorf("Leases in namespace %s: %w", l.ns, err), hint: leaseHint}
	}
	out := make([]*coordinationv1.Lease, len(list.Items))
	for i := range list.Items {
		out[i] = &list.Items[i]
	}
	return out, nil
}

func newNodeLeases(cs kubernetes.Interface, ns, node string, duration time.Duration, log *slog.Logger) *nodeLeases {
	if duration <= 0 {
		duration = DefaultNodeLease
	}
	return &nodeLeases{cs: cs, ns: ns, node: node, duration: duration, started: time.Now(), log: log}
}

// leaseName is a valid object name for the node's name (lower case, other
// characters than letters, digits, '-' and '.' become '-').
func leaseName(node string) string {
	b := []byte(strings.ToLower(node))
	for i, c := range b {
		if (c < 'a' || c > 'z') && (c < '0' || c > '9') && c != '-' && c != '.' {
			b[i] = '-'
		}
	}
	n := nodeLeasePrefix + strings.Trim(string(b), "-.")
	if len(n) > 253 {
		n = n[:253]
	}
	return n
}

// run renews the Lease until ctx ends, then marks it stopped (not ready)
// so the others see a clean stop at once rather than at expiry.
func (l *nodeLeases) run(ctx context.Context) {
	renew := l.duration / 4
	tick := time.NewTicker(min(time.Second, renew/2))
	defer tick.Stop()
	var last time.Time
	lastReady, failing := false, false
	for {
		st := l.status()
		if time.Since(last) >= renew || st.Ready != lastReady {
			// Bounded: a request hanging on a lost apiserver must not stop
			// the loop from trying again once it is back.
			wctx, cancel := context.WithTimeout(ctx, 10*time.Second)
			err := l.write(wctx, st, false)
			cancel()
			switch {
			case err != nil && ctx.Err() == nil:
				if !failing {
					l.log.Warn("node lease not renewed: other nodes will list this one as not ready when it expires",
						"lease", l.ns+"/"+leaseName(l.node), "err", err, "hint", leaseHint)
				}
				failing = true
			case err == nil:
				if failing {
					l.log.Info("node lease renewed again", "lease", l.ns+"/"+leaseName(l.node))
				}
				failing, last, lastReady = false, time.Now(), st.Ready
			}
		}
		select {
		case <-ctx.Done():
			sctx, cancel := context.WithTimeout(context.Background(), 3*time.Second)
			if err := l.write(sctx, l.status(), true); err != nil {
				l.log.Warn("node lease not marked stopped", "err", err)
			}
			cancel()
			return
		case <-tick.C:
		}
	}
}

const leaseHint = "the node's ServiceAccount needs get, list, create and update on Leases in its namespace (the chart's Roles grant them)"

// write creates or renews the Lease with the node's status.
func (l *nodeLeases) write(ctx context.Context, st internalapi.NodeStatus, stopped bool) error {
	now := metav1.NewMicroTime(time.Now())
	secs := int32(l.duration / time.Second)
	ann := map[string]string{
		annRole: st.Role, annVersion: st.Version, annReady: strconv.FormatBool(st.Ready && !stopped),
		annSerial: strconv.FormatUint(st.Serial, 10), annSnapAge: strconv.FormatFloat(st.SnapshotAgeSeconds, 'f', 1, 64),
	}
	if stopped {
		ann[annStopped] = now.UTC().Format(time.RFC3339)
	}
	if !st.Ready && l.why != nil {
		ann[annNotReady] = l.why()
	}
	if a := l.internalAddr(); a != "" {
		ann[annInternal] = a
	}
	leases := l.cs.CoordinationV1().Leases(l.ns)
	name := leaseName(l.node)
	cur, err := leases.Get(ctx, name, metav1.GetOptions{})
	if apierrors.IsNotFound(err) {
		acquired := metav1.NewMicroTime(l.started)
		_, err = leases.Create(ctx, &coordinationv1.Lease{
			ObjectMeta: metav1.ObjectMeta{Name: name, Namespace: l.ns, Labels: map[string]string{nodeLeaseLabel: "true"}, Annotations: ann},
			Spec:       coordinationv1.LeaseSpec{HolderIdentity: &l.node, LeaseDurationSeconds: &secs, AcquireTime: &acquired, RenewTime: &now},
		}, metav1.CreateOptions{})
		return err
	}
	if err != nil {
		return err
	}
	cur.Annotations = ann
	if cur.Labels == nil {
		cur.Labels = map[string]string{}
	}
	cur.Labels[nodeLeaseLabel] = "true"
	acquired := metav1.NewMicroTime(l.started)
	cur.Spec.HolderIdentity, cur.Spec.LeaseDurationSeconds, cur.Spec.AcquireTime, cur.Spec.RenewTime = &l.node, &secs, &acquired, &now
	_, err = leases.Update(ctx, cur, metav1.UpdateOptions{})
	return err
}

// nodes lists every node Lease, the serving node replaced by self (its
// live status), sorted by name.
func (l *nodeLeases) nodes(ctx context.Context, self api.NodeInfo) ([]api.NodeInfo, error) {
	all, err := l.leases(ctx)
	if err != nil {
		return nil, err
	}
	now := time.Now()
	out := []api.NodeInfo{self}
	for _, le := range all {
		if le.Labels[nodeLeaseLabel] != "true" {
			continue
		}
		n, ok := leaseNode(le, now)
		if !ok || n.Name == self.Name {
			continue
		}
		out = append(out, n)
	}
	sort.SliceStable(out[1:], func(i, j int) bool { return out[i+1].Name < out[j+1].Name })
	return out, nil
}

// leaseNode is one node as its Lease describes it at now.
func leaseNode(le *coordinationv1.Lease, now time.Time) (api.NodeInfo, bool) {
	if le.Spec.HolderIdentity == nil || *le.Spec.HolderIdentity == "" || le.Spec.RenewTime == nil {
		return api.NodeInfo{}, false
	}
	a := le.Annotations
	n := api.NodeInfo{Name: *le.Spec.HolderIdentity, Version: a[annVersion], Role: a[annRole], Address: a[annInternal]}
	n.Serial, _ = strconv.ParseUint(a[annSerial], 10, 64)
	since := now.Sub(le.Spec.RenewTime.Time)
	seen := max(since.Seconds(), 0)
	n.HeartbeatAgeSeconds = &seen
	ready := a[annReady] == "true"
	if age, err := strconv.ParseFloat(a[annSnapAge], 64); err == nil {
		n.SnapshotAgeSeconds = &age
	}
	dur := time.Duration(ptrOr(le.Spec.LeaseDurationSeconds, 40)) * time.Second
	switch {
	case a[annStopped] != "":
		ready = false
		n.Error = "stopped at " + a[annStopped]
	case since > dur:
		ready = false
		n.Error = fmt.Sprintf("no heartbeat for %s (its Lease of %s expired): the node was killed, is stuck or cannot reach the apiserver",
			since.Round(time.Second), dur)
		if n.SnapshotAgeSeconds != nil {
			// Its view has not been refreshed since, as far as anyone knows.
			age := *n.SnapshotAgeSeconds + seen
			n.SnapshotAgeSeconds = &age
		}
	case !ready && a[annNotReady] != "":
		n.Error = "not ready: " + a[annNotReady]
	}
	n.Ready = &ready
	return n, true
}

func ptrOr[T any](p *T, def T) T {
	if p == nil {
		return def
	}
	return *p
}

// leader is the holder of the operator's election Lease while it is
// valid, and the Lease's transitions (the epoch: how many times another
// replica took over). No Lease yet: no leader, epoch 0.
func (l *nodeLeases) leader(ctx context.Context) (holder string, epoch int64, err error) {
	all, err := l.leases(ctx)
	if err != nil {
		return "", 0, err
	}
	var le *coordinationv1.Lease
	for _, x := range all {
		if x.Name == operatorLeaseName {
			le = x
		}
	}
	if le == nil {
		return "", 0, nil
	}
	epoch = int64(ptrOr(le.Spec.LeaseTransitions, 0))
	h := operator.LeaderNode(ptrOr(le.Spec.HolderIdentity, ""))
	if h == "" || le.Spec.RenewTime == nil {
		return "", epoch, nil
	}
	if time.Since(le.Spec.RenewTime.Time) > time.Duration(ptrOr(le.Spec.LeaseDurationSeconds, 15))*time.Second {
		return "", epoch, nil // expired: nobody leads until a replica takes it
	}
	return h, epoch, nil
}

// clusterIDOf is the UID of the service namespace: stable for the life of
// the installation, the same on every node. Empty (and logged once) when
// the node may not read it.
func (l *nodeLeases) clusterIDOf(ctx context.Context) string {
	l.mu.Lock()
	defer l.mu.Unlock()
	if l.clusterID != "" {
		return l.clusterID
	}
	ns, err := l.cs.CoreV1().Namespaces().Get(ctx, l.ns, metav1.GetOptions{})
	if err != nil {
		if l.idWarned {
			return ""
		}
		l.idWarned = true
		l.log.Warn("clusterID not known: the service namespace is not readable", "namespace", l.ns, "err", err,
			"hint", "the chart's ClusterRoles grant get on the release namespace")
		return ""
	}
	l.clusterID = string(ns.UID)
	return l.clusterID
}
