package node

import (
	"context"
	"fmt"
	"log/slog"
	"sync"
	"sync/atomic"
	"time"

	"github.com/svcdns/svc/controllers/blocklists"
	"github.com/svcdns/svc/controllers/policies"
	"github.com/svcdns/svc/dataplane"
	"github.com/svcdns/svc/dataplane/blocklist"
	"github.com/svcdns/svc/dataplane/catalogue"
	"github.com/svcdns/svc/dataplane/policy"
	"github.com/svcdns/svc/dataplane/policy/toggle"
	"github.com/svcdns/svc/dataplane/safesearch"
	"github.com/svcdns/svc/internal/listfetch"
	"github.com/svcdns/svc/internal/settings"
	"github.com/svcdns/svc/internal/store"
)

// blocking runs what filtering needs on a node: the list fetcher and BlockList
// reconciler, the catalogue, the Policy reconciler and the per-node toggle, and
// compiles policies over the current lists for each snapshot.
type blocking struct {
	log     *slog.Logger
	st      store.Store
	fetcher *listfetch.Fetcher
	cat     *catalogue.Loader
	safe    *safesearch.Table
	toggle  *toggle.Toggle
	pols    *policies.Reconciler
	hot     *hotConfig

	mu    sync.Mutex
	lists map[string]*blocklist.List // "namespace/name"

	changed func() // asks the snapshotter for a rebuild
	// rec is the list reconciler of a node that fetches lists itself.
	rec atomic.Pointer[blocklists.Reconciler[policy.CompiledSource, *blocklist.List]]
	// table is the policy table of the snapshot being served.
	table   atomic.Pointer[policy.Table]
	metrics *nodeMetrics
	// follow, when set, replaces the local list reconciler (kube store data
	// plane: bodies come from the operator leader by digest).
	follow *listFollower
}

func newBlocking(ctx context.Context, cfg *settings.Config, st store.Store, dp *dataplane.Server, nodeName string, hot *hotConfig, log *slog.Logger) (*blocking, error) {
	fetcher, err := listfetch.New(listfetch.Options{Dir: cfg.Blocking.ListsDir, AllowLocal: cfg.Blocking.AllowLocalListURLs, Logger: log.With("component", "listfetch")})
	if err != nil {
		return nil, err
	}
	safe := safesearch.New()
	cat, err := catalogue.NewLoader(ctx, catalogue.LoaderConfig{
		URL: cfg.Blocking.Catalogue.URL, ImportedServicesURL: cfg.Blocking.Catalogue.ImportedServicesURL, SafeSearchEngines: safe.Engines(),
	}, fetcher.Client(), time.Now, log.With("component", "catalogue"))
	if err != nil {
		return nil, fmt.Errorf("catalogue: %w", err)
	}
	b := &blocking{
		log: log, st: st, fetcher: fetcher, cat: cat, safe: safe, hot: hot,
		toggle: toggle.New(dp, toggle.RealClock(), nodeName, cfg.Blocking.Enabled),
		lists:  map[string]*blocklist.List{},
	}
	b.pols = &policies.Reconciler{Store: st, Catalogue: func() policies.Catalogue { return cat.Current() }, Now: time.Now}
	return b, nil
}

// run reconciles block lists until ctx ends; initial receives the result of the
// first pass (blocking.initStrategy decides whether the node waits for it).
func (b *blocking) run(ctx context.Context, cfg *settings.Config, initial chan<- error) error {
	go b.refreshCatalogue(ctx, cfg.Blocking.Catalogue)
	if b.follow != nil {
		// kube store: the operator leader fetches, this node copies bodies
		b.follow.onList = b.setList
		return b.follow.run(ctx, initial)
	}
	b.rec.Store(blocklists.New(blocklists.Options[policy.CompiledSource, *blocklist.List]{
		Store: b.st, Fetcher: b.fetcher, Compiler: policy.ListCompiler{},
		AllowDegraded: cfg.Blocking.AllowDegraded, DefaultRefresh: cfg.Blocking.RefreshInterval,
		Now: time.Now, Logger: b.log.With("component", "blocklists"),
		OnList: b.setList, OnFetch: b.metrics.listFetched,
	}))
	return b.rec.Load().Run(ctx, initial)
}

