// Package kubewatch gives client-go informers a ListerWatcher that waits out
// an apiserver nobody answers at (a restart or an upgrade) on a short pace of
// its own, so a cache follows the cluster again within seconds of its return.
//
// Why: a reflector whose list or watch fails sleeps on an exponential backoff
// that reaches 30-60 s within a minute of failures, and keeps sleeping after
// the apiserver is back. Measured against a real kube-apiserver restarted
// after 20 s down: a store's cache showed a change made after the restart
// 56 s later. The operator waits on that cache after each status write and
// the data plane serves from it.
//
// Only failures to reach the apiserver are retried here (refused, reset,
// dial errors, a dropped connection). An answer (429, 5xx, 410 Gone, a
// denial) goes to the reflector, whose handling of it is unchanged.
package kubewatch

import (
	"context"
	"errors"
	"net"
	"time"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	utilnet "k8s.io/apimachinery/pkg/util/net"
	"k8s.io/apimachinery/pkg/util/wait"
	"k8s.io/apimachinery/pkg/watch"
	"k8s.io/client-go/tools/cache"
)

// Pace of the retries: the first after FirstRetry, each next one twice as
// late up to MaxRetry, each with up to a quarter more at random so a
// DaemonSet's nodes do not reconnect in step. MaxRetry bounds how long a
// cache lags behind an apiserver that is back: one retry to a port that
// refuses costs the apiserver nothing, a relist it misses costs the cluster
// stale answers.
const (
	FirstRetry = 250 * time.Millisecond
	MaxRetry   = 4 * time.Second
)

// ListWatch is a cache.ListerWatcher that retries, until its context ends,
// a list or watch that did not reach the apiserver. It lists and then
// watches (no streaming initial list): the streaming path's retry sleeps
// out its backoff without looking at the context, and for the few hundred
// objects these caches hold the stream saves the apiserver nothing.
type ListWatch struct {
	lw cache.ListerWatcherWithContext
}

// New wraps lw.
func New(lw cache.ListerWatcher) *ListWatch {
	return &ListWatch{lw: cache.ToListerWatcherWithContext(lw)}
}

// ListWithContext lists, retrying while the apiserver is unreachable.
func (l *ListWatch) ListWithContext(ctx context.Context, o metav1.ListOptions) (runtime.Object, error) {
	return retry(ctx, func() (runtime.Object, error) { return l.lw.ListWithContext(ctx, o) })
}

// WatchWithContext starts a watch, retrying while the apiserver is
// unreachable.
func (l *ListWatch) WatchWithContext(ctx context.Context, o metav1.ListOptions) (watch.Interface, error) {
	return retry(ctx, func() (watch.Interface, error) { return l.lw.WatchWithContext(ctx, o) })
}

// List lists once: without a context a retry could not be stopped. The
// reflector calls ListWithContext.
func (l *ListWatch) List(o metav1.ListOptions) (runtime.Object, error) {
	return l.lw.ListWithContext(context.Background(), o)
}

// Watch starts a watch once (see List).
func (l *ListWatch) Watch(o metav1.ListOptions) (watch.Interface, error) {
	return l.lw.WatchWithContext(context.Background(), o)
}

// IsWatchListSemanticsUnSupported turns the streaming initial list off
// (client-go's util/watchlist.DoesClientNotSupportWatchListSemantics).
func (*ListWatch) IsWatchListSemanticsUnSupported() bool { return true }

func retry[T any](ctx context.Context, call func() (T, error)) (T, error) {
	delay := FirstRetry
	for {
		v, err := call()
		if err == nil || !Unreachable(err) {
			return v, err
		}
		t := time.NewTimer(wait.Jitter(delay, 0.25))
		select {
		case <-ctx.Done():
			t.Stop()
			return v, err
		case <-t.C:
		}
		delay = min(2*delay, MaxRetry)
	}
}

// Unreachable reports whether err means no apiserver answered: the
// connection was refused, reset or dropped, or could not be dialled.
func Unreachable(err error) bool {
	if err == nil {
		return false
	}
	var op *net.OpError
	if errors.As(err, &op) && op.Op == "dial" {
		return true
	}
	return utilnet.IsConnectionRefused(err) || utilnet.IsConnectionReset(err) || utilnet.IsProbableEOF(err)
}
