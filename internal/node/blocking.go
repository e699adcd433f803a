package node

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"sync"
	"sync/atomic"
	"time"

	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/rest"
	kevents "k8s.io/client-go/tools/events"

	"github.com/svcdns/svc/api/v1alpha1"
	"github.com/svcdns/svc/controllers/blocklists"
	"github.com/svcdns/svc/controllers/events"
	"github.com/svcdns/svc/controllers/policies"
	unblockctl "github.com/svcdns/svc/controllers/unblock"
	"github.com/svcdns/svc/dataplane"
	"github.com/svcdns/svc/dataplane/blocklist"
	"github.com/svcdns/svc/dataplane/catalogue"
	"github.com/svcdns/svc/dataplane/policy"
	"github.com/svcdns/svc/dataplane/policy/toggle"
	"github.com/svcdns/svc/dataplane/safesearch"
	"github.com/svcdns/svc/internal/listfetch"
	"github.com/svcdns/svc/internal/operator"
	"github.com/svcdns/svc/internal/runner"
	"github.com/svcdns/svc/internal/settings"
	"github.com/svcdns/svc/internal/store"
	"github.com/svcdns/svc/internal/unblock"
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
	hot     *hotConfig
	// events is the Kubernetes Events recorder of the operator's
	// reconcilers (empty outside Kubernetes: nothing is recorded).
	events *events.Deferred
	// tenancy confines policies to their namespace (set by setTenancy
	// before anything compiles).
	tenancy *policy.Tenancy

	mu    sync.Mutex
	lists map[string]*blocklist.List // "namespace/name"
	// gens knows the BlockList generation each compiled list came from.
	gens listGenerations
	// listsLoaded is set once the first pass over the lists is done: until
	// then a policy naming a list not compiled yet is expected, not a
	// problem to log (policies compile with the first snapshot).
	listsLoaded atomic.Bool

	changed func() // asks the snapshotter for a rebuild
	// rec is the list reconciler of a node that fetches lists itself.
	rec atomic.Pointer[blocklists.Reconciler[policy.CompiledSource, *blocklist.List]]
	// table is the policy table of the snapshot being served.
	table   atomic.Pointer[policy.Table]
	metrics *nodeMetrics
	// follow, when set, replaces the local list reconciler (kube store data
	// plane: bodies come from the operator leader by digest).
	follow *listFollower
	// unblock files and decides unblock requests (one per process: its
	// per-client rate limit is in memory); the block page's Submitter.
	unblock *unblock.Service
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
	b.tenancy = resolveTenancy(cfg, DefaultNamespace)
	b.events = &events.Deferred{}
	b.unblock = newUnblockService(st, hot, log)
	return b, nil
}

// listEvents is the Events reporter of the operator's BlockList reconciler.
func (b *blocking) listEvents() *events.Reporter { return events.NewReporter(b.events, "Reconcile") }

// kubeRecorder records events.k8s.io Events as "service-operator" until ctx
// ends.
func kubeRecorder(ctx context.Context, rc *rest.Config) (events.Recorder, error) {
	if rc == nil {
		return nil, errors.New("no Kubernetes client configuration")
	}
	cs, err := kubernetes.NewForConfig(rc)
	if err != nil {
		return nil, fmt.Errorf("events client: %w", err)
	}
	br := kevents.NewBroadcaster(&kevents.EventSinkImpl{Interface: cs.EventsV1()})
	if err := br.StartRecordingToSinkWithContext(ctx); err != nil {
		return nil, fmt.Errorf("events: %w", err)
	}
	context.AfterFunc(ctx, br.Shutdown)
	return br.NewRecorder(runtime.NewScheme(), "service-operator"), nil
}

// setTenancy resolves blocking.globalPolicyNamespaces against the service's
// namespace (SERVICE_NAMESPACE); call before the node compiles anything.
func (b *blocking) setTenancy(cfg *settings.Config, serviceNamespace string) {
	b.tenancy = resolveTenancy(cfg, serviceNamespace)
	if cfg.Store.Driver == "kube" {
		// requests no policy of a namespace decided live with the service
		b.unblock.DefaultNamespace = serviceNamespace
	}
}

// resolveTenancy: an empty blocking.globalPolicyNamespaces means the
// service's own namespace; with the sqlite store also "default", where
// objects applied without a namespace live, so a single-team install keeps
// its policies for everyone.
func resolveTenancy(cfg *settings.Config, serviceNamespace string) *policy.Tenancy {
	ns := append([]string(nil), cfg.Blocking.GlobalPolicyNamespaces...)
	if len(ns) == 0 {
		ns = []string{serviceNamespace}
		if cfg.Store.Driver != "kube" && serviceNamespace != "default" {
			ns = append(ns, "default")
		}
	}
	return &policy.Tenancy{GlobalNamespaces: ns}
}

