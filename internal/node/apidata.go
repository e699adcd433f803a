package node

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"strings"

	apierrors "k8s.io/apimachinery/pkg/api/errors"

	"github.com/svcdns/svc/api/v1alpha1"
	"github.com/svcdns/svc/controllers/blocklists"
	"github.com/svcdns/svc/dataplane/blocklist"
	"github.com/svcdns/svc/dataplane/catalogue"
	"github.com/svcdns/svc/internal/api"
	"github.com/svcdns/svc/internal/internalapi"
	"github.com/svcdns/svc/internal/version"
)

// catalogueData serves the catalogue routes from the node's catalogue loader.
type catalogueData struct{ l *catalogue.Loader }

func (c catalogueData) CatalogueInfo(context.Context) (api.CatalogueInfo, error) {
	b, err := json.Marshal(c.l.Info())
	if err != nil {
		return api.CatalogueInfo{}, err
	}
	var out api.CatalogueInfo
	return out, json.Unmarshal(b, &out)
}

func (c catalogueData) CatalogueCategories(context.Context) ([]api.CatalogueCategory, error) {
	cs := c.l.Current().Categories()
	out := make([]api.CatalogueCategory, len(cs))
	for i, x := range cs {
		out[i] = api.CatalogueCategory(x)
	}
	return out, nil
}

func (c catalogueData) CatalogueServices(context.Context) ([]api.CatalogueService, error) {
	ss := c.l.Current().Services()
	out := make([]api.CatalogueService, len(ss))
	for i, x := range ss {
		out[i] = api.CatalogueService(x)
	}
	return out, nil
}

func (c catalogueData) CatalogueIconSVG(_ context.Context, id string, onDark bool) ([]byte, bool) {
	return c.l.Current().IconSVG(id, onDark)
}

// policyStates answers GET /policies/{ns}/{name}/state from the served table.
type policyStates struct{ b *blocking }

func (p policyStates) PolicyState(_ context.Context, ns, name string) (api.PolicyState, bool, error) {
	t := p.b.table.Load()
	if t == nil {
		return api.PolicyState{}, false, nil
	}
	st, ok := t.State(ns + "/" + name)
	if !ok {
		return api.PolicyState{}, false, nil
	}
	out := api.PolicyState{Policy: st.Policy, Priority: st.Priority, Active: st.Active, Scheduled: st.Scheduled,
		Effective: st.Effective, Groups: st.Groups, Problems: st.Problems, At: st.At, ShadowedBy: []api.PolicyShadow{}}
	for _, s := range st.ShadowedBy {
		out.ShadowedBy = append(out.ShadowedBy, api.PolicyShadow(s))
	}
	out.Lists = make([]api.PolicyListUse, 0, len(st.Lists))
	for _, u := range st.Lists {
		out.Lists = append(out.Lists, api.PolicyListUse(u))
	}
	return out, true, nil
}

// listRules reads a source's rules: inline lines, the cached body of its
// url, or (kube store) its ConfigMap read now with the node's credentials.
type listRules struct{ b *blocking }

// maxRulesBody bounds how much of a cached body the entries routes read.
const maxRulesBody = 64 << 20

func (l listRules) SourceRules(ctx context.Context, src api.BlockListSource) ([]string, bool, error) {
	format := blocklist.Format(src.Format)
	switch {
	case src.URL != "":
		f := l.b.fetcher
		res, ok := f.Cached(src.URL)
		if !ok {
			return nil, false, nil
		}
		body, err := f.Open(res.Digest)
		if err != nil {
			return nil, false, nil
		}
		defer body.Close()
		text, err := io.ReadAll(io.LimitReader(body, maxRulesBody))
		if err != nil {
			return nil, false, err
		}
		return blocklist.NormalizeRules(format, src.Subdomains, string(text)), true, nil
	case src.ConfigMapRef != nil:
		if l.b.follow == nil || l.b.follow.configMaps == nil {
			return nil, false, nil // sqlite store: such sources cannot be read
		}
		ns, err := blocklists.ConfigMapNamespace(src.Namespace, &v1alpha1.ConfigMapRef{Name: src.ConfigMapRef.Name, Namespace: src.ConfigMapRef.Namespace})
		if err != nil {
			return nil, false, nil // refused: the list's status says why
		}
		text, err := l.b.follow.configMaps.ListBody(ctx, ns, src.ConfigMapRef.Name)
		if apierrors.IsNotFound(err) {
			return nil, false, nil
		}
		if err != nil {
			return nil, false, fmt.Errorf("configMap %s/%s: %w", ns, src.ConfigMapRef.Name, err)
		}
		if len(text) > maxRulesBody {
			text = text[:maxRulesBody]
		}
		return blocklist.NormalizeRules(format, src.Subdomains, text), true, nil
	default:
		return blocklist.NormalizeRules(format, src.Subdomains, strings.Join(src.Inline, "\n")), true, nil
	}
}

