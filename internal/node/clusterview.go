package node

import (
	"context"
	"sync"
	"time"

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
	if p.creds != nil {
		c.client, c.peers = internalapi.NewClient(p.creds), parsePeers(p.env(PeersEnv))
	}
	return c
}
