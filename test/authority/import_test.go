package authority_test

import (
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/miekg/dns"

	"github.com/svcdns/svc/test/freeport"
	"github.com/svcdns/svc/test/nodetest"
	"github.com/svcdns/svc/test/proc"
	"github.com/svcdns/svc/test/refdns"
)

// svcBin is the svc binary built once for the package (proc.MainWithSvc).
var svcBin string

func TestMain(m *testing.M) { os.Exit(proc.MainWithSvc(m, &svcBin)) }

const adminPassword = "correct horse battery staple"

// importCase is a zone file imported with `svc import bind` and served by
// NSD from the same file.
type importCase struct {
	object, origin, file string
	serial               uint32
	nameServers          string // as the CLI prints them
	// probes are names (relative to the origin) that are not owners in the
	// file: non-existent names, names under wildcards and delegations,
	// empty non-terminals.
	probes []string
}

// TestImportServesLikeNSD imports zone files through the built svc binary
// into a running node (SQLite store) and asks the node and NSD (serving the
// same files) for the SOA, the NS set, every name of the files with each of
// their types and some absent ones, and names that do not exist (NXDOMAIN
// and NODATA with the SOA in authority): the answers must be equal. Then the
// export, put in canonical form with named-compilezone and ldns-read-zone,
// must equal the file in the same form.
func TestImportServesLikeNSD(t *testing.T) {
	for _, tool := range []string{"/usr/sbin/nsd", "/usr/bin/named-compilezone", "/usr/bin/ldns-read-zone"} {
		refdns.Require(t, tool)
	}
	dir := t.TempDir()
	big := filepath.Join(dir, "big.test.zone")
	if err := os.WriteFile(big, []byte(bigZone(5000)), 0o644); err != nil {
		t.Fatal(err)
	}
	cases := []importCase{
		{object: "example.test", origin: "example.test", file: "testdata/example.test.zone", serial: 2024061501,
			nameServers: "ns1.example.test. ns2.example.test. ns.example.net.",
			probes: []string{"nx", "nx.www", "a.b.nx", "x.apps", "deep.x.apps", "x.wild", "host.sub", "a.b.sub", "nx.other",
				"ent", "b.ent", "x.a.b.ent", "_tcp", "WwW", "FiXeD.aPpS"}},
		{object: "big", origin: "big.test", file: big, serial: 7, nameServers: "ns1.big.test. ns2.big.test.",
			probes: []string{"nx", "h9999", "x.h0001", "x.w0500", "a.b.w1000", "a.d0100", "ns.d0200", "nx.d4900"}},
	}

	n := nodetest.Start(t, nodetest.Lameduck(100*time.Millisecond), nodetest.APITLSOff(), nodetest.SettingsFile(),
		nodetest.Env("SERVICE_ADMIN_PASSWORD="+adminPassword))
	u := newCLIUser(t)
	u.okIn(adminPassword+"\n", "login", "--server", "http://"+n.Addrs.API, "-u", "admin", "--password-stdin", "--name", "test")
	nsd := startNSDZones(t, cases)
	ours := n.DNSAddr("udp")

	for _, c := range cases {
		t.Run(c.object, func(t *testing.T) {
			start := time.Now()
			out := u.ok("import", "bind", c.object, "--origin", c.origin, "-f", c.file)
			t.Logf("svc import bind %s: %s\n%s", c.object, time.Since(start).Round(time.Millisecond), out)
			for _, want := range []string{"dnszone/" + c.object + " created\n", "dnsrecordset/import-" + c.object + " created\n",
				fmt.Sprintf("SOA from the file: ns1.%s. ", c.origin), fmt.Sprintf(" serial %d ", c.serial), "NS from the file: " + c.nameServers + " "} {
				if !strings.Contains(out, want) {
					t.Errorf("import output lacks %q", want)
				}
			}
			waitSerial(t, ours, c.origin, c.serial)

			queries, diffs := compareZone(t, ours, nsd, c)
			t.Logf("%s: %d queries, node and NSD differ in %d", c.origin, queries, diffs)

			exported := filepath.Join(t.TempDir(), c.origin+".zone")
			u.ok("zones", "export", c.object, "--out", exported)
			want, got := canonicalZone(t, c.origin, c.file), canonicalZone(t, c.origin, exported)
			if d := lineDiff(want, got); d != "" {
				t.Errorf("export differs from the file in canonical form (named-compilezone -s full, ldns-read-zone -z):\n%s", d)
			}
			t.Logf("%s: export equals the file in canonical form (%d records)", c.origin, len(want))

			// Importing the export again changes nothing.
			again := u.ok("import", "bind", c.object, "-f", exported)
			if !strings.Contains(again, "dnszone/"+c.object+" kept\n") || strings.Contains(again, " created\n") || strings.Contains(again, " updated\n") || strings.Contains(again, " deleted\n") {
				t.Errorf("re-importing the export changed something:\n%s", again)
			}
		})
	}
}

