// Package kube is the store driver for Kubernetes: the installable kinds are
// custom resources read through informers and written with the dynamic
// client; internal kinds (users, tokens, bindings, ...) are Secrets labelled
// service.io/kind in the service namespace, their sensitive fields sealed
// with a key derived from the encryption key. Ownership, generation and
// validation are enforced above the driver by store.New.
package kube

import (
	"context"
	"encoding/base64"
	"encoding/json"
	"errors"
	"fmt"
	"log/slog"
	"reflect"
	"sort"
	"strconv"
	"sync"
	"sync/atomic"
	"time"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/labels"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apimachinery/pkg/watch"
	"k8s.io/client-go/dynamic"
	"k8s.io/client-go/rest"
	"k8s.io/client-go/tools/cache"

	"github.com/svcdns/svc/internal/kubewatch"
	"github.com/svcdns/svc/internal/store"
)

// DefaultNamespace is where internal kinds live unless configured.
const DefaultNamespace = "service-system"

var secretsGVR = schema.GroupVersionResource{Version: "v1", Resource: "secrets"}

// Options configure Open.
type Options struct {
	// Namespace holds the Secrets of internal kinds (default service-system).
	Namespace string
	// EncryptionKey (required) and PreviousEncryptionKey seal sensitive fields.
	EncryptionKey         []byte
	PreviousEncryptionKey []byte
	// StartupTimeout bounds the initial cache sync (store.kube.startupTimeout,
	// default 15s).
	StartupTimeout time.Duration
	// ProbeInterval is how often the driver confirms the apiserver is
	// reachable while nothing changes (default 5s).
	ProbeInterval time.Duration
	// WriteSyncTimeout bounds how long a write waits for the cache to show
	// it (read-your-writes; default 10s).
	WriteSyncTimeout time.Duration
	Logger           *slog.Logger
}

// Driver implements store.Driver on a Kubernetes cluster.
type Driver struct {
	dyn       dynamic.Interface
	namespace string
	sealer    *sealer
	kinds     map[string]*kindInfo
	log       *slog.Logger
	opts      Options

	crd     map[string]cache.SharedIndexInformer // by kind
	secrets cache.SharedIndexInformer

	ctx    context.Context
	cancel context.CancelFunc
	wg     sync.WaitGroup
	closed atomic.Bool

	lastSync     atomic.Int64 // unix nanos of the last confirmed sync
	lastWatchErr atomic.Int64 // unix nanos of the last list/watch error

	mu      sync.Mutex
	changed chan struct{} // closed and replaced on every cache change
}

var _ store.Driver = (*Driver)(nil)

