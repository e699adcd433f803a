package edge

import (
	"bytes"
	"flag"
	"net/netip"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/svcdns/svc/test/testpki"
)

var update = flag.Bool("update", false, "rewrite the golden files in testdata")

// goldenCase is one combination of flags; every case is rendered with
// both renderers.
type goldenCase struct {
	name string
	set  func(c *Config)
}

var goldenCases = []goldenCase{
	{"defaults", func(c *Config) {}},
	{"no-backends-no-zones", func(c *Config) { c.Backends, c.Zones = nil, nil }},
	{"secret-dynblocks-acl", func(c *Config) {
		c.ProxySecret = []byte("0123456789abcdef0123456789abcdef\x00\"\\")
		c.Dynblocks, c.DynblocksQPS, c.DynblocksNXDomainRate = true, 100, 5
		c.ACL = []string{"10.0.0.0/8", "192.0.2.7"}
		c.TransferSources = []string{"192.0.2.53/32", "2001:db8::/64"}
	}},
	{"encrypted-client-id", func(c *Config) {
		c.Protocols = []string{"do53", "dot", "doh"}
		c.TLSDir, c.ClientIDDomain = "/etc/dnsdist/tls", "dns.example.org"
		c.ProxySecret = []byte(strings.Repeat("s", 32))
	}},
	{"no-cache-threads-policies", func(c *Config) {
		c.CacheSize, c.Threads = 0, 4
		c.PoolAuthoritative, c.PoolResolver = "roundrobin", "firstAvailable"
	}},
	{"ebpf-listen-port", func(c *Config) {
		c.EBPF, c.Dynblocks, c.Listen = true, true, "127.0.0.1:5300"
	}},
}

func testConfig() Config {
	c := Defaults()
	c.ConsoleKey = bytes.Repeat([]byte{7}, 32)
	c.APIKey = "test-api-key"
	c.Backends = []Backend{
		{Name: "node-a", Address: netip.MustParseAddrPort("10.0.0.11:5353")},
		{Name: "node-b", Address: netip.MustParseAddrPort("10.0.0.12:5353")},
	}
	c.Zones = []string{"example.org.", "corp.example."}
	return c
}

// TestRenderGolden renders every case with both renderers and compares
// with testdata (-update rewrites); every Lua rendering also passes
// `dnsdist --check-config` (TLS cases get a real certificate first).
func TestRenderGolden(t *testing.T) {
	dnsdist := requireDnsdist(t)
	for _, gc := range goldenCases {
		for _, r := range []string{"lua", "yaml"} {
			t.Run(gc.name+"/"+r, func(t *testing.T) {
				c := testConfig()
				c.Renderer = r
				gc.set(&c)
				body, name, err := Render(&c)
				if err != nil {
					t.Fatal(err)
				}
				golden := filepath.Join("testdata", gc.name+"."+filepath.Ext(name)[1:])
				if *update {
					if err := os.WriteFile(golden, body, 0o644); err != nil {
						t.Fatal(err)
					}
				}
				want, err := os.ReadFile(golden)
				if err != nil {
					t.Fatalf("%v (run with -update to create it)", err)
				}
				if !bytes.Equal(body, want) {
					t.Errorf("%s differs from the rendering (run go test ./internal/edge -run TestRenderGolden -update and review the diff)", golden)
				}
				if r == "lua" {
					checkLua(t, dnsdist, &c)
				}
			})
		}
	}
}

// checkLua runs dnsdist --check-config on c rendered with a real TLS
// directory (the golden uses a placeholder path).
func checkLua(t *testing.T, dnsdist string, c *Config) {
	t.Helper()
	dir := t.TempDir()
	if c.TLSDir != "" {
		c.TLSDir = filepath.Join(dir, "tls")
		writeTestCert(t, c.TLSDir)
	}
	body, name, err := Render(c)
	if err != nil {
		t.Fatal(err)
	}
	path := filepath.Join(dir, name)
	if err := os.WriteFile(path, body, 0o600); err != nil {
		t.Fatal(err)
	}
	if err := CheckConfig(t.Context(), dnsdist, path); err != nil {
		t.Fatalf("%v\n%s", err, body)
	}
}

