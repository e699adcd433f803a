// Package runner is the local controller runner of the sqlite store and of
// a data-plane node's list follower: store.Follow feeds "namespace/name"
// keys of each controller's kind into that controller's deduplicating,
// rate-limited work queue (client-go's workqueue, which needs no cluster),
// and a worker reconciles them by key. The queue gives what a hand-written
// watch loop does not: a burst of events for one object is one reconcile,
// the same key is never reconciled by two workers at once, a failing key is
// retried with per-key exponential backoff, and a reconciler's "again in d"
// is a delayed add. In Kubernetes the operator runs the same Reconcilers
// through controller-runtime (internal/operator), which is built on the same
// queue.
package runner

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"strings"
	"sync"
	"time"

	"k8s.io/client-go/util/workqueue"

	"github.com/svcdns/svc/internal/store"
)

// Reconciler reconciles one object by key and says when to look at it again
// (0: only on its next change). internal/operator.Reconciler has the same
// method, so one value serves both store modes.
type Reconciler interface {
	Reconcile(ctx context.Context, namespace, name string) (time.Duration, error)
}

// ReconcilerFunc adapts a function.
type ReconcilerFunc func(ctx context.Context, namespace, name string) (time.Duration, error)

// Reconcile implements Reconciler.
func (f ReconcilerFunc) Reconcile(ctx context.Context, namespace, name string) (time.Duration, error) {
	return f(ctx, namespace, name)
}

// Default retry backoff of a failing key (it doubles per failure of that
// key and starts over after a success).
const (
	DefaultMinBackoff = time.Second
	DefaultMaxBackoff = 5 * time.Minute
)

// Controller is one reconciler and what feeds it.
type Controller struct {
	// Kind is the followed store kind; every object of it is reconciled
	// after each list and on each change.
	Kind       string
	Reconciler Reconciler
	// Workers reconcile distinct keys concurrently (default 1).
	Workers int
	// MinBackoff and MaxBackoff bound the retry of a failing key (defaults
	// DefaultMinBackoff and DefaultMaxBackoff).
	MinBackoff, MaxBackoff time.Duration
	// Initial, when set, receives the errors of the first reconcile of every
	// object of the first list (nothing when all succeeded) and is then
	// closed: blocking.initStrategy waits on it.
	Initial chan<- error
	// QuietRetries logs failed reconciles at Info, not Warn: for failures
	// expected for a while (a follower waiting for the leader's bodies).
	QuietRetries bool
}

// Runner runs controllers until its context ends.
type Runner struct {
	st    store.ListWatcher
	log   *slog.Logger
	ctrls []*controller
}

// Queue adds keys to one controller's queue from outside its watch (another
// controller's reconcile naming objects of this kind).
type Queue struct {
	q workqueue.TypedRateLimitingInterface[string]
}

// Enqueue asks for a reconcile of namespace/name; keys already waiting are
// not added twice, and adds after the runner stopped are dropped.
func (q *Queue) Enqueue(namespace, name string) { q.q.Add(namespace + "/" + name) }

type controller struct {
	Controller
	q   workqueue.TypedRateLimitingInterface[string]
	log *slog.Logger

	mu       sync.Mutex
	pending  map[string]bool // keys of the first list not reconciled yet
	firstErr []error
	initDone bool
}

// New builds a runner over st; the queues exist from here on, so Queue may
// be handed out before Run.
func New(st store.ListWatcher, log *slog.Logger, cs ...Controller) (*Runner, error) {
	if log == nil {
		log = slog.New(slog.DiscardHandler)
	}
	r := &Runner{st: st, log: log}
	for _, c := range cs {
		if c.Kind == "" || c.Reconciler == nil {
			return nil, fmt.Errorf("runner: controller %q needs a kind and a reconciler", c.Kind)
		}
		for _, o := range r.ctrls {
			if o.Kind == c.Kind {
				return nil, fmt.Errorf("runner: two controllers for kind %s", c.Kind)
			}
		}
		if c.Workers <= 0 {
			c.Workers = 1
		}
		if c.MinBackoff <= 0 {
			c.MinBackoff = DefaultMinBackoff
		}
		if c.MaxBackoff < c.MinBackoff {
			c.MaxBackoff = max(DefaultMaxBackoff, c.MinBackoff)
		}
		q := workqueue.NewTypedRateLimitingQueueWithConfig(
			workqueue.NewTypedItemExponentialFailureRateLimiter[string](c.MinBackoff, c.MaxBackoff),
			workqueue.TypedRateLimitingQueueConfig[string]{Name: c.Kind})
		r.ctrls = append(r.ctrls, &controller{Controller: c, q: q, log: log.With("controller", c.Kind)})
	}
	return r, nil
}