// Open connects to the cluster, starts the informers and waits for their
// first sync (Options.StartupTimeout). It refuses to start without an
// encryption key.
func Open(ctx context.Context, cfg *rest.Config, opts Options) (*Driver, error) {
	sl, err := newSealer(opts.EncryptionKey, opts.PreviousEncryptionKey)
	if err != nil {
		return nil, err
	}
	if opts.Namespace == "" {
		opts.Namespace = DefaultNamespace
	}
	if opts.StartupTimeout <= 0 {
		opts.StartupTimeout = 15 * time.Second
	}
	if opts.ProbeInterval <= 0 {
		opts.ProbeInterval = 5 * time.Second
	}
	if opts.WriteSyncTimeout <= 0 {
		opts.WriteSyncTimeout = 10 * time.Second
	}
	if opts.Logger == nil {
		opts.Logger = slog.New(slog.DiscardHandler)
	}
	kinds, err := loadKinds()
	if err != nil {
		return nil, err
	}
	cfg = rest.CopyConfig(cfg)
	if cfg.QPS == 0 {
		cfg.QPS, cfg.Burst = 100, 200
	}
	dyn, err := dynamic.NewForConfig(cfg)
	if err != nil {
		return nil, fmt.Errorf("kube store: client: %w", err)
	}
	d := &Driver{
		dyn: dyn, namespace: opts.Namespace, sealer: sl, kinds: kinds,
		log: opts.Logger, opts: opts, crd: map[string]cache.SharedIndexInformer{},
		changed: make(chan struct{}),
	}
	d.ctx, d.cancel = context.WithCancel(context.WithoutCancel(ctx))

	handler := cache.ResourceEventHandlerFuncs{
		AddFunc:    func(any) { d.touch() },
		UpdateFunc: func(any, any) { d.touch() },
		DeleteFunc: func(any) { d.touch() },
	}
	setup := func(inf cache.SharedIndexInformer, what string) error {
		if err := inf.SetTransform(stripManagedFields); err != nil {
			return err
		}
		if err := inf.SetWatchErrorHandlerWithContext(func(_ context.Context, _ *cache.Reflector, err error) {
			d.lastWatchErr.Store(time.Now().UnixNano())
			d.log.Debug("kube store: list/watch failed", "resource", what, "err", err)
		}); err != nil {
			return err
		}
		_, err := inf.AddEventHandler(handler)
		return err
	}
	for kind, ki := range kinds {
		if ki.Internal {
			continue
		}
		inf := listWatchInformer(dyn, ki.GVR, metav1.NamespaceAll, nil)
		if err := setup(inf, ki.GVR.Resource); err != nil {
			return nil, fmt.Errorf("kube store: informer %s: %w", kind, err)
		}
		d.crd[kind] = inf
	}
	d.secrets = listWatchInformer(dyn, secretsGVR, d.namespace, func(o *metav1.ListOptions) {
		o.LabelSelector = KindLabel
	})
	if err := setup(d.secrets, "secrets"); err != nil {
		return nil, fmt.Errorf("kube store: informer secrets: %w", err)
	}

	synced := []cache.InformerSynced{d.secrets.HasSynced}
	for _, inf := range d.all() {
		d.wg.Go(func() { inf.RunWithContext(d.ctx) })
	}
	for _, inf := range d.crd {
		synced = append(synced, inf.HasSynced)
	}
	sctx, scancel := context.WithTimeout(ctx, opts.StartupTimeout)
	defer scancel()
	if !cache.WaitForCacheSync(sctx.Done(), synced...) {
		d.Close()
		return nil, fmt.Errorf("kube store: caches not synced within %s (are the CRDs installed and the RBAC rules granted?)", opts.StartupTimeout)
	}
	d.lastSync.Store(time.Now().UnixNano())
	d.wg.Go(d.probe)
	return d, nil
}

func (d *Driver) all() []cache.SharedIndexInformer {
	out := []cache.SharedIndexInformer{d.secrets}
	for _, inf := range d.crd {
		out = append(out, inf)
	}
	return out
}

func stripManagedFields(obj any) (any, error) {
	if u, ok := obj.(*unstructured.Unstructured); ok {
		u.SetManagedFields(nil)
	}
	return obj, nil
}

// touch records a cache change: it wakes writers waiting for their write
// and counts as contact with the apiserver.
func (d *Driver) touch() {
	d.lastSync.Store(time.Now().UnixNano())
	d.mu.Lock()
	close(d.changed)
	d.changed = make(chan struct{})
	d.mu.Unlock()
}

func (d *Driver) changes() <-chan struct{} {
	d.mu.Lock()
	defer d.mu.Unlock()
	return d.changed
}

// probe confirms contact with the apiserver while nothing changes: a
// successful quorum read with no list/watch error since the previous probe
// moves the sync clock.
func (d *Driver) probe() {
	t := time.NewTicker(d.opts.ProbeInterval)
	defer t.Stop()
	gvr := d.kinds[store.KindDNSZone].GVR
	for {
		select {
		case <-d.ctx.Done():
			return
		case <-t.C:
		}
		start := time.Now()
		ctx, cancel := context.WithTimeout(d.ctx, d.opts.ProbeInterval)
		_, err := d.dyn.Resource(gvr).List(ctx, metav1.ListOptions{Limit: 1})
		cancel()
		if err != nil {
			d.lastWatchErr.Store(time.Now().UnixNano())
			continue
		}
		if time.Since(time.Unix(0, d.lastWatchErr.Load())) > d.opts.ProbeInterval {
			d.lastSync.Store(start.UnixNano())
		}
	}
}

// LastSync is when the driver last confirmed its view matches the cluster:
// the first sync, a watch event, or a successful probe with healthy watches.
// While the apiserver is unreachable reads keep answering from the cache and
// this time stops moving.
func (d *Driver) LastSync() time.Time { return time.Unix(0, d.lastSync.Load()) }

