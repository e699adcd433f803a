package settings

import (
	"encoding/json"
	"errors"
	"fmt"
	"net/netip"
	"slices"
	"strconv"
	"strings"
	"time"
)

// Scope says whether a key belongs to one host or is shared by the cluster.
type Scope string

const (
	ScopeNode    Scope = "node"
	ScopeCluster Scope = "cluster"
)

// Flag qualifies how a key may be changed and shown.
type Flag uint8

const (
	// FlagHostOnly keys come from the config file or environment only, never the API.
	FlagHostOnly Flag = 1 << iota
	// FlagRestart keys take effect at the next start.
	FlagRestart
	// FlagWriteOnly values are never returned by the API.
	FlagWriteOnly
)

func (f Flag) names() []string {
	out := []string{}
	if f&FlagHostOnly != 0 {
		out = append(out, "host-only")
	}
	if f&FlagRestart != 0 {
		out = append(out, "restart")
	}
	if f&FlagWriteOnly != 0 {
		out = append(out, "write-only")
	}
	return out
}

// KeyInfo is the public description of one key (GET /settings/_schema).
type KeyInfo struct {
	Key         string   `json:"key"`
	Type        string   `json:"type"`
	Default     any      `json:"default"`
	Scope       Scope    `json:"scope"`
	Flags       []string `json:"flags"`
	Allowed     []string `json:"allowed,omitempty"`
	Range       string   `json:"range,omitempty"`
	Description string   `json:"description"`
	// Env is the environment variable setting the key; empty for list and
	// map keys, which only a file can set.
	Env string `json:"env,omitempty"`
}

// key is one registry entry; values are held typed (time.Duration,
// []netip.Prefix, ...) and converted to the decoded-YAML shape by format.
type key struct {
	info   KeyInfo
	flags  Flag
	def    any
	parse  func(any) (any, error)
	format func(any) any
	set    func(*Config, any)
	envOK  bool
	// isMap keys take merge patches entry by entry; mergeDefault keys are
	// also laid over their default map.
	isMap        bool
	mergeDefault bool
}

func (k *key) is(f Flag) bool { return k.flags&f != 0 }

// kind is a value type: its name in the schema, parser and formatter.
type kind[T any] struct {
	name   string
	parse  func(any) (T, error)
	format func(T) any
	env    bool
}

// opt narrows a kind: allowed values or a range, with its description.
type opt[T any] struct {
	allowed []string
	rng     string
	check   func(T) error
}

func str() kind[string] {
	return kind[string]{"string", parseString, func(s string) any { return s }, true}
}

func integer() kind[int] {
	return kind[int]{"int", func(v any) (int, error) {
		n, err := parseInt(v)
		return int(n), err
	}, func(n int) any { return json.Number(strconv.Itoa(n)) }, true}
}

func boolean() kind[bool] {
	return kind[bool]{"bool", parseBool, func(b bool) any { return b }, true}
}

func duration() kind[time.Duration] {
	return kind[time.Duration]{"duration", parseDuration, formatDuration, true}
}

func bytesize() kind[int64] { return kind[int64]{"bytes", parseBytes, formatBytes, true} }

func hostport() kind[string] {
	return kind[string]{"hostport", parseHostPort, func(s string) any { return s }, true}
}

func cidrs() kind[[]netip.Prefix] {
	return kind[[]netip.Prefix]{"cidr[]", parseCIDRList, formatCIDRList, true}
}

func strs() kind[[]string] {
	return kind[[]string]{"string[]", parseStringList, formatStringList, true}
}

func urlKind() kind[string] {
	return kind[string]{"url", parseURL, func(s string) any { return s }, true}
}

func ipv4() kind[netip.Addr] { return kind[netip.Addr]{"ipv4", parseIPv4, formatAddr, true} }
func ipv6() kind[netip.Addr] { return kind[netip.Addr]{"ipv6", parseIPv6, formatAddr, true} }

func domain() kind[string] {
	return kind[string]{"domain", parseDomain, func(s string) any { return s }, true}
}

func oneOf(vals ...string) opt[string] {
	return opt[string]{allowed: vals, check: func(s string) error {
		if slices.Contains(vals, s) {
			return nil
		}
		return fmt.Errorf("invalid value %q: want one of %s", s, strings.Join(vals, ", "))
	}}
}

func intRange(lo, hi int) opt[int] {
	return opt[int]{rng: fmt.Sprintf("%d to %d", lo, hi), check: func(n int) error {
		if n < lo || n > hi {
			return fmt.Errorf("invalid value %d: want %d to %d", n, lo, hi)
		}
		return nil
	}}
}

func intMin(lo int) opt[int] {
	return opt[int]{rng: fmt.Sprintf(">= %d", lo), check: func(n int) error {
		if n < lo {
			return fmt.Errorf("invalid value %d: want >= %d", n, lo)
		}
		return nil
	}}
}

func durMin(lo time.Duration) opt[time.Duration] {
	return opt[time.Duration]{rng: fmt.Sprintf(">= %s", formatDuration(lo)), check: func(d time.Duration) error {
		if d < lo {
			return fmt.Errorf("invalid duration %s: want at least %s", formatDuration(d), formatDuration(lo))
		}
		return nil
	}}
}

func maxLen(n int) opt[string] {
	return opt[string]{rng: fmt.Sprintf("at most %d chars", n), check: func(s string) error {
		if l := len([]rune(s)); l > n {
			return fmt.Errorf("too long: %d chars, at most %d", l, n)
		}
		return nil
	}}
}

func each(check func(string) error) opt[[]string] {
	return opt[[]string]{check: func(l []string) error {
		for _, s := range l {
			if err := check(s); err != nil {
				return err
			}
		}
		return nil
	}}
}

