package authority

import (
	"bytes"
	"flag"
	"fmt"
	"net/netip"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/miekg/dns"
)

var update = flag.Bool("update", false, "rewrite golden files")

// Case is one query against the fixture and what it must produce.
type Case struct {
	Qname  string
	Qtype  uint16
	Client string // client address, default 192.0.2.200
	Groups []string
	Kind   Kind
	Rcode  int
	Blob   bool // a pre-encoded answer is expected
}

var lookupCases = []Case{
	{Qname: "www.example.com.", Qtype: dns.TypeA, Kind: Answered, Blob: true},
	{Qname: "www.example.com.", Qtype: dns.TypeAAAA, Kind: Answered, Blob: true},
	{Qname: "www.example.com.", Qtype: dns.TypeMX, Kind: NoData, Blob: true},
	{Qname: "nothere.example.com.", Qtype: dns.TypeA, Kind: NXDomain, Rcode: dns.RcodeNameError},
	{Qname: "x.www.example.com.", Qtype: dns.TypeA, Kind: NXDomain, Rcode: dns.RcodeNameError},
	{Qname: "example.com.", Qtype: dns.TypeSOA, Kind: Answered, Blob: true},
	{Qname: "example.com.", Qtype: dns.TypeNS, Kind: Answered, Blob: true},
	{Qname: "example.com.", Qtype: dns.TypeMX, Kind: Answered, Blob: true},
	{Qname: "example.com.", Qtype: dns.TypeTXT, Kind: Answered, Blob: true},
	{Qname: "example.com.", Qtype: dns.TypeAAAA, Kind: NoData, Blob: true},
	{Qname: "example.com.", Qtype: dns.TypeANY, Kind: Answered},
	{Qname: "www.example.com.", Qtype: dns.TypeANY, Kind: Answered},
	{Qname: "mail.example.com.", Qtype: dns.TypeA, Kind: Answered, Blob: true},
	{Qname: "ns1.example.com.", Qtype: dns.TypeMX, Kind: NoData, Blob: true},
	{Qname: "ns2.example.com.", Qtype: dns.TypeTXT, Kind: NoData, Blob: true},
	{Qname: "alias.example.com.", Qtype: dns.TypeA, Kind: Answered},
	{Qname: "alias.example.com.", Qtype: dns.TypeCNAME, Kind: Answered, Blob: true},
	{Qname: "alias.example.com.", Qtype: dns.TypeMX, Kind: Answered},
	{Qname: "chain1.example.com.", Qtype: dns.TypeAAAA, Kind: Answered},
	{Qname: "loop1.example.com.", Qtype: dns.TypeA, Kind: Answered},
	{Qname: "ext.example.com.", Qtype: dns.TypeA, Kind: Answered},
	{Qname: "dangling.example.com.", Qtype: dns.TypeA, Kind: Answered, Rcode: dns.RcodeNameError},
	{Qname: "sub.example.com.", Qtype: dns.TypeA, Kind: Referral, Blob: true},
	{Qname: "sub.example.com.", Qtype: dns.TypeNS, Kind: Referral, Blob: true},
	{Qname: "sub.example.com.", Qtype: dns.TypeDS, Kind: Answered, Blob: true},
	{Qname: "host.sub.example.com.", Qtype: dns.TypeA, Kind: Referral},
	{Qname: "ns.sub.example.com.", Qtype: dns.TypeA, Kind: Referral},
	{Qname: "x.old.example.com.", Qtype: dns.TypeA, Kind: Answered},
	{Qname: "old.example.com.", Qtype: dns.TypeDNAME, Kind: Answered, Blob: true},
	{Qname: "old.example.com.", Qtype: dns.TypeA, Kind: NoData, Blob: true},
	{Qname: "host.legacy.example.com.", Qtype: dns.TypeA, Kind: Answered},
	{Qname: "gone.legacy.example.com.", Qtype: dns.TypeA, Kind: Answered, Rcode: dns.RcodeNameError},
	{Qname: "gone.legacy.example.com.", Qtype: dns.TypeCNAME, Kind: Answered},
	{Qname: "foo.wild.example.com.", Qtype: dns.TypeA, Kind: Answered, Blob: true},
	{Qname: "foo.wild.example.com.", Qtype: dns.TypeTXT, Kind: Answered, Blob: true},
	{Qname: "foo.wild.example.com.", Qtype: dns.TypeMX, Kind: NoData},
	{Qname: "a.b.wild.example.com.", Qtype: dns.TypeA, Kind: Answered, Blob: true},
	{Qname: "wild.example.com.", Qtype: dns.TypeA, Kind: NoData, Blob: true},
	{Qname: "*.wild.example.com.", Qtype: dns.TypeA, Kind: Answered, Blob: true},
	{Qname: "x.wc.example.com.", Qtype: dns.TypeA, Kind: Answered},
	{Qname: "ent.example.com.", Qtype: dns.TypeA, Kind: NoData, Blob: true},
	{Qname: "b.ent.example.com.", Qtype: dns.TypeTXT, Kind: NoData, Blob: true},
	{Qname: "x.ent.example.com.", Qtype: dns.TypeA, Kind: NXDomain, Rcode: dns.RcodeNameError},
	{Qname: "_sip._tcp.example.com.", Qtype: dns.TypeSRV, Kind: Answered, Blob: true},
	{Qname: "generic.example.com.", Qtype: 65534, Kind: Answered, Blob: true},
	{Qname: "generic-a.example.com.", Qtype: dns.TypeA, Kind: Answered, Blob: true},
	{Qname: "caa.example.com.", Qtype: dns.TypeCAA, Kind: Answered, Blob: true},
	{Qname: "txt.example.com.", Qtype: dns.TypeTXT, Kind: Answered, Blob: true},
	{Qname: "mixed.case.example.com.", Qtype: dns.TypeA, Kind: Answered, Blob: true},
	{Qname: "office.example.com.", Qtype: dns.TypeA, Kind: NoData},
	{Qname: "office.example.com.", Qtype: dns.TypeA, Groups: []string{"default/office"}, Kind: Answered},
	{Qname: "office.example.com.", Qtype: dns.TypeTXT, Kind: Answered},
	{Qname: "published.example.com.", Qtype: dns.TypeA, Kind: NXDomain, Rcode: dns.RcodeNameError},
	{Qname: "disabled.example.com.", Qtype: dns.TypeA, Kind: NXDomain, Rcode: dns.RcodeNameError},
	{Qname: "expired.example.com.", Qtype: dns.TypeA, Kind: NXDomain, Rcode: dns.RcodeNameError},
	{Qname: "expiring.example.com.", Qtype: dns.TypeA, Kind: Answered, Blob: true},
	{Qname: "partly-bad.example.com.", Qtype: dns.TypeA, Kind: Answered, Blob: true},
	{Qname: "ptr.example.com.", Qtype: dns.TypePTR, Kind: Answered, Blob: true},
	{Qname: "hinfo.example.com.", Qtype: dns.TypeHINFO, Kind: Answered, Blob: true},
	{Qname: "sshfp.example.com.", Qtype: dns.TypeSSHFP, Kind: Answered, Blob: true},
	{Qname: "svc.example.com.", Qtype: dns.TypeHTTPS, Kind: Answered, Blob: true},
	// Zone-level behaviour.
	{Qname: "host.fwd.example.org.", Qtype: dns.TypeA, Kind: Forward},
	{Qname: "intranet.corp.example.", Qtype: dns.TypeA, Kind: Refused, Rcode: dns.RcodeRefused},
	{Qname: "intranet.corp.example.", Qtype: dns.TypeA, Client: "10.9.9.9", Kind: Answered, Blob: true},
	{Qname: "intranet.corp.example.", Qtype: dns.TypeA, Client: "::ffff:10.9.9.9", Kind: Answered, Blob: true},
	{Qname: "intranet.corp.example.", Qtype: dns.TypeA, Client: "2001:db8::1", Kind: Answered, Blob: true},
	{Qname: "intranet.corp.example.", Qtype: dns.TypeA, Groups: []string{"default/staff"}, Kind: Answered, Blob: true},
	{Qname: "host.late.example.", Qtype: dns.TypeA, Kind: ServFail, Rcode: dns.RcodeServerFailure},
	{Qname: "nothere.late.example.", Qtype: dns.TypeA, Kind: ServFail, Rcode: dns.RcodeServerFailure},
	{Qname: "example.com.", Qtype: dns.TypeAXFR, Kind: Refused, Rcode: dns.RcodeRefused},
	// The default zone "." answers what it holds and nothing else.
	{Qname: "router.lan.", Qtype: dns.TypeA, Kind: Answered, Blob: true},
	{Qname: "router.lan.", Qtype: dns.TypeAAAA, Kind: NoData, Blob: true},
	{Qname: "other.lan.", Qtype: dns.TypeA, Kind: NotFound},
	{Qname: "lan.", Qtype: dns.TypeA, Kind: NotFound},
	{Qname: ".", Qtype: dns.TypeNS, Kind: NotFound},
	{Qname: "box.dev.lan.", Qtype: dns.TypeA, Kind: Answered, Blob: true},
	{Qname: "nas.lan.", Qtype: dns.TypeA, Kind: NotFound},
	{Qname: "nas.lan.", Qtype: dns.TypeA, Groups: []string{"default/family"}, Kind: Answered},
	{Qname: "tv.lan.", Qtype: dns.TypeA, Kind: Answered},
	{Qname: "www.example.net.", Qtype: dns.TypeA, Kind: NotFound},
}