// bigZone is a zone of about n names: hosts with A (and some AAAA and TXT),
// a delegation with glue every 100 names and a wildcard every 500.
func bigZone(n int) string {
	var b strings.Builder
	b.WriteString("$ORIGIN big.test.\n$TTL 600\n@ IN SOA ns1 dns-admin 7 3600 600 86400 60\n@ 3600 IN NS ns1\n@ 3600 IN NS ns2\nns1 IN A 192.0.2.1\nns2 IN A 192.0.2.2\n")
	for i := range n {
		fmt.Fprintf(&b, "h%04d IN A 10.%d.%d.1\n", i, i/250, i%250)
		if i%7 == 0 {
			fmt.Fprintf(&b, "h%04d IN AAAA 2001:db8::%x\n", i, i)
		}
		if i%13 == 0 {
			fmt.Fprintf(&b, "h%04d 300 IN TXT \"host %d\"\n", i, i)
		}
		if i%100 == 0 {
			fmt.Fprintf(&b, "d%04d IN NS ns.d%04d\nns.d%04d IN A 10.200.%d.53\n", i, i, i, i/100)
		}
		if i%500 == 0 {
			fmt.Fprintf(&b, "*.w%04d IN A 10.250.%d.1\n", i, i/500)
		}
	}
	return b.String()
}

// cliUser runs the built svc binary with its own home and client config.
type cliUser struct {
	t   *testing.T
	env []string
}

func newCLIUser(t *testing.T) *cliUser {
	home := t.TempDir()
	return &cliUser{t: t, env: []string{"HOME=" + home, "PATH=" + os.Getenv("PATH"), "SERVICE_KEYRING=file",
		"SERVICE_CLI_CONFIG=" + filepath.Join(home, ".config", "service", "config.yaml")}}
}

func (u *cliUser) okIn(stdin string, args ...string) string {
	u.t.Helper()
	r := proc.Run(u.t, u.env, stdin, svcBin, args...)
	if r.Code != 0 {
		u.t.Fatalf("svc %s: exit %d\nstdout: %s\nstderr: %s", strings.Join(args, " "), r.Code, r.Stdout, r.Stderr)
	}
	return r.Stdout
}

func (u *cliUser) ok(args ...string) string {
	u.t.Helper()
	return u.okIn("", args...)
}

// startNSDZones serves the cases' zone files from one NSD on a free port.
func startNSDZones(t *testing.T, cases []importCase) string {
	t.Helper()
	dir := t.TempDir()
	port := freeport.UDPTCP(t)
	var zones strings.Builder
	for _, c := range cases {
		abs, err := filepath.Abs(c.file)
		if err != nil {
			t.Fatal(err)
		}
		fmt.Fprintf(&zones, "zone:\n\tname: %s\n\tzonefile: \"%s\"\n", c.origin, abs)
	}
	conf := refdns.NSDConf(dir, port, 1, []string{"rrl-ratelimit: 0"}, zones.String())
	cf := filepath.Join(dir, "nsd.conf")
	if err := os.WriteFile(cf, []byte(conf), 0o644); err != nil {
		t.Fatal(err)
	}
	refdns.Start(t, "/usr/sbin/nsd", "-d", "-c", cf)
	addr := fmt.Sprintf("127.0.0.1:%d", port)
	for _, c := range cases {
		waitSerial(t, addr, c.origin, c.serial)
	}
	return addr
}

// waitSerial waits (at most 20 s) until addr answers the zone's SOA with serial.
func waitSerial(t *testing.T, addr, zone string, serial uint32) {
	t.Helper()
	c := &dns.Client{Timeout: 500 * time.Millisecond}
	m := new(dns.Msg)
	m.SetQuestion(dns.Fqdn(zone), dns.TypeSOA)
	var last string
	deadline := time.Now().Add(20 * time.Second)
	for time.Now().Before(deadline) {
		r, _, err := c.Exchange(m, addr)
		if err == nil && len(r.Answer) == 1 {
			if soa, ok := r.Answer[0].(*dns.SOA); ok && soa.Serial == serial {
				return
			}
		}
		last = fmt.Sprint(r, err)
		time.Sleep(100 * time.Millisecond)
	}
	t.Fatalf("%s did not answer %s SOA with serial %d in time; last: %s", addr, zone, serial, last)
}