func requireDnsdist(t *testing.T) string {
	t.Helper()
	p, err := exec.LookPath("dnsdist")
	if err != nil {
		t.Fatal("dnsdist not found: install it with hack/install-test-deps.sh (Debian package dnsdist)")
	}
	return p
}

func TestValidateRefusesClearly(t *testing.T) {
	for _, tc := range []struct {
		set  func(*Config)
		want string
	}{
		{func(c *Config) { c.Protocols = []string{"doq"}; c.TLSDir = "/x" }, "needs dnsdist 1.9"},
		{func(c *Config) { c.Protocols = []string{"dot"} }, "needs --tls-dir"},
		{func(c *Config) { c.Protocols = []string{"dns"} }, "unknown protocol"},
		{func(c *Config) { c.Renderer = "json" }, "want lua"},
		{func(c *Config) { c.PoolResolver = "fastest" }, "--pool-resolver"},
		{func(c *Config) { c.ACL = []string{"nope"} }, "--acl"},
		{func(c *Config) { c.ProxySecret = []byte("short") }, "at least 32 bytes"},
		{func(c *Config) { c.Listen = "example.com:53" }, "--listen"},
	} {
		c := testConfig()
		tc.set(&c)
		err := c.Validate()
		if err == nil || !strings.Contains(err.Error(), tc.want) {
			t.Errorf("want an error with %q, got %v", tc.want, err)
		}
	}
	c := testConfig()
	c.Protocols, c.TLSDir, c.Version = []string{"doq", "doh3"}, "/x", "1.9.10"
	if err := c.Validate(); err != nil {
		t.Errorf("doq on dnsdist 1.9: %v", err)
	}
	_ = time.Second
}

func TestParseBackends(t *testing.T) {
	b, err := ParseBackends([]string{"10.0.0.2", "n1=10.0.0.1:53", "[2001:db8::1]"}, 5353)
	if err != nil {
		t.Fatal(err)
	}
	want := []Backend{
		{Name: "n1", Address: netip.MustParseAddrPort("10.0.0.1:53")},
		{Name: "10.0.0.2:5353", Address: netip.MustParseAddrPort("10.0.0.2:5353")},
		{Name: "[2001:db8::1]:5353", Address: netip.MustParseAddrPort("[2001:db8::1]:5353")},
	}
	if len(b) != len(want) {
		t.Fatalf("%v", b)
	}
	for i := range want {
		if b[i] != want[i] {
			t.Errorf("%d: %v, want %v", i, b[i], want[i])
		}
	}
	if _, err := ParseBackends([]string{"node.example"}, 53); err == nil || !strings.Contains(err.Error(), "--backends-from kubernetes") {
		t.Errorf("host name: %v", err)
	}
}

// writeTestCert puts a certificate and key from testpki in dir as
// tls.crt and tls.key, the --tls-dir layout.
func writeTestCert(t *testing.T, dir string) {
	t.Helper()
	pki := testpki.New(t)
	if err := os.MkdirAll(dir, 0o755); err != nil {
		t.Fatal(err)
	}
	for src, dst := range map[string]string{pki.CertFile: "tls.crt", pki.KeyFile: "tls.key"} {
		b, err := os.ReadFile(src)
		if err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(filepath.Join(dir, dst), b, 0o600); err != nil {
			t.Fatal(err)
		}
	}
}

// TestYAMLDynamicRuleRcodeByVersion: dnsdist 2.0 reads a dynamic rule's
// rcode as a number, 2.1 and later as a name.
func TestYAMLDynamicRuleRcodeByVersion(t *testing.T) {
	for _, tc := range []struct{ version, want string }{
		{"2.0.4", "rcode: 3\n"}, {"2.1.0", "rcode: NXDomain\n"}, {"", "rcode: NXDomain\n"},
	} {
		c := testConfig()
		c.Renderer, c.Version, c.Dynblocks = "yaml", tc.version, true
		body, _, err := Render(&c)
		if err != nil {
			t.Fatal(err)
		}
		if !strings.Contains(string(body), tc.want) {
			t.Errorf("dnsdist %q: no %q in\n%s", tc.version, strings.TrimSpace(tc.want), body)
		}
	}
}
