// Package operator runs the reconcilers in Kubernetes mode: a
// controller-runtime manager with leader election (a Lease), one controller
// per kind feeding the reconciler cores (written against store.Store), and
// the manager's event recorder for Kubernetes Events.
package operator

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"os"
	"strconv"
	"strings"
	"time"

	"github.com/go-logr/logr"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apimachinery/pkg/util/uuid"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/rest"
	toolscache "k8s.io/client-go/tools/cache"
	"k8s.io/client-go/tools/leaderelection/resourcelock"
	ctrl "sigs.k8s.io/controller-runtime"
	crcache "sigs.k8s.io/controller-runtime/pkg/cache"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/controller"
	"sigs.k8s.io/controller-runtime/pkg/event"
	"sigs.k8s.io/controller-runtime/pkg/handler"
	"sigs.k8s.io/controller-runtime/pkg/manager"
	metricsserver "sigs.k8s.io/controller-runtime/pkg/metrics/server"
	"sigs.k8s.io/controller-runtime/pkg/reconcile"
	"sigs.k8s.io/controller-runtime/pkg/recorder"
	"sigs.k8s.io/controller-runtime/pkg/source"

	"github.com/svcdns/svc/internal/kubewatch"
	"github.com/svcdns/svc/internal/store"
)

// Reconciler is a reconciler core: it reconciles one object and says when to
// look again (0: only on change).
type Reconciler interface {
	Reconcile(ctx context.Context, namespace, name string) (requeueAfter time.Duration, err error)
}

// ReconcilerFunc adapts a function.
type ReconcilerFunc func(ctx context.Context, namespace, name string) (time.Duration, error)

// Reconcile implements Reconciler.
func (f ReconcilerFunc) Reconcile(ctx context.Context, namespace, name string) (time.Duration, error) {
	return f(ctx, namespace, name)
}

// Controller binds a reconciler to the kind whose changes trigger it.
type Controller struct {
	Kind       string // e.g. BlockList
	Reconciler Reconciler
	// Trigger, when set, also queues reconciles that another controller
	// asks for: they go through this controller's own queue, which runs
	// at most one reconcile per object at a time, instead of racing it.
	Trigger *Trigger
}

// Trigger queues reconciles of one controller's objects from outside its
// watch (a BlockList change re-checks the policies that name it).
type Trigger struct {
	ch chan event.GenericEvent
}

// triggerBuffer is how many asked-for reconciles may wait for the
// controller's queue (which deduplicates them).
const triggerBuffer = 1024

// NewTrigger returns a trigger for one Controller of one manager.
func NewTrigger() *Trigger { return &Trigger{ch: make(chan event.GenericEvent, triggerBuffer)} }

// Enqueue asks for a reconcile of namespace/name. It never blocks: false
// means triggerBuffer requests already wait (the controller is not
// running, or far behind) and this one was not queued.
func (t *Trigger) Enqueue(namespace, name string) bool {
	u := &unstructured.Unstructured{}
	u.SetNamespace(namespace)
	u.SetName(name)
	select {
	case t.ch <- event.GenericEvent{Object: u}:
		return true
	default:
		return false
	}
}

// Options configure New.
type Options struct {
	// Namespace holds the leader-election Lease (default service-system).
	Namespace string
	// LeaseName names the Lease (default service-operator).
	LeaseName string
	// Identity is this replica's node name (default: host name); the
	// Lease holder is "<Identity>_<uid>", unique per manager, so GET
	// /cluster names the leader's node (LeaderNode) and a restarted replica
	// never mistakes the Lease of its predecessor for its own.
	Identity string
	// LeaseDuration, RenewDeadline and RetryPeriod tune leader election
	// (defaults 15s, 10s, 2s).
	LeaseDuration, RenewDeadline, RetryPeriod time.Duration
	// Controllers are the reconciler cores to run (the controllers package's
	// BlockList and Policy reconcilers, adapted).
	Controllers []Controller
	// Store, when set, runs the built-in DNSZone and DNSRecordSet status
	// reconcilers on it, and every reconcile waits (requeues) until it shows
	// the object as the manager's cache does: the cores read the store,
	// whose informers are not the manager's.
	Store  store.Store
	Logger *slog.Logger
	// Runnables run while this replica leads, each until its context ends
	// (the publisher: one writer per cluster).
	Runnables []func(context.Context) error
}

// Operator is a manager ready to run.
type Operator struct {
	mgr   manager.Manager
	log   *slog.Logger
	store store.Store
}

