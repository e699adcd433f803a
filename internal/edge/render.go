package edge

import (
	"bytes"
	"crypto/sha256"
	"encoding/base64"
	"fmt"
	"net/netip"
	"path/filepath"
	"strconv"
	"strings"

	"golang.org/x/crypto/scrypt"
)

// Render returns the dnsdist configuration for c and its file name
// (dnsdist picks the format by extension: .conf is Lua, .yml is YAML).
func Render(c *Config) (body []byte, name string, err error) {
	if err := c.Validate(); err != nil {
		return nil, "", err
	}
	if c.Renderer == "yaml" {
		return renderYAML(c), "dnsdist.yml", nil
	}
	return renderLua(c), "dnsdist.conf", nil
}

// luaQuote quotes s as a Lua string literal; bytes outside printable
// ASCII become decimal escapes, so any secret survives.
func luaQuote(s string) string {
	var b strings.Builder
	b.WriteByte('"')
	for i := 0; i < len(s); i++ {
		c := s[i]
		switch {
		case c == '"' || c == '\\':
			b.WriteByte('\\')
			b.WriteByte(c)
		case c >= 0x20 && c < 0x7f:
			b.WriteByte(c)
		default:
			fmt.Fprintf(&b, "\\%03d", c)
		}
	}
	b.WriteByte('"')
	return b.String()
}

func luaList(items []string) string {
	q := make([]string, len(items))
	for i, s := range items {
		q[i] = luaQuote(s)
	}
	return "{" + strings.Join(q, ", ") + "}"
}

func (c *Config) tlsFiles() (cert, key string) {
	return filepath.Join(c.TLSDir, "tls.crt"), filepath.Join(c.TLSDir, "tls.key")
}

func (c *Config) has(p string) bool {
	for _, x := range c.Protocols {
		if x == p {
			return true
		}
	}
	return false
}

// consoleACL lets the supervisor (same host or pod) reach the console.
var consoleACL = []string{"127.0.0.0/8", "::1/128"}

// cacheServer is the name of a backend's second server entry, the one
// in the cached authoritative pool: it adds the client's whole address
// as EDNS Client Subnet, which dnsdist's packet cache hashes, so cached
// answers are per client (views and per-policy rewrites stay correct).
func cacheServer(name string) string { return name + "#auth" }

// serverLua is the newServer call for backend b (auth: the entry of the
// cached authoritative pool).
func (c *Config) serverLua(b Backend, auth bool) string {
	name, pools := b.Name, luaList([]string{PoolAuthoritative, PoolResolver})
	ecs := ""
	if c.authCached() {
		pools = luaList([]string{PoolResolver})
		if auth {
			// disableZeroScope: an answer without an ECS scope would
			// otherwise be cached for every client (zero scope).
			name, pools, ecs = cacheServer(b.Name), luaList([]string{PoolAuthoritative}), ", useClientSubnet=true, disableZeroScope=true"
		}
	}
	iv := int(c.HealthInterval.Seconds())
	if iv < 1 {
		iv = 1
	}
	// weight: chashed and whashed put a server on their hash ring weight
	// times; with dnsdist's default of 1 point each, two backends split
	// the names in a random, often very uneven share (a node may get
	// almost none). Equal weights change nothing for the other policies.
	return fmt.Sprintf("newServer({address=%s, name=%s, pool=%s, weight=%d, useProxyProtocol=true%s, checkName=%s, checkType=\"TXT\", checkInterval=%d, maxCheckFailures=1, rise=1})",
		luaQuote(b.Address.String()), luaQuote(name), pools, serverWeight, ecs, luaQuote(HealthName), iv)
}

// serverWeight is every backend's dnsdist weight (see serverLua).
const serverWeight = 1000

// authCached: the authoritative pool has a packet cache.
func (c *Config) authCached() bool { return c.AuthoritativeCache && c.CacheSize > 0 }

// ServerCommands are the console statements that add backend b.
func (c *Config) ServerCommands(b Backend) []string {
	cmds := []string{c.serverLua(b, false)}
	if c.authCached() {
		cmds = append(cmds, c.serverLua(b, true))
	}
	return cmds
}

