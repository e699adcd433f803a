package node

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"reflect"
	"slices"
	"strconv"
	"sync"
	"sync/atomic"
	"time"

	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime"

	"github.com/svcdns/svc/api/v1alpha1"
	"github.com/svcdns/svc/dataplane"
	"github.com/svcdns/svc/dataplane/authority"
	"github.com/svcdns/svc/internal/settings"
	"github.com/svcdns/svc/internal/store"
)

// debounce gathers bursts of store changes (an apply of a directory) into one build.
const debounce = 50 * time.Millisecond

// snapshotter keeps a view of the objects the data plane compiles, rebuilds the
// snapshot when they change, and swaps it into the server. Builds run here, off
// the query path; a failed build keeps the last good snapshot serving.
type snapshotter struct {
	st     store.Store
	dp     *dataplane.Server
	log    *slog.Logger
	static func() dataplane.SnapshotInput // forwarder and settings-derived parts
	// blocking compiles policies, client groups and lists; nil leaves blocking out.
	blocking func(objs blockingObjects) (dataplane.Blocker, dataplane.Identifier)
	// fresh tells whether the store view is recent enough; when it is not,
	// primary zones answer SERVFAIL (never NXDOMAIN). Nil means always fresh.
	fresh    func(now time.Time) (bool, time.Duration)
	wasFresh bool
	// status, when set, writes zone and record set status from each build.
	status  *zoneStatus
	metrics *nodeMetrics
	serials serials // only build touches it
	// onServed, when set, is told each table published (must not block).
	onServed func(*authority.Table)

	mu       sync.Mutex
	objects  map[store.Key]*unstructured.Unstructured
	synced   bool
	lastErr  error
	builtAt  time.Time
	problems []authority.Problem
	table    *authority.Table
	compiled *authority.Table // last Compile result before WithSync; build only
	// typed caches each object's conversion from unstructured, keyed by the
	// object it was converted from; build only.
	typed   map[store.Key]typedObject
	rebuild chan struct{}

	// Write visibility (visibility.go): what the served snapshot was built
	// from, and the writes waiting for it.
	seenRev     int64   // highest store revision applied (mu)
	served      *served // mu
	firstServed chan struct{}
	waiters     atomic.Int32
	hurry       chan struct{}
	// listGens, when set, gives the BlockList version each compiled list
	// came from; settingsNow the configuration in force.
	listGens    func() map[string]string
	settingsNow func() *settings.Config
}

// typedObject is an object converted from src.
type typedObject struct {
	src *unstructured.Unstructured
	v   any // *v1alpha1.DNSZone, *v1alpha1.DNSRecordSet, ...
}

// compiledKinds are the kinds a snapshot is built from.
var compiledKinds = []string{"DNSZone", "DNSRecordSet", "ClientGroup", "Policy", "BlockList"}

func isCompiledKind(kind string) bool { return slices.Contains(compiledKinds, kind) }

func newSnapshotter(st store.Store, dp *dataplane.Server, log *slog.Logger, static func() dataplane.SnapshotInput) *snapshotter {
	return &snapshotter{wasFresh: true, st: st, dp: dp, log: log, static: static, objects: map[store.Key]*unstructured.Unstructured{},
		rebuild: make(chan struct{}, 1), hurry: make(chan struct{}, 1), firstServed: make(chan struct{})}
}

// Ready reports whether the first snapshot from the store is being served.
func (s *snapshotter) Ready() error {
	s.mu.Lock()
	defer s.mu.Unlock()
	if !s.synced {
		return errors.New("zones not loaded from the store yet")
	}
	return nil
}

// Trigger asks for a rebuild (settings changed).
func (s *snapshotter) Trigger() {
	select {
	case s.rebuild <- struct{}{}:
	default:
	}
}