func (c Case) client() Client {
	addr := netip.MustParseAddr("192.0.2.200")
	if c.Client != "" {
		addr = netip.MustParseAddr(c.Client)
	}
	groups := c.Groups
	return Client{Addr: addr, InGroup: func(g string) bool {
		for _, x := range groups {
			if x == g {
				return true
			}
		}
		return false
	}}
}

func wireName(t testing.TB, name string) []byte {
	t.Helper()
	buf := make([]byte, 256)
	n, err := dns.PackDomainName(name, buf, 0, nil, false)
	if err != nil {
		t.Fatalf("pack %q: %v", name, err)
	}
	buf = buf[:n]
	lowerWire(buf)
	return buf
}

func (c Case) title() string {
	s := c.Qname + " " + dns.Type(c.Qtype).String()
	if c.Client != "" {
		s += " from " + c.Client
	}
	if len(c.Groups) > 0 {
		s += " in " + strings.Join(c.Groups, ",")
	}
	return s
}

// render is the golden text form of an answer.
func render(a Answer) string {
	var b strings.Builder
	fmt.Fprintf(&b, "kind=%s rcode=%s aa=%t minTTL=%d blob=%t zone=%s", a.Kind, dns.RcodeToString[a.Rcode], a.Authoritative, a.MinTTL, a.Wire != nil, a.Zone)
	if a.ForwardGroup != "" {
		fmt.Fprintf(&b, " forward=%s", a.ForwardGroup)
	}
	b.WriteString("\n")
	for _, sec := range []struct {
		name string
		rrs  []dns.RR
	}{{"answer", a.Answer}, {"authority", a.Ns}, {"additional", a.Extra}} {
		for _, rr := range sec.rrs {
			fmt.Fprintf(&b, "  %s: %s\n", sec.name, rr.String())
		}
	}
	return b.String()
}

