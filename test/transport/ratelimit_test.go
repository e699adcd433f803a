package transport_test

import (
	"net"
	"testing"
	"time"

	"github.com/miekg/dns"

	"github.com/svcdns/svc/dataplane/ratelimit"
)

// TestUDPRateLimit floods from 127.0.0.2 with loopback exemption turned off
// (LimitLoopback: tests only, there are no other addresses here). The
// flood is cut to the rate (60 per minute per /32: burst 1, 1 per second),
// half of the limited queries get TC=1 (slip 50), the rest nothing;
// 127.0.0.3 is unaffected, TCP from 127.0.0.2 is never limited, and the
// health name always passes.
func TestUDPRateLimit(t *testing.T) {
	st := newStack(t, stackOpts{noTLS: true})
	m, err := ratelimit.NewMetrics(nil)
	if err != nil {
		t.Fatal(err)
	}
	l, err := ratelimit.New(ratelimit.Config{Enabled: true, IPv4: map[int]int{32: 60, 24: 0}, Slip: 50, LimitLoopback: true}, m)
	if err != nil {
		t.Fatal(err)
	}
	st.dp.SetRateLimiter(l)
	srv := net.UDPAddrFromAddrPort(st.addr("udp"))
	flood := func(src string, n int) (answered, tc int) {
		c, err := net.DialUDP("udp", &net.UDPAddr{IP: net.ParseIP(src)}, srv)
		if err != nil {
			t.Fatal(err)
		}
		defer c.Close()
		for i := range n {
			if _, err := c.Write(query(t, uint16(i+1))); err != nil {
				t.Fatal(err)
			}
		}
		buf := make([]byte, 1500)
		for {
			_ = c.SetReadDeadline(time.Now().Add(300 * time.Millisecond))
			k, err := c.Read(buf)
			if err != nil {
				return answered, tc
			}
			m := new(dns.Msg)
			if err := m.Unpack(buf[:k]); err != nil {
				t.Fatal(err)
			}
			if m.Truncated {
				if len(m.Answer) != 0 || len(m.Question) != 1 {
					t.Fatalf("slip answer not empty: %v", m)
				}
				tc++
			} else {
				answered++
			}
		}
	}
	const n = 100
	answered, tc := flood("127.0.0.2", n)
	t.Logf("127.0.0.2: %d answered, %d TC=1, %d dropped of %d", answered, tc, n-answered-tc, n)
	if answered < 1 || answered > 3 {
		t.Errorf("answered %d, want 1 to 3 (burst 1, 1/s)", answered)
	}
	limited := n - answered
	if tc < limited/2-2 || tc > limited/2+2 {
		t.Errorf("TC=1 %d of %d limited, want about half", tc, limited)
	}
	if a, _ := flood("127.0.0.3", 1); a != 1 {
		t.Error("127.0.0.3 limited")
	}
	// TCP from the limited address.
	c := &dns.Client{Net: "tcp", Timeout: 2 * time.Second, Dialer: &net.Dialer{LocalAddr: &net.TCPAddr{IP: net.ParseIP("127.0.0.2")}}}
	for i := range 20 {
		m := new(dns.Msg)
		m.SetQuestion("www.example.com.", dns.TypeA)
		r, _, err := c.Exchange(m, st.addr("tcp").String())
		if err != nil || r.Truncated || len(r.Answer) != 1 {
			t.Fatalf("tcp query %d: %v %v", i, r, err)
		}
	}
	// Health name over UDP from the limited address.
	hc := &dns.Client{Net: "udp", Timeout: time.Second, Dialer: &net.Dialer{LocalAddr: &net.UDPAddr{IP: net.ParseIP("127.0.0.2")}}}
	for i := range 5 {
		m := new(dns.Msg)
		m.SetQuestion("health.service.internal.", dns.TypeTXT)
		r, _, err := hc.Exchange(m, st.addr("udp").String())
		if err != nil || r.Truncated {
			t.Fatalf("health %d: %v %v", i, r, err)
		}
	}
}
