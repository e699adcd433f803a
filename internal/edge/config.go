// Package edge is `svc edge`: it renders a dnsdist configuration for a
// load balancer in front of the nodes (Lua for dnsdist 1.7-1.9, YAML for
// 2.x) and supervises the dnsdist process, following the nodes (backends)
// and their zones (which names go to the authoritative pool) at runtime
// through dnsdist's console.
package edge

import (
	"errors"
	"fmt"
	"net"
	"net/netip"
	"slices"
	"strconv"
	"strings"
	"time"
)

// Pool names in the rendered configuration.
const (
	PoolAuthoritative = "authoritative"
	PoolResolver      = "resolver"
)

// HealthName is the nodes' internal health name, asked as TXT.
const HealthName = "health.service.internal."

// Proxy protocol TLV types the nodes read (dataplane/proxyproto).
const (
	tlvSecret   = 0xE0
	tlvClientID = 0xE1
)

// cacheKeyOption is the EDNS option (local/experimental range, RFC 6891
// 9) the edge adds to queries of the cached pool with the client's
// address and client ID, so dnsdist's packet cache, which hashes the
// query's options, never serves one client's answer to another.
const cacheKeyOption = 65001

// Protocols the edge can accept queries on.
var Protocols = []string{"do53", "dot", "doh", "doq", "doh3"}

// Policies are dnsdist's built-in load-balancing policies.
var Policies = []string{"leastOutstanding", "firstAvailable", "roundrobin", "wrandom", "whashed", "chashed"}

// Config is everything a rendering depends on: the flags of `svc edge`
// plus the backends and zones known at render time and the generated keys.
type Config struct {
	Renderer string // "lua" or "yaml"
	// Version is the dnsdist version the Lua rendering targets ("1.7",
	// "1.8", "1.9"; empty: 1.7): DoQ and DoH3 need 1.9.
	Version string

	Listen    string   // address (host or host:port) for Do53
	Protocols []string // subset of Protocols
	DoT, DoH  string   // listen addresses for DoT and DoH (default host:853, host:443)
	DoQ, DoH3 string
	TLSDir    string // tls.crt and tls.key for DoT/DoH/DoQ/DoH3
	// ClientIDDomain: a DoT SNI "<id>.<ClientIDDomain>" carries client
	// ID <id> (DoH carries it as /dns-query/<id>).
	ClientIDDomain string

	ACL     []string // client networks allowed (empty: dnsdist's private defaults)
	Threads int

	Backends    []Backend
	BackendPort int
	Zones       []string // authoritative zones (FQDN)

	PoolAuthoritative string // load-balancing policy
	PoolResolver      string

	AuthoritativeCache bool // cache the authoritative pool (keyed per client)
	CacheSize          int
	CacheMaxTTL        int

	Dynblocks             bool
	DynblocksQPS          int
	DynblocksNXDomainRate int

	EBPF bool

	// TransferSources may ask for zone transfers (AXFR, IXFR) through the
	// edge; others get REFUSED there. Empty: transfers pass to the nodes,
	// whose own transfer ACL decides (they see the real client).
	TransferSources []string

	ProxySecret []byte // the nodes' PROXY secret (TLV 0xE0); nil on loopback

	Console    string // host:port
	ConsoleKey []byte // 32 bytes
	API        string // host:port of dnsdist's web server and API
	APIKey     string

	HealthInterval time.Duration // health check interval (1s)
}

// Backend is one node's DNS listener.
type Backend struct {
	Name    string
	Address netip.AddrPort
}

// Defaults are the flag defaults of the spec.
func Defaults() Config {
	return Config{
		Renderer: "lua", Listen: "0.0.0.0", Protocols: []string{"do53"}, Threads: 2,
		BackendPort: 5353, PoolAuthoritative: "leastOutstanding", PoolResolver: "chashed",
		AuthoritativeCache: true, CacheSize: 200000, CacheMaxTTL: 86400,
		DynblocksQPS: 50, DynblocksNXDomainRate: 20,
		Console: "127.0.0.1:5199", API: "127.0.0.1:8083", HealthInterval: time.Second,
	}
}