// checker runs the data plane's compile for the status reconcilers, over
// the objects in the store (one source of truth for status and serving).
type checker struct{ b *blocking }

func (c checker) input(ctx context.Context) (policy.Input, error) {
	cfg := c.b.hot.current()
	in := policy.Input{Catalogue: c.b.cat.Current(), SafeSearch: c.b.safe, Tenancy: c.b.tenancy,
		Settings: policy.Settings{DefaultResponse: cfg.Blocking.DefaultResponse, BlockTTL: cfg.Blocking.BlockTTL}}
	groups, err := store.ListTyped[v1alpha1.ClientGroup](ctx, c.b.st, policies.GroupKind, "")
	if err != nil {
		return in, err
	}
	lists, err := store.ListTyped[v1alpha1.BlockList](ctx, c.b.st, blocklists.Kind, "")
	if err != nil {
		return in, err
	}
	in.Groups = groups
	for i := range lists {
		// existence is what a reference needs; the rules are the list's business
		in.Lists = append(in.Lists, policy.List{Object: &lists[i]})
	}
	return in, nil
}

// CheckPolicy implements policies.Checker.
func (c checker) CheckPolicy(ctx context.Context, p *v1alpha1.Policy) ([]policies.Problem, error) {
	in, err := c.input(ctx)
	if err != nil {
		return nil, err
	}
	var out []policies.Problem
	for _, pr := range policy.Check(ctx, in, p) {
		out = append(out, policies.Problem{Reason: pr.Reason, Message: pr.Msg})
	}
	return out, nil
}

// CheckGroup implements policies.GroupChecker.
func (c checker) CheckGroup(ctx context.Context, g *v1alpha1.ClientGroup) ([]policies.Problem, error) {
	groups, err := store.ListTyped[v1alpha1.ClientGroup](ctx, c.b.st, policies.GroupKind, "")
	if err != nil {
		return nil, err
	}
	_, problems := policy.CompileGroups(groups)
	name := g.Namespace + "/" + g.Name
	var out []policies.Problem
	for _, pr := range problems {
		if pr.Name == name {
			out = append(out, policies.Problem{Reason: pr.Reason, Message: pr.Msg})
		}
	}
	return out, nil
}

// controllers is the one list of the node's controllers: BlockList,
// Policy, ClientGroup and UnblockRequest. The local runner runs it on the sqlite store
// (blocking.run) and the operator's controller-runtime manager on the kube
// store (operatorControllers), so both modes run the same reconcile
// functions. A BlockList or ClientGroup change re-checks the policies that
// name it, so a reference that appears or disappears shows on them at once.
func controllers(lists runner.Reconciler, pols *policies.Reconciler, groups *policies.GroupReconciler, unblocks runner.Reconciler) []runner.Controller {
	return []runner.Controller{
		{Kind: blocklists.Kind, Reconciler: runner.ReconcilerFunc(func(ctx context.Context, ns, name string) (time.Duration, error) {
			after, err := lists.Reconcile(ctx, ns, name)
			if perr := pols.ReconcileReferencing(ctx, blocklists.Kind, ns, name); err == nil {
				err = perr
			}
			return after, err
		}), MinBackoff: listRetryMin},
		{Kind: policies.Kind, Reconciler: runner.ReconcilerFunc(func(ctx context.Context, ns, name string) (time.Duration, error) {
			_, err := pols.Reconcile(ctx, ns, name)
			// the groups it selects (or selected) list it in their status
			if gerr := groups.PolicyChanged(ctx, ns, name); err == nil {
				err = gerr
			}
			return 0, err
		})},
		{Kind: policies.GroupKind, Reconciler: runner.ReconcilerFunc(func(ctx context.Context, ns, name string) (time.Duration, error) {
			return 0, groups.Reconcile(ctx, ns, name)
		})},
		{Kind: unblockctl.Kind, Reconciler: unblocks},
	}
}

// listRetryMin is the first wait before a list that failed (a fetch, a
// parse) is reconciled again; it doubles up to runner.DefaultMaxBackoff, so
// a list server that is down is not asked every second.
const listRetryMin = 10 * time.Second