// ServerNames are the dnsdist server names of backend b.
func (c *Config) ServerNames(b Backend) []string {
	if c.authCached() {
		return []string{b.Name, cacheServer(b.Name)}
	}
	return []string{b.Name}
}

// zonesRuleIndex is the position of the edge-zones rule: after the
// edge-secret and edge-client-id rules when they are rendered.
func (c *Config) zonesRuleIndex() int {
	n := 0
	if len(c.TransferSources) > 0 {
		n++
	}
	if c.ProxySecret != nil {
		n++
	}
	if c.encrypted() {
		n++
	}
	return n
}

func (c *Config) encrypted() bool {
	return c.has("dot") || c.has("doh") || c.has("doq") || c.has("doh3")
}

// ZonesCommand is the console statement that replaces the zones rule:
// the new rule is added last and moved back before edge-resolver, so a
// query sees either the old zones or the new ones.
func (c *Config) ZonesCommand(zones []string) string {
	var b strings.Builder
	b.WriteString("local z = newSuffixMatchNode() ")
	for _, z := range zones {
		fmt.Fprintf(&b, "z:add(%s) ", luaQuote(z))
	}
	i := c.zonesRuleIndex()
	fmt.Fprintf(&b, `addAction(SuffixMatchNodeRule(z, true), PoolAction("%s"), {name="edge-zones"}) mvRule(%d, %d) rmRule(%d)`, PoolAuthoritative, i+2, i, i+1)
	return b.String()
}

