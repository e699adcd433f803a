package node

import (
	"github.com/svcdns/svc/dataplane"
	"github.com/svcdns/svc/dataplane/cache"
	"github.com/svcdns/svc/dataplane/transport"
	"github.com/svcdns/svc/dataplane/upstream"
	"github.com/svcdns/svc/internal/settings"
)

// dataplaneConfig maps node settings onto the data plane's own configuration.
func dataplaneConfig(cfg *settings.Config, nodeName string) dataplane.Config {
	dc := dataplane.Config{Node: nodeName, Sockets: cfg.Listeners.Sockets, Cache: cacheConfig(cfg),
		DoTIdleTimeout: transport.DefaultIdleTimeout, ECSClientFrom: cfg.Listeners.ECSClientFrom}
	for _, l := range cfg.Listeners.DNS {
		dc.Listeners = append(dc.Listeners, dataplane.ListenerConfig{Address: l.Address, Protocols: l.Protocols})
	}
	return dc
}

func cacheConfig(cfg *settings.Config) cache.Config {
	c := cfg.Cache
	return cache.Config{
		MaxEntries:        c.MaxEntries,
		MinTTL:            c.MinTTL,
		MaxTTL:            c.MaxTTL,
		NegativeTTL:       c.NegativeTTL,
		PrefetchThreshold: c.Prefetch.Threshold,
		PrefetchWindow:    c.Prefetch.Window,
		StaleTTL:          c.ServeStale.TTL,
		StaleAnswerTTL:    c.ServeStale.AnswerTTL,
		StaleMaxWait:      c.ServeStale.MaxWait,
	}
}

// upstreamConfig maps upstreams.* onto the forwarder's configuration.
func upstreamConfig(cfg *settings.Config) upstream.Config {
	u := cfg.Upstreams
	uc := upstream.Config{
		Groups:      make(map[string]upstream.GroupConfig, len(u.Groups)),
		Bootstrap:   u.Bootstrap,
		Conditional: make(map[string]string, len(u.Conditional)),
		ECS:         upstream.ECSConfig{Mode: u.ECS.Mode, IPv4Prefix: u.ECS.IPv4Prefix, IPv6Prefix: u.ECS.IPv6Prefix},
	}
	for name, g := range u.Groups {
		uc.Groups[name] = upstream.GroupConfig{Servers: g.Servers, Strategy: upstream.Strategy(g.Strategy), Timeout: g.Timeout}
	}
	for suffix, group := range u.Conditional {
		uc.Conditional[suffix] = group
	}
	return uc
}