// SnapshotAge is how old the driver's view is at now.
func (d *Driver) SnapshotAge(now time.Time) time.Duration {
	return max(0, now.Sub(d.LastSync()))
}

// Fresh reports whether the view is at most maxAge old
// (store.kube.snapshot.maxAge); a node whose view is older is not ready and
// answers SERVFAIL for primary zones.
func (d *Driver) Fresh(now time.Time, maxAge time.Duration) bool {
	return maxAge <= 0 || d.SnapshotAge(now) <= maxAge
}

// closeWait bounds how long Close waits for the informers to return. The
// informers list and watch (listWatchInformer), whose backoff ends with the
// context; the bound stays as a guard against any other wait in client-go.
const closeWait = 5 * time.Second

// Close stops the informers and the watches.
func (d *Driver) Close() error {
	if d.closed.Swap(true) {
		return nil
	}
	d.cancel()
	done := make(chan struct{})
	go func() {
		d.wg.Wait()
		close(done)
	}()
	select {
	case <-done:
		return nil
	case <-time.After(closeWait):
		return fmt.Errorf("kube store: informers still running %v after close", closeWait)
	}
}

func (d *Driver) kind(kind string) (*kindInfo, error) {
	if d.closed.Load() {
		return nil, store.ErrClosed
	}
	ki, ok := d.kinds[kind]
	if !ok {
		return nil, fmt.Errorf("%w: unknown kind %q", store.ErrInvalid, kind)
	}
	return ki, nil
}

func (d *Driver) checkScope(ki *kindInfo, key store.Key) error {
	if ki.Namespaced && key.Namespace == "" {
		return fmt.Errorf("%w: metadata.namespace: Required value: %s is namespaced", store.ErrInvalid, ki.Kind)
	}
	if !ki.Namespaced && key.Namespace != "" {
		return fmt.Errorf("%w: metadata.namespace: Forbidden: %s is cluster-scoped", store.ErrInvalid, ki.Kind)
	}
	return nil
}

func cacheKey(ns, name string) string {
	if ns == "" {
		return name
	}
	return ns + "/" + name
}

// cached returns the cached object of key (nil when absent), decoded.
func (d *Driver) cached(ki *kindInfo, key store.Key) (*unstructured.Unstructured, error) {
	var (
		item any
		ok   bool
		err  error
	)
	if ki.Internal {
		item, ok, err = d.secrets.GetIndexer().GetByKey(cacheKey(d.namespace, secretName(key)))
	} else {
		item, ok, err = d.crd[ki.Kind].GetIndexer().GetByKey(cacheKey(key.Namespace, key.Name))
	}
	if err != nil || !ok {
		return nil, err
	}
	u, _ := item.(*unstructured.Unstructured)
	if u == nil {
		return nil, nil
	}
	if ki.Internal {
		return d.fromSecret(u)
	}
	return u.DeepCopy(), nil
}

// Get implements store.Driver from the cache.
func (d *Driver) Get(_ context.Context, key store.Key) (*unstructured.Unstructured, error) {
	ki, err := d.kind(key.Kind)
	if err != nil {
		return nil, err
	}
	u, err := d.cached(ki, key)
	if err != nil {
		return nil, err
	}
	if u == nil {
		return nil, fmt.Errorf("%s: %w", key, store.ErrNotFound)
	}
	return u, nil
}

type cursor struct {
	Namespace string `json:"n,omitempty"`
	Name      string `json:"m"`
}