// mk builds one key from a typed kind, so parse, format and set agree on T.
func mk[T any](path string, k kind[T], def T, scope Scope, flags Flag, desc string, set func(*Config, T), opts ...opt[T]) *key {
	info := KeyInfo{Key: path, Type: k.name, Scope: scope, Flags: flags.names(), Description: desc}
	for _, o := range opts {
		info.Allowed = append(info.Allowed, o.allowed...)
		if o.rng != "" {
			info.Range = o.rng
		}
	}
	return &key{
		info:  info,
		flags: flags,
		def:   def,
		envOK: k.env,
		parse: func(v any) (any, error) {
			t, err := k.parse(v)
			if err != nil {
				return nil, err
			}
			for _, o := range opts {
				if err := o.check(t); err != nil {
					return nil, err
				}
			}
			return t, nil
		},
		format: func(v any) any { return k.format(v.(T)) },
		set:    func(c *Config, v any) { set(c, v.(T)) },
	}
}

const (
	hr  = FlagHostOnly | FlagRestart
	rst = FlagRestart
)

// defaultBlockPageMessage is the block page text when none is configured.
const defaultBlockPageMessage = "This domain has been blocked by the administrator of this network."

// registry lists every key of the spec's Settings table, in table order. It is
// built per Manager so no package state is shared.
func registry() []*key {
	N, C := ScopeNode, ScopeCluster
	return append([]*key{
		mk("node.name", str(), "", N, hr, "node name; empty uses the host name", func(c *Config, v string) { c.Node.Name = v }),
		mk("node.lameduck", duration(), 2*time.Second, N, hr, "how long listeners keep serving after SIGTERM or POST /lameduck; 0 stops at once", func(c *Config, v time.Duration) { c.Node.Lameduck = v }),
		mk("node.dataDir", str(), "/var/lib/service", N, hr, "holds state.db, querylog.db, local.db, lists and keys", func(c *Config, v string) { c.Node.DataDir = v }),

		listKey("listeners.dns", []DNSListener{{Address: "0.0.0.0:53", Protocols: []string{"udp", "tcp"}}}, "plain DNS listeners: items {address*, protocols (udp, tcp; default both)}", parseDNSListeners, formatDNSListeners, func(c *Config, v []DNSListener) { c.Listeners.DNS = v }),
		listKey("listeners.dot", []TLSListener{}, "DNS-over-TLS listeners: items {address*, tls* {certFile*, keyFile*}}", parseTLSListeners, formatTLSListeners, func(c *Config, v []TLSListener) { c.Listeners.DoT = v }),
		listKey("listeners.doq", []TLSListener{}, "DNS-over-QUIC listeners: items {address*, tls* {certFile*, keyFile*}}", parseTLSListeners, formatTLSListeners, func(c *Config, v []TLSListener) { c.Listeners.DoQ = v }),
		listKey("listeners.doh", []HTTPSListener{}, "DNS-over-HTTPS listeners: items {address*, tls* {certFile*, keyFile*}, path (default /dns-query)}", parseHTTPSListeners, formatHTTPSListeners, func(c *Config, v []HTTPSListener) { c.Listeners.DoH = v }),
		listKey("listeners.doh3", []HTTPSListener{}, "DNS-over-HTTP/3 listeners: items as listeners.doh", parseHTTPSListeners, formatHTTPSListeners, func(c *Config, v []HTTPSListener) { c.Listeners.DoH3 = v }),
		mk("listeners.dohServer", str(), "lean", N, hr, "server of the DoH listeners (HTTP/1.1 and HTTP/2): lean (the service's own, fastest) or stdlib (Go's net/http with x/net/http2: the escape hatch when a flaw is found in the lean one)", func(c *Config, v string) { c.Listeners.DoHServer = v }, oneOf("lean", "stdlib")),
		mk("listeners.api.address", hostport(), "0.0.0.0:8080", N, hr, "API and dashboard listener", func(c *Config, v string) { c.Listeners.API.Address = v }),
		mk("listeners.api.tls.auto", str(), "selfsigned", N, hr, "TLS of the API when no certFile is given: selfsigned or off (plain HTTP)", func(c *Config, v string) { c.Listeners.API.TLS.Auto = v }, oneOf("selfsigned", "off")),
		mk("listeners.api.tls.certFile", str(), "", N, hr, "API certificate (PEM); takes precedence over auto", func(c *Config, v string) { c.Listeners.API.TLS.CertFile = v }),
		mk("listeners.api.tls.keyFile", str(), "", N, hr, "API private key (PEM)", func(c *Config, v string) { c.Listeners.API.TLS.KeyFile = v }),
		mk("listeners.api.pathPrefix", str(), "", N, hr, "path prefix the API and dashboard are served under, e.g. /dns", func(c *Config, v string) { c.Listeners.API.PathPrefix = v }, opt[string]{check: checkPathPrefix}),
		mk("listeners.api.trustedProxies", cidrs(), []netip.Prefix{}, N, hr, "only these peers may set X-Forwarded-For and X-Forwarded-Proto", func(c *Config, v []netip.Prefix) { c.Listeners.API.TrustedProxies = v }),
		mk("listeners.api.writeVisibleTimeout", duration(), 2*time.Second, N, hr, "how long a write through the API waits until this node's DNS answers include it (X-Service-Visible); 0 does not wait, the X-Service-Wait header overrides it per request", func(c *Config, v time.Duration) { c.Listeners.API.WriteVisibleTimeout = v }),
		mk("listeners.ops.address", hostport(), "0.0.0.0:8081", N, hr, "serves /healthz/live and /healthz/ready without login", func(c *Config, v string) { c.Listeners.Ops.Address = v }),
		mk("listeners.metrics.address", hostport(), "0.0.0.0:9153", N, hr, "serves /metrics", func(c *Config, v string) { c.Listeners.Metrics.Address = v }),
		mk("listeners.proxyProtocolFrom", cidrs(), []netip.Prefix{}, N, hr, "peers allowed to send PROXY protocol v2", func(c *Config, v []netip.Prefix) { c.Listeners.ProxyProtocolFrom = v }),
		mk("listeners.ecsClientFrom", cidrs(), []netip.Prefix{}, N, hr, "forwarders (e.g. cluster DNS) whose EDNS Client Subnet option names the client: a /32 or /128 source prefix is the client for client groups, the query log and rate limiting; never trusted from other peers", func(c *Config, v []netip.Prefix) { c.Listeners.ECSClientFrom = v }, opt[[]netip.Prefix]{check: func(l []netip.Prefix) error {
			for _, p := range l {
				if p.Bits() == 0 {
					return fmt.Errorf("%s trusts every peer, so any client could choose its identity with an ECS option; list the forwarders' addresses or their pod network", p)
				}
			}
			return nil
		}}),
		mk("listeners.proxyProtocolSecretFile", str(), "", N, hr, "file with the PROXY protocol secret (at least 32 bytes, TLV 0xE0); required when a peer is not loopback", func(c *Config, v string) { c.Listeners.ProxyProtocolSecretFile = v }),
		mk("listeners.internal.address", hostport(), "0.0.0.0:8082", N, hr, "node-to-node listener (TLS plus bearer token)", func(c *Config, v string) { c.Listeners.Internal.Address = v }),
		mk("listeners.internal.tokenFile", str(), "", N, hr, "internal bearer token; empty derives it from the encryption key", func(c *Config, v string) { c.Listeners.Internal.TokenFile = v }),
		mk("listeners.internal.tls.certFile", str(), "", N, hr, "internal certificate; empty derives it from the encryption key", func(c *Config, v string) { c.Listeners.Internal.TLS.CertFile = v }),
		mk("listeners.internal.tls.keyFile", str(), "", N, hr, "internal private key; empty derives it from the encryption key", func(c *Config, v string) { c.Listeners.Internal.TLS.KeyFile = v }),
		mk("listeners.internal.tls.caFile", str(), "", N, hr, "internal CA; empty derives it from the encryption key", func(c *Config, v string) { c.Listeners.Internal.TLS.CAFile = v }),
		mk("listeners.internal.tls.serverName", domain(), "", N, hr, "server name expected in peers' certificates", func(c *Config, v string) { c.Listeners.Internal.TLS.ServerName = v }),
		mk("listeners.blockPage.http", hostport(), ":80", N, hr, "block page HTTP listener; empty turns it off", func(c *Config, v string) { c.Listeners.BlockPage.HTTP = v }),
		mk("listeners.blockPage.https", hostport(), "", N, hr, "block page HTTPS listener; empty turns it off", func(c *Config, v string) { c.Listeners.BlockPage.HTTPS = v }),
		mk("listeners.blockPage.tls.certFile", str(), "", N, hr, "block page certificate; empty generates a self-signed one", func(c *Config, v string) { c.Listeners.BlockPage.TLS.CertFile = v }),
		mk("listeners.blockPage.tls.keyFile", str(), "", N, hr, "block page private key; empty generates a self-signed one", func(c *Config, v string) { c.Listeners.BlockPage.TLS.KeyFile = v }),
		mk("listeners.sockets", integer(), 0, N, hr, "UDP sockets per DNS listener (SO_REUSEPORT); 0 means one per CPU", func(c *Config, v int) { c.Listeners.Sockets = v }, intMin(0)),

		mk("store.driver", str(), "sqlite", N, hr, "object store: sqlite (file in dataDir) or kube (custom resources)", func(c *Config, v string) { c.Store.Driver = v }, oneOf("sqlite", "kube")),
		mk("store.kube.startupTimeout", duration(), 15*time.Second, N, hr, "how long the kube driver waits for its caches at start", func(c *Config, v time.Duration) { c.Store.Kube.StartupTimeout = v }),
		mk("store.kube.snapshot.maxAge", duration(), 24*time.Hour, N, hr, "an older snapshot makes the node not ready and primary zones answer SERVFAIL", func(c *Config, v time.Duration) { c.Store.Kube.SnapshotMaxAge = v }),
		mk("store.kube.settingsConfigMap", str(), "service-settings", N, hr, "ConfigMap in the service's namespace holding the cluster-scope settings every node applies (PATCH /settings writes it)", func(c *Config, v string) { c.Store.Kube.SettingsConfigMap = v }),

		upstreamGroupsKey(),
		mk("upstreams.bootstrap", kind[[]string]{"upstream[]", parseStringList, formatStringList, true}, []string{"1.1.1.1:53"}, C, 0, "resolvers (by IP) used to resolve upstream host names", func(c *Config, v []string) { c.Upstreams.Bootstrap = v }, opt[[]string]{check: checkBootstrap}),
		conditionalKey(),
		mk("upstreams.ecs.mode", str(), "strip", C, 0, "EDNS Client Subnet: strip, forward or add", func(c *Config, v string) { c.Upstreams.ECS.Mode = v }, oneOf("strip", "forward", "add")),
		mk("upstreams.ecs.ipv4Prefix", integer(), 24, C, 0, "IPv4 prefix length sent with ECS mode add", func(c *Config, v int) { c.Upstreams.ECS.IPv4Prefix = v }, intRange(0, 32)),
		mk("upstreams.ecs.ipv6Prefix", integer(), 56, C, 0, "IPv6 prefix length sent with ECS mode add", func(c *Config, v int) { c.Upstreams.ECS.IPv6Prefix = v }, intRange(0, 128)),

		mk("cache.maxEntries", integer(), 200000, C, 0, "answers kept in the cache; 0 turns the cache off", func(c *Config, v int) { c.Cache.MaxEntries = v }, intMin(0)),
		mk("cache.minTTL", duration(), 5*time.Second, C, 0, "lowest TTL a cached answer gets; 0 honours record TTLs", func(c *Config, v time.Duration) { c.Cache.MinTTL = v }),
		mk("cache.maxTTL", duration(), 24*time.Hour, C, 0, "highest TTL a cached answer gets; 0 no limit", func(c *Config, v time.Duration) { c.Cache.MaxTTL = v }),
		mk("cache.negativeTTL", duration(), 5*time.Minute, C, 0, "TTL of cached NXDOMAIN and NODATA answers", func(c *Config, v time.Duration) { c.Cache.NegativeTTL = v }),
		mk("cache.prefetch.threshold", integer(), 5, C, 0, "hits within the window that make an entry prefetched before expiry; 0 turns off", func(c *Config, v int) { c.Cache.Prefetch.Threshold = v }, intMin(0)),
		mk("cache.prefetch.window", duration(), 2*time.Hour, C, 0, "window in which prefetch hits are counted", func(c *Config, v time.Duration) { c.Cache.Prefetch.Window = v }),
		mk("cache.serveStale.ttl", duration(), 72*time.Hour, C, 0, "how long expired answers may be served when upstreams fail; 0 turns off", func(c *Config, v time.Duration) { c.Cache.ServeStale.TTL = v }),
		mk("cache.serveStale.answerTTL", duration(), 30*time.Second, C, 0, "TTL of a stale answer; 0 means 30s", func(c *Config, v time.Duration) {
			c.Cache.ServeStale.AnswerTTL = orDur(v, 30*time.Second)
		}),
		mk("cache.serveStale.maxWait", duration(), 1800*time.Millisecond, C, 0, "how long to wait for upstreams before answering stale; 0 means 1800ms", func(c *Config, v time.Duration) {
			c.Cache.ServeStale.MaxWait = orDur(v, 1800*time.Millisecond)
		}),

		mk("blocking.enabled", boolean(), true, C, 0, "blocking on or off for the cluster", func(c *Config, v bool) { c.Blocking.Enabled = v }),
		mk("blocking.defaultResponse", str(), "zeroIP", C, 0, "answer to a blocked name", func(c *Config, v string) { c.Blocking.DefaultResponse = v }, oneOf("zeroIP", "nxdomain", "customIP", "refused", "blockPage")),
		mk("blocking.blockTTL", duration(), 10*time.Minute, C, 0, "TTL of blocked answers", func(c *Config, v time.Duration) { c.Blocking.BlockTTL = v }),
		mk("blocking.allowDegraded", boolean(), true, C, rst, "serve while some lists failed to load", func(c *Config, v bool) { c.Blocking.AllowDegraded = v }),
		mk("blocking.customIP.v4", ipv4(), netip.Addr{}, C, 0, "A answer for defaultResponse customIP; empty answers NODATA", func(c *Config, v netip.Addr) { c.Blocking.CustomIP.V4 = v }),
		mk("blocking.customIP.v6", ipv6(), netip.Addr{}, C, 0, "AAAA answer for defaultResponse customIP; empty answers NODATA", func(c *Config, v netip.Addr) { c.Blocking.CustomIP.V6 = v }),
		mk("blocking.refreshInterval", duration(), 24*time.Hour, C, rst, "how often block lists are fetched", func(c *Config, v time.Duration) { c.Blocking.RefreshInterval = v }, durMin(time.Minute)),
		mk("blocking.initStrategy", str(), "fast", C, rst, "start: fast (serve at once), blocking (wait for lists) or failOnError", func(c *Config, v string) { c.Blocking.InitStrategy = v }, oneOf("fast", "blocking", "failOnError")),
		mk("blocking.listsDir", str(), "", N, hr, "where fetched lists are kept; empty means <dataDir>/lists", func(c *Config, v string) { c.Blocking.ListsDir = v }),
		mk("blocking.allowLocalListURLs", boolean(), false, N, hr, "allow loopback, link-local, unspecified and multicast list URLs (private LAN addresses are always allowed)", func(c *Config, v bool) { c.Blocking.AllowLocalListURLs = v }),
		mk("blocking.catalogue.url", urlKind(), "", C, rst, "catalogue document (schema version 2 or 1); empty uses the embedded one; an invalid document leaves the current one", func(c *Config, v string) { c.Blocking.Catalogue.URL = v }),
		mk("blocking.catalogue.importedServicesURL", urlKind(), "", C, rst, "opt-in import of a third-party services file; empty is off", func(c *Config, v string) { c.Blocking.Catalogue.ImportedServicesURL = v }),
		mk("blocking.catalogue.refreshInterval", duration(), 24*time.Hour, C, rst, "how often the catalogue is fetched", func(c *Config, v time.Duration) { c.Blocking.Catalogue.RefreshInterval = v }, durMin(time.Minute)),
		mk("blocking.globalPolicyNamespaces", strs(), []string{}, N, hr, "namespaces whose Policies may apply to every client (empty clientGroupRefs) and select ClientGroups of any namespace; others are confined to their own namespace's groups. Empty means the service's own namespace (SERVICE_NAMESPACE, default service-system; with the sqlite store also default); * allows every namespace", func(c *Config, v []string) { c.Blocking.GlobalPolicyNamespaces = v }, each(checkNamespaceOrAll)),

		mk("blockPage.enabled", boolean(), false, C, rst, "answer blocked names with the block page address", func(c *Config, v bool) { c.BlockPage.Enabled = v }),
		mk("blockPage.ipv4", ipv4(), netip.Addr{}, C, 0, "IPv4 address of the block page; empty picks a specific listener address", func(c *Config, v netip.Addr) { c.BlockPage.IPv4 = v }),
		mk("blockPage.ipv6", ipv6(), netip.Addr{}, C, 0, "IPv6 address of the block page; empty picks a specific listener address", func(c *Config, v netip.Addr) { c.BlockPage.IPv6 = v }),
		mk("blockPage.title", str(), "This site is blocked", C, 0, "block page title", func(c *Config, v string) { c.BlockPage.Title = v }, maxLen(200)),
		mk("blockPage.message", str(), defaultBlockPageMessage, C, 0, "block page text (plain text)", func(c *Config, v string) { c.BlockPage.Message = v }, maxLen(2000)),
		mk("blockPage.contact", str(), "", C, 0, "contact shown on the block page", func(c *Config, v string) { c.BlockPage.Contact = v }),
		mk("blockPage.showDetails", boolean(), true, C, 0, "show list and rule on the block page", func(c *Config, v bool) { c.BlockPage.ShowDetails = v }),
		mk("blockPage.dashboardURL", urlKind(), "", C, 0, "dashboard link on the block page", func(c *Config, v string) { c.BlockPage.DashboardURL = v }),
		mk("blockPage.rateLimit", integer(), 120, C, 0, "requests per minute per client, then 429; 0 removes the limit", func(c *Config, v int) { c.BlockPage.RateLimit = v }, intRange(0, 100000)),

		mk("unblockRequests.enabled", boolean(), true, C, 0, "people may ask for an unblock from the block page (needs blockPage.enabled)", func(c *Config, v bool) { c.UnblockRequests.Enabled = v }),
		mk("unblockRequests.rateLimit", integer(), 5, C, 0, "requests per hour per client (IPv6 per /64)", func(c *Config, v int) { c.UnblockRequests.RateLimit = v }, intRange(1, 100)),
		mk("unblockRequests.maxPending", integer(), 1000, C, 0, "pending requests kept at most", func(c *Config, v int) { c.UnblockRequests.MaxPending = v }, intRange(1, 10000)),
		mk("unblockRequests.pendingExpiry", duration(), 336*time.Hour, C, 0, "an undecided request expires after this", func(c *Config, v time.Duration) { c.UnblockRequests.PendingExpiry = v }, durMin(time.Hour)),
		mk("unblockRequests.retention", duration(), 720*time.Hour, C, 0, "decided requests are kept this long", func(c *Config, v time.Duration) { c.UnblockRequests.Retention = v }, durMin(time.Hour)),

		mk("querylog.enabled", boolean(), true, C, rst, "record queries", func(c *Config, v bool) { c.Querylog.Enabled = v }),
		mk("querylog.sink", str(), "sqlite", C, rst, "where rows go: sqlite (querylog.db) or slog (the process log)", func(c *Config, v string) { c.Querylog.Sink = v }, oneOf("sqlite", "slog")),
		mk("querylog.privacy", str(), "full", C, 0, "what is recorded", func(c *Config, v string) { c.Querylog.Privacy = v }, oneOf("full", "anonymize_client", "hide_domains", "hide_domains_clients", "nothing")),
		mk("querylog.anonymize", str(), "prefix", C, 0, "client anonymisation: prefix (IPv4 /24, IPv6 /48) or pseudonym", func(c *Config, v string) { c.Querylog.Anonymize = v }, oneOf("prefix", "pseudonym")),
		mk("querylog.retention.raw", duration(), 720*time.Hour, C, 0, "raw rows kept; 0 keeps until the size cap (per-minute totals 35 days, per-hour 400 days, per-day forever)", func(c *Config, v time.Duration) { c.Querylog.Retention.Raw = v }),
		mk("querylog.retention.maxDBBytes", bytesize(), int64(10<<30), C, 0, "size cap of querylog.db; 0 removes the cap", func(c *Config, v int64) { c.Querylog.Retention.MaxDBBytes = v }),
		mk("querylog.exclude.domains", strs(), []string{}, C, 0, "names not logged: exact, *.suffix or /regex/", func(c *Config, v []string) { c.Querylog.Exclude.Domains = v }, each(checkExcludePattern)),
		mk("querylog.exclude.clients", strs(), []string{}, C, 0, "clients not logged: IP, CIDR or client name", func(c *Config, v []string) { c.Querylog.Exclude.Clients = v }, each(checkClientPattern)),
		mk("querylog.exclude.sudn", boolean(), true, C, 0, "do not log special-use domain names", func(c *Config, v bool) { c.Querylog.Exclude.SUDN = v }),

		mk("ratelimit.enabled", boolean(), true, C, 0, "UDP rate limit on or off (TCP, DoT, DoH, DoQ, DoH3, loopback and the health name are never limited)", func(c *Config, v bool) { c.Ratelimit.Enabled = v }),
		prefixMapKey("ratelimit.ipv4", 32, map[int]int{24: 6000, 32: 600}, func(c *Config, v map[int]int) { c.Ratelimit.IPv4 = v }),
		prefixMapKey("ratelimit.ipv6", 128, map[int]int{128: 600, 64: 6000, 56: 12000}, func(c *Config, v map[int]int) { c.Ratelimit.IPv6 = v }),
		mk("ratelimit.slip", integer(), 50, C, 0, "percent of limited queries answered with TC=1 instead of dropped", func(c *Config, v int) { c.Ratelimit.Slip = v }, intRange(0, 100)),
		mk("ratelimit.maxBuckets", integer(), 65536, C, 0, "tracked client prefixes; 0 means 65536", func(c *Config, v int) {
			if v == 0 {
				v = 65536
			}
			c.Ratelimit.MaxBuckets = v
		}, intMin(0)),
		mk("ratelimit.exempt", cidrs(), []netip.Prefix{}, C, 0, "clients never limited (loopback always is)", func(c *Config, v []netip.Prefix) { c.Ratelimit.Exempt = v }),

		rawListKey("objects", "inline manifests, managed by the config file", "kind", func(c *Config, v []map[string]any) { c.Objects = v }),
		mk("settingsFile", str(), "", N, hr, "file holding cluster settings changed through the API; watched; empty makes settings read-only", func(c *Config, v string) { c.SettingsFile = v }),
		mk("objectsDir", str(), "/etc/service/objects.d", N, hr, "watched directory of YAML objects; a deleted document deletes the object", func(c *Config, v string) { c.ObjectsDir = v }),
		tsigKeysKey(),

		mk("auth.localLogin", str(), "enabled", N, rst, "local account login: enabled, admins-only or disabled", func(c *Config, v string) { c.Auth.LocalLogin = v }, oneOf("enabled", "admins-only", "disabled")),
		mk("auth.bootstrap.adminPasswordFile", str(), "", N, hr, "first-boot admin password file; SERVICE_ADMIN_PASSWORD(_FILE) takes precedence", func(c *Config, v string) { c.Auth.Bootstrap.AdminPasswordFile = v }),
		mk("auth.session.idleTimeout", duration(), 30*time.Minute, C, 0, "a session unused this long ends", func(c *Config, v time.Duration) { c.Auth.Session.IdleTimeout = v }),
		mk("auth.session.lifetime", duration(), 12*time.Hour, C, 0, "a session ends this long after login", func(c *Config, v time.Duration) { c.Auth.Session.Lifetime = v }),
		mk("auth.session.secure", kind[string]{"auto|bool", parseAutoBool, func(s string) any { return s }, true}, "auto", C, 0, "Secure cookie flag: auto (when served over TLS), true or false", func(c *Config, v string) { c.Auth.Session.Secure = v }, opt[string]{allowed: []string{"auto", "true", "false"}, check: func(string) error { return nil }}),
		mk("auth.tokens.maxLifetime", duration(), 0, N, 0, "default expiry and cap of API tokens; 0 means tokens may never expire", func(c *Config, v time.Duration) { c.Auth.Tokens.MaxLifetime = v }),
		rawListKey("auth.identityProviders", "OIDC identity providers: IdentityProvider spec plus id, decoded strictly", "id", func(c *Config, v []map[string]any) { c.Auth.IdentityProviders = v }),
		mk("auth.kubernetes.mode", str(), "sar", N, hr, "authorization of Kubernetes identities: sar (SubjectAccessReview); impersonate is not supported", func(c *Config, v string) { c.Auth.Kubernetes.Mode = v }, opt[string]{allowed: []string{"sar"}, check: func(s string) error {
			if s != "sar" {
				return fmt.Errorf("invalid value %q: only sar is supported", s)
			}
			return nil
		}}),
		mk("auth.adminSocket.path", str(), "/run/service/service.sock", N, hr, "admin socket (mode 0660); empty turns it off", func(c *Config, v string) { c.Auth.AdminSocket.Path = v }),
		mk("auth.adminSocket.group", integer(), -1, N, hr, "group id admitted to the admin socket; -1 none", func(c *Config, v int) { c.Auth.AdminSocket.Group = v }, intMin(-1)),
		rawListKey("rbac.bindings", "RoleBinding specs (subject, role, scope), decoded strictly", "", func(c *Config, v []map[string]any) { c.RBAC.Bindings = v }),
	}, append(append(notifyKeys(), externalDNSKeys()...), publishKeys()...)...)
}