// Queue returns the queue of kind's controller (nil: none).
func (r *Runner) Queue(kind string) *Queue {
	for _, c := range r.ctrls {
		if c.Kind == kind {
			return &Queue{q: c.q}
		}
	}
	return nil
}

// Run follows and reconciles until ctx ends (nil) or the store is closed
// (its error). Every goroutine it started has ended when it returns: the
// queues are shut down and in-flight reconciles (whose ctx is cancelled)
// have returned.
func (r *Runner) Run(ctx context.Context) error {
	ctx, cancel := context.WithCancel(ctx)
	defer cancel()
	var (
		wg      sync.WaitGroup
		errOnce sync.Once
		runErr  error
	)
	for _, c := range r.ctrls {
		wg.Add(1)
		go func() {
			defer wg.Done()
			if err := c.feed(ctx, r.st); err != nil {
				errOnce.Do(func() { runErr = err })
				cancel()
			}
		}()
		for range c.Workers {
			wg.Add(1)
			go func() {
				defer wg.Done()
				for c.next(ctx) {
				}
			}()
		}
	}
	<-ctx.Done()
	for _, c := range r.ctrls {
		c.q.ShutDown()
	}
	wg.Wait()
	return runErr
}

// feed turns the store's events into keys until ctx ends.
func (c *controller) feed(ctx context.Context, st store.ListWatcher) error {
	known := map[string]bool{}
	for ev := range store.Follow(ctx, st, []string{c.Kind}, store.FollowOptions{Logger: c.log}) {
		switch ev.Type {
		case store.Error:
			return fmt.Errorf("follow %s: %w", c.Kind, ev.Err)
		case store.Synced:
			keys := store.SyncedKeys(known, ev.Objects)
			c.startInitial(keys)
			for _, k := range keys {
				c.q.Add(k)
			}
		default:
			k := ev.Object.GetNamespace() + "/" + ev.Object.GetName()
			known[k] = ev.Type != store.Deleted
			c.q.Add(k)
		}
	}
	return nil
}

// next reconciles one key; false once the queue is shut down.
func (c *controller) next(ctx context.Context) bool {
	key, shutdown := c.q.Get()
	if shutdown {
		return false
	}
	defer c.q.Done(key)
	ns, name, _ := strings.Cut(key, "/")
	after, err := c.reconcile(ctx, ns, name)
	c.doneInitial(key, err)
	switch {
	case ctx.Err() != nil:
		// stopping: the next start lists everything again
	case err != nil:
		level := slog.LevelWarn
		if c.QuietRetries {
			level = slog.LevelInfo
		}
		c.log.Log(ctx, level, "reconcile failed; retrying", "key", key, "err", err,
			"retries", c.q.NumRequeues(key)+1, "after", c.backoff(key))
		c.q.AddRateLimited(key)
	default:
		c.q.Forget(key)
		if after > 0 {
			c.q.AddAfter(key, after)
		}
	}
	return true
}

// backoff is the wait before key's next retry (what AddRateLimited uses).
func (c *controller) backoff(key string) time.Duration {
	return min(c.MinBackoff<<min(c.q.NumRequeues(key), 30), c.MaxBackoff)
}

// reconcile turns a panic into an error, so one bad object is retried with
// backoff instead of taking the node down.
func (c *controller) reconcile(ctx context.Context, ns, name string) (after time.Duration, err error) {
	defer func() {
		if p := recover(); p != nil {
			err = fmt.Errorf("reconcile %s %s/%s panicked: %v", c.Kind, ns, name, p)
		}
	}()
	return c.Reconciler.Reconcile(ctx, ns, name)
}

func (c *controller) startInitial(keys []string) {
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.initDone || c.pending != nil {
		return
	}
	c.pending = make(map[string]bool, len(keys))
	for _, k := range keys {
		c.pending[k] = true
	}
	c.finishInitialLocked()
}

func (c *controller) doneInitial(key string, err error) {
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.initDone || !c.pending[key] {
		return
	}
	delete(c.pending, key)
	if err != nil {
		c.firstErr = append(c.firstErr, err)
	}
	c.finishInitialLocked()
}

func (c *controller) finishInitialLocked() {
	if c.initDone || c.pending == nil || len(c.pending) > 0 {
		return
	}
	c.initDone = true
	if c.Initial != nil {
		if len(c.firstErr) > 0 {
			c.Initial <- errors.Join(c.firstErr...)
		}
		close(c.Initial)
	}
}
