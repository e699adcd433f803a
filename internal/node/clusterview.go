package node

import (
	"context"
	"fmt"
	"net/http"
	"sort"
	"strings"
	"sync"
	"time"

	"k8s.io/client-go/kubernetes"

	"github.com/svcdns/svc/internal/api"
	"github.com/svcdns/svc/internal/internalapi"
	"github.com/svcdns/svc/internal/version"
)

// servedRevision is the store revision of the snapshot being served (its
// serial in GET /nodes); 0 before the first.
func (s *snapshotter) servedRevision() int64 {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.served == nil {
		return 0
	}
	return s.served.rev
}

// peerNodes asks every peer of SERVICE_INTERNAL_PEERS (each address a name
// resolves to: the chart's headless Service names every pod) for its
// status, 3s each, all at once. A peer that does not answer is listed with
// its address and the error.
func peerNodes(ctx context.Context, client *internalapi.Client, peers []string) []api.NodeInfo {
	addrs := resolvePeers(ctx, peers)
	out := make([]api.NodeInfo, len(addrs))
	var wg sync.WaitGroup
	for i, a := range addrs {
		wg.Add(1)
		go func() {
			defer wg.Done()
			pctx, cancel := context.WithTimeout(ctx, 3*time.Second)
			defer cancel()
			st, err := client.Status(pctx, a)
			if err != nil {
				out[i] = api.NodeInfo{Name: a, Address: a, Error: err.Error()}
				return
			}
			ready, age := st.Ready, st.SnapshotAgeSeconds
			out[i] = api.NodeInfo{Name: st.Node, Version: st.Version, Ready: &ready, Address: a,
				SnapshotAgeSeconds: &age, Serial: st.Serial, Role: st.Role}
		}()
	}
	wg.Wait()
	return out
}

// selfStatus is this node's internal status.
func selfStatus(d internalDeps) internalapi.NodeStatus {
	_, age := d.store.fresh(time.Now())
	return internalapi.NodeStatus{Node: d.node, SnapshotAgeSeconds: age.Seconds(), Ready: d.ops.readiness().Ready,
		Version: version.Get().Version, Serial: uint64(max(d.snaps.servedRevision(), 0)), Role: d.role}
}

// clusterView serves GET /cluster and /nodes.
func (p *proc) clusterView() clusterInfo {
	ops := p.ops
	c := clusterInfo{driver: p.cfg.Store.Driver, node: p.nodeName, address: p.cfg.Listeners.API.Address,
		ready: func() bool { return ops.readiness().Ready },
		self: func() internalapi.NodeStatus {
			return selfStatus(internalDeps{node: p.nodeName, snaps: p.snaps, ops: ops, store: p.st, role: p.role})
		}}
	if p.leases != nil {
		// Kubernetes: the node Leases list every node, the operator's
		// election Lease names the leader (nodelease.go).
		c.leases = p.leases
		return c
	}
	if p.creds != nil {
		c.client, c.peers = internalapi.NewClient(p.creds), parsePeers(p.env(PeersEnv))
	}
	return c
}

// whyNotReady is the failing readiness checks, "check: reason; ...".
func whyNotReady(ops *Ops) string {
	r := ops.readiness()
	if r.Lameduck {
		return "lameduck"
	}
	parts := make([]string, 0, len(r.Failing))
	for n, why := range r.Failing {
		parts = append(parts, n+": "+why)
	}
	sort.Strings(parts)
	return strings.Join(parts, "; ")
}

// startHeartbeat keeps this node's Lease on Kubernetes (nodelease.go),
// for every role; the last write on stop marks the node stopped.
func (p *proc) startHeartbeat(ctx context.Context) error {
	if !p.kubeMode {
		return nil
	}
	rc, err := restConfig(p.env)
	if err != nil {
		return fmt.Errorf("node lease: %w", err)
	}
	cs, err := kubernetes.NewForConfig(rc)
	if err != nil {
		return fmt.Errorf("node lease: kubernetes client: %w", err)
	}
	l := newNodeLeases(cs, namespace(p.env), p.nodeName, p.opts.NodeLease, p.logger.With("component", "nodelease"))
	ops := p.ops
	l.status = func() internalapi.NodeStatus {
		return selfStatus(internalDeps{node: p.nodeName, snaps: p.snaps, ops: ops, store: p.st, role: p.role})
	}
	l.why = func() string { return whyNotReady(ops) }
	p.leases = l
	if p.role != RoleOperator {
		l.watch(ctx) // GET /nodes and /cluster read the cache
	}
	ctx, cancel := context.WithCancel(ctx)
	done := make(chan struct{})
	go func() {
		defer close(done)
		l.run(ctx)
	}()
	p.onStop(func() {
		cancel()
		<-done
	})
	return nil
}

// nodeForwarder answers the API's node= choice (api.NodeForwarder): the
// named peer of SERVICE_INTERNAL_PEERS serves the read through its internal
// listener. Names are learnt from the peers' status, kept for a short while.
type nodeForwarder struct {
	client *internalapi.Client
	peers  []string
	// leases names the nodes and their internal addresses on Kubernetes.
	leases *nodeLeases

	mu    sync.Mutex
	addrs map[string]string // node name -> internal address
	at    time.Time
}

// nodeNamesFresh is how long the name-to-address map is reused.
const nodeNamesFresh = 30 * time.Second

func (f *nodeForwarder) address(ctx context.Context, node string) (string, bool) {
	f.mu.Lock()
	defer f.mu.Unlock()
	if a, ok := f.addrs[node]; ok && time.Since(f.at) < nodeNamesFresh {
		return a, true
	}
	// Unknown or old: ask every peer again (a pod may have a new address).
	m := map[string]string{}
	for _, n := range peerNodes(ctx, f.client, f.peers) {
		if n.Error == "" {
			m[n.Name] = n.Address
		}
	}
	f.addrs, f.at = m, time.Now()
	a, ok := m[node]
	return a, ok
}

func (f *nodeForwarder) Forward(ctx context.Context, node, pathAndQuery string, header http.Header) (*http.Response, error) {
	var addr string
	var ok bool
	if f.leases != nil {
		addr, ok = f.leases.address(ctx, node)
	} else {
		addr, ok = f.address(ctx, node)
	}
	if !ok {
		return nil, api.ErrUnknownNode
	}
	return f.client.Forward(ctx, addr, pathAndQuery, header)
}

// forwarder is the API's NodeForwarder: on Kubernetes the nodes of the
// node Leases at the internal address each recorded; with SQLite the peers
// of SERVICE_INTERNAL_PEERS (nil without any).
func (p *proc) forwarder() api.NodeForwarder {
	if p.creds == nil {
		return nil
	}
	if p.leases != nil {
		return &nodeForwarder{client: internalapi.NewClient(p.creds), leases: p.leases}
	}
	peers := parsePeers(p.env(PeersEnv))
	if p.kubeMode || len(peers) == 0 {
		return nil
	}
	return &nodeForwarder{client: internalapi.NewClient(p.creds), peers: peers}
}

// forwardedAPI serves a peer's forwarded read with this node's API: the
// path below /api/v1 goes under the API's base path; the request keeps the
// internal token the internal listener checked, which the API takes as the
// node principal (implicit viewer and auditor).
func forwardedAPI(srv *api.Server) http.Handler {
	h, base := srv.Handler(), srv.BasePath()
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		r2 := r.Clone(r.Context())
		r2.URL.Path, r2.URL.RawPath = base+r.URL.Path, ""
		r2.Header.Del("Cookie")
		h.ServeHTTP(w, r2)
	})
}
