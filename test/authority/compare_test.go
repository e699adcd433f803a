// Package authority_test serves one zone from NSD, Knot DNS and the
// service's authority table and compares their answers section by section.
package authority_test

import (
	"fmt"
	"net"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/miekg/dns"

	"github.com/svcdns/svc/api/v1alpha1"
	"github.com/svcdns/svc/dataplane/authority"
	"github.com/svcdns/svc/test/fakeupstream"
	"github.com/svcdns/svc/test/freeport"
	"github.com/svcdns/svc/test/refdns"
)

func ep(name, typ string, targets ...string) v1alpha1.Endpoint {
	return v1alpha1.Endpoint{DNSName: name, RecordType: typ, Targets: targets}
}

// zoneContent exercises every lookup rule that NSD and Knot implement too.
func zoneContent() []v1alpha1.Endpoint {
	return []v1alpha1.Endpoint{
		ep("@", "MX", "10 mail.example.com.", "20 mail2.example.com."),
		ep("@", "TXT", "v=spf1 -all"),
		ep("ns1", "A", "192.0.2.53"),
		ep("ns1", "AAAA", "2001:db8::53"),
		ep("ns2", "A", "192.0.2.54"),
		ep("www", "A", "192.0.2.1", "192.0.2.2"),
		ep("www", "AAAA", "2001:db8::1"),
		ep("mail", "A", "192.0.2.25"),
		ep("mail2", "A", "192.0.2.26"),
		ep("alias", "CNAME", "www.example.com."),
		ep("chain1", "CNAME", "chain2.example.com."),
		ep("chain2", "CNAME", "www.example.com."),
		ep("loop1", "CNAME", "loop2.example.com."),
		ep("loop2", "CNAME", "loop1.example.com."),
		ep("ext", "CNAME", "www.example.net."),
		ep("dangling", "CNAME", "nothere.example.com."),
		ep("sub", "NS", "ns.sub.example.com.", "ns.elsewhere.net."),
		ep("sub", "DS", "12345 8 2 49FD46E6C4B45C55D4AC69CBD3CD34AC1AFE51DE7C8D2A5C3E1CC9E5D5F6A7B8"),
		ep("ns.sub", "A", "192.0.2.100"),
		ep("old", "DNAME", "example.net."),
		ep("legacy", "DNAME", "new.example.com."),
		ep("host.new", "A", "192.0.2.77"),
		ep("*.wild", "A", "192.0.2.50"),
		ep("*.wild", "TXT", `"wild text"`),
		ep("*.wc", "CNAME", "www.example.com."),
		ep("a.b.ent", "A", "192.0.2.60"),
		ep("_sip._tcp", "SRV", "10 5 5060 sip.example.com."),
		ep("sip", "A", "192.0.2.70"),
		ep("generic", "TYPE65534", `\# 3 abcdef`),
		ep("caa", "CAA", `0 issue "letsencrypt.org"`),
		ep("txt", "TXT", `"quoted one" "two"`, `unquoted text`),
		ep("ptr", "PTR", "www.example.com."),
		ep("hinfo", "HINFO", `"PDP-11" "UNIX"`),
	}
}

func compileZone(t *testing.T) *authority.Table {
	t.Helper()
	z := v1alpha1.DNSZone{}
	z.Name = "example.com"
	z.ResourceVersion = "77"
	z.Spec.NameServers = []string{"ns1.example.com.", "ns2.example.com."}
	rs := v1alpha1.DNSRecordSet{}
	rs.Namespace, rs.Name = "default", "example"
	rs.Spec.ZoneRef.Name = "example.com"
	rs.Spec.Endpoints = zoneContent()
	tab, problems := authority.Compile([]v1alpha1.DNSZone{z}, []v1alpha1.DNSRecordSet{rs}, time.Now())
	if len(problems) > 0 {
		t.Fatalf("compile: %v", problems)
	}
	return tab
}

func waitReady(t *testing.T, addr, what string) {
	t.Helper()
	c := &dns.Client{Timeout: 300 * time.Millisecond}
	m := new(dns.Msg)
	m.SetQuestion("example.com.", dns.TypeSOA)
	deadline := time.Now().Add(15 * time.Second)
	for time.Now().Before(deadline) {
		if r, _, err := c.Exchange(m, addr); err == nil && r.Rcode == dns.RcodeSuccess && len(r.Answer) == 1 {
			return
		}
		time.Sleep(100 * time.Millisecond)
	}
	t.Fatalf("%s at %s did not answer example.com SOA in time", what, addr)
}

func startNSD(t *testing.T, zonefile string) string {
	refdns.Require(t, "/usr/sbin/nsd")
	dir := t.TempDir()
	port := freeport.UDPTCP(t)
	conf := refdns.NSDConf(dir, port, 1, nil, fmt.Sprintf("zone:\n\tname: example.com\n\tzonefile: \"%s\"\n", zonefile))
	cf := filepath.Join(dir, "nsd.conf")
	if err := os.WriteFile(cf, []byte(conf), 0o644); err != nil {
		t.Fatal(err)
	}
	refdns.Start(t, "/usr/sbin/nsd", "-d", "-c", cf)
	addr := fmt.Sprintf("127.0.0.1:%d", port)
	waitReady(t, addr, "nsd")
	return addr
}

