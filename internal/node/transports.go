package node

import (
	"fmt"
	"maps"

	"github.com/svcdns/svc/dataplane/proxyproto"
	"github.com/svcdns/svc/dataplane/ratelimit"
	"github.com/svcdns/svc/dataplane/transport"
	"github.com/svcdns/svc/internal/settings"
)

// proxyPolicy builds the PROXY protocol policy of listeners.proxyProtocolFrom.
func proxyPolicy(cfg *settings.Config) (*proxyproto.Policy, error) {
	if len(cfg.Listeners.ProxyProtocolFrom) == 0 {
		return nil, nil
	}
	p := &proxyproto.Policy{From: cfg.Listeners.ProxyProtocolFrom}
	if f := cfg.Listeners.ProxyProtocolSecretFile; f != "" {
		secret, err := proxyproto.LoadSecret(f)
		if err != nil {
			return nil, fmt.Errorf("listeners.proxyProtocolSecretFile: %w", err)
		}
		p.Secret = secret
	}
	if err := p.Validate(); err != nil {
		return nil, fmt.Errorf("listeners.proxyProtocolFrom: %w", err)
	}
	return p, nil
}

// ratelimitConfig maps ratelimit.*. The settings leave out levels set to 0;
// the limiter merges with its defaults, so a default level switched off is
// passed back as an explicit 0.
func ratelimitConfig(cfg *settings.Config) ratelimit.Config {
	r := cfg.Ratelimit
	withOff := func(set, defaults map[int]int) map[int]int {
		out := maps.Clone(set)
		if out == nil {
			out = map[int]int{}
		}
		for k := range defaults {
			if _, ok := out[k]; !ok {
				out[k] = 0
			}
		}
		return out
	}
	return ratelimit.Config{
		Enabled: r.Enabled, Slip: r.Slip, MaxBuckets: r.MaxBuckets, Exempt: r.Exempt,
		IPv4: withOff(r.IPv4, ratelimit.DefaultIPv4), IPv6: withOff(r.IPv6, ratelimit.DefaultIPv6),
	}
}

// transportConfig maps listeners.dot, .doh, .doq and .doh3.
func transportConfig(cfg *settings.Config, pp *proxyproto.Policy, lim connLimits) transport.Config {
	conv := func(in []settings.TLSListener) []transport.Listener {
		var out []transport.Listener
		for _, l := range in {
			out = append(out, transport.Listener{Address: l.Address, CertFile: l.TLS.CertFile, KeyFile: l.TLS.KeyFile})
		}
		return out
	}
	convHTTP := func(in []settings.HTTPSListener) []transport.Listener {
		var out []transport.Listener
		for _, l := range in {
			out = append(out, transport.Listener{Address: l.Address, CertFile: l.TLS.CertFile, KeyFile: l.TLS.KeyFile, Path: l.Path})
		}
		return out
	}
	return transport.Config{
		DoT: conv(cfg.Listeners.DoT), DoQ: conv(cfg.Listeners.DoQ),
		DoH: convHTTP(cfg.Listeners.DoH), DoH3: convHTTP(cfg.Listeners.DoH3),
		ProxyProtocol: pp,
		MaxConns:      lim.Stream,
		MaxQUICConns:  lim.QUIC,
		DoHServer:     cfg.Listeners.DoHServer,
	}
}