// listRefresher fetches a list's url sources now.
type listRefresher struct{ b *blocking }

func (r listRefresher) RefreshBlockList(ctx context.Context, ns, name string) error {
	rec := r.b.rec.Load()
	if rec == nil {
		return notFetcher{errors.New("this node does not fetch block lists; the operator leader does")}
	}
	_, err := rec.Refresh(ctx, ns, name)
	return err
}

// notFetcher refuses a refresh on a data-plane node (501 not_implemented,
// not a bare 500): only the operator leader fetches list URLs.
type notFetcher struct{ error }

func (notFetcher) ErrorKey() string { return "not_implemented" }
func (notFetcher) ErrorHint() string {
	return "the operator leader refetches each list every spec.refreshInterval and data-plane nodes copy its bodies; shorten refreshInterval for fresher lists"
}

// BlockingState reports the node's blocking toggle (GET /dns/blocking).
func (d dnsService) BlockingState(context.Context) (api.BlockingState, error) {
	return blockingState(d.toggle.State()), nil
}

// clusterInfo describes this node; peers are not tracked in this release.
type clusterInfo struct {
	driver, node, address string
	ready                 func() bool
	// self is this node's status; peers (SERVICE_INTERNAL_PEERS) are asked
	// for theirs over the internal listener with client (nil: none).
	self   func() internalapi.NodeStatus
	client *internalapi.Client
	peers  []string
	// leases lists the nodes on Kubernetes (nil otherwise).
	leases *nodeLeases
}

func (c clusterInfo) ClusterInfo(ctx context.Context) (api.ClusterInfo, error) {
	info := api.ClusterInfo{Driver: c.driver, Nodes: 1, Node: c.node}
	if c.leases != nil {
		ns, err := c.Nodes(ctx)
		if err != nil {
			return info, err
		}
		info.Nodes = int64(len(ns))
		if info.Leader, info.Epoch, err = c.leases.leader(ctx); err != nil {
			return info, err
		}
		info.ClusterID = c.leases.clusterIDOf(ctx)
		return info, nil
	}
	if c.driver == "sqlite" {
		info.Leader = c.node // each SQLite node owns its store
	}
	if c.client != nil && len(c.peers) > 0 {
		ns, _ := c.Nodes(ctx)
		info.Nodes = int64(len(ns))
	}
	return info, nil
}

// Nodes lists this node, then each peer as it answers for itself.
func (c clusterInfo) Nodes(ctx context.Context) ([]api.NodeInfo, error) {
	ready := c.ready()
	me := api.NodeInfo{Name: c.node, Version: version.Get().Version, Ready: &ready, Leader: c.driver == "sqlite", Address: c.address}
	if c.self != nil {
		st := c.self()
		age := st.SnapshotAgeSeconds
		me.SnapshotAgeSeconds, me.Serial, me.Role = &age, st.Serial, st.Role
	}
	if c.leases != nil {
		out, err := c.leases.nodes(ctx, me)
		if err != nil {
			return nil, err
		}
		leader, _, err := c.leases.leader(ctx)
		if err != nil {
			return nil, err
		}
		for i := range out {
			out[i].Leader = leader != "" && out[i].Name == leader
		}
		return out, nil
	}
	out := []api.NodeInfo{me}
	if c.client == nil || len(c.peers) == 0 {
		return out, nil
	}
	for _, n := range peerNodes(ctx, c.client, c.peers) {
		if n.Name == c.node {
			continue // a headless Service also names this pod
		}
		n.Leader = c.driver == "sqlite" && n.Error == ""
		out = append(out, n)
	}
	return out, nil
}
