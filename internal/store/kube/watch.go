package kube

import (
	"context"
	"fmt"
	"sync"
	"time"

	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/watch"
	"k8s.io/client-go/dynamic"

	"github.com/svcdns/svc/internal/store"
)

// watchSource is one apiserver watch feeding a store watch.
type watchSource struct {
	res      dynamic.ResourceInterface
	selector string
	kind     string // "" for every internal kind (Secrets)
	internal bool
	items    func() ([]any, string) // the cache's objects and version, used when a live list fails
}

// Watch implements store.Driver with apiserver watches (one per kind, one
// for the Secrets of internal kinds) resumed from the last delivered version
// when they end; a version the apiserver no longer keeps ends the watch with
// an Error event carrying store.ErrExpired.
func (d *Driver) Watch(ctx context.Context, opts store.WatchOptions) (<-chan store.Event, error) {
	if d.closed.Load() {
		return nil, store.ErrClosed
	}
	var sources []watchSource
	addCRD := func(ki *kindInfo) {
		inf := d.crd[ki.Kind]
		sources = append(sources, watchSource{res: d.dyn.Resource(ki.GVR), kind: ki.Kind, items: func() ([]any, string) {
			return inf.GetIndexer().List(), inf.LastSyncResourceVersion()
		}})
	}
	secretSource := func(kind string) watchSource {
		sel := KindLabel
		if kind != "" {
			sel = KindLabel + "=" + kind
		}
		return watchSource{res: d.dyn.Resource(secretsGVR).Namespace(d.namespace), selector: sel, kind: kind, internal: true,
			items: func() ([]any, string) { return d.secrets.GetIndexer().List(), d.secrets.LastSyncResourceVersion() }}
	}
	if opts.Kind != "" {
		ki, err := d.kind(opts.Kind)
		if err != nil {
			return nil, err
		}
		if ki.Internal {
			sources = append(sources, secretSource(ki.Kind))
		} else {
			addCRD(ki)
		}
	} else {
		for _, ki := range d.kinds {
			if !ki.Internal {
				addCRD(ki)
			}
		}
		sources = append(sources, secretSource(""))
	}
	if opts.ResourceVersion != "" {
		if _, err := store.ParseVersion(opts.ResourceVersion); err != nil {
			return nil, err
		}
	}

	wctx, cancel := context.WithCancel(ctx)
	stop := context.AfterFunc(d.ctx, cancel)
	out := make(chan store.Event, 64)
	var (
		wg      sync.WaitGroup
		errOnce sync.Once
	)
	fail := func(err error) {
		errOnce.Do(func() {
			select {
			case out <- store.Event{Type: store.Error, Err: err}:
			case <-wctx.Done():
			}
			cancel()
		})
	}
	// The current state is read before Watch returns, so every change after
	// it is delivered as a change.
	type start struct {
		items []any
		rv    string
	}
	starts := make([]start, len(sources))
	for i, src := range sources {
		starts[i].rv = opts.ResourceVersion
		if opts.ResourceVersion == "" {
			starts[i].items, starts[i].rv = d.initial(wctx, src)
		}
	}
	for i, src := range sources {
		wg.Go(func() {
			if err := d.follow(wctx, src, starts[i].rv, starts[i].items, out); err != nil {
				fail(err)
			}
		})
	}
	go func() {
		wg.Wait()
		stop()
		cancel()
		close(out)
	}()
	return out, nil
}

// decode turns an apiserver object into the store's object; ok is false for
// objects the watch skips.
func (d *Driver) decode(src watchSource, u *unstructured.Unstructured) (*unstructured.Unstructured, bool) {
	if !src.internal {
		u = u.DeepCopy()
		u.SetManagedFields(nil)
		return u, true
	}
	if src.kind != "" && u.GetLabels()[KindLabel] != src.kind {
		return nil, false
	}
	obj, err := d.fromSecret(u)
	if err != nil {
		d.log.Warn("kube store: skipping an undecodable secret", "err", err)
		return nil, false
	}
	return obj, true
}

// initial lists the current objects of src and the version to watch from;
// the cache answers when the apiserver cannot.
func (d *Driver) initial(ctx context.Context, src watchSource) ([]any, string) {
	lctx, cancel := context.WithTimeout(ctx, 10*time.Second)
	defer cancel()
	list, err := src.res.List(lctx, metav1.ListOptions{LabelSelector: src.selector})
	if err != nil {
		return src.items()
	}
	items := make([]any, len(list.Items))
	for i := range list.Items {
		items[i] = &list.Items[i]
	}
	return items, list.GetResourceVersion()
}

// follow runs one source until ctx ends (nil) or the watch cannot resume
// (the error).
func (d *Driver) follow(ctx context.Context, src watchSource, rv string, initial []any, out chan<- store.Event) error {
	send := func(ev store.Event) bool {
		select {
		case out <- ev:
			return true
		case <-ctx.Done():
			return false
		}
	}
	for _, it := range initial {
		u, ok := it.(*unstructured.Unstructured)
		if !ok {
			continue
		}
		if obj, ok := d.decode(src, u); ok && !send(store.Event{Type: store.Added, Object: obj}) {
			return nil
		}
	}
	backoff := 200 * time.Millisecond
	for ctx.Err() == nil {
		w, err := src.res.Watch(ctx, metav1.ListOptions{
			ResourceVersion: rv, LabelSelector: src.selector, AllowWatchBookmarks: true,
		})
		if err != nil {
			if apierrors.IsGone(err) || apierrors.IsResourceExpired(err) {
				return fmt.Errorf("%w: %v", store.ErrExpired, err)
			}
			select {
			case <-ctx.Done():
				return nil
			case <-time.After(backoff):
			}
			backoff = min(backoff*2, 10*time.Second)
			continue
		}
		backoff = 200 * time.Millisecond
		expired, done := d.drain(ctx, w, src, &rv, send)
		w.Stop()
		if done {
			return nil
		}
		if expired != nil {
			return expired
		}
	}
	return nil
}

// drain forwards one watch's events; it returns an error when the version
// expired and done when ctx ended.
func (d *Driver) drain(ctx context.Context, w watch.Interface, src watchSource, rv *string, send func(store.Event) bool) (error, bool) {
	for {
		var (
			ev watch.Event
			ok bool
		)
		select {
		case <-ctx.Done():
			return nil, true
		case ev, ok = <-w.ResultChan():
		}
		if !ok {
			return nil, false
		}
		switch ev.Type {
		case watch.Error:
			err := apierrors.FromObject(ev.Object)
			if apierrors.IsGone(err) || apierrors.IsResourceExpired(err) {
				return fmt.Errorf("%w: %v", store.ErrExpired, err), false
			}
			return nil, false
		case watch.Bookmark:
			if u, ok := ev.Object.(*unstructured.Unstructured); ok {
				*rv = u.GetResourceVersion()
			}
			continue
		}
		u, ok := ev.Object.(*unstructured.Unstructured)
		if !ok {
			continue
		}
		*rv = u.GetResourceVersion()
		obj, ok := d.decode(src, u)
		if !ok {
			continue
		}
		var typ store.EventType
		switch ev.Type {
		case watch.Added:
			typ = store.Added
		case watch.Modified:
			typ = store.Modified
		case watch.Deleted:
			typ = store.Deleted
		default:
			continue
		}
		if !send(store.Event{Type: typ, Object: obj}) {
			return nil, true
		}
	}
}