func renderLua(c *Config) []byte {
	var b bytes.Buffer
	w := func(format string, args ...any) { fmt.Fprintf(&b, format+"\n", args...) }
	w("-- dnsdist configuration rendered by svc edge (lua, dnsdist %s). Do not edit:", c.versionName())
	w("-- svc edge run renders it again on every start. It holds the console and")
	w("-- API keys: keep it private (mode 0600).")
	w("setSecurityPollSuffix(\"\")")
	w("")
	w("-- Frontends")
	addr := c.bindAddr("do53")
	for i := 0; i < c.Threads; i++ {
		fn := "addLocal"
		if i == 0 {
			fn = "setLocal"
		}
		w("%s(%s, {reusePort=true})", fn, luaQuote(addr))
	}
	cert, key := c.tlsFiles()
	if c.has("dot") {
		w("addTLSLocal(%s, %s, %s, {provider=\"openssl\", reusePort=true})", luaQuote(c.bindAddr("dot")), luaQuote(cert), luaQuote(key))
	}
	if c.has("doh") {
		w("addDOHLocal(%s, %s, %s, {\"/dns-query\"}, {reusePort=true, exactPathMatching=false})", luaQuote(c.bindAddr("doh")), luaQuote(cert), luaQuote(key))
	}
	if c.has("doq") {
		w("addDOQLocal(%s, %s, %s, {reusePort=true})", luaQuote(c.bindAddr("doq")), luaQuote(cert), luaQuote(key))
	}
	if c.has("doh3") {
		w("addDOH3Local(%s, %s, %s, {reusePort=true})", luaQuote(c.bindAddr("doh3")), luaQuote(cert), luaQuote(key))
	}
	w("setMaxTCPClientThreads(%d)", max(c.Threads, 2))
	if len(c.ACL) > 0 {
		w("setACL(%s)", luaList(c.ACL))
	}
	w("")
	w("-- Console (the supervisor adds and removes backends and zones here) and API")
	w("controlSocket(%s)", luaQuote(c.Console))
	w("setKey(%s)", luaQuote(base64.StdEncoding.EncodeToString(c.ConsoleKey)))
	w("setConsoleACL(%s)", luaList(consoleACL))
	w("setConsoleConnectionsLogging(false)")
	w("webserver(%s)", luaQuote(c.API))
	h := hashPassword(c.APIKey)
	w("setWebserverConfig({apiKey=%s, password=%s, acl=%s})", luaQuote(h), luaQuote(h), luaQuote(strings.Join(apiACL(c.API), ", ")))
	w("")
	w("-- Backends: the nodes, with PROXY v2 so they see the real client, checked")
	w("-- with the internal health name")
	w("setServFailWhenNoServer(true)")
	if c.authCached() {
		w("setECSSourcePrefixV4(32)")
		w("setECSSourcePrefixV6(128)")
		w("setECSOverride(true)")
	}
	for _, be := range c.Backends {
		for _, cmd := range c.ServerCommands(be) {
			w("%s", cmd)
		}
	}
	w("setPoolServerPolicy(%s, %s)", c.PoolAuthoritative, luaQuote(PoolAuthoritative))
	w("setPoolServerPolicy(%s, %s)", c.PoolResolver, luaQuote(PoolResolver))
	if c.authCached() {
		w("")
		w("-- Packet cache on the authoritative pool only, keyed per client (ECS of")
		w("-- the whole address); queries with a client ID skip it. The resolver")
		w("-- pool is never cached here: its answers depend on each client's policy.")
		w("edgeCache = newPacketCache(%d, {maxTTL=%d, maxNegativeTTL=3600, parseECS=true})", c.CacheSize, c.CacheMaxTTL)
		w("getPool(%s):setCache(edgeCache)", luaQuote(PoolAuthoritative))
	}
	w("")
	w("-- Rules: PROXY TLVs (secret 0xE0, client ID 0xE1), zones to the")
	w("-- authoritative pool, the rest to the resolver pool")
	if len(c.TransferSources) > 0 {
		w("edgeTransferSources = newNMG()")
		for _, a := range c.TransferSources {
			w("edgeTransferSources:addMask(%s)", luaQuote(a))
		}
		w("addAction(AndRule({OrRule({QTypeRule(DNSQType.AXFR), QTypeRule(DNSQType.IXFR)}), NotRule(NetmaskGroupRule(edgeTransferSources, true))}), RCodeAction(DNSRCode.REFUSED), {name=\"edge-transfer\"})")
	}
	secret := ""
	if c.ProxySecret != nil {
		secret = luaQuote(string(c.ProxySecret))
		w("addAction(AllRule(), SetProxyProtocolValuesAction({[%d]=%s}), {name=\"edge-secret\"})", tlvSecret, secret)
	}
	if c.encrypted() {
		w("edgeSecret = %s", orNil(secret))
		w("edgeIDDomain = %s", luaQuote(strings.ToLower("."+strings.Trim(c.ClientIDDomain, "."))))
		w("%s", luaClientID)
		var sel []string
		if c.has("doh") {
			sel = append(sel, `HTTPPathRegexRule("^/dns-query/")`)
		}
		for _, p := range []string{"dot", "doq", "doh3"} {
			if c.has(p) {
				ap, _ := netip.ParseAddrPort(c.bindAddr(p))
				sel = append(sel, fmt.Sprintf("DSTPortRule(%d)", ap.Port()))
			}
		}
		rule := sel[0]
		if len(sel) > 1 {
			rule = "OrRule({" + strings.Join(sel, ", ") + "})"
		}
		w("addAction(%s, LuaAction(edgeClientID), {name=\"edge-client-id\"})", rule)
	}
	w("edgeZones = newSuffixMatchNode()")
	for _, z := range c.Zones {
		w("edgeZones:add(%s)", luaQuote(z))
	}
	w("addAction(SuffixMatchNodeRule(edgeZones, true), PoolAction(%s), {name=\"edge-zones\"})", luaQuote(PoolAuthoritative))
	w("addAction(AllRule(), PoolAction(%s), {name=\"edge-resolver\"})", luaQuote(PoolResolver))
	if c.Dynblocks {
		w("")
		w("-- Dynamic blocks: clients above --dynblocks-qps queries or")
		w("-- --dynblocks-nxdomain-rate NXDOMAIN answers per second (over 10 s) are")
		w("-- dropped for 60 s")
		w("edgeDynBlocks = dynBlockRulesGroup()")
		w("edgeDynBlocks:setQueryRate(%d, 10, \"edge: query rate above %d/s\", 60)", c.DynblocksQPS, c.DynblocksQPS)
		w("edgeDynBlocks:setRCodeRate(DNSRCode.NXDOMAIN, %d, 10, \"edge: NXDOMAIN rate above %d/s\", 60)", c.DynblocksNXDomainRate, c.DynblocksNXDomainRate)
		if c.EBPF {
			w("edgeBPF = newBPFFilter(65536, 65536, 1024)")
			w("setDefaultBPFFilter(edgeBPF)")
			w("edgeDynBPF = newDynBPFFilter(edgeBPF)")
			w("registerDynBPFFilter(edgeDynBPF)")
		}
		w("function maintenance()")
		w("  edgeDynBlocks:apply()")
		w("end")
	} else if c.EBPF {
		w("edgeBPF = newBPFFilter(65536, 65536, 1024)")
		w("setDefaultBPFFilter(edgeBPF)")
	}
	return b.Bytes()
}