func startKnot(t *testing.T, zonefile string) string {
	refdns.Require(t, "/usr/sbin/knotd")
	dir := t.TempDir()
	port := freeport.UDPTCP(t)
	refdns.StartKnot(t, dir, refdns.KnotConf(dir, port, "warning", fmt.Sprintf(`template:
  - id: default
    storage: "%[1]s"
    semantic-checks: off
zone:
  - domain: example.com
    file: "%[2]s"
    zonefile-sync: -1
    zonefile-load: whole
    journal-content: none
`, dir, zonefile)))
	addr := fmt.Sprintf("127.0.0.1:%d", port)
	waitReady(t, addr, "knotd")
	return addr
}

// startTable serves the table through a small miekg/dns server using the
// slow path (the real listener lives in the dataplane package).
func startTable(t *testing.T, tab *authority.Table) string {
	return fakeupstream.Serve(t, func(w dns.ResponseWriter, req *dns.Msg) {
		q := req.Question[0]
		buf := make([]byte, 256)
		n, err := dns.PackDomainName(strings.ToLower(q.Name), buf, 0, nil, false)
		if err != nil {
			return
		}
		a := tab.Lookup(buf[:n], q.Qtype, authority.Client{Addr: w.RemoteAddr().(*net.UDPAddr).AddrPort().Addr()})
		if a.Kind == authority.NotFound {
			a.Rcode = dns.RcodeRefused
		}
		b, err := authority.PackReply(req, &a, nil)
		if err != nil {
			t.Errorf("pack %s: %v", q.Name, err)
			return
		}
		_, _ = w.Write(b)
	})
}

var queryNames = []string{
	"@", "www", "mail", "ns1", "ns2", "alias", "chain1", "chain2", "loop1", "ext", "dangling",
	"sub", "host.sub", "ns.sub", "a.b.ns.sub", "old", "x.old", "a.b.old", "legacy", "host.legacy", "gone.legacy",
	"new", "host.new", "wild", "*.wild", "foo.wild", "a.b.wild", "x.wc", "wc", "ent", "b.ent", "a.b.ent",
	"x.ent", "x.a.b.ent", "_tcp", "_sip._tcp", "sip", "generic", "caa", "txt", "ptr", "hinfo",
	"nothere", "x.www", "nx1.nx2", "WwW", "AlIaS",
}

var queryTypes = []uint16{
	dns.TypeA, dns.TypeAAAA, dns.TypeMX, dns.TypeTXT, dns.TypeNS, dns.TypeSOA, dns.TypeCNAME,
	dns.TypeDNAME, dns.TypeSRV, dns.TypeCAA, dns.TypeDS, 65534, dns.TypePTR, dns.TypeHINFO,
}

// section renders an RR section order-independently, case-folded (answers
// echo the question's case through compression).
func section(rrs []dns.RR) string {
	var out []string
	for _, rr := range rrs {
		if rr.Header().Rrtype == dns.TypeOPT {
			continue
		}
		out = append(out, strings.ToLower(rr.String()))
	}
	slices.Sort(out)
	return strings.Join(out, "\n")
}

func summary(m *dns.Msg) string {
	return fmt.Sprintf("rcode=%s aa=%t\nanswer:\n%s\nauthority:\n%s", dns.RcodeToString[m.Rcode], m.Authoritative, section(m.Answer), section(m.Ns))
}

func TestCompareWithNSDAndKnot(t *testing.T) {
	tab := compileZone(t)
	text, err := tab.ZoneFile("example.com.")
	if err != nil {
		t.Fatal(err)
	}
	zonefile := filepath.Join(t.TempDir(), "example.com.zone")
	if err := os.WriteFile(zonefile, []byte(text), 0o644); err != nil {
		t.Fatal(err)
	}
	ours := startTable(t, tab)
	refs := map[string]string{"nsd": startNSD(t, zonefile), "knot": startKnot(t, zonefile)}

	c := &dns.Client{Timeout: 2 * time.Second}
	queries, diffs := 0, 0
	for _, name := range queryNames {
		qname := "example.com."
		if name != "@" {
			qname = name + ".example.com."
		}
		for _, qt := range queryTypes {
			m := new(dns.Msg)
			m.SetQuestion(qname, qt)
			m.RecursionDesired = false
			m.SetEdns0(4096, false)
			got, _, err := c.Exchange(m, ours)
			if err != nil {
				t.Fatalf("%s %s from table: %v", qname, dns.Type(qt), err)
			}
			queries++
			for _, ref := range []string{"nsd", "knot"} {
				want, _, err := c.Exchange(m, refs[ref])
				if err != nil {
					t.Fatalf("%s %s from %s: %v", qname, dns.Type(qt), ref, err)
				}
				if g, w := summary(got), summary(want); g != w {
					diffs++
					if diffs <= 25 {
						t.Errorf("%s %s: table and %s differ\n--- table\n%s\n--- %s\n%s", qname, dns.Type(qt), ref, g, ref, w)
					}
				}
			}
		}
	}
	t.Logf("%d queries compared against NSD and Knot, %d differences", queries, diffs)
	if queries < 300 {
		t.Errorf("only %d queries", queries)
	}
}
