package node

import (
	"context"
	"log/slog"
	"runtime/debug"
	"runtime/metrics"
	"time"
)

// releaseStartupMemory returns idle heap to the operating system while the
// node settles: from the first snapshot served (ready() nil; nil ready: at
// once), every few seconds for two minutes whenever more than releaseSlack
// of free heap or of garbage is held, and once at the end. Not at the moment of readiness itself, when the
// first clients arrive.
//
// Why: the start (settings, store, CRD schemas, API registration, the
// objects directory, the first snapshots and list compiles) peaks far above
// what an idle node keeps live, and the Go runtime keeps free heap up to
// its last goal: measured here, ~38 MiB of an idle all-role node's ~145 MiB
// RSS was such heap (go_memstats_heap_idle_bytes minus released) that the
// background scavenger never returned, because it stayed under the goal
// (issue #27 item 4). Each release costs one GC at a moment little else
// happens; after the settling window the runtime's own scavenger rules.
//
// The binary's read-only pages the start touched are dropped from the
// process twice (dropBinaryPages): at the first release, and at the end of
// the window, after what the first minutes load (lists, objects) has run.
func releaseStartupMemory(ctx context.Context, logger *slog.Logger, ready func() error) {
	const (
		poll         = 200 * time.Millisecond
		every        = 5 * time.Second
		window       = 2 * time.Minute
		releaseSlack = 8 << 20
	)
	start := time.Now()
	t := time.NewTicker(poll)
	defer t.Stop()
	for ready != nil && ready() != nil && time.Since(start) < window {
		select {
		case <-ctx.Done():
			return
		case <-t.C:
		}
	}
	t.Reset(every)
	samples := []metrics.Sample{
		{Name: "/memory/classes/heap/free:bytes"},
		{Name: "/memory/classes/heap/objects:bytes"}, // live and not yet collected
		{Name: "/gc/heap/live:bytes"},                // live at the last collection
	}
	dropped := false
	for time.Since(start) < window {
		select {
		case <-ctx.Done():
			return
		case <-t.C:
		}
		// The start's garbage counts too: under the heap goal (twice the
		// live heap) no collection comes while the node is idle, and what
		// the start left uncollected would stay resident (measured: 20 s
		// after a start on a loaded machine, 29 MB in use for 14 live).
		metrics.Read(samples)
		free, objects, live := sampleUint(samples[0]), sampleUint(samples[1]), sampleUint(samples[2])
		if free > releaseSlack || objects > live+releaseSlack {
			debug.FreeOSMemory()
		}
		if !dropped {
			dropped = true
			dropBinaryPagesLogged(logger)
		}
	}
	debug.FreeOSMemory()
	dropBinaryPagesLogged(logger)
}

func sampleUint(s metrics.Sample) uint64 {
	if s.Value.Kind() != metrics.KindUint64 {
		return 0
	}
	return s.Value.Uint64()
}

func dropBinaryPagesLogged(logger *slog.Logger) {
	n, err := dropBinaryPages()
	if err != nil {
		// Only memory at rest is at stake; the node serves as before.
		logger.Warn("could not release the binary's idle pages", "err", err)
		return
	}
	logger.Debug("released the binary's idle pages", "advisedBytes", n)
}
