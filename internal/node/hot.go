package node

import (
	"log/slog"
	"reflect"
	"sync"
	"time"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/svcdns/svc/dataplane"
	"github.com/svcdns/svc/dataplane/upstream"
	"github.com/svcdns/svc/internal/settings"
)

// hotConfig holds the parts of the snapshot that come from cluster settings and
// applies settings changes without a restart: cache knobs, upstreams, blocking.
type hotConfig struct {
	log *slog.Logger

	mu  sync.Mutex
	cfg *settings.Config
	fwd *upstream.Resolver
	// newLimiter rebuilds the UDP rate limiter when ratelimit.* changes.
	newLimiter func(*settings.Config) error
	// querylog applies querylog.* changes.
	querylog func(*settings.Config) error
}

func newHotConfig(cfg *settings.Config, fwd *upstream.Resolver, log *slog.Logger) *hotConfig {
	return &hotConfig{cfg: cfg, fwd: fwd, log: log}
}

func (h *hotConfig) snapshotInput() dataplane.SnapshotInput {
	h.mu.Lock()
	defer h.mu.Unlock()
	return dataplane.SnapshotInput{
		Forwarder:       h.fwd,
		Router:          h.fwd,
		BlockingEnabled: h.cfg.Blocking.Enabled,
		BlockTTL:        h.cfg.Blocking.BlockTTL,
	}
}

// current returns the configuration in force.
func (h *hotConfig) current() *settings.Config {
	h.mu.Lock()
	defer h.mu.Unlock()
	return h.cfg
}

// follow applies every new configuration the settings manager publishes.
func (h *hotConfig) follow(updates <-chan *settings.Config, dp *dataplane.Server, snaps *snapshotter, reg prometheus.Registerer) {
	for next := range updates {
		h.mu.Lock()
		prev := h.cfg
		h.cfg = next
		var retired *upstream.Resolver
		if !reflect.DeepEqual(prev.Upstreams, next.Upstreams) {
			fwd, err := upstream.New(upstreamConfig(next), h.log.With("component", "upstream"), reg)
			if err != nil {
				h.log.Error("upstreams change refused, keeping the previous ones", "err", err)
			} else {
				retired, h.fwd = h.fwd, fwd
			}
		}
		h.mu.Unlock()
		if !reflect.DeepEqual(prev.Cache, next.Cache) {
			dp.SetCacheConfig(cacheConfig(next))
		}
		if !reflect.DeepEqual(prev.Querylog, next.Querylog) && h.querylog != nil {
			if err := h.querylog(next); err != nil {
				h.log.Error("querylog change refused", "err", err)
			}
		}
		if !reflect.DeepEqual(prev.Ratelimit, next.Ratelimit) && h.newLimiter != nil {
			if err := h.newLimiter(next); err != nil {
				h.log.Error("ratelimit change refused, keeping the previous limits", "err", err)
			}
		}
		snaps.Trigger()
		if retired != nil {
			// Queries still running on the old forwarder finish within its timeouts.
			time.AfterFunc(10*time.Second, func() { _ = retired.Close() })
		}
		h.log.Info("settings applied")
	}
}

// Close releases the current forwarder.
func (h *hotConfig) Close() {
	h.mu.Lock()
	defer h.mu.Unlock()
	_ = h.fwd.Close()
}
