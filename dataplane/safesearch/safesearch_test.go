package safesearch

import (
	"testing"

	"github.com/miekg/dns"
)

func wire(t *testing.T, name string) []byte {
	t.Helper()
	b := make([]byte, 256)
	n, err := dns.PackDomainName(dns.Fqdn(name), b, 0, nil, false)
	if err != nil {
		t.Fatal(err)
	}
	return b[:n]
}

func TestLookup(t *testing.T) {
	tab := New()
	cases := []struct {
		name   string
		mode   Mode
		target string // "" means not rewritten
	}{
		{"www.google.com", Strict, "forcesafesearch.google.com."},
		{"google.de", Strict, "forcesafesearch.google.com."},
		{"www.google.co.uk", Moderate, "forcesafesearch.google.com."},
		{"www.google.com.br", Strict, "forcesafesearch.google.com."},
		{"mail.google.com", Strict, ""},
		{"www.youtube.com", Strict, "restrict.youtube.com."},
		{"www.youtube.com", Moderate, "restrictmoderate.youtube.com."},
		{"m.youtube.com", Moderate, "restrictmoderate.youtube.com."},
		{"www.bing.com", Strict, "strict.bing.com."},
		{"duckduckgo.com", Strict, "safe.duckduckgo.com."},
		{"ya.ru", Strict, "familysearch.yandex.ru."},
		{"pixabay.com", Strict, "safesearch.pixabay.com."},
		{"example.com", Strict, ""},
	}
	for _, tc := range cases {
		ans, _, ok := tab.Lookup(wire(t, tc.name), tc.mode)
		if tc.target == "" {
			if ok {
				t.Errorf("%s rewritten", tc.name)
			}
			continue
		}
		if !ok || len(ans) != 1 || ans[0].(*dns.CNAME).Target != tc.target || ans[0].Header().Name != dns.Fqdn(tc.name) {
			t.Errorf("%s (mode %d) = %v, want CNAME %s", tc.name, tc.mode, ans, tc.target)
		}
	}
	if tab.Engines() != 6 || tab.Hosts() < 350 {
		t.Fatalf("engines %d hosts %d", tab.Engines(), tab.Hosts())
	}
}

func TestLookupAllocs(t *testing.T) {
	tab := New()
	q := wire(t, "www.google.fr")
	if n := testing.AllocsPerRun(100, func() { tab.Lookup(q, Strict) }); n != 0 {
		t.Fatalf("%v allocs", n)
	}
}