// compareZone asks both servers about every owner of the case's file (each
// of its types, plus A, MX and TXT), the SOA and NS at the apex and the
// probes (each with A, TXT and SOA), and reports differences.
func compareZone(t *testing.T, ours, ref string, c importCase) (queries, diffs int) {
	t.Helper()
	owners := zoneOwners(t, c.origin, c.file)
	type q struct {
		name  string
		qtype uint16
	}
	var qs []q
	names := slices.Sorted(func(yield func(string) bool) {
		for n := range owners {
			if !yield(n) {
				return
			}
		}
	})
	for _, name := range names {
		types := owners[name]
		for _, qt := range []uint16{dns.TypeA, dns.TypeMX, dns.TypeTXT} {
			if !slices.Contains(types, qt) {
				types = append(types, qt)
			}
		}
		for _, qt := range types {
			qs = append(qs, q{name, qt})
		}
	}
	for _, p := range c.probes {
		for _, qt := range []uint16{dns.TypeA, dns.TypeTXT, dns.TypeSOA} {
			qs = append(qs, q{p + "." + dns.Fqdn(c.origin), qt})
		}
	}
	cl := &dns.Client{Timeout: 2 * time.Second}
	for _, x := range qs {
		if strings.HasPrefix(x.name, "*.") {
			continue // a wildcard owner asked for literally is tested through probes
		}
		m := new(dns.Msg)
		m.SetQuestion(x.name, x.qtype)
		m.RecursionDesired = false
		m.SetEdns0(4096, false)
		got, _, err := cl.Exchange(m, ours)
		if err != nil {
			t.Fatalf("%s %s from the node: %v", x.name, dns.Type(x.qtype), err)
		}
		want, _, err := cl.Exchange(m, ref)
		if err != nil {
			t.Fatalf("%s %s from NSD: %v", x.name, dns.Type(x.qtype), err)
		}
		queries++
		if g, w := summary(got), summary(want); g != w {
			diffs++
			if diffs <= 20 {
				t.Errorf("%s %s: node and NSD differ\n--- node\n%s\n--- nsd\n%s", x.name, dns.Type(x.qtype), g, w)
			}
		}
	}
	if queries < len(owners) {
		t.Errorf("only %d queries for %d names", queries, len(owners))
	}
	return queries, diffs
}

// zoneOwners reads file's owner names (lower-cased) and their types.
func zoneOwners(t *testing.T, origin, file string) map[string][]uint16 {
	t.Helper()
	f, err := os.Open(file)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	out := map[string][]uint16{}
	zp := dns.NewZoneParser(f, dns.Fqdn(origin), file)
	for rr, ok := zp.Next(); ok; rr, ok = zp.Next() {
		h := rr.Header()
		name := strings.ToLower(h.Name)
		if !slices.Contains(out[name], h.Rrtype) {
			out[name] = append(out[name], h.Rrtype)
		}
	}
	if err := zp.Err(); err != nil {
		t.Fatalf("%s: %v", file, err)
	}
	return out
}

// canonicalZone is file in canonical form: named-compilezone -s full (every
// name absolute, one record per line) then ldns-read-zone -z (canonical
// case and order), comments and blank lines dropped.
func canonicalZone(t *testing.T, origin, file string) []string {
	t.Helper()
	full := filepath.Join(t.TempDir(), "full.zone")
	cmd := exec.Command("/usr/bin/named-compilezone", "-q", "-i", "none", "-k", "ignore", "-n", "ignore", "-m", "ignore",
		"-r", "ignore", "-M", "ignore", "-S", "ignore", "-W", "ignore", "-s", "full", "-o", full, origin, file)
	if out, err := cmd.CombinedOutput(); err != nil {
		t.Fatalf("named-compilezone %s: %v\n%s", file, err, out)
	}
	out, err := exec.Command("/usr/bin/ldns-read-zone", "-z", full).Output()
	if err != nil {
		t.Fatalf("ldns-read-zone %s: %v", file, err)
	}
	var lines []string
	for _, l := range strings.Split(string(out), "\n") {
		if l = strings.TrimSpace(l); l != "" && !strings.HasPrefix(l, ";") {
			lines = append(lines, strings.Join(strings.Fields(l), " "))
		}
	}
	slices.Sort(lines)
	return lines
}

// lineDiff lists the lines only in a (-) and only in b (+), at most 40.
func lineDiff(a, b []string) string {
	var d []string
	for _, l := range a {
		if _, ok := slices.BinarySearch(b, l); !ok {
			d = append(d, "- "+l)
		}
	}
	for _, l := range b {
		if _, ok := slices.BinarySearch(a, l); !ok {
			d = append(d, "+ "+l)
		}
	}
	if len(d) > 40 {
		d = append(d[:40], fmt.Sprintf("... and %d more", len(d)-40))
	}
	return strings.Join(d, "\n")
}
