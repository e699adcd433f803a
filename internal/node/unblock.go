package node

import (
	"log/slog"
	"time"

	"github.com/svcdns/svc/controllers/events"
	unblockctl "github.com/svcdns/svc/controllers/unblock"
	"github.com/svcdns/svc/internal/runner"
	"github.com/svcdns/svc/internal/settings"
	"github.com/svcdns/svc/internal/store"
	"github.com/svcdns/svc/internal/unblock"
)

// newUnblockService is the node's unblock request service: the block
// page's Submitter (blocking.unblock). It reads unblockRequests.* live.
func newUnblockService(st store.Store, hot *hotConfig, log *slog.Logger) *unblock.Service {
	return unblock.NewService(st, func() settings.UnblockRequests { return hot.current().UnblockRequests }, time.Now).
		WithLogger(log.With("component", "unblock"))
}

// unblockReconciler is the UnblockRequest reconciler of the one controller
// list; rec records Kubernetes Events (nil on the sqlite store).
func (b *blocking) unblockReconciler(rec *events.Deferred) runner.Reconciler {
	r := &unblockctl.Reconciler{
		Store:    b.st,
		Settings: func() settings.UnblockRequests { return b.hot.current().UnblockRequests },
		Now:      time.Now,
		Metrics:  b.metrics.unblockMetrics(),
		Logger:   b.log.With("component", "unblock"),
	}
	if rec != nil {
		r.Events = rec
	}
	return r
}