// Run follows the store (store.Follow: a watch that ends is resumed by
// listing again, while the last snapshot keeps serving), builds the first
// snapshot after the first list and rebuilds on every change. It returns
// when ctx ends, or with store.ErrClosed.
func (s *snapshotter) Run(ctx context.Context) error {
	events := store.Follow(ctx, s.st, compiledKinds, store.FollowOptions{Logger: s.log})
	timer := time.NewTimer(time.Hour)
	defer timer.Stop()
	pending, synced := false, false
	var expiry <-chan time.Time
	arm := func(at time.Time) {
		if at.IsZero() {
			expiry = nil
			return
		}
		expiry = time.After(time.Until(at))
	}
	later := func() {
		if !pending {
			pending = true
			d := debounce
			if s.waiters.Load() > 0 {
				d = hurriedDebounce
			}
			timer.Reset(d)
		}
	}
	// Freshness is polled: when the store view turns stale (or fresh again)
	// the snapshot is rebuilt with the zones marked accordingly.
	freshTick := time.NewTicker(time.Second)
	defer freshTick.Stop()
	for {
		select {
		case <-ctx.Done():
			return nil
		case ev, ok := <-events:
			switch {
			case !ok:
				return nil
			case ev.Type == store.Error:
				return fmt.Errorf("follow store: %w", ev.Err)
			case ev.Type == store.Synced:
				changed := s.replace(ev.Objects)
				if !synced {
					arm(s.build())
					synced = true
					s.mu.Lock()
					s.synced = true
					s.mu.Unlock()
				} else if changed {
					later()
				}
			case s.apply(ev):
				later()
			}
		case <-s.rebuild:
			if synced {
				later()
			}
		case <-s.hurry:
			if pending {
				timer.Reset(hurriedDebounce)
			}
		case <-timer.C:
			pending = false
			arm(s.build())
		case <-expiry:
			arm(s.build())
		case now := <-freshTick.C:
			if synced && s.fresh != nil {
				if ok, _ := s.fresh(now); ok != s.wasFresh {
					arm(s.build())
				}
			}
		}
	}
}

// replace takes a full list as the new view; it reports whether anything a
// build compiles changed (an object added, deleted or changed).
func (s *snapshotter) replace(items []*unstructured.Unstructured) bool {
	seen := make(map[store.Key]bool, len(items))
	changed := false
	for _, o := range items {
		seen[store.KeyOf(o)] = true
		if s.apply(store.Event{Type: store.Modified, Object: o}) {
			changed = true
		}
	}
	s.mu.Lock()
	var gone []*unstructured.Unstructured
	for k, o := range s.objects {
		if !seen[k] {
			gone = append(gone, o)
		}
	}
	s.mu.Unlock()
	for _, o := range gone {
		s.apply(store.Event{Type: store.Deleted, Object: o})
		changed = true
	}
	return changed
}

// apply records one change; it reports whether the change matters to a build.
func (s *snapshotter) apply(ev store.Event) bool {
	if ev.Object == nil {
		return false
	}
	if !isCompiledKind(ev.Object.GetKind()) {
		return false
	}
	k := store.KeyOf(ev.Object)
	s.mu.Lock()
	defer s.mu.Unlock()
	if rv, err := strconv.ParseInt(ev.Object.GetResourceVersion(), 10, 64); err == nil && rv > s.seenRev {
		s.seenRev = rv
	}
	if ev.Type == store.Deleted {
		delete(s.objects, k)
		return true
	}
	old, ok := s.objects[k]
	if ok && old.GetResourceVersion() == ev.Object.GetResourceVersion() {
		return false
	}
	s.objects[k] = ev.Object
	// A status-only write (generation, labels and annotations unchanged)
	// changes nothing that is compiled.
	return !ok || old.GetGeneration() != ev.Object.GetGeneration() ||
		!reflect.DeepEqual(old.GetAnnotations(), ev.Object.GetAnnotations()) ||
		!reflect.DeepEqual(old.GetLabels(), ev.Object.GetLabels())
}