func TestLookupGolden(t *testing.T) {
	tab, _ := fixtureTable()
	var out strings.Builder
	for _, c := range lookupCases {
		a := tab.Lookup(wireName(t, c.Qname), c.Qtype, c.client())
		if a.Kind != c.Kind || a.Rcode != c.Rcode || (a.Wire != nil) != c.Blob {
			t.Errorf("%s: kind=%s rcode=%d blob=%t, want kind=%s rcode=%d blob=%t\n%s", c.title(), a.Kind, a.Rcode, a.Wire != nil, c.Kind, c.Rcode, c.Blob, render(a))
		}
		fmt.Fprintf(&out, ";; %s\n%s\n", c.title(), render(a))
	}
	golden(t, "lookup.golden", out.String())
}

func golden(t *testing.T, name, got string) {
	t.Helper()
	path := filepath.Join("testdata", name)
	if *update {
		if err := os.MkdirAll("testdata", 0o755); err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(path, []byte(got), 0o644); err != nil {
			t.Fatal(err)
		}
		return
	}
	want, err := os.ReadFile(path)
	if err != nil {
		t.Fatalf("%v (run go test -update)", err)
	}
	if string(want) != got {
		t.Errorf("%s differs from the golden file (go test -update rewrites it):\n%s", path, diffLines(string(want), got))
	}
}

func diffLines(want, got string) string {
	w, g := strings.Split(want, "\n"), strings.Split(got, "\n")
	var b strings.Builder
	for i := 0; i < max(len(w), len(g)); i++ {
		var wl, gl string
		if i < len(w) {
			wl = w[i]
		}
		if i < len(g) {
			gl = g[i]
		}
		if wl != gl {
			fmt.Fprintf(&b, "line %d:\n- %s\n+ %s\n", i+1, wl, gl)
		}
	}
	return b.String()
}

// mixCase spells a name in alternating case, as 0x20 clients do.
func mixCase(s string) string {
	b := []byte(s)
	for i := range b {
		if i%2 == 0 && b[i] >= 'a' && b[i] <= 'z' {
			b[i] -= 'a' - 'A'
		}
	}
	return string(b)
}

