package querylog

import (
	"context"
	"net/netip"
	"net/url"
	"strings"
	"testing"
	"time"
)

func TestDomainPatterns(t *testing.T) {
	m, err := compileDomainPatterns([]string{"ads.example", "*.track.example", "/^x[0-9]+\\./", "Upper.Example."})
	if err != nil {
		t.Fatal(err)
	}
	for _, tc := range []struct {
		name string
		want bool
	}{
		{"ads.example", true},
		{"sub.ads.example", false},
		{"track.example", false}, // *.suffix is strict subdomains
		{"a.track.example", true},
		{"a.b.track.example", true},
		{"xtrack.example", false},
		{"x12.example", true},
		{"ax12.example", false},
		{"upper.example", true},
	} {
		if got := m.match(tc.name); got != tc.want {
			t.Errorf("%s: %v, want %v", tc.name, got, tc.want)
		}
	}
	for _, bad := range []string{"", "/(/", "*.", "a b", "*.*.x"} {
		if _, err := compileDomainPatterns([]string{bad}); err == nil {
			t.Errorf("%q accepted", bad)
		}
	}
}

func TestClientPatterns(t *testing.T) {
	m, err := compileClientPatterns([]string{"10.1.2.3", "192.168.0.0/16", "2001:db8::/32", "Kids-Tablet"})
	if err != nil {
		t.Fatal(err)
	}
	for _, tc := range []struct {
		addr, name string
		want       bool
	}{
		{"10.1.2.3", "", true},
		{"10.1.2.4", "", false},
		{"192.168.77.1", "", true},
		{"::ffff:192.168.1.1", "", true},
		{"2001:db8:1::1", "", true},
		{"2001:db9::1", "", false},
		{"10.9.9.9", "kids-tablet", true},
		{"10.9.9.9", "laptop", false},
	} {
		if got := m.match(netip.MustParseAddr(tc.addr), tc.name); got != tc.want {
			t.Errorf("%s/%s: %v, want %v", tc.addr, tc.name, got, tc.want)
		}
	}
	if _, err := compileClientPatterns([]string{"a b"}); err == nil {
		t.Error("name with space accepted")
	}
}

func TestSpecialUse(t *testing.T) {
	for name, want := range map[string]bool{
		"localhost": true, "a.localhost": true, "printer.local": true, "router.home.arpa": true,
		"1.0.168.192.in-addr.arpa": true, "1.0.0.10.in-addr.arpa": true, "1.0.20.172.in-addr.arpa": true,
		"1.0.32.172.in-addr.arpa": false, "8.8.8.8.in-addr.arpa": false, "example.com": false,
		"notlocal": false, "localhost.example": false, "x.invalid": true, "b.d.f.ip6.arpa": true,
	} {
		if got := IsSpecialUse(name); got != want {
			t.Errorf("%s: %v, want %v", name, got, want)
		}
	}
	// IsSpecialUse settles names by their last label first: each suffix
	// (and a name under it) must still be found.
	for _, s := range sudnSuffixes {
		if !IsSpecialUse(s) || !IsSpecialUse("x."+s) {
			t.Errorf("%s or a name under it is not special-use", s)
		}
	}
}

func TestAnonymize(t *testing.T) {
	p, _ := compilePolicy(Config{Enabled: true, Privacy: PrivacyAnonymizeClient, Anonymize: AnonymizePrefix}, nil)
	for in, want := range map[string]string{"192.0.2.77": "192.0.2.0", "2001:db8:1:2:3::9": "2001:db8:1::", "::ffff:10.1.2.3": "10.1.2.0", "bogus": ""} {
		if got := p.anonymize(in); got != want {
			t.Errorf("%s: %q, want %q", in, got, want)
		}
	}
	k1, _ := compilePolicy(Config{Enabled: true, Anonymize: AnonymizePseudonym}, []byte("key-1"))
	k2, _ := compilePolicy(Config{Enabled: true, Anonymize: AnonymizePseudonym}, []byte("key-2"))
	a, b, c := k1.anonymize("192.0.2.1"), k1.anonymize("192.0.2.1"), k2.anonymize("192.0.2.1")
	if a != b || a == c || !strings.HasPrefix(a, "anon-") || k1.anonymize("192.0.2.2") == a {
		t.Fatalf("pseudonyms %q %q %q", a, b, c)
	}
}