func orDur(v, d time.Duration) time.Duration {
	if v == 0 {
		return d
	}
	return v
}

func checkPathPrefix(s string) error {
	if s == "" {
		return nil
	}
	if !strings.HasPrefix(s, "/") || strings.ContainsAny(s, "?# ") {
		return fmt.Errorf("invalid path prefix %q: want a path starting with /", s)
	}
	return nil
}

func checkBootstrap(l []string) error {
	for _, s := range l {
		if err := checkUpstream(s); err != nil {
			return err
		}
		if !upstreamHostIsIP(s) {
			return fmt.Errorf("invalid bootstrap upstream %q: must name an IP address", s)
		}
	}
	return nil
}

// listKey builds a host-only node key holding a list of typed items.
func listKey[T any](path string, def []T, desc string, parse func([]any) ([]T, error), format func([]T) []any, set func(*Config, []T)) *key {
	k := kind[[]T]{name: "list", env: false,
		parse: func(v any) ([]T, error) {
			l, err := asList(v)
			if err != nil {
				return nil, err
			}
			return parse(l)
		},
		format: func(v []T) any { return format(v) },
	}
	return mk(path, k, def, ScopeNode, hr, desc, set)
}

func itemErr(i int, err error) error { return fmt.Errorf("item %d: %w", i, err) }

