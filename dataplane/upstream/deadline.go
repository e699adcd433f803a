package upstream

import (
	"context"
	"sync"
	"sync/atomic"
	"time"
)

// deadlineCtx is a context with a deadline that costs no timer until
// someone asks for its Done channel. A forwarded query used to carry two
// nested context.WithTimeout (the data plane's bound on the query, the
// group's on each attempt): two timers, two cancel funcs and the parent's
// children map per query, about a tenth of a cache miss's CPU. The pooled
// UDP exchange, which already runs a timer per query for its
// retransmissions, never calls Done: it waits on the root's channel (the
// server's shutdown) and checks the deadline when its timer fires
// (deadlineOf). Every other user (TCP, DoH, DoQ, coalesced followers,
// races, a Forwarder that is not this package's) calls Done and gets a
// real context.WithDeadline, made then.
//
// The context's own cancel (the func WithDeadline returns) is meant to be
// called once the work using it has returned, as with `defer cancel()`: it
// makes Err report context.Canceled, and cancels the real context if one
// was made, but wakes no one waiting on the root's channel.
type deadlineCtx struct {
	root     context.Context // not a *deadlineCtx
	deadline time.Time
	// real is made by the first Done; cancelled holds once cancel ran.
	mu        sync.Mutex
	real      context.Context
	stop      context.CancelFunc
	cancelled atomic.Bool
}

// WithDeadline is context.WithDeadline for a forwarded query: the
// Resolver's pooled UDP exchanges wait on it without a timer of its own
// (see deadlineCtx). Other code may use the context as any other.
func WithDeadline(parent context.Context, d time.Time) (context.Context, context.CancelFunc) {
	if p, ok := parent.(*deadlineCtx); ok {
		if p.cancelled.Load() || !d.Before(p.deadline) {
			// Nothing to add: the parent ends first (or has ended).
			return p, func() {}
		}
		parent = p.root
	} else if pd, ok := parent.Deadline(); ok && pd.Before(d) {
		d = pd // Deadline reports the earliest; the root's ends it too
	}
	c := &deadlineCtx{root: parent, deadline: d}
	return c, c.cancel
}

func (c *deadlineCtx) cancel() {
	c.cancelled.Store(true)
	c.mu.Lock()
	stop := c.stop
	c.mu.Unlock()
	if stop != nil {
		stop()
	}
}

func (c *deadlineCtx) Deadline() (time.Time, bool) { return c.deadline, true }

func (c *deadlineCtx) Value(key any) any { return c.root.Value(key) }

func (c *deadlineCtx) Done() <-chan struct{} {
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.real == nil {
		c.real, c.stop = context.WithDeadline(c.root, c.deadline)
		if c.cancelled.Load() {
			c.stop()
		}
	}
	return c.real.Done()
}

func (c *deadlineCtx) Err() error {
	c.mu.Lock()
	real := c.real
	c.mu.Unlock()
	if real != nil {
		return real.Err()
	}
	if err := c.root.Err(); err != nil {
		return err
	}
	if c.cancelled.Load() {
		return context.Canceled
	}
	if !time.Now().Before(c.deadline) {
		return context.DeadlineExceeded
	}
	return nil
}

// deadlineOf returns the channel that ends ctx early (cancellation) and
// ctx's deadline (zero: none) for a waiter that times the deadline
// itself. For a deadlineCtx the channel is its root's, which makes no
// timer; for any other context it is ctx's own Done.
func deadlineOf(ctx context.Context) (<-chan struct{}, time.Time) {
	if c, ok := ctx.(*deadlineCtx); ok {
		return c.root.Done(), c.deadline
	}
	d, _ := ctx.Deadline()
	return ctx.Done(), d
}