// storeLagRetry is how soon a request is looked at again when the store's
// view has not caught up with the event that triggered it.
const storeLagRetry = 100 * time.Millisecond

// GroupVersion of every kind the operator watches.
var GroupVersion = schema.GroupVersion{Group: "service.io", Version: "v1alpha1"}

// New builds the manager and registers the controllers. Metrics and probes
// of controller-runtime are off: the node serves its own.
func New(cfg *rest.Config, opts Options) (*Operator, error) {
	if opts.Logger == nil {
		opts.Logger = slog.New(slog.DiscardHandler)
	}
	if opts.Namespace == "" {
		opts.Namespace = "service-system"
	}
	if opts.LeaseName == "" {
		opts.LeaseName = "service-operator"
	}
	dur := func(d, def time.Duration) *time.Duration {
		if d <= 0 {
			d = def
		}
		return &d
	}
	lock, err := electionLock(cfg, opts, *dur(opts.RenewDeadline, 10*time.Second))
	if err != nil {
		return nil, err
	}
	mgr, err := ctrl.NewManager(cfg, manager.Options{
		LeaderElectionResourceLockInterface: lock,
		Logger:                              logr.FromSlogHandler(opts.Logger.Handler()),
		LeaderElection:                      true,
		LeaderElectionID:                    opts.LeaseName,
		LeaderElectionNamespace:             opts.Namespace,
		LeaderElectionResourceLock:          "leases",
		LeaderElectionReleaseOnCancel:       true,
		LeaseDuration:                       dur(opts.LeaseDuration, 15*time.Second),
		RenewDeadline:                       dur(opts.RenewDeadline, 10*time.Second),
		RetryPeriod:                         dur(opts.RetryPeriod, 2*time.Second),
		Metrics:                             metricsserver.Options{BindAddress: "0"},
		HealthProbeBindAddress:              "0",
		// The controllers' caches wait out an apiserver restart on
		// kubewatch's short pace, not the reflector's backoff of up to a
		// minute, so a leader that kept its Lease follows changes at once.
		Cache: crcache.Options{NewInformer: func(lw toolscache.ListerWatcher, obj runtime.Object, resync time.Duration, idx toolscache.Indexers) toolscache.SharedIndexInformer {
			return toolscache.NewSharedIndexInformer(kubewatch.New(lw), obj, resync, idx)
		}},
	})
	if err != nil {
		return nil, fmt.Errorf("operator: manager: %w", err)
	}
	opts.Logger.Info("operator: starting", "identity", lock.Identity())
	o := &Operator{mgr: mgr, log: opts.Logger, store: opts.Store}
	ctrls := opts.Controllers
	if opts.Store != nil {
		rec := mgr.GetEventRecorder("service-operator")
		st := &statusReconciler{store: opts.Store, events: rec, now: time.Now}
		ctrls = append(ctrls,
			Controller{Kind: store.KindDNSZone, Reconciler: ReconcilerFunc(st.reconcileZone)},
			Controller{Kind: store.KindDNSRecordSet, Reconciler: ReconcilerFunc(st.reconcileRecordSet)},
		)
	}
	for _, c := range ctrls {
		if err := o.add(c); err != nil {
			return nil, err
		}
	}
	for _, r := range opts.Runnables {
		// A RunnableFunc needs leader election: it starts on election.
		if err := mgr.Add(manager.RunnableFunc(r)); err != nil {
			return nil, fmt.Errorf("operator: %w", err)
		}
	}
	return o, nil
}

func (o *Operator) add(c Controller) error {
	u := &unstructured.Unstructured{}
	u.SetGroupVersionKind(GroupVersion.WithKind(c.Kind))
	r := c.Reconciler
	// Names are unique per manager; the process-wide check (for metrics,
	// which are off here) would refuse a second manager in one process.
	skip := true
	b := ctrl.NewControllerManagedBy(o.mgr).
		Named(c.Kind).
		For(u).
		WithOptions(controller.Options{MaxConcurrentReconciles: 2, SkipNameValidation: &skip})
	if c.Trigger != nil {
		b = b.WatchesRawSource(source.Channel(c.Trigger.ch, &handler.EnqueueRequestForObject{}))
	}
	err := b.Complete(reconcile.Func(func(ctx context.Context, req reconcile.Request) (reconcile.Result, error) {
		if o.storeBehind(ctx, u.GroupVersionKind(), req) {
			return reconcile.Result{RequeueAfter: storeLagRetry}, nil
		}
		after, err := r.Reconcile(ctx, req.Namespace, req.Name)
		if err != nil {
			return reconcile.Result{}, fmt.Errorf("%s %s: %w", c.Kind, req.NamespacedName, err)
		}
		return reconcile.Result{RequeueAfter: after}, nil
	}))
	if err != nil {
		return fmt.Errorf("operator: controller %s: %w", c.Kind, err)
	}
	return nil
}