func parseDNSListeners(l []any) ([]DNSListener, error) {
	out := make([]DNSListener, 0, len(l))
	for i, e := range l {
		m, err := asMap(e)
		if err == nil {
			err = fields(m, []string{"address", "protocols"}, "address")
		}
		if err != nil {
			return nil, itemErr(i, err)
		}
		d := DNSListener{Protocols: []string{"udp", "tcp"}}
		if d.Address, err = requiredHostPort(m["address"]); err != nil {
			return nil, itemErr(i, err)
		}
		if p, ok := m["protocols"]; ok {
			if d.Protocols, err = parseStringList(p); err != nil {
				return nil, itemErr(i, fmt.Errorf("protocols: %w", err))
			}
			if len(d.Protocols) == 0 {
				return nil, itemErr(i, errors.New("protocols: at least one of udp, tcp"))
			}
			seen := map[string]bool{}
			for _, p := range d.Protocols {
				if (p != "udp" && p != "tcp") || seen[p] {
					return nil, itemErr(i, fmt.Errorf("protocols: invalid or repeated %q: want udp, tcp", p))
				}
				seen[p] = true
			}
		}
		out = append(out, d)
	}
	return out, nil
}

func formatDNSListeners(l []DNSListener) []any {
	out := make([]any, len(l))
	for i, d := range l {
		out[i] = map[string]any{"address": d.Address, "protocols": formatStringList(d.Protocols)}
	}
	return out
}