// setList puts a compiled list into (ok=false: removes it from) the next
// snapshot.
func (b *blocking) setList(name string, l *blocklist.List, ok bool) {
	b.mu.Lock()
	if ok {
		b.lists[name] = l
	} else {
		delete(b.lists, name)
	}
	b.mu.Unlock()
	if ok {
		b.metrics.setListRules(name, l.Status().RuleCount, true)
	} else {
		b.metrics.setListRules(name, 0, false)
	}
	if b.changed != nil {
		b.changed()
	}
}

// refreshCatalogue reloads a configured catalogue document periodically.
func (b *blocking) refreshCatalogue(ctx context.Context, c settings.Catalogue) {
	if c.URL == "" && c.ImportedServicesURL == "" {
		return
	}
	interval := c.RefreshInterval
	if interval < time.Minute {
		interval = 24 * time.Hour
	}
	for {
		if changed, err := b.cat.Refresh(ctx); err != nil {
			b.log.Warn("catalogue refresh failed, keeping the current one", "err", err)
		} else if changed && b.changed != nil {
			b.changed()
		}
		select {
		case <-ctx.Done():
			return
		case <-time.After(interval):
		}
	}
}

// reconcilePolicy writes a policy's status (unknown catalogue ids).
func (b *blocking) reconcilePolicy(ctx context.Context, namespace, name string) {
	go func() {
		if _, err := b.pols.Reconcile(ctx, namespace, name); stoppedEarly(ctx, err) {
			b.log.Warn("policy status", "policy", namespace+"/"+name, "err", err)
		}
	}()
}

// compile builds the blocking part of a snapshot.
func (b *blocking) compile(objs blockingObjects) (dataplane.Blocker, dataplane.Identifier) {
	cfg := b.hot.current()
	in := policy.Input{
		Groups: objs.groups, Policies: objs.policies,
		Catalogue: b.cat.Current(), SafeSearch: b.safe,
		Settings: policy.Settings{
			DefaultResponse: cfg.Blocking.DefaultResponse, BlockTTL: cfg.Blocking.BlockTTL,
			CustomIPv4: cfg.Blocking.CustomIP.V4, CustomIPv6: cfg.Blocking.CustomIP.V6,
			BlockPageIPv4: cfg.BlockPage.IPv4, BlockPageIPv6: cfg.BlockPage.IPv6,
		},
	}
	b.mu.Lock()
	for i := range objs.lists {
		l := &objs.lists[i]
		if compiled, ok := b.lists[l.Namespace+"/"+l.Name]; ok {
			in.Lists = append(in.Lists, policy.List{Object: l, Compiled: compiled})
		}
	}
	b.mu.Unlock()
	table, problems := policy.Compile(context.Background(), in)
	b.table.Store(table)
	for _, p := range problems {
		b.log.Warn("policy problem", "problem", fmt.Sprint(p))
	}
	return table, table.Groups()
}

// waitInitialLists applies blocking.initStrategy: fast serves at once and blocks
// once lists are ready; blocking waits for the first pass; failOnError also stops
// the node when a list could not be loaded.
func waitInitialLists(ctx context.Context, strategy string, initial <-chan error, log *slog.Logger) error {
	if strategy == "" || strategy == "fast" {
		return nil
	}
	select {
	case <-ctx.Done():
		return ctx.Err()
	case err, ok := <-initial:
		if ok && err != nil {
			if strategy == "failOnError" {
				return fmt.Errorf("blocking.initStrategy failOnError: block lists did not load: %w", err)
			}
			log.Warn("some block lists did not load; serving without them", "err", err)
		}
	}
	return nil
}