// operatorControllers are controllers for the operator (the kube store).
// Each records Kubernetes Events through the node's own recorder (started
// here with the operator's credentials, so it outlives each leader term's
// manager). lists is the BlockList reconciler, built with Events:
// b.listEvents().
func (b *blocking) operatorControllers(ctx context.Context, rc *rest.Config, lists operator.Reconciler) []operator.Controller {
	if rec, err := kubeRecorder(ctx, rc); err != nil {
		b.log.Warn("no Kubernetes Events for block lists, policies and client groups", "err", err)
	} else {
		b.events.Set(rec)
	}
	pols := &policies.Reconciler{Store: b.st, Checker: checker{b}, Now: time.Now,
		Events: events.NewReporter(b.events, "Reconcile")}
	groups := &policies.GroupReconciler{Store: b.st, Checker: checker{b}, Policies: pols,
		Events: events.NewReporter(b.events, "Reconcile")}
	// A BlockList or ClientGroup change queues the policies that name it on
	// the Policy controller's own queue (one status write per policy at a
	// time), as the local runner does on the sqlite store.
	polTrigger := operator.NewTrigger()
	pols.Enqueue = func(ns, name string) {
		if !polTrigger.Enqueue(ns, name) {
			b.log.Warn("policy re-check not queued: the Policy controller is behind", "policy", ns+"/"+name)
		}
	}
	var out []operator.Controller
	for _, c := range controllers(lists, pols, groups, b.unblockReconciler(b.events)) {
		// controller-runtime brings its own queue and backoff
		oc := operator.Controller{Kind: c.Kind, Reconciler: c.Reconciler}
		if c.Kind == policies.Kind {
			oc.Trigger = polTrigger
		}
		out = append(out, oc)
	}
	return out
}

// run reconciles block lists until ctx ends; initial receives the result of the
// first pass (blocking.initStrategy decides whether the node waits for it).
// On the sqlite store it runs the node's controllers on the local runner.
func (b *blocking) run(ctx context.Context, cfg *settings.Config, initial chan<- error) error {
	go b.refreshCatalogue(ctx, cfg.Blocking.Catalogue)
	if b.follow != nil {
		// kube store: the operator leader fetches, this node copies bodies
		b.follow.onList = b.setList
		b.follow.compiler = b.gens.compiler()
		return b.follow.run(ctx, initial)
	}
	lists := blocklists.New(blocklists.Options[policy.CompiledSource, *blocklist.List]{
		Store: b.st, Fetcher: b.fetcher, Compiler: b.gens.compiler(),
		AllowDegraded: cfg.Blocking.AllowDegraded, DefaultRefresh: cfg.Blocking.RefreshInterval,
		Now: time.Now, Logger: b.log.With("component", "blocklists"),
		OnList: b.setList, OnFetch: b.metrics.listFetched,
	})
	b.rec.Store(lists)
	pols := &policies.Reconciler{Store: b.st, Checker: checker{b}, Now: time.Now}
	groups := &policies.GroupReconciler{Store: b.st, Checker: checker{b}, Policies: pols}
	cs := controllers(lists, pols, groups, b.unblockReconciler(nil))
	for i := range cs {
		if cs[i].Kind == blocklists.Kind {
			cs[i].Initial = initial
		}
	}
	r, err := runner.New(b.st, b.log.With("component", "controllers"), cs...)
	if err != nil {
		return err
	}
	pols.Enqueue = r.Queue(policies.Kind).Enqueue
	return r.Run(ctx)
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

// compile builds the blocking part of a snapshot.
func (b *blocking) compile(objs blockingObjects) (dataplane.Blocker, dataplane.Identifier) {
	cfg := b.hot.current()
	bp4, bp6 := blockPageAddrs(cfg)
	in := policy.Input{
		Groups: objs.groups, Policies: objs.policies, Tenancy: b.tenancy,
		Catalogue: b.cat.Current(), SafeSearch: b.safe,
		Settings: policy.Settings{
			DefaultResponse: cfg.Blocking.DefaultResponse, BlockTTL: cfg.Blocking.BlockTTL,
			CustomIPv4: cfg.Blocking.CustomIP.V4, CustomIPv6: cfg.Blocking.CustomIP.V6,
			BlockPageIPv4: bp4, BlockPageIPv6: bp6,
		},
	}
	b.mu.Lock()
	for i := range objs.lists {
		// a list without rules yet is still a list (ListNotLoaded, not UnknownList)
		l := &objs.lists[i]
		in.Lists = append(in.Lists, policy.List{Object: l, Compiled: b.lists[l.Namespace+"/"+l.Name]})
	}
	b.mu.Unlock()
	table, problems := policy.Compile(context.Background(), in)
	b.table.Store(table)
	for _, p := range problems {
		if !b.listsLoaded.Load() && (p.Reason == policy.ReasonListNotLoaded || p.Reason == policy.ReasonUnknownList) {
			continue
		}
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