func parseTLSFiles(v any) (TLSFiles, error) {
	m, err := asMap(v)
	if err == nil {
		err = fields(m, []string{"certFile", "keyFile"}, "certFile", "keyFile")
	}
	if err != nil {
		return TLSFiles{}, fmt.Errorf("tls: %w", err)
	}
	var t TLSFiles
	if t.CertFile, err = asString(m["certFile"]); err != nil {
		return t, fmt.Errorf("tls.certFile: %w", err)
	}
	if t.KeyFile, err = asString(m["keyFile"]); err != nil {
		return t, fmt.Errorf("tls.keyFile: %w", err)
	}
	return t, nil
}

func parseTLSListeners(l []any) ([]TLSListener, error) {
	out := make([]TLSListener, 0, len(l))
	for i, e := range l {
		m, err := asMap(e)
		if err == nil {
			err = fields(m, []string{"address", "tls"}, "address", "tls")
		}
		if err != nil {
			return nil, itemErr(i, err)
		}
		var t TLSListener
		if t.Address, err = requiredHostPort(m["address"]); err != nil {
			return nil, itemErr(i, err)
		}
		if t.TLS, err = parseTLSFiles(m["tls"]); err != nil {
			return nil, itemErr(i, err)
		}
		out = append(out, t)
	}
	return out, nil
}