// List implements store.Driver from the cache, ordered by namespace and
// name; the continue token is the last key returned, so objects present
// throughout a paged list are listed exactly once.
func (d *Driver) List(ctx context.Context, opts store.ListOptions) (store.ListResult, error) {
	ki, err := d.kind(opts.Kind)
	if err != nil {
		return store.ListResult{}, err
	}
	if opts.Fresh && !ki.Internal {
		return d.listLive(ctx, ki, opts)
	}
	var after *cursor
	if opts.Continue != "" {
		raw, err := base64.RawURLEncoding.DecodeString(opts.Continue)
		after = &cursor{}
		if err != nil || json.Unmarshal(raw, after) != nil || after.Name == "" {
			return store.ListResult{}, fmt.Errorf("%w: malformed continue token", store.ErrInvalid)
		}
	}
	var (
		items []any
		rv    string
	)
	if ki.Internal {
		items, rv = d.secrets.GetIndexer().List(), d.secrets.LastSyncResourceVersion()
	} else {
		inf := d.crd[ki.Kind]
		items, rv = inf.GetIndexer().List(), inf.LastSyncResourceVersion()
	}
	var objs []*unstructured.Unstructured
	for _, it := range items {
		u, ok := it.(*unstructured.Unstructured)
		if !ok {
			continue
		}
		if ki.Internal {
			if u.GetLabels()[KindLabel] != ki.Kind {
				continue
			}
			if u, err = d.fromSecret(u); err != nil {
				d.log.Warn("kube store: skipping an undecodable secret", "kind", ki.Kind, "err", err)
				continue
			}
		}
		if opts.Namespace != "" && u.GetNamespace() != opts.Namespace {
			continue
		}
		if opts.Selector != nil && !opts.Selector.Matches(labels.Set(u.GetLabels())) {
			continue
		}
		if after != nil && !less(after.Namespace, after.Name, u.GetNamespace(), u.GetName()) {
			continue
		}
		objs = append(objs, u)
	}
	sort.Slice(objs, func(i, j int) bool {
		return less(objs[i].GetNamespace(), objs[i].GetName(), objs[j].GetNamespace(), objs[j].GetName())
	})
	res := store.ListResult{ResourceVersion: rv}
	if opts.Limit > 0 && len(objs) > opts.Limit {
		objs = objs[:opts.Limit]
		last := objs[len(objs)-1]
		b, _ := json.Marshal(cursor{Namespace: last.GetNamespace(), Name: last.GetName()})
		res.Continue = base64.RawURLEncoding.EncodeToString(b)
	}
	res.Items = make([]*unstructured.Unstructured, len(objs))
	for i, o := range objs {
		if ki.Internal {
			res.Items[i] = o // already a fresh decode
		} else {
			res.Items[i] = o.DeepCopy()
		}
	}
	return res, nil
}

// listLive lists a custom resource from the apiserver (store.ListOptions
// Fresh), all pages, ordered by namespace and name.
func (d *Driver) listLive(ctx context.Context, ki *kindInfo, opts store.ListOptions) (store.ListResult, error) {
	lo := metav1.ListOptions{Limit: 500}
	if opts.Selector != nil {
		lo.LabelSelector = opts.Selector.String()
	}
	res := d.resource(ki, opts.Namespace)
	var out store.ListResult
	for {
		lctx, cancel := context.WithTimeout(ctx, 30*time.Second)
		page, err := res.List(lctx, lo)
		cancel()
		if err != nil {
			return store.ListResult{}, fmt.Errorf("list %s from the apiserver: %w", ki.GVR.Resource, err)
		}
		if out.ResourceVersion == "" {
			out.ResourceVersion = page.GetResourceVersion()
		}
		for i := range page.Items {
			u := &page.Items[i]
			u.SetManagedFields(nil)
			out.Items = append(out.Items, u)
		}
		if lo.Continue = page.GetContinue(); lo.Continue == "" {
			break
		}
	}
	sort.Slice(out.Items, func(i, j int) bool {
		return less(out.Items[i].GetNamespace(), out.Items[i].GetName(), out.Items[j].GetNamespace(), out.Items[j].GetName())
	})
	return out, nil
}

func less(ns1, n1, ns2, n2 string) bool {
	if ns1 != ns2 {
		return ns1 < ns2
	}
	return n1 < n2
}

