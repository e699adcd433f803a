package store

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"slices"
	"strconv"
	"time"

	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
)

// Synced is the Type of the event Follow delivers after each list: Objects
// holds every object of the followed kinds, and the consumer replaces its
// view with it (an object it knew that is missing was deleted meanwhile).
const Synced EventType = "SYNCED"

// ListWatcher is the part of a Store that Follow reads.
type ListWatcher interface {
	List(ctx context.Context, opts ListOptions) (ListResult, error)
	Watch(ctx context.Context, opts WatchOptions) (<-chan Event, error)
}

// FollowOptions tune Follow; zero values take the defaults.
type FollowOptions struct {
	// MinBackoff and MaxBackoff bound the wait before listing again after a
	// watch ended or a list failed (defaults 200ms and 30s; the wait doubles
	// while failures repeat and starts over after a watch that delivered).
	MinBackoff, MaxBackoff time.Duration
	Logger                 *slog.Logger
}

// Follow keeps a consumer in step with the store: it lists every object of
// kinds (a Synced event), then delivers their changes. Whenever a watch
// ends for any reason (a version the store no longer keeps after an
// apiserver restart or an etcd compaction, a lost connection) it lists
// again and resumes, with backoff, so the consumer keeps serving its last
// view meanwhile and never has to handle the end of a watch. The channel is
// closed when ctx ends; a closed store ends it with an Error event carrying
// ErrClosed.
func Follow(ctx context.Context, st ListWatcher, kinds []string, opts FollowOptions) <-chan Event {
	if opts.MinBackoff <= 0 {
		opts.MinBackoff = 200 * time.Millisecond
	}
	if opts.MaxBackoff < opts.MinBackoff {
		opts.MaxBackoff = max(30*time.Second, opts.MinBackoff)
	}
	log := opts.Logger
	if log == nil {
		log = slog.New(slog.DiscardHandler)
	}
	out := make(chan Event, 64)
	go func() {
		defer close(out)
		send := func(ev Event) bool {
			select {
			case out <- ev:
				return true
			case <-ctx.Done():
				return false
			}
		}
		wait := func(d time.Duration) bool {
			t := time.NewTimer(d)
			defer t.Stop()
			select {
			case <-t.C:
				return true
			case <-ctx.Done():
				return false
			}
		}
		closed := func(err error) bool {
			if errors.Is(err, ErrClosed) {
				send(Event{Type: Error, Err: err})
				return true
			}
			return ctx.Err() != nil
		}
		backoff := opts.MinBackoff
		for ctx.Err() == nil {
			items, rv, err := listKinds(ctx, st, kinds)
			if err == nil {
				if !send(Event{Type: Synced, Objects: items}) {
					return
				}
				var ch <-chan Event
				if ch, err = st.Watch(ctx, WatchOptions{Kind: watchKind(kinds), ResourceVersion: rv}); err == nil {
					var delivered bool
					if err, delivered = forward(ctx, ch, kinds, send); delivered {
						backoff = opts.MinBackoff
					}
					if ctx.Err() != nil {
						return
					}
				}
			}
			if closed(err) {
				return
			}
			// Expected after an apiserver restart or a compaction: no alarm.
			level := slog.LevelWarn
			if err == nil || errors.Is(err, ErrExpired) {
				level = slog.LevelInfo
			}
			log.Log(ctx, level, "store watch ended; listing again", "kinds", kinds, "err", err, "retry", backoff)
			if !wait(backoff) {
				return
			}
			backoff = min(2*backoff, opts.MaxBackoff)
		}
	}()
	return out
}

// forward passes one watch's events of kinds on until the watch ends; it
// returns why (nil: closed without an error) and whether anything was
// delivered.
func forward(ctx context.Context, ch <-chan Event, kinds []string, send func(Event) bool) (err error, delivered bool) {
	for ev := range ch {
		if ev.Type == Error {
			err = ev.Err
			continue // the driver closes the channel right after
		}
		if ev.Object == nil || !slices.Contains(kinds, ev.Object.GetKind()) {
			continue
		}
		if !send(ev) {
			return ctx.Err(), delivered
		}
		delivered = true
	}
	return err, delivered
}

// watchKind watches the one kind, or every kind for several.
func watchKind(kinds []string) string {
	if len(kinds) == 1 {
		return kinds[0]
	}
	return ""
}

// listKinds lists every object of kinds from the source of truth (Fresh:
// a cache's version may be older than a restarted apiserver keeps) and the
// oldest of the lists' versions, from which a watch misses none of their
// changes.
func listKinds(ctx context.Context, st ListWatcher, kinds []string) ([]*unstructured.Unstructured, string, error) {
	var (
		items []*unstructured.Unstructured
		since int64 = -1
	)
	for _, kind := range kinds {
		opts := ListOptions{Kind: kind, Limit: 500, Fresh: true}
		for first := true; ; first = false {
			page, err := st.List(ctx, opts)
			if err != nil {
				return nil, "", fmt.Errorf("list %s: %w", kind, err)
			}
			if first {
				rv, err := strconv.ParseInt(page.ResourceVersion, 10, 64)
				if err != nil && page.ResourceVersion != "" {
					return nil, "", fmt.Errorf("list %s: version %q: %w", kind, page.ResourceVersion, err)
				}
				if since < 0 || rv < since {
					since = rv
				}
			}
			items = append(items, page.Items...)
			if page.Continue == "" {
				break
			}
			opts.Continue = page.Continue
		}
	}
	return items, strconv.FormatInt(max(since, 0), 10), nil
}

// SyncedKeys brings known ("namespace/name" keys of one kind) up to the
// objects of a Synced event and returns the keys to reconcile: every listed
// object, and every known one that is gone (deleted while not watched).
func SyncedKeys(known map[string]bool, objs []*unstructured.Unstructured) []string {
	listed := make(map[string]bool, len(objs))
	keys := make([]string, 0, len(objs))
	for _, o := range objs {
		k := o.GetNamespace() + "/" + o.GetName()
		listed[k] = true
		keys = append(keys, k)
	}
	for k, present := range known {
		if present && !listed[k] {
			keys = append(keys, k)
		}
	}
	clear(known)
	for k := range listed {
		known[k] = true
	}
	return keys
}