func formatTLS(t TLSFiles) map[string]any {
	return map[string]any{"certFile": t.CertFile, "keyFile": t.KeyFile}
}

func formatTLSListeners(l []TLSListener) []any {
	out := make([]any, len(l))
	for i, t := range l {
		out[i] = map[string]any{"address": t.Address, "tls": formatTLS(t.TLS)}
	}
	return out
}

func parseHTTPSListeners(l []any) ([]HTTPSListener, error) {
	out := make([]HTTPSListener, 0, len(l))
	for i, e := range l {
		m, err := asMap(e)
		if err == nil {
			err = fields(m, []string{"address", "tls", "path"}, "address", "tls")
		}
		if err != nil {
			return nil, itemErr(i, err)
		}
		h := HTTPSListener{Path: "/dns-query"}
		if h.Address, err = requiredHostPort(m["address"]); err != nil {
			return nil, itemErr(i, err)
		}
		if h.TLS, err = parseTLSFiles(m["tls"]); err != nil {
			return nil, itemErr(i, err)
		}
		if p, ok := m["path"]; ok {
			if h.Path, err = asString(p); err != nil || !strings.HasPrefix(h.Path, "/") {
				return nil, itemErr(i, fmt.Errorf("path: want a path starting with /"))
			}
		}
		out = append(out, h)
	}
	return out, nil
}

