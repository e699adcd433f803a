package upstream

import (
	"crypto/tls"
	"crypto/x509"
	"errors"
	"fmt"
	"os"
	"strings"
	"time"

	"github.com/miekg/dns"
)

// Strategy chooses which servers of a group are asked, and in which order.
type Strategy string

// Strategies of settings upstreams.groups.*.strategy.
const (
	// ParallelBest asks two random servers at once and takes the first good
	// answer; when both fail the other servers are tried in order.
	ParallelBest Strategy = "parallel_best"
	// Strict asks the servers in the configured order, the next on failure.
	Strict Strategy = "strict"
	// Random asks one random server, then another random one on failure.
	Random Strategy = "random"
	// RTTWeighted picks servers at random weighted by the inverse of their
	// smoothed round-trip time; failures add a penalty to that time.
	RTTWeighted Strategy = "rtt_weighted"
)

// DefaultGroup is the group used when no conditional rule matches.
const DefaultGroup = "default"

// DefaultTimeout is the per-attempt timeout of a group without one.
const DefaultTimeout = 2 * time.Second

// ECS modes of settings upstreams.ecs.mode.
const (
	ECSStrip   = "strip"   // remove the client's ECS option
	ECSForward = "forward" // pass the client's ECS option through
	ECSAdd     = "add"     // set ECS from the client address
)

// Config mirrors the settings upstreams.*.
type Config struct {
	// Groups maps a group name to its servers (upstreams.groups). A missing
	// "default" group gets DefaultConfig's.
	Groups map[string]GroupConfig
	// Bootstrap lists plain DNS servers (IP literals, udp or tcp) used to
	// resolve host names in upstream addresses (upstreams.bootstrap).
	// Nil means [1.1.1.1:53].
	Bootstrap []string
	// Conditional maps a domain suffix to a group (upstreams.conditional).
	Conditional map[string]string
	// ECS is upstreams.ecs.
	ECS ECSConfig
	// TLS is the base client TLS configuration for tls://, https:// and
	// quic:// upstreams (tests set RootCAs here). Nil means system roots.
	// It is cloned; ServerName and NextProtos are set per upstream.
	TLS *tls.Config
	// CAFile names a PEM file of extra root certificates trusted for
	// encrypted upstreams, added to TLS.RootCAs or the system roots.
	CAFile string
}

// GroupConfig is one entry of upstreams.groups.
type GroupConfig struct {
	Servers  []string      // upstream addresses (see ParseAddress)
	Strategy Strategy      // empty means ParallelBest
	Timeout  time.Duration // per attempt; zero means DefaultTimeout
}

// ECSConfig is upstreams.ecs. Prefix lengths are taken as given (0 is a
// valid setting); DefaultConfig carries the spec defaults 24 and 56.
type ECSConfig struct {
	Mode       string // ECSStrip, ECSForward or ECSAdd; empty means ECSStrip
	IPv4Prefix int    // 0 to 32
	IPv6Prefix int    // 0 to 128
}

// DefaultConfig returns the spec defaults of upstreams.*.
func DefaultConfig() Config {
	return Config{
		Groups: map[string]GroupConfig{
			DefaultGroup: defaultGroup(),
		},
		Bootstrap:   []string{"1.1.1.1:53"},
		Conditional: map[string]string{},
		ECS:         ECSConfig{Mode: ECSStrip, IPv4Prefix: 24, IPv6Prefix: 56},
	}
}

func defaultGroup() GroupConfig {
	return GroupConfig{
		Servers:  []string{"1.1.1.1:53", "9.9.9.9:53"},
		Strategy: ParallelBest,
		Timeout:  DefaultTimeout,
	}
}

