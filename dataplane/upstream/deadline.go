package upstream

import (
	"context"
	"sync"
	"sync/atomic"
	"time"
)

// DeadlineContext is a context with a deadline that costs no timer until
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
// Release (its cancel) is meant to be called once the work using it has
// returned, as with `defer cancel()`: it makes Err report
// context.Canceled, and cancels the real context if one was made, but
// wakes no one waiting on the root's channel.
type DeadlineContext struct {
	root     context.Context // not a *DeadlineContext
	deadline time.Time
	// real is made by the first Done (under mu); cancelled holds once
	// Release ran.
	mu        sync.Mutex
	real      atomic.Pointer[realCtx]
	cancelled atomic.Bool
}

type realCtx struct {
	ctx  context.Context
	stop context.CancelFunc
}

// NewDeadline is context.WithDeadline for a forwarded query: one
// allocation, no timer (see DeadlineContext).
func NewDeadline(parent context.Context, d time.Time) *DeadlineContext {
	if p, ok := parent.(*DeadlineContext); ok {
		parent = p.root
		d = minTime(d, p.deadline)
	} else if pd, ok := parent.Deadline(); ok {
		d = minTime(d, pd) // Deadline reports the earliest; the root's ends it too
	}
	return &DeadlineContext{root: parent, deadline: d}
}

// withDeadline is NewDeadline that returns parent itself (and nil to
// release) when parent ends no later than d.
func withDeadline(parent context.Context, d time.Time) (context.Context, *DeadlineContext) {
	if pd, ok := parent.Deadline(); ok && !d.Before(pd) {
		return parent, nil
	}
	if p, ok := parent.(*DeadlineContext); ok && p.cancelled.Load() {
		return parent, nil
	}
	c := NewDeadline(parent, d)
	return c, c
}

func minTime(a, b time.Time) time.Time {
	if b.Before(a) {
		return b
	}
	return a
}

// Release ends the context (Err reports context.Canceled); nil is allowed.
func (c *DeadlineContext) Release() {
	if c == nil {
		return
	}
	c.cancelled.Store(true)
	if r := c.real.Load(); r != nil {
		r.stop()
	}
}

func (c *DeadlineContext) Deadline() (time.Time, bool) { return c.deadline, true }

func (c *DeadlineContext) Value(key any) any { return c.root.Value(key) }

func (c *DeadlineContext) Done() <-chan struct{} {
	if r := c.real.Load(); r != nil {
		return r.ctx.Done()
	}
	c.mu.Lock()
	defer c.mu.Unlock()
	r := c.real.Load()
	if r == nil {
		r = new(realCtx)
		r.ctx, r.stop = context.WithDeadline(c.root, c.deadline)
		c.real.Store(r)
		if c.cancelled.Load() { // Release ran meanwhile, maybe before the Store
			r.stop()
		}
	}
	return r.ctx.Done()
}

func (c *DeadlineContext) Err() error {
	if r := c.real.Load(); r != nil {
		return r.ctx.Err()
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
// itself. For a DeadlineContext the channel is its root's, which makes no
// timer; for any other context it is ctx's own Done.
func deadlineOf(ctx context.Context) (<-chan struct{}, time.Time) {
	if c, ok := ctx.(*DeadlineContext); ok {
		return c.root.Done(), c.deadline
	}
	d, _ := ctx.Deadline()
	return ctx.Done(), d
}