func TestParseFilter(t *testing.T) {
	tok := encodeContinue(42)
	for _, tc := range []struct {
		q       string
		ok      bool
		check   func(Filter) bool
		comment string
	}{
		{"", true, func(f Filter) bool { return f == Filter{} }, "empty"},
		{"domain=Ads.Example.&client=10.0.0.1&list=ads&qtype=aaaa&status=Blocked&upstream=u&zone=z&policy=default/kids&client_id=%20kids%20&limit=10&continue=" + tok, true,
			func(f Filter) bool {
				return f.Domain == "ads.example" && f.Client == "10.0.0.1" && f.List == "ads" && f.QType == "AAAA" && f.Status == "blocked" &&
					f.Upstream == "u" && f.Zone == "z" && f.Policy == "default/kids" && f.ClientID == "kids" && f.Limit == 10 && f.Continue == tok
			}, "all"},
		{"domain=ads&domain_match=substring", true, func(f Filter) bool { return f.DomainMatch == MatchSubstring }, "substring"},
		{"status_class=error&since=2026-01-01T00:00:00Z&until=2026-01-02T00:00:00.5Z", true,
			func(f Filter) bool {
				return f.StatusClass == "error" && f.Since.Equal(time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC)) && f.Until.Nanosecond() == 5e8
			}, "class and times"},
		{"status=nope", false, nil, "unknown status"},
		{"status_class=nope", false, nil, "unknown class"},
		{"domain_match=regex", false, nil, "bad match"},
		{"limit=0", false, nil, "limit 0"},
		{"limit=1001", false, nil, "limit too big"},
		{"limit=x", false, nil, "limit nan"},
		{"since=yesterday", false, nil, "bad time"},
		{"continue=abc", false, nil, "bad token"},
		{"client=a&client=b", false, nil, "repeated"},
		{"client_id=a&client_id=b", false, nil, "repeated client_id"},
		{"client_id=" + strings.Repeat("a", 256), false, nil, "long client_id"},
		{"domain=" + strings.Repeat("a", 256), false, nil, "long"},
	} {
		v, _ := url.ParseQuery(tc.q)
		f, err := ParseFilter(v)
		if (err == nil) != tc.ok {
			t.Errorf("%s: err %v", tc.comment, err)
			continue
		}
		if tc.ok && !tc.check(f) {
			t.Errorf("%s: %+v", tc.comment, f)
		}
	}
}

func FuzzParseFilter(f *testing.F) {
	for _, s := range []string{"", "domain=a.b&status=blocked", "since=2026-01-01T00:00:00Z&limit=5", "continue=" + encodeContinue(7), "status_class=allowed&domain_match=substring&domain=%00", "client_id=kids&client=10.0.0.1"} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, q string) {
		v, err := url.ParseQuery(q)
		if err != nil {
			return
		}
		flt, err := ParseFilter(v)
		if err != nil {
			return
		}
		if flt.Limit < 0 || flt.Limit > maxLimit {
			t.Fatalf("limit %d", flt.Limit)
		}
		if flt.Continue != "" {
			if id, err := decodeContinue(flt.Continue); err != nil || id <= 0 {
				t.Fatalf("accepted token %q", flt.Continue)
			}
		}
		r := Row{Domain: flt.Domain, Status: flt.Status, ClientID: flt.ClientID}
		_ = flt.Match(&r)
		if flt.ClientID != "" && (flt.Match(&Row{ClientID: flt.ClientID + "x"}) || strings.TrimSpace(flt.ClientID) != flt.ClientID) {
			t.Fatalf("client_id %q matches another client ID or keeps spaces", flt.ClientID)
		}
	})
}