func formatHTTPSListeners(l []HTTPSListener) []any {
	out := make([]any, len(l))
	for i, h := range l {
		out[i] = map[string]any{"address": h.Address, "tls": formatTLS(h.TLS), "path": h.Path}
	}
	return out
}

// rawListKey holds a list of maps passed on undecoded; idField, when set, must
// be a non-empty string unique in the list.
func rawListKey(path, desc, idField string, set func(*Config, []map[string]any)) *key {
	k := kind[[]map[string]any]{name: "list", env: false,
		parse: func(v any) ([]map[string]any, error) {
			l, err := asList(v)
			if err != nil {
				return nil, err
			}
			out := make([]map[string]any, 0, len(l))
			seen := map[string]bool{}
			for i, e := range l {
				m, err := asMap(e)
				if err != nil {
					return nil, itemErr(i, err)
				}
				if idField != "" {
					id, _ := m[idField].(string)
					if id == "" {
						return nil, itemErr(i, fmt.Errorf("field %q is required", idField))
					}
					// Manifests may repeat a kind; identity providers may not repeat an id.
					if idField == "id" && seen[id] {
						return nil, itemErr(i, fmt.Errorf("repeated id %q", id))
					}
					seen[id] = true
				}
				out = append(out, m)
			}
			return out, nil
		},
		format: func(l []map[string]any) any {
			out := make([]any, len(l))
			for i, m := range l {
				out[i] = m
			}
			return out
		},
	}
	return mk(path, k, []map[string]any{}, ScopeNode, hr, desc, set)
}

func tsigKeysKey() *key {
	algs := []string{"hmac-sha256", "hmac-sha512"}
	k := kind[[]TSIGKey]{name: "list", env: false,
		parse: func(v any) ([]TSIGKey, error) {
			l, err := asList(v)
			if err != nil {
				return nil, err
			}
			out := make([]TSIGKey, 0, len(l))
			seen := map[string]bool{}
			for i, e := range l {
				m, err := asMap(e)
				if err == nil {
					err = fields(m, []string{"name", "algorithm", "secretFile"}, "name", "algorithm", "secretFile")
				}
				if err != nil {
					return nil, itemErr(i, err)
				}
				var t TSIGKey
				if t.Name, err = parseDomain(m["name"]); err != nil {
					return nil, itemErr(i, fmt.Errorf("name: %w", err))
				}
				if seen[strings.ToLower(t.Name)] {
					return nil, itemErr(i, fmt.Errorf("repeated name %q", t.Name))
				}
				seen[strings.ToLower(t.Name)] = true
				t.Algorithm, _ = asString(m["algorithm"])
				if !slices.Contains(algs, t.Algorithm) {
					return nil, itemErr(i, fmt.Errorf("algorithm: invalid value %q: want hmac-sha256, hmac-sha512", t.Algorithm))
				}
				if t.SecretFile, err = asString(m["secretFile"]); err != nil {
					return nil, itemErr(i, fmt.Errorf("secretFile: %w", err))
				}
				out = append(out, t)
			}
			return out, nil
		},
		format: func(l []TSIGKey) any {
			out := make([]any, len(l))
			for i, t := range l {
				out[i] = map[string]any{"name": t.Name, "algorithm": t.Algorithm, "secretFile": t.SecretFile}
			}
			return out
		},
	}
	return mk("tsigKeys", k, []TSIGKey{}, ScopeNode, hr|FlagWriteOnly, "TSIG keys for zone transfers: items {name* (domain), algorithm* (hmac-sha256, hmac-sha512), secretFile*}", func(c *Config, v []TSIGKey) { c.TSIGKeys = v })
}

var groupFields = []string{"servers", "strategy", "timeout"}