// Validate says what is wrong with c and how to fix it.
func (c *Config) Validate() error {
	var errs []error
	if c.Renderer != "lua" && c.Renderer != "yaml" {
		errs = append(errs, fmt.Errorf("--renderer %q: want lua (dnsdist 1.7-1.9) or yaml (dnsdist 2.x)", c.Renderer))
	}
	if len(c.Protocols) == 0 {
		errs = append(errs, errors.New("--protocols: name at least one of do53, dot, doh, doq, doh3"))
	}
	for _, p := range c.Protocols {
		if !slices.Contains(Protocols, p) {
			errs = append(errs, fmt.Errorf("--protocols: unknown protocol %q (do53, dot, doh, doq, doh3)", p))
			continue
		}
		if p != "do53" && c.TLSDir == "" {
			errs = append(errs, fmt.Errorf("--protocols %s needs --tls-dir with tls.crt and tls.key", p))
		}
		if (p == "doq" || p == "doh3") && c.Renderer == "lua" && c.luaVersion() < 109 {
			errs = append(errs, fmt.Errorf("--protocols %s needs dnsdist 1.9 or later (this dnsdist is %s): drop %s or install a newer dnsdist", p, c.versionName(), p))
		}
	}
	if _, _, err := c.listenHostPort(); err != nil {
		errs = append(errs, err)
	}
	for _, a := range c.ACL {
		if _, err := netip.ParsePrefix(a); err != nil {
			if _, err2 := netip.ParseAddr(a); err2 != nil {
				errs = append(errs, fmt.Errorf("--acl %q: want a network like 10.0.0.0/8 or an address", a))
			}
		}
	}
	for _, a := range c.TransferSources {
		if _, err := netip.ParsePrefix(a); err != nil {
			if _, err2 := netip.ParseAddr(a); err2 != nil {
				errs = append(errs, fmt.Errorf("--transfer-source %q: want a network like 192.0.2.0/24 or an address", a))
			}
		}
	}
	if c.Threads < 1 || c.Threads > 64 {
		errs = append(errs, fmt.Errorf("--threads %d: want 1 to 64", c.Threads))
	}
	for _, p := range []struct{ flag, v string }{{"--pool-authoritative", c.PoolAuthoritative}, {"--pool-resolver", c.PoolResolver}} {
		if !slices.Contains(Policies, p.v) {
			errs = append(errs, fmt.Errorf("%s %q: want one of %s", p.flag, p.v, strings.Join(Policies, ", ")))
		}
	}
	if c.CacheSize < 0 {
		errs = append(errs, fmt.Errorf("--cache-size %d: want 0 (no cache) or more", c.CacheSize))
	}
	if c.Dynblocks && (c.DynblocksQPS < 1 || c.DynblocksNXDomainRate < 1) {
		errs = append(errs, errors.New("--dynblocks-qps and --dynblocks-nxdomain-rate must be at least 1"))
	}
	if len(c.ConsoleKey) != 32 {
		errs = append(errs, errors.New("console key: want 32 bytes"))
	}
	for _, a := range []struct{ flag, v string }{{"--console", c.Console}, {"--api", c.API}} {
		if _, err := netip.ParseAddrPort(a.v); err != nil {
			errs = append(errs, fmt.Errorf("%s %q: want ip:port, e.g. 127.0.0.1:5199", a.flag, a.v))
		}
	}
	if c.ProxySecret != nil && len(c.ProxySecret) < 32 {
		errs = append(errs, errors.New("--proxy-protocol-secret-file: the secret must be at least 32 bytes, as the nodes require"))
	}
	return errors.Join(errs...)
}

// luaVersion is Version as major*100+minor (107 for 1.7).
func (c *Config) luaVersion() int {
	v := c.Version
	if v == "" {
		return 107
	}
	parts := strings.SplitN(v, ".", 3)
	maj, _ := strconv.Atoi(parts[0])
	mnr := 0
	if len(parts) > 1 {
		mnr, _ = strconv.Atoi(parts[1])
	}
	return maj*100 + mnr
}

func (c *Config) versionName() string {
	if c.Version == "" {
		return "1.7"
	}
	return c.Version
}

// listenHostPort splits --listen; the port defaults to 53.
func (c *Config) listenHostPort() (string, int, error) {
	l := c.Listen
	if l == "" {
		l = "0.0.0.0"
	}
	if a, err := netip.ParseAddr(strings.Trim(l, "[]")); err == nil {
		return a.String(), 53, nil
	}
	host, port, err := net.SplitHostPort(l)
	if err != nil {
		return "", 0, fmt.Errorf("--listen %q: want an address or address:port", c.Listen)
	}
	p, err := strconv.Atoi(port)
	if err != nil || p < 0 || p > 65535 {
		return "", 0, fmt.Errorf("--listen %q: bad port", c.Listen)
	}
	if _, err := netip.ParseAddr(host); err != nil {
		return "", 0, fmt.Errorf("--listen %q: want an IP address", c.Listen)
	}
	return host, p, nil
}

// bindAddr is the listen address of protocol p.
func (c *Config) bindAddr(p string) string {
	host, port, _ := c.listenHostPort()
	def := map[string]int{"do53": port, "dot": 853, "doh": 443, "doq": 853, "doh3": 443}[p]
	set := map[string]string{"dot": c.DoT, "doh": c.DoH, "doq": c.DoQ, "doh3": c.DoH3}[p]
	if set != "" {
		return set
	}
	return net.JoinHostPort(host, strconv.Itoa(def))
}

// ParseBackends reads --backends: host[:port] or name=host[:port], comma
// separated; the port defaults to port.
func ParseBackends(list []string, port int) ([]Backend, error) {
	var out []Backend
	for _, s := range list {
		s = strings.TrimSpace(s)
		if s == "" {
			continue
		}
		name := ""
		if i := strings.IndexByte(s, '='); i > 0 {
			name, s = s[:i], s[i+1:]
		}
		ap, err := netip.ParseAddrPort(s)
		if err != nil {
			a, err2 := netip.ParseAddr(strings.Trim(s, "[]"))
			if err2 != nil {
				return nil, fmt.Errorf("--backends %q: want ip[:port] or name=ip[:port] (host names are not resolved: use --backends-from kubernetes for a Service)", s)
			}
			ap = netip.AddrPortFrom(a, uint16(port))
		}
		if name == "" {
			name = ap.String()
		}
		out = append(out, Backend{Name: name, Address: ap})
	}
	SortBackends(out)
	return out, nil
}

// SortBackends orders backends by address, so renderings are stable.
func SortBackends(b []Backend) {
	slices.SortFunc(b, func(x, y Backend) int { return x.Address.Compare(y.Address) })
}