// Write implements store.Driver. The apiserver has no transactions: every
// write's version is checked against the cache first so a stale batch fails
// before anything changes, then the writes run in order, each with its
// resourceVersion precondition enforced by the apiserver.
func (d *Driver) Write(ctx context.Context, writes []store.Write) ([]*unstructured.Unstructured, error) {
	infos := make([]*kindInfo, len(writes))
	for i, w := range writes {
		ki, err := d.kind(w.Key.Kind)
		if err != nil {
			return nil, err
		}
		if err := d.checkScope(ki, w.Key); err != nil {
			return nil, err
		}
		infos[i] = ki
		cur, err := d.cached(ki, w.Key)
		if err != nil {
			return nil, err
		}
		switch w.Op {
		case store.OpCreate:
			if cur != nil {
				return nil, fmt.Errorf("create %s: %w: already exists", w.Key, store.ErrConflict)
			}
		case store.OpUpdate, store.OpDelete:
			if cur == nil {
				return nil, fmt.Errorf("%s: %w", w.Key, store.ErrNotFound)
			}
			if cur.GetResourceVersion() != w.ResourceVersion {
				d.catchUp(ctx, ki, w.Key)
				return nil, fmt.Errorf("%s: %w: resourceVersion %s, stored %s", w.Key, store.ErrConflict, w.ResourceVersion, cur.GetResourceVersion())
			}
		default:
			return nil, fmt.Errorf("%w: unknown write op %d", store.ErrInvalid, w.Op)
		}
	}
	out := make([]*unstructured.Unstructured, len(writes))
	for i, w := range writes {
		o, err := d.write(ctx, infos[i], w)
		if err != nil {
			if errors.Is(err, store.ErrConflict) {
				d.catchUp(ctx, infos[i], w.Key)
			}
			return nil, fmt.Errorf("%s: %w", w.Key, err)
		}
		out[i] = o
	}
	return out, nil
}

func (d *Driver) resource(ki *kindInfo, ns string) dynamic.ResourceInterface {
	if ki.Internal {
		return d.dyn.Resource(secretsGVR).Namespace(d.namespace)
	}
	if ki.Namespaced {
		return d.dyn.Resource(ki.GVR).Namespace(ns)
	}
	return d.dyn.Resource(ki.GVR)
}

func (d *Driver) write(ctx context.Context, ki *kindInfo, w store.Write) (*unstructured.Unstructured, error) {
	res := d.resource(ki, w.Key.Namespace)
	if w.Op == store.OpDelete {
		name := w.Key.Name
		if ki.Internal {
			name = secretName(w.Key)
		}
		cur, _ := d.cached(ki, w.Key)
		rv := w.ResourceVersion
		if err := res.Delete(ctx, name, metav1.DeleteOptions{Preconditions: &metav1.Preconditions{ResourceVersion: &rv}}); err != nil {
			return nil, mapErr(err, d.request("delete", ki, w.Key.Namespace, name))
		}
		d.waitCache(ctx, func() bool {
			now, _ := d.cached(ki, w.Key)
			return now == nil || (cur != nil && now.GetUID() != cur.GetUID())
		})
		return nil, nil
	}

	var (
		stored *unstructured.Unstructured
		err    error
	)
	if ki.Internal {
		sec, err := d.toSecret(w.Object, w.ResourceVersion)
		if err != nil {
			return nil, err
		}
		var s *unstructured.Unstructured
		verb := "create"
		if w.Op == store.OpCreate {
			s, err = res.Create(ctx, sec, metav1.CreateOptions{})
		} else {
			verb = "update"
			s, err = res.Update(ctx, sec, metav1.UpdateOptions{})
		}
		if err != nil {
			return nil, mapErr(err, d.request(verb, ki, "", sec.GetName()))
		}
		if stored, err = d.fromSecret(s); err != nil {
			return nil, err
		}
	} else {
		obj := w.Object.DeepCopy()
		obj.SetManagedFields(nil)
		if w.Op == store.OpCreate {
			obj.SetResourceVersion("")
			obj.SetUID("")
			obj.SetCreationTimestamp(metav1.Time{})
			status, hasStatus := obj.Object["status"]
			if stored, err = res.Create(ctx, obj, metav1.CreateOptions{}); err != nil {
				return nil, mapErr(err, d.request("create", ki, w.Key.Namespace, w.Key.Name))
			}
			if ki.Status && hasStatus && !reflect.DeepEqual(stored.Object["status"], status) {
				stored.Object["status"] = status
				if stored, err = res.UpdateStatus(ctx, stored, metav1.UpdateOptions{}); err != nil {
					return nil, mapErr(err, d.statusRequest(ki, w.Key))
				}
			}
		} else {
			obj.SetResourceVersion(w.ResourceVersion)
			mainChanged, statusChanged := true, ki.Status && obj.Object["status"] != nil
			if cur, _ := d.cached(ki, w.Key); cur != nil && cur.GetResourceVersion() == w.ResourceVersion {
				mainChanged = !reflect.DeepEqual(content(cur), content(obj))
				statusChanged = ki.Status && !reflect.DeepEqual(cur.Object["status"], obj.Object["status"])
			}
			if !ki.Status {
				mainChanged = true
			}
			stored = obj
			if mainChanged {
				if stored, err = res.Update(ctx, obj, metav1.UpdateOptions{}); err != nil {
					return nil, mapErr(err, d.request("update", ki, w.Key.Namespace, w.Key.Name))
				}
			}
			if statusChanged {
				next := stored.DeepCopy()
				if st, ok := obj.Object["status"]; ok {
					next.Object["status"] = st
				} else {
					delete(next.Object, "status")
				}
				if stored, err = res.UpdateStatus(ctx, next, metav1.UpdateOptions{}); err != nil {
					return nil, mapErr(err, d.statusRequest(ki, w.Key))
				}
			}
		}
		stored.SetManagedFields(nil)
	}
	rv := stored.GetResourceVersion()
	d.waitCache(ctx, func() bool {
		now, _ := d.cached(ki, w.Key)
		return now != nil && !versionBefore(now.GetResourceVersion(), rv)
	})
	return stored, nil
}

