package authority

import (
	"strings"
	"testing"

	"github.com/svcdns/svc/api/v1alpha1"
)

// TestParseZoneFileRefuses: each bad input is refused with its line and what
// is wrong, as PUT refuses the same record.
func TestParseZoneFileRefuses(t *testing.T) {
	head := "$TTL 300\n@ IN SOA ns1.example.com. h.example.com. 1 2 3 4 5\n"
	cases := []struct{ name, text, want string }{
		{"origin escapes the zone", head + "$ORIGIN evil.example.\nwww IN A 192.0.2.1\n", "line 4: www.evil.example. is outside zone example.com."},
		{"absolute name outside", head + "ok IN A 192.0.2.1\nwww.other.test. IN A 192.0.2.1\n", "line 4: www.other.test. is outside zone"},
		{"NUL in owner", head + "a\\000b IN A 192.0.2.1\n", "line 3: name a\\000b.example.com. holds a control character (byte 0x00)"},
		{"tab byte in owner", head + "a\\009b IN A 192.0.2.1\n", "line 3: name"},
		{"TXT over 64 KiB", head + "big IN TXT \"" + strings.Repeat("x", 70000) + "\"\n", "line 3: big.example.com. TXT record data is"},
		{"class CH", head + "x CH A 192.0.2.1\n", "line 3:"},
		{"SOA below apex", head + "sub IN SOA a. b. 1 2 3 4 5\n", "line 3: sub.example.com.: SOA below the apex"},
		{"CNAME beside other data (what PUT refuses)", head + "w IN CNAME t.example.com.\nw IN A 192.0.2.1\n", "w "},
		{"include", head + "$INCLUDE /etc/passwd\n", "zone file:"},
		{"multi-line record before the bad one", head + "m IN TXT ( \"a\"\n \"b\" )\n$ORIGIN x.test.\nq IN A 192.0.2.1\n", "line 6: q.x.test."},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			_, err := ParseZoneFile(strings.NewReader(c.text), "example.com.")
			if err == nil {
				t.Fatalf("accepted:\n%s", c.text)
			}
			if !strings.Contains(err.Error(), c.want) {
				t.Fatalf("error %q, want it to contain %q", err, c.want)
			}
		})
	}
}

// TestParseZoneFileAccepts: long TXT data is split into 255-byte strings as
// DNS allows, and a record set built from it passes CheckRecordSet.
func TestParseZoneFileAccepts(t *testing.T) {
	text := "$ORIGIN example.com.\n$TTL 300\nt IN TXT \"" + strings.Repeat("y", 600) + "\"\nsub IN A 192.0.2.1\n"
	z, err := ParseZoneFile(strings.NewReader(text), "example.com.")
	if err != nil {
		t.Fatal(err)
	}
	if len(z.Endpoints) != 2 {
		t.Fatalf("endpoints %+v", z.Endpoints)
	}
	for _, ep := range z.Endpoints {
		if ep.RecordType == "TXT" && strings.Count(ep.Targets[0], "\"") != 6 {
			t.Fatalf("TXT not split into 255-byte strings: %.80s...", ep.Targets[0])
		}
	}
}

// FuzzZoneFileWritePath: whatever the reader accepts, the write-time check
// (what PUT runs) accepts and the compile step serves without a problem.
func FuzzZoneFileWritePath(f *testing.F) {
	f.Add("$ORIGIN example.com.\n@ 60 IN SOA ns hm 1 2 3 4 5\n@ IN NS ns1.example.net.\nwww 60 IN A 192.0.2.1\n")
	f.Add("$ORIGIN evil.example.\nwww IN A 192.0.2.1\n")
	f.Add("a\\000b IN A 192.0.2.1\n")
	f.Add("w IN CNAME t.example.com.\nw IN A 192.0.2.1\n")
	f.Add("t IN TXT \"" + strings.Repeat("z", 300) + "\" \"b\"\nm IN MX 10 mx\ns IN SRV 1 2 3 t\n")
	f.Fuzz(func(t *testing.T, text string) {
		imp, err := ParseZoneFile(strings.NewReader(text), "example.com.")
		if err != nil {
			return
		}
		z := zoneObj("example.com")
		rs := recordSet("default", "f", "example.com", imp.Endpoints...)
		if ps := CheckRecordSet(&rs, &z); len(ps) > 0 {
			t.Fatalf("accepted by the reader, refused by PUT: %+v", ps)
		}
		z.Spec.SOA, z.Spec.NameServers = imp.SOA, imp.NameServers
		if len(z.Spec.NameServers) == 0 {
			z.Spec.NameServers = nil
		}
		_, problems := Compile([]v1alpha1.DNSZone{z}, []v1alpha1.DNSRecordSet{rs}, fixtureNow)
		for _, p := range problems {
			if p.Kind == "DNSRecordSet" {
				t.Fatalf("accepted by the reader, not served: %+v", p)
			}
		}
	})
}