// TestWireMatchesSlowPath demands that header + question + blob is
// byte-for-byte what miekg/dns packs for the same answer, for the question
// spelled in lower and in mixed case, and that the reply decodes to the
// answer's sections.
func TestWireMatchesSlowPath(t *testing.T) {
	tab, _ := fixtureTable()
	blobs := 0
	for _, c := range lookupCases {
		a := tab.Lookup(wireName(t, c.Qname), c.Qtype, c.client())
		for _, spelled := range []string{c.Qname, mixCase(c.Qname)} {
			req := new(dns.Msg)
			req.SetQuestion(spelled, c.Qtype)
			req.Id = 0xbeef
			req.CheckingDisabled = true
			slow, err := PackReply(req, &a, nil)
			if err != nil {
				t.Fatalf("%s: pack: %v", c.title(), err)
			}
			var got dns.Msg
			if err := got.Unpack(slow); err != nil {
				t.Fatalf("%s: unpack slow path: %v", c.title(), err)
			}
			if got.Question[0].Name != spelled {
				t.Errorf("%s: question echoed as %q, want %q", c.title(), got.Question[0].Name, spelled)
			}
			if len(got.Answer) != len(a.Answer) || len(got.Ns) != len(a.Ns) || len(got.Extra) != len(a.Extra) {
				t.Errorf("%s: slow path sections %d/%d/%d, want %d/%d/%d", c.title(), len(got.Answer), len(got.Ns), len(got.Extra), len(a.Answer), len(a.Ns), len(a.Extra))
			}
			if a.Wire == nil {
				continue
			}
			blobs++
			q, err := req.Pack()
			if err != nil {
				t.Fatal(err)
			}
			fast := AppendWire(nil, q[:12], q[12:], &a)
			if !bytes.Equal(fast, slow) {
				t.Errorf("%s (%s): fast path differs from slow path\nfast %x\nslow %x", c.title(), spelled, fast, slow)
			}
			if len(got.Answer) > 0 && strings.EqualFold(got.Answer[0].Header().Name, spelled) && got.Answer[0].Header().Name != spelled {
				t.Errorf("%s: answer owner %q does not echo the question's case %q", c.title(), got.Answer[0].Header().Name, spelled)
			}
		}
	}
	if blobs < 40 {
		t.Errorf("only %d cases had a blob", blobs)
	}
}

func TestLookupZeroAlloc(t *testing.T) {
	tab, _ := fixtureTable()
	cl := Client{Addr: netip.MustParseAddr("192.0.2.1")}
	for _, c := range []Case{
		{Qname: "www.example.com.", Qtype: dns.TypeA},
		{Qname: "www.example.com.", Qtype: dns.TypeMX},
		{Qname: "sub.example.com.", Qtype: dns.TypeA},
		{Qname: "router.lan.", Qtype: dns.TypeA},
		{Qname: "other.lan.", Qtype: dns.TypeA},
		{Qname: "host.fwd.example.org.", Qtype: dns.TypeA},
	} {
		q := wireName(t, c.Qname)
		if n := testing.AllocsPerRun(100, func() { tab.Lookup(q, c.Qtype, cl) }); n != 0 {
			t.Errorf("%s: %v allocations per lookup, want 0", c.title(), n)
		}
	}
}

// TestWildcardAllocs keeps wildcard A answers pre-encoded and at two
// allocations (the owner name and the synthesised record).
func TestWildcardAllocs(t *testing.T) {
	tab, _ := fixtureTable()
	q := wireName(t, "foo.wild.example.com.")
	if a := tab.Lookup(q, dns.TypeA, Client{}); a.Wire == nil {
		t.Fatal("wildcard A has no blob")
	}
	if n := testing.AllocsPerRun(100, func() { tab.Lookup(q, dns.TypeA, Client{}) }); n > 2 {
		t.Errorf("wildcard A: %v allocations per lookup, want at most 2", n)
	}
}

// TestConcurrentMaterialise races first lookups of compact sets, whose
// records are built on first use.
func TestConcurrentMaterialise(t *testing.T) {
	tab, _ := fixtureTable()
	names := []string{"www.example.com.", "router.lan.", "foo.wild.example.com.", "mail.example.com."}
	done := make(chan []string)
	for g := 0; g < 4; g++ {
		go func() {
			var out []string
			for _, n := range names {
				for _, qt := range []uint16{dns.TypeA, dns.TypeAAAA, dns.TypeMX} {
					out = append(out, render(tab.Lookup(wireName(t, n), qt, Client{})))
				}
			}
			done <- out
		}()
	}
	first := <-done
	for g := 1; g < 4; g++ {
		if got := <-done; strings.Join(got, "") != strings.Join(first, "") {
			t.Errorf("goroutines disagree")
		}
	}
}