// content is what a main-resource update can change: everything but status
// and system metadata.
func content(u *unstructured.Unstructured) map[string]any {
	out := map[string]any{}
	for k, v := range u.Object {
		if k != "status" && k != "metadata" {
			out[k] = v
		}
	}
	out["labels"] = u.GetLabels()
	out["annotations"] = u.GetAnnotations()
	return out
}

// versionBefore compares two resourceVersions numerically (etcd revisions).
func versionBefore(a, b string) bool {
	x, err1 := strconv.ParseUint(a, 10, 64)
	y, err2 := strconv.ParseUint(b, 10, 64)
	if err1 != nil || err2 != nil {
		return a != b
	}
	return x < y
}

// waitCache waits (bounded) until cond holds on the cache, so a caller
// reading after its own write sees it.
func (d *Driver) waitCache(ctx context.Context, cond func() bool) {
	timer := time.NewTimer(d.opts.WriteSyncTimeout)
	defer timer.Stop()
	for {
		ch := d.changes()
		if cond() {
			return
		}
		select {
		case <-ch:
		case <-timer.C:
			d.log.Warn("kube store: the cache did not show a write in time", "timeout", d.opts.WriteSyncTimeout)
			return
		case <-ctx.Done():
			return
		case <-d.ctx.Done():
			return
		}
	}
}

// catchUp waits (briefly) until the cache holds the live version of key, so
// that a caller retrying after a conflict reads what beat it.
func (d *Driver) catchUp(ctx context.Context, ki *kindInfo, key store.Key) {
	name := key.Name
	if ki.Internal {
		name = secretName(key)
	}
	live, err := d.resource(ki, key.Namespace).Get(ctx, name, metav1.GetOptions{})
	if err != nil {
		return
	}
	ctx, cancel := context.WithTimeout(ctx, 2*time.Second)
	defer cancel()
	d.waitCache(ctx, func() bool {
		now, _ := d.cached(ki, key)
		return now != nil && !versionBefore(now.GetResourceVersion(), live.GetResourceVersion())
	})
}

// listWatchInformer is dynamicinformer's informer for gvr in namespace,
// except that it lists and then watches and waits out an unreachable
// apiserver on kubewatch's short pace instead of the reflector's backoff.
func listWatchInformer(dyn dynamic.Interface, gvr schema.GroupVersionResource, namespace string, tweak func(*metav1.ListOptions)) cache.SharedIndexInformer {
	res := dyn.Resource(gvr).Namespace(namespace)
	opt := func(o metav1.ListOptions) metav1.ListOptions {
		if tweak != nil {
			tweak(&o)
		}
		return o
	}
	lw := kubewatch.New(&cache.ListWatch{
		ListWithContextFunc: func(ctx context.Context, o metav1.ListOptions) (runtime.Object, error) {
			return res.List(ctx, opt(o))
		},
		WatchFuncWithContext: func(ctx context.Context, o metav1.ListOptions) (watch.Interface, error) {
			return res.Watch(ctx, opt(o))
		},
	})
	return cache.NewSharedIndexInformerWithOptions(lw, &unstructured.Unstructured{},
		cache.SharedIndexInformerOptions{Indexers: cache.Indexers{}, ObjectDescription: gvr.String()})
}