func upstreamGroupsKey() *key {
	strategies := []string{"parallel_best", "strict", "random", "rtt_weighted"}
	k := kind[map[string]UpstreamGroup]{name: "map", env: false,
		parse: func(v any) (map[string]UpstreamGroup, error) {
			m, err := asMap(v)
			if err != nil {
				return nil, err
			}
			out := make(map[string]UpstreamGroup, len(m))
			for _, name := range sortedKeys(m) {
				if err := checkGroupName(name); err != nil {
					return nil, err
				}
				g, err := parseGroup(m[name], strategies)
				if err != nil {
					return nil, fmt.Errorf("group %q: %w", name, err)
				}
				out[name] = g
			}
			return out, nil
		},
		format: func(m map[string]UpstreamGroup) any {
			out := make(map[string]any, len(m))
			for name, g := range m {
				out[name] = map[string]any{"servers": formatStringList(g.Servers), "strategy": g.Strategy, "timeout": formatDuration(g.Timeout)}
			}
			return out
		},
	}
	def := map[string]UpstreamGroup{"default": {Servers: []string{"1.1.1.1:53", "9.9.9.9:53"}, Strategy: "parallel_best", Timeout: 2 * time.Second}}
	key := mk("upstreams.groups", k, def, ScopeCluster, 0,
		"named upstream groups: name to {servers* (host:port, IP or udp/tcp/tls/https/quic/h3 URL), strategy (default parallel_best), timeout (default 2s)}; merged over the built-in default group",
		func(c *Config, v map[string]UpstreamGroup) { c.Upstreams.Groups = v }, opt[map[string]UpstreamGroup]{allowed: strategies, check: func(map[string]UpstreamGroup) error { return nil }})
	key.isMap, key.mergeDefault = true, true
	return key
}

func checkGroupName(s string) error {
	if s == "" || len(s) > 63 {
		return fmt.Errorf("invalid group name %q", s)
	}
	for i, c := range s {
		ok := (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || (c >= '0' && c <= '9') || (i > 0 && (c == '-' || c == '_' || c == '.'))
		if !ok {
			return fmt.Errorf("invalid group name %q", s)
		}
	}
	return nil
}

func parseGroup(v any, strategies []string) (UpstreamGroup, error) {
	g := UpstreamGroup{Strategy: "parallel_best", Timeout: 2 * time.Second}
	m, err := asMap(v)
	if err == nil {
		err = fields(m, groupFields, "servers")
	}
	if err != nil {
		return g, err
	}
	if g.Servers, err = parseStringList(m["servers"]); err != nil {
		return g, fmt.Errorf("servers: %w", err)
	}
	if len(g.Servers) == 0 {
		return g, errors.New("servers: at least one is required")
	}
	for _, s := range g.Servers {
		if err := checkUpstream(s); err != nil {
			return g, fmt.Errorf("servers: %w", err)
		}
	}
	if s, ok := m["strategy"]; ok {
		g.Strategy, _ = asString(s)
		if !slices.Contains(strategies, g.Strategy) {
			return g, fmt.Errorf("strategy: invalid value %q: want one of %s", g.Strategy, strings.Join(strategies, ", "))
		}
	}
	if t, ok := m["timeout"]; ok {
		if g.Timeout, err = parseDuration(t); err != nil {
			return g, fmt.Errorf("timeout: %w", err)
		}
		if g.Timeout == 0 {
			return g, errors.New("timeout: must be above 0")
		}
	}
	return g, nil
}

func conditionalKey() *key {
	k := kind[map[string]string]{name: "map", env: false,
		parse: func(v any) (map[string]string, error) {
			m, err := asMap(v)
			if err != nil {
				return nil, err
			}
			out := make(map[string]string, len(m))
			for _, suffix := range sortedKeys(m) {
				if err := checkDomain(suffix); err != nil {
					return nil, fmt.Errorf("suffix: %w", err)
				}
				g, ok := m[suffix].(string)
				if !ok || checkGroupName(g) != nil {
					return nil, fmt.Errorf("suffix %q: want a group name", suffix)
				}
				canon := strings.ToLower(strings.TrimSuffix(suffix, ".")) + "."
				if _, dup := out[canon]; dup {
					return nil, fmt.Errorf("suffix %q: repeated", suffix)
				}
				out[canon] = g
			}
			return out, nil
		},
		format: func(m map[string]string) any {
			out := make(map[string]any, len(m))
			for s, g := range m {
				out[s] = g
			}
			return out
		},
	}
	key := mk("upstreams.conditional", k, map[string]string{}, ScopeCluster, 0, "name suffix to upstream group; the longest suffix wins; answers are never cached", func(c *Config, v map[string]string) { c.Upstreams.Conditional = v })
	key.isMap = true
	return key
}

// prefixMapKey holds prefix length to queries per minute, merged over defaults.
func prefixMapKey(path string, maxBits int, def map[int]int, set func(*Config, map[int]int)) *key {
	k := kind[map[int]int]{name: "map", env: false,
		parse: func(v any) (map[int]int, error) {
			m, err := asMap(v)
			if err != nil {
				return nil, err
			}
			out := make(map[int]int, len(m))
			for ks, qv := range m {
				bits, err := strconv.Atoi(ks)
				if err != nil || bits < 0 || bits > maxBits {
					return nil, fmt.Errorf("invalid prefix length %q: want 0 to %d", ks, maxBits)
				}
				n, err := parseInt(qv)
				if err != nil || n < 0 || n > 1<<31 {
					return nil, fmt.Errorf("prefix %d: invalid queries per minute %v", bits, qv)
				}
				out[bits] = int(n)
			}
			return out, nil
		},
		format: func(m map[int]int) any {
			out := make(map[string]any, len(m))
			for b, n := range m {
				out[strconv.Itoa(b)] = json.Number(strconv.Itoa(n))
			}
			return out
		},
	}
	desc := fmt.Sprintf("prefix length (0 to %d) to queries per minute; merged with the defaults; 0 turns a level off", maxBits)
	key := mk(path, k, def, ScopeCluster, 0, desc, func(c *Config, v map[int]int) {
		out := make(map[int]int, len(v))
		for b, n := range v {
			if n > 0 {
				out[b] = n
			}
		}
		set(c, out)
	}, opt[map[int]int]{rng: fmt.Sprintf("keys 0 to %d", maxBits), check: func(map[int]int) error { return nil }})
	key.isMap, key.mergeDefault = true, true
	return key
}
