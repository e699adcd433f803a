package node

import (
	"context"
	"log/slog"
	"sync"
	"time"

	"github.com/svcdns/svc/api/v1alpha1"
	"github.com/svcdns/svc/controllers/zones"
	"github.com/svcdns/svc/dataplane/authority"
	"github.com/svcdns/svc/internal/store"
)

// zoneStatus writes DNSZone and DNSRecordSet status from each compiled snapshot
// (serial, counts, records that could not be served). Writes run on their own
// goroutine, latest snapshot wins, so a slow store never holds up a build.
type zoneStatus struct {
	w   zones.Writer
	log *slog.Logger

	mu      sync.Mutex
	pending *zoneStatusInput
	wake    chan struct{}
}

type zoneStatusInput struct {
	zones    []v1alpha1.DNSZone
	sets     []v1alpha1.DNSRecordSet
	table    *authority.Table
	problems []authority.Problem
}

func newZoneStatus(st store.Store, log *slog.Logger) *zoneStatus {
	return &zoneStatus{w: zones.Writer{Store: st, Now: time.Now}, log: log, wake: make(chan struct{}, 1)}
}

// offer hands over the inputs of the snapshot just built.
func (z *zoneStatus) offer(in zoneStatusInput) {
	z.mu.Lock()
	z.pending = &in
	z.mu.Unlock()
	select {
	case z.wake <- struct{}{}:
	default:
	}
}

func (z *zoneStatus) run(ctx context.Context) {
	for {
		select {
		case <-ctx.Done():
			return
		case <-z.wake:
		}
		z.mu.Lock()
		in := z.pending
		z.pending = nil
		z.mu.Unlock()
		if in == nil {
			continue
		}
		if err := z.w.Sync(ctx, in.zones, in.sets, zones.FromCompile(in.table, in.problems)); stoppedEarly(ctx, err) {
			// A conflict means the object changed; the next build writes again.
			z.log.Warn("zone status not written", "err", err)
		}
	}
}