// hashPassword is dnsdist's hashPassword(): scrypt with N=2^10, r=8,
// p=1, a 16-byte salt and a 32-byte key, so the configuration never holds
// the API key itself. The salt derives from the key: renderings are
// reproducible and two keys never share one.
func hashPassword(key string) string {
	sum := sha256.Sum256([]byte("svc edge api key salt\x00" + key))
	salt := sum[:16]
	out, err := scrypt.Key([]byte(key), salt, 1<<10, 8, 1, 32)
	if err != nil {
		panic(err) // fixed, valid parameters
	}
	return "$scrypt$ln=10,p=1,r=8$" + base64.StdEncoding.EncodeToString(salt) + "$" + base64.StdEncoding.EncodeToString(out)
}

func orNil(s string) string {
	if s == "" {
		return "nil"
	}
	return s
}

// luaClientID runs only for DoT/DoH/DoQ/DoH3 queries: it carries the
// client ID (DoH path /dns-query/<id>, or TLS server name
// <id>.<--client-id-domain>) to the nodes in TLV 0xE1, and keeps such
// queries out of the packet cache.
const luaClientID = `function edgeClientID(dq)
  local id = nil
  local path = dq:getHTTPPath()
  if path ~= nil and path ~= "" then
    id = string.match(path, "^/dns%-query/([%w%-]+)$")
  end
  if id == nil and edgeIDDomain ~= "." then
    local sni = dq:getServerNameIndication()
    if sni ~= nil and #sni > #edgeIDDomain and string.lower(string.sub(sni, -#edgeIDDomain)) == edgeIDDomain then
      local label = string.sub(sni, 1, #sni - #edgeIDDomain)
      if string.match(label, "^[%w%-]+$") then id = label end
    end
  end
  if id == nil or #id > 63 then
    return DNSAction.None, ""
  end
  local v = {[225]=id}
  if edgeSecret ~= nil then v[224] = edgeSecret end
  dq:setProxyProtocolValues(v)
  dq.skipCache = true
  return DNSAction.None, ""
end`

// apiACL allows the API's own host (and loopback) to reach it.
func apiACL(api string) []string {
	acl := []string{"127.0.0.1/32", "::1/128"}
	if ap, err := netip.ParseAddrPort(api); err == nil && !ap.Addr().IsLoopback() && !ap.Addr().IsUnspecified() {
		acl = append(acl, netip.PrefixFrom(ap.Addr(), ap.Addr().BitLen()).String())
	}
	return acl
}

func yq(s string) string { return strconv.Quote(s) }

// yamlRcodeNXDomain is NXDOMAIN as a dynamic rule's rcode: a name since
// dnsdist 2.1, a number in 2.0 (dnsdist's settings definitions, changes
// of dynamic_rule). An unknown version (render without dnsdist
// installed) gets the 2.1 form.
func (c *Config) yamlRcodeNXDomain() string {
	if c.Version == "2.0" || strings.HasPrefix(c.Version, "2.0.") {
		return "3"
	}
	return "NXDomain"
}

