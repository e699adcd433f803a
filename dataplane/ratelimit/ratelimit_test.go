package ratelimit

import (
	"net/netip"
	"testing"
	"time"

	"github.com/miekg/dns"
)

func q(t testing.TB, name string) []byte {
	m := new(dns.Msg)
	m.SetQuestion(name, dns.TypeA)
	b, err := m.Pack()
	if err != nil {
		t.Fatal(err)
	}
	return b
}

func TestLimiter(t *testing.T) {
	l, err := New(Config{Enabled: true, IPv4: map[int]int{32: 60}, IPv6: map[int]int{128: 0, 64: 60}, Slip: 0,
		Exempt: []netip.Prefix{netip.MustParsePrefix("192.0.2.0/24")}, MaxBuckets: 32}, nil)
	if err != nil {
		t.Fatal(err)
	}
	var now int64
	l.now = func() int64 { return now }
	msg := q(t, "www.example.com.")
	a := netip.MustParseAddr("198.51.100.1")
	if l.Check(a, msg) != Allow || l.Check(a, msg) != Drop {
		t.Fatal("burst of 1 not enforced")
	}
	now += int64(time.Second)
	if l.Check(a, msg) != Allow {
		t.Fatal("no refill after 1s")
	}
	if l.Check(netip.MustParseAddr("192.0.2.7"), msg) != Allow || l.Check(netip.MustParseAddr("127.0.0.1"), msg) != Allow {
		t.Fatal("exempt or loopback limited")
	}
	if l.Check(a, q(t, "HEALTH.service.internal.")) != Allow {
		t.Fatal("health name limited")
	}
	// IPv6 /128 off, /64 on: two hosts of one /64 share a bucket.
	if l.Check(netip.MustParseAddr("2001:db8::1"), msg) != Allow || l.Check(netip.MustParseAddr("2001:db8::2"), msg) != Drop {
		t.Fatal("ipv6 /64 not shared")
	}
	for i := range 1000 {
		l.Check(netip.AddrFrom4([4]byte{10, byte(i >> 8), byte(i), 1}), msg)
	}
	if b := l.Buckets(); b > 32+numShards {
		t.Fatalf("%d buckets, max 32", b)
	}
	if off, _ := New(Config{Enabled: false}, nil); off.Check(a, msg) != Allow {
		t.Fatal("nil limiter limits")
	}
	if _, err := New(Config{Enabled: true, IPv4: map[int]int{33: 1}}, nil); err == nil {
		t.Fatal("prefix 33 accepted")
	}
}

func TestAppendTruncated(t *testing.T) {
	b, ok := AppendTruncated(nil, q(t, "www.example.com."))
	m := new(dns.Msg)
	if !ok || m.Unpack(b) != nil || !m.Truncated || !m.Response || len(m.Answer) != 0 || m.Question[0].Name != "www.example.com." {
		t.Fatalf("%v %v", ok, m)
	}
}

func TestCheckAllocs(t *testing.T) {
	l, _ := New(Config{Enabled: true, Slip: 50}, nil)
	msg := q(t, "www.example.com.")
	a := netip.MustParseAddr("198.51.100.1")
	if n := testing.AllocsPerRun(1000, func() { l.Check(a, msg) }); n != 0 {
		t.Fatalf("%v allocs per check", n)
	}
}

func BenchmarkCheck(b *testing.B) {
	l, _ := New(Config{Enabled: true, Slip: 50}, nil)
	msg := q(b, "www.example.com.")
	b.ReportAllocs()
	i := 0
	for b.Loop() {
		i++
		l.Check(netip.AddrFrom4([4]byte{10, 0, byte(i >> 8), byte(i)}), msg)
	}
}

// TestSlipSpread: the slip share holds over any run of limited queries,
// not only per hundred (slip 50 is every other one, so a flood of 10
// gets 5 TC=1 answers, not 10).
func TestSlipSpread(t *testing.T) {
	for _, slip := range []int{0, 1, 33, 50, 100} {
		l, err := New(Config{Enabled: true, IPv4: map[int]int{32: 60}, Slip: slip}, nil)
		if err != nil {
			t.Fatal(err)
		}
		l.now = func() int64 { return 0 }
		msg := q(t, "www.example.com.")
		a := netip.MustParseAddr("198.51.100.1")
		l.Check(a, msg) // the burst
		slipped := 0
		for n := 1; n <= 300; n++ {
			if l.Check(a, msg) == Slip {
				slipped++
			}
			// After n limited queries, floor(n*slip/100) were slipped.
			if want := n * slip / 100; slipped != want {
				t.Fatalf("slip %d: %d of the first %d limited queries slipped, want %d", slip, slipped, n, want)
			}
		}
	}
}