// withDefaults fills the zero values that mean "the default" and checks
// everything else.
func (c Config) withDefaults() (Config, error) {
	out := c
	out.Groups = make(map[string]GroupConfig, len(c.Groups)+1)
	for name, g := range c.Groups {
		if name == "" {
			return Config{}, errors.New("upstream group with an empty name")
		}
		if len(g.Servers) == 0 {
			return Config{}, fmt.Errorf("upstream group %q has no servers", name)
		}
		if g.Strategy == "" {
			g.Strategy = ParallelBest
		}
		switch g.Strategy {
		case ParallelBest, Strict, Random, RTTWeighted:
		default:
			return Config{}, fmt.Errorf("upstream group %q: unknown strategy %q (want parallel_best, strict, random or rtt_weighted)", name, g.Strategy)
		}
		if g.Timeout < 0 {
			return Config{}, fmt.Errorf("upstream group %q: negative timeout", name)
		}
		if g.Timeout == 0 {
			g.Timeout = DefaultTimeout
		}
		out.Groups[name] = g
	}
	if _, ok := out.Groups[DefaultGroup]; !ok {
		out.Groups[DefaultGroup] = defaultGroup()
	}
	if c.Bootstrap == nil {
		out.Bootstrap = []string{"1.1.1.1:53"}
	}
	out.Conditional = make(map[string]string, len(c.Conditional))
	for suffix, group := range c.Conditional {
		if _, ok := out.Groups[group]; !ok {
			return Config{}, fmt.Errorf("conditional %q names unknown upstream group %q", suffix, group)
		}
		key, err := normalizeSuffix(suffix)
		if err != nil {
			return Config{}, err
		}
		if prev, dup := out.Conditional[key]; dup && prev != group {
			return Config{}, fmt.Errorf("conditional suffix %q given twice with different groups", key)
		}
		out.Conditional[key] = group
	}
	switch c.ECS.Mode {
	case "":
		out.ECS.Mode = ECSStrip
	case ECSStrip, ECSForward, ECSAdd:
	default:
		return Config{}, fmt.Errorf("unknown upstreams.ecs.mode %q (want strip, forward or add)", c.ECS.Mode)
	}
	if c.ECS.IPv4Prefix < 0 || c.ECS.IPv4Prefix > 32 {
		return Config{}, fmt.Errorf("upstreams.ecs.ipv4Prefix %d out of 0 to 32", c.ECS.IPv4Prefix)
	}
	if c.ECS.IPv6Prefix < 0 || c.ECS.IPv6Prefix > 128 {
		return Config{}, fmt.Errorf("upstreams.ecs.ipv6Prefix %d out of 0 to 128", c.ECS.IPv6Prefix)
	}
	return out, nil
}

// normalizeSuffix returns the lower-case FQDN form used as map key.
func normalizeSuffix(s string) (string, error) {
	s = strings.ToLower(strings.TrimSpace(s))
	if s == "" {
		return "", errors.New("empty conditional suffix")
	}
	s = dns.Fqdn(s)
	if _, ok := dns.IsDomainName(s); !ok {
		return "", fmt.Errorf("conditional suffix %q is not a domain name", s)
	}
	return s, nil
}

// maxCAFileSize bounds the CA file read.
const maxCAFileSize = 1 << 20

func (c Config) tlsConfig() (*tls.Config, error) {
	var base *tls.Config
	if c.TLS != nil {
		base = c.TLS.Clone()
	} else {
		base = &tls.Config{}
	}
	if base.MinVersion == 0 {
		base.MinVersion = tls.VersionTLS12
	}
	if c.CAFile == "" {
		return base, nil
	}
	st, err := os.Stat(c.CAFile)
	if err != nil {
		return nil, fmt.Errorf("upstream CA file: %w", err)
	}
	if st.Size() > maxCAFileSize {
		return nil, fmt.Errorf("upstream CA file %s larger than %d bytes", c.CAFile, maxCAFileSize)
	}
	pem, err := os.ReadFile(c.CAFile)
	if err != nil {
		return nil, fmt.Errorf("upstream CA file: %w", err)
	}
	pool := base.RootCAs
	if pool == nil {
		if pool, err = x509.SystemCertPool(); err != nil || pool == nil {
			pool = x509.NewCertPool()
		}
	} else {
		pool = pool.Clone()
	}
	if !pool.AppendCertsFromPEM(pem) {
		return nil, fmt.Errorf("upstream CA file %s holds no PEM certificate", c.CAFile)
	}
	base.RootCAs = pool
	return base, nil
}