func FuzzExcludePatterns(f *testing.F) {
	for _, s := range []string{"ads.example", "*.x.example", "/^a+$/", "10.0.0.0/8", "::1", "laptop"} {
		f.Add(s, "a.x.example")
	}
	f.Fuzz(func(t *testing.T, pattern, name string) {
		if m, err := compileDomainPatterns([]string{pattern}); err == nil {
			m.match(NormalizeDomain(name))
			if !strings.HasPrefix(pattern, "/") && !strings.HasPrefix(pattern, "*.") && !m.match(NormalizeDomain(pattern)) {
				t.Fatalf("exact pattern %q does not match itself", pattern)
			}
		}
		if m, err := compileClientPatterns([]string{pattern}); err == nil {
			if a, err := netip.ParseAddr(pattern); err == nil && !m.match(a, "") {
				t.Fatalf("address pattern %q does not match itself", pattern)
			}
		}
	})
}

func TestBrokerDropsSlowSubscriber(t *testing.T) {
	b := NewBroker()
	slow, fast := b.Subscribe(2), b.Subscribe(100)
	done := make(chan struct{})
	go func() {
		b.Publish([]Row{{ID: 1}, {ID: 2}, {ID: 3}})
		close(done)
	}()
	select {
	case <-done:
	case <-time.After(5 * time.Second):
		t.Fatal("Publish blocked on a slow subscriber")
	}
	if !slow.Overflowed() || b.Subscribers() != 1 {
		t.Fatalf("slow subscriber kept: overflowed=%v subs=%d", slow.Overflowed(), b.Subscribers())
	}
	n := 0
	for range slow.C { // drained then closed
		n++
	}
	if n != 2 || len(fast.C) != 3 {
		t.Fatalf("slow got %d, fast has %d", n, len(fast.C))
	}
	fast.Close()
	if b.Subscribers() != 0 {
		t.Fatal("close did not unsubscribe")
	}
}

func TestHourCapMakesTopApproximate(t *testing.T) {
	w := openTest(t, DefaultConfig(), Options{DomainCap: 3})
	now := time.Now()
	for _, d := range []string{"a", "a", "b", "c", "d", "e"} {
		w.Enqueue(row(now, d+".example", "10.0.0.1", "answered"))
	}
	flush(t, w)
	top, err := w.Top(context.Background(), TopRequest{Dim: DimDomains})
	if err != nil || !top.Approximate || len(top.Items) != 3 || top.Items[0].Key != "a.example" || top.Items[0].Count != 2 {
		t.Fatalf("top %+v %v", top, err)
	}
	w.hourMu.Lock()
	n := len(w.hour.counts[0])
	w.hourMu.Unlock()
	if n != 4 { // 3 names + the overflow bucket
		t.Fatalf("%d domain counters kept, cap 3", n)
	}
}

// A zone filter finds the rows of that zone whether or not the user types
// the trailing dot the rows keep (a transfer's row says "imported.test.").
func TestZoneFilterIgnoresTrailingDotAndCase(t *testing.T) {
	for _, c := range []struct {
		filter, row string
		want        bool
	}{
		{"imported.test", "imported.test.", true},
		{"imported.test.", "imported.test.", true},
		{"Imported.TEST", "imported.test.", true},
		{"imported.test", "imported.test", true},
		{"test", "imported.test.", false},
		{".", ".", true},
		{".", "test.", false},
	} {
		f := Filter{Zone: c.filter}
		if got := f.Match(&Row{Zone: c.row}); got != c.want {
			t.Errorf("zone=%q on a row of %q: match %v, want %v", c.filter, c.row, got, c.want)
		}
	}
}