// build compiles the current objects and swaps the snapshot in. It returns
// when the next build is due because a record leaves service (zero: never).
func (s *snapshotter) build() time.Time {
	start := time.Now()
	// What the build is made of, read before it compiles: a change that
	// lands meanwhile counts as not served yet (visibility.go).
	var cfg *settings.Config
	if s.settingsNow != nil {
		cfg = s.settingsNow()
	}
	var lists map[string]string
	if s.listGens != nil {
		lists = s.listGens()
	}
	s.mu.Lock()
	rev := s.seenRev
	var zones []v1alpha1.DNSZone
	var sets []v1alpha1.DNSRecordSet
	var bo blockingObjects
	var convErr error
	// Converting a large record set from unstructured costs about as much as
	// compiling it, so an object unchanged since the last build keeps its
	// typed copy (the typed values are only read afterwards).
	typed := make(map[store.Key]typedObject, len(s.objects))
	for k, o := range s.objects {
		t, ok := s.typed[k]
		if !ok || t.src != o {
			t = typedObject{src: o}
			var into any
			switch o.GetKind() {
			case "ClientGroup":
				into = new(v1alpha1.ClientGroup)
			case "Policy":
				into = new(v1alpha1.Policy)
			case "BlockList":
				into = new(v1alpha1.BlockList)
			case "DNSZone":
				into = new(v1alpha1.DNSZone)
			case "DNSRecordSet":
				into = new(v1alpha1.DNSRecordSet)
			default:
				continue
			}
			if err := runtime.DefaultUnstructuredConverter.FromUnstructured(o.Object, into); err != nil {
				convErr = errors.Join(convErr, fmt.Errorf("%s %s/%s: %w", o.GetKind(), o.GetNamespace(), o.GetName(), err))
				continue
			}
			t.v = into
		}
		typed[k] = t
		switch v := t.v.(type) {
		case *v1alpha1.ClientGroup:
			bo.groups = append(bo.groups, *v)
		case *v1alpha1.Policy:
			bo.policies = append(bo.policies, *v)
		case *v1alpha1.BlockList:
			bo.lists = append(bo.lists, *v)
		case *v1alpha1.DNSZone:
			zones = append(zones, *v)
		case *v1alpha1.DNSRecordSet:
			sets = append(sets, *v)
		}
	}
	s.typed = typed
	s.mu.Unlock()

	s.serials.assign(zones, sets)
	// Zones whose objects did not change since the last build are taken
	// over, not encoded again.
	table, problems := authority.CompileReusing(s.compiled, zones, sets, start)
	s.compiled = table
	fresh := true
	if s.fresh != nil {
		fresh, _ = s.fresh(start)
	}
	s.wasFresh = fresh
	if !fresh {
		// The default zone "." stays: an unsynced default zone would fail every
		// forwarded name, not just the names it holds.
		table = table.WithSync(func(zone, _ string) bool { return zone == "." })
	}
	in := s.static()
	in.Authority = table
	if s.blocking != nil {
		in.Blocker, in.Identifier = s.blocking(bo)
	}
	in.Version = start.UTC().Format(time.RFC3339Nano)
	s.dp.Swap(dataplane.NewSnapshot(in))
	if s.onServed != nil {
		s.onServed(table) // zone transfers: IXFR journal and NOTIFY
	}

	s.metrics.observeBuild(start)
	s.mu.Lock()
	s.problems, s.lastErr, s.builtAt, s.table = problems, convErr, start, table
	prev := s.served
	s.served = &served{rev: rev, objects: typed, lists: lists, settings: cfg, done: make(chan struct{})}
	s.mu.Unlock()
	if prev != nil {
		close(prev.done)
	} else {
		close(s.firstServed)
	}
	if s.status != nil {
		s.status.offer(zoneStatusInput{zones: zones, sets: sets, table: table, problems: problems})
	}
	if convErr != nil {
		s.log.Error("objects skipped in snapshot", "err", convErr)
	}
	for _, p := range problems {
		s.log.Warn("record skipped", "problem", fmt.Sprint(p))
	}
	s.log.Debug("snapshot built", "zones", len(zones), "recordSets", len(sets), "policies", len(bo.policies), "took", time.Since(start))
	return table.NextChange()
}

// blockingObjects are the typed objects the blocking part of a snapshot needs.
type blockingObjects struct {
	groups   []v1alpha1.ClientGroup
	policies []v1alpha1.Policy
	lists    []v1alpha1.BlockList
}

// Zones lists the zones of the snapshot being served.
func (s *snapshotter) Zones() []authority.ZoneInfo {
	s.mu.Lock()
	t := s.table
	s.mu.Unlock()
	if t == nil {
		return nil
	}
	return t.Zones()
}