func yList(items []string) string {
	q := make([]string, len(items))
	for i, s := range items {
		q[i] = yq(s)
	}
	return "[" + strings.Join(q, ", ") + "]"
}

// renderYAML writes dnsdist 2.x's YAML format (field names from dnsdist's
// settings definitions). Lua functions are inline.
func renderYAML(c *Config) []byte {
	var b bytes.Buffer
	w := func(format string, args ...any) { fmt.Fprintf(&b, format+"\n", args...) }
	w("# dnsdist configuration rendered by svc edge (yaml, dnsdist 2.x). Do not edit:")
	w("# svc edge run renders it again on every start. It holds the console and")
	w("# API keys: keep it private (mode 0600).")
	w("security_polling:")
	w("  suffix: \"\"")
	w("binds:")
	w("  - listen_address: %s", yq(c.bindAddr("do53")))
	w("    protocol: Do53")
	w("    reuseport: true")
	w("    threads: %d", c.Threads)
	cert, key := c.tlsFiles()
	for _, p := range []struct{ proto, name string }{{"dot", "DoT"}, {"doh", "DoH"}, {"doq", "DoQ"}, {"doh3", "DoH3"}} {
		if !c.has(p.proto) {
			continue
		}
		w("  - listen_address: %s", yq(c.bindAddr(p.proto)))
		w("    protocol: %s", p.name)
		w("    reuseport: true")
		w("    tls:")
		w("      certificates:")
		w("        - certificate: %s", yq(cert))
		w("          key: %s", yq(key))
		if p.proto == "doh" {
			w("    doh:")
			w("      paths: [\"/dns-query\"]")
			w("      exact_path_matching: false")
		}
	}
	if len(c.ACL) > 0 {
		w("acl: %s", yList(c.ACL))
	}
	w("tuning:")
	w("  tcp:")
	w("    worker_threads: %d", max(c.Threads, 2))
	w("console:")
	w("  listen_address: %s", yq(c.Console))
	w("  key: %s", yq(base64.StdEncoding.EncodeToString(c.ConsoleKey)))
	w("  acl: %s", yList(consoleACL))
	w("  log_connections: false")
	w("webserver:")
	w("  listen_addresses: [%s]", yq(c.API))
	h := hashPassword(c.APIKey)
	w("  api_key: %s", yq(h))
	w("  password: %s", yq(h))
	w("  acl: %s", yList(apiACL(c.API)))
	w("load_balancing_policies:")
	w("  servfail_on_no_server: true")
	if c.authCached() {
		w("edns_client_subnet:")
		w("  override_existing: true")
		w("  source_prefix_v4: 32")
		w("  source_prefix_v6: 128")
	}
	iv := max(int(c.HealthInterval.Seconds()), 1)
	if len(c.Backends) == 0 {
		w("backends: []")
	} else {
		w("backends:")
	}
	for _, be := range c.Backends {
		entries := []struct {
			name  string
			pools []string
			ecs   bool
		}{{be.Name, []string{PoolAuthoritative, PoolResolver}, false}}
		if c.authCached() {
			entries = []struct {
				name  string
				pools []string
				ecs   bool
			}{{be.Name, []string{PoolResolver}, false}, {cacheServer(be.Name), []string{PoolAuthoritative}, true}}
		}
		for _, e := range entries {
			w("  - address: %s", yq(be.Address.String()))
			w("    name: %s", yq(e.name))
			w("    protocol: Do53")
			w("    pools: %s", yList(e.pools))
			w("    use_proxy_protocol: true")
			if e.ecs {
				w("    use_client_subnet: true")
				w("    disable_zero_scope: true")
			}
			w("    health_checks:")
			w("      mode: auto")
			w("      qname: %s", yq(HealthName))
			w("      qtype: TXT")
			w("      interval: %d", iv)
			w("      max_failures: 1")
			w("      rise: 1")
		}
	}
	w("pools:")
	w("  - name: %s", PoolAuthoritative)
	w("    policy: %s", c.PoolAuthoritative)
	if c.authCached() {
		w("    packet_cache: edge")
	}
	w("  - name: %s", PoolResolver)
	w("    policy: %s", c.PoolResolver)
	if c.authCached() {
		w("packet_caches:")
		w("  - name: edge")
		w("    size: %d", c.CacheSize)
		w("    max_ttl: %d", c.CacheMaxTTL)
		w("    max_negative_ttl: 3600")
		w("    parse_ecs: true")
	}
	w("query_rules:")
	if len(c.TransferSources) > 0 {
		w("  - name: edge-transfer")
		w("    selector:")
		w("      type: And")
		w("      selectors:")
		w("        - type: Or")
		w("          selectors:")
		w("            - {type: QType, qtype: AXFR}")
		w("            - {type: QType, qtype: IXFR}")
		w("        - type: Not")
		w("          selector:")
		w("            type: NetmaskGroup")
		w("            netmasks: %s", yList(c.TransferSources))
		w("    action:")
		w("      type: RCode")
		w("      rcode: Refused")
	}
	if c.ProxySecret != nil {
		w("  - name: edge-secret")
		w("    selector:")
		w("      type: All")
		w("    action:")
		w("      type: SetProxyProtocolValues")
		w("      values:")
		w("        - key: %d", tlvSecret)
		w("          value: %s", yq(string(c.ProxySecret)))
	}
	if c.encrypted() {
		secret := "nil"
		if c.ProxySecret != nil {
			secret = luaQuote(string(c.ProxySecret))
		}
		code := fmt.Sprintf("edgeSecret = %s\nedgeIDDomain = %s\n%s\nreturn edgeClientID", secret,
			luaQuote(strings.ToLower("."+strings.Trim(c.ClientIDDomain, "."))), luaClientID)
		w("  - name: edge-client-id")
		w("    selector:")
		w("      type: Or")
		w("      selectors:")
		if c.has("doh") {
			w("        - type: HTTPPathRegex")
			w("          expression: \"^/dns-query/\"")
		}
		for _, p := range []string{"dot", "doq", "doh3"} {
			if c.has(p) {
				ap, _ := netip.ParseAddrPort(c.bindAddr(p))
				w("        - type: DSTPort")
				w("          port: %d", ap.Port())
			}
		}
		w("    action:")
		w("      type: Lua")
		w("      function_code: |")
		for _, l := range strings.Split(code, "\n") {
			w("        %s", l)
		}
	}
	w("  - name: edge-zones")
	w("    selector:")
	w("      type: QNameSuffix")
	w("      suffixes: %s", yList(c.Zones))
	w("      quiet: true")
	w("    action:")
	w("      type: Pool")
	w("      pool_name: %s", PoolAuthoritative)
	w("  - name: edge-resolver")
	w("    selector:")
	w("      type: All")
	w("    action:")
	w("      type: Pool")
	w("      pool_name: %s", PoolResolver)
	if c.Dynblocks {
		w("dynamic_rules:")
		w("  - name: edge")
		w("    rules:")
		w("      - type: query-rate")
		w("        rate: %d", c.DynblocksQPS)
		w("        seconds: 10")
		w("        action_duration: 60")
		w("        comment: %s", yq(fmt.Sprintf("edge: query rate above %d/s", c.DynblocksQPS)))
		w("      - type: rcode-rate")
		w("        rcode: %s", c.yamlRcodeNXDomain())
		w("        rate: %d", c.DynblocksNXDomainRate)
		w("        seconds: 10")
		w("        action_duration: 60")
		w("        comment: %s", yq(fmt.Sprintf("edge: NXDOMAIN rate above %d/s", c.DynblocksNXDomainRate)))
	}
	if c.EBPF {
		w("ebpf:")
		w("  ipv4: {max_entries: 65536}")
		w("  ipv6: {max_entries: 65536}")
		w("  qnames: {max_entries: 1024}")
	}
	return b.Bytes()
}
