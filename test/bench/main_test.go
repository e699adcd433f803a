package main

import (
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/miekg/dns"

	"github.com/svcdns/svc/test/fakeupstream"
)

// TestReadQueries: -drive asks what a dnsperf input file lists, and a file
// it cannot read whole is refused with the line at fault.
func TestReadQueries(t *testing.T) {
	dir := t.TempDir()
	write := func(name, text string) string {
		p := filepath.Join(dir, name)
		if err := os.WriteFile(p, []byte(text), 0o600); err != nil {
			t.Fatal(err)
		}
		return p
	}
	pkts, err := readQueries(write("ok.txt", "h1.bench. A\n# a comment\n\nc2.cache.up AAAA\nb3.ads3.blk\n"))
	if err != nil {
		t.Fatal(err)
	}
	want := []struct {
		name  string
		qtype uint16
	}{{"h1.bench.", dns.TypeA}, {"c2.cache.up.", dns.TypeAAAA}, {"b3.ads3.blk.", dns.TypeA}}
	if len(pkts) != len(want) {
		t.Fatalf("%d queries, want %d", len(pkts), len(want))
	}
	for i, w := range want {
		m := new(dns.Msg)
		if err := m.Unpack(pkts[i]); err != nil {
			t.Fatal(err)
		}
		if q := m.Question[0]; q.Name != w.name || q.Qtype != w.qtype || !m.RecursionDesired || m.Id != uint16(i) {
			t.Errorf("query %d: %v id %d rd %v, want %s %s", i, q, m.Id, m.RecursionDesired, w.name, dns.TypeToString[w.qtype])
		}
	}
	for _, c := range []struct{ name, text, err string }{
		{"type.txt", "a.example. A\nb.example. NOPE\n", "type.txt:2: unknown type \"NOPE\""},
		{"empty.txt", "# nothing\n", "no queries"},
		{"long.txt", strings.Repeat("a", 64) + ".example. A\n", "long.txt:1:"},
	} {
		if _, err := readQueries(write(c.name, c.text)); err == nil || !strings.Contains(err.Error(), c.err) {
			t.Errorf("%s: error %v, want one containing %q", c.name, err, c.err)
		}
	}
}

// TestDriveCountsOnlyRightAnswers: -drive measures a server that answers,
// and refuses to rate one that answers SERVFAIL (a fast failure must not
// look like a fast server).
func TestDriveCountsOnlyRightAnswers(t *testing.T) {
	file := filepath.Join(t.TempDir(), "q.txt")
	if err := os.WriteFile(file, []byte("a.example. A\nb.example. A\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	for _, c := range []struct {
		rcode byte
		ok    bool
	}{{dns.RcodeSuccess, true}, {dns.RcodeNameError, true}, {dns.RcodeServerFailure, false}} {
		addr := fakeupstream.Serve(t, func(w dns.ResponseWriter, r *dns.Msg) {
			m := new(dns.Msg)
			_ = w.WriteMsg(m.SetRcode(r, int(c.rcode)))
		})
		err := driveServer(addr, file, strconv.Itoa(os.Getpid()), 200*time.Millisecond, 2, 4)
		if (err == nil) != c.ok {
			t.Errorf("rcode %s: error %v, want ok %v", dns.RcodeToString[int(c.rcode)], err, c.ok)
		}
	}
}