// storeBehind reports whether the store's view of req's object is older than
// the manager's cache, which delivered the request. The two are separate
// informers on the same watch: a request for a new object can arrive before
// the store has it, and a reconciler core reading the store would take the
// object for deleted (and, as nothing changes after, never look again) or
// act on a stale spec. Errors on either side let the core run (it reports
// its own).
func (o *Operator) storeBehind(ctx context.Context, gvk schema.GroupVersionKind, req reconcile.Request) bool {
	if o.store == nil {
		return false
	}
	live := &unstructured.Unstructured{}
	live.SetGroupVersionKind(gvk)
	err := o.mgr.GetClient().Get(ctx, req.NamespacedName, live)
	if err != nil && !apierrors.IsNotFound(err) {
		return false
	}
	liveGone := err != nil
	seen, err := o.store.Get(ctx, gvk.Kind, req.Namespace, req.Name)
	if err != nil && !errors.Is(err, store.ErrNotFound) {
		return false
	}
	seenGone := err != nil
	switch {
	case liveGone && seenGone:
		return false
	case liveGone || seenGone:
		o.log.Debug("operator: store not caught up", "kind", gvk.Kind, "object", req.NamespacedName.String())
		return true
	}
	if versionBefore(seen.GetResourceVersion(), live.GetResourceVersion()) {
		o.log.Debug("operator: store not caught up", "kind", gvk.Kind, "object", req.NamespacedName.String(),
			"store", seen.GetResourceVersion(), "cache", live.GetResourceVersion())
		return true
	}
	return false
}

// versionBefore compares resourceVersions as the kube store does (etcd
// revisions); versions that are not numbers are never "before".
func versionBefore(a, b string) bool {
	x, err1 := strconv.ParseUint(a, 10, 64)
	y, err2 := strconv.ParseUint(b, 10, 64)
	return err1 == nil && err2 == nil && x < y
}

// Recorder records Kubernetes Events (events.k8s.io) for reconcilers.
func (o *Operator) Recorder(name string) recorder.EventRecorder { return o.mgr.GetEventRecorder(name) }

// Client is the manager's cached client.
func (o *Operator) Client() client.Client { return o.mgr.GetClient() }

// Elected is closed when this replica becomes the leader.
func (o *Operator) Elected() <-chan struct{} { return o.mgr.Elected() }

// Run runs the manager until ctx ends; the Lease is released on the way out.
func (o *Operator) Run(ctx context.Context) error {
	if err := o.mgr.Start(ctx); err != nil && !errors.Is(err, context.Canceled) {
		return fmt.Errorf("operator: %w", err)
	}
	return nil
}

// electionLock is the Lease lock of the election, held as
// "<identity>_<uid>" (what controller-runtime would use, with the node's
// name instead of the host name). The client's timeout is below the renew
// deadline so one hung request cannot cost the lead.
func electionLock(cfg *rest.Config, opts Options, renewDeadline time.Duration) (resourcelock.Interface, error) {
	id := opts.Identity
	if id == "" {
		h, err := os.Hostname()
		if err != nil {
			return nil, fmt.Errorf("operator: leader identity: %w", err)
		}
		id = h
	}
	id += "_" + string(uuid.NewUUID())
	cfg = rest.AddUserAgent(rest.CopyConfig(cfg), "leader-election")
	cfg.Timeout = max(renewDeadline/2, time.Second)
	cs, err := kubernetes.NewForConfig(cfg)
	if err != nil {
		return nil, fmt.Errorf("operator: election client: %w", err)
	}
	return resourcelock.New(resourcelock.LeasesResourceLock, opts.Namespace, opts.LeaseName, cs.CoreV1(), cs.CoordinationV1(),
		resourcelock.ResourceLockConfig{Identity: id})
}

// LeaderNode is the node name in a Lease holder identity
// ("<node>_<uid>"); an identity without the suffix is returned whole.
func LeaderNode(holder string) string {
	if i := strings.LastIndex(holder, "_"); i > 0 {
		return holder[:i]
	}
	return holder
}
