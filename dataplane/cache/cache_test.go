package cache

import (
	"encoding/binary"
	"sync/atomic"
	"testing"
	"time"

	"github.com/miekg/dns"
)

type clock struct{ t time.Time }

func (c *clock) Now() time.Time { return c.t }

func rr(t testing.TB, s string) dns.RR {
	r, err := dns.NewRR(s)
	if err != nil {
		t.Fatal(err)
	}
	return r
}

func wname(s string) []byte {
	b := make([]byte, 256)
	n, _ := dns.PackDomainName(s, b, 0, nil, false)
	return b[:n]
}

func newTest(t *testing.T, mod func(*Config), refresh RefreshFunc) (*Cache, *clock) {
	clk := &clock{t: time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC)}
	cfg := DefaultConfig()
	cfg.MaxEntries = 100
	cfg.Now = clk.Now
	if mod != nil {
		mod(&cfg)
	}
	return New(cfg, refresh), clk
}

// ttls decodes the TTLs written by AppendSections.
func ttls(t *testing.T, c *Cache, e *Entry, now time.Time, stale bool) []uint32 {
	b := e.AppendSections(nil, now, c, stale)
	var out []uint32
	for i := 1; i < len(e.ttl); i += 2 {
		out = append(out, binary.BigEndian.Uint32(b[e.ttl[i]:]))
	}
	return out
}

func TestTTLs(t *testing.T) {
	cases := []struct {
		name  string
		mod   func(*Config)
		msg   *dns.Msg
		after time.Duration
		state State
		want  []uint32
	}{
		{"decrement", nil, &dns.Msg{Answer: []dns.RR{rr(t, "a. 300 IN A 192.0.2.1")}}, 100 * time.Second, Fresh, []uint32{200}},
		{"min ttl raises", nil, &dns.Msg{Answer: []dns.RR{rr(t, "a. 1 IN A 192.0.2.1")}}, 0, Fresh, []uint32{5}},
		{"max ttl caps", func(c *Config) { c.MaxTTL = time.Minute }, &dns.Msg{Answer: []dns.RR{rr(t, "a. 86400 IN A 192.0.2.1")}}, 0, Fresh, []uint32{60}},
		{"entry expires with smallest", nil, &dns.Msg{Answer: []dns.RR{rr(t, "a. 600 IN CNAME b."), rr(t, "b. 60 IN A 192.0.2.1")}}, 61 * time.Second, Stale, []uint32{30, 30}},
		{"negative from SOA minimum", nil, &dns.Msg{MsgHdr: dns.MsgHdr{Rcode: dns.RcodeNameError}, Ns: []dns.RR{rr(t, "a. 3600 IN SOA ns. h. 1 2 3 4 90")}}, 10 * time.Second, Fresh, []uint32{80}},
		{"negative capped", func(c *Config) { c.NegativeTTL = 30 * time.Second }, &dns.Msg{MsgHdr: dns.MsgHdr{Rcode: dns.RcodeNameError}, Ns: []dns.RR{rr(t, "a. 3600 IN SOA ns. h. 1 2 3 4 900")}}, 0, Fresh, []uint32{30}},
		{"stale off", func(c *Config) { c.StaleTTL = 0 }, &dns.Msg{Answer: []dns.RR{rr(t, "a. 10 IN A 192.0.2.1")}}, 11 * time.Second, Miss, nil},
		{"stale window ends", nil, &dns.Msg{Answer: []dns.RR{rr(t, "a. 10 IN A 192.0.2.1")}}, 73 * time.Hour, Miss, nil},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			c, clk := newTest(t, tc.mod, nil)
			if err := c.Put(wname("a."), dns.TypeA, dns.ClassINET, 0, tc.msg, clk.t); err != nil {
				t.Fatal(err)
			}
			clk.t = clk.t.Add(tc.after)
			e, st := c.Get(wname("a."), dns.TypeA, dns.ClassINET, 0, clk.t)
			if st != tc.state {
				t.Fatalf("state %v, want %v", st, tc.state)
			}
			if e == nil {
				return
			}
			got := ttls(t, c, e, clk.t, st == Stale)
			if len(got) != len(tc.want) {
				t.Fatalf("ttls %v, want %v", got, tc.want)
			}
			for i := range got {
				if got[i] != tc.want[i] {
					t.Fatalf("ttls %v, want %v", got, tc.want)
				}
			}
		})
	}
}

func TestKeysAndFlush(t *testing.T) {
	c, clk := newTest(t, nil, nil)
	m := &dns.Msg{Answer: []dns.RR{rr(t, "a. 300 IN A 192.0.2.1")}}
	_ = c.Put(wname("a."), dns.TypeA, dns.ClassINET, FlagDO, m, clk.t)
	_ = c.Put(wname("b."), dns.TypeA, dns.ClassINET, 0, m, clk.t)
	if _, st := c.Get(wname("a."), dns.TypeA, dns.ClassINET, 0, clk.t); st != Miss {
		t.Fatal("DO bit not part of the key")
	}
	if _, st := c.Get(wname("a."), dns.TypeAAAA, dns.ClassINET, FlagDO, clk.t); st != Miss {
		t.Fatal("type not part of the key")
	}
	c.Flush(wname("a."))
	if _, st := c.Get(wname("a."), dns.TypeA, dns.ClassINET, FlagDO, clk.t); st != Miss {
		t.Fatal("flushed name still cached")
	}
	if _, st := c.Get(wname("b."), dns.TypeA, dns.ClassINET, 0, clk.t); st != Fresh {
		t.Fatal("flush of one name dropped another")
	}
	c.Flush(nil)
	if c.Len() != 0 {
		t.Fatalf("len %d after flush all", c.Len())
	}
}

func TestServfailDoesNotReplaceStale(t *testing.T) {
	c, clk := newTest(t, nil, nil)
	_ = c.Put(wname("a."), dns.TypeA, dns.ClassINET, 0, &dns.Msg{Answer: []dns.RR{rr(t, "a. 10 IN A 192.0.2.1")}}, clk.t)
	clk.t = clk.t.Add(time.Minute)
	_ = c.Put(wname("a."), dns.TypeA, dns.ClassINET, 0, &dns.Msg{MsgHdr: dns.MsgHdr{Rcode: dns.RcodeServerFailure}}, clk.t)
	if e, st := c.Get(wname("a."), dns.TypeA, dns.ClassINET, 0, clk.t); st != Stale || e.Rcode() != dns.RcodeSuccess {
		t.Fatalf("state %v", st)
	}
	_ = c.Put(wname("s."), dns.TypeA, dns.ClassINET, 0, &dns.Msg{MsgHdr: dns.MsgHdr{Rcode: dns.RcodeServerFailure}}, clk.t)
	clk.t = clk.t.Add(6 * time.Second)
	if _, st := c.Get(wname("s."), dns.TypeA, dns.ClassINET, 0, clk.t); st != Miss {
		t.Fatalf("servfail kept %v past 5s", st)
	}
}

func TestBoundedEviction(t *testing.T) {
	c, clk := newTest(t, func(c *Config) { c.MaxEntries = 64 }, nil)
	m := &dns.Msg{Answer: []dns.RR{rr(t, "a. 300 IN A 192.0.2.1")}}
	for i := range 1000 {
		_ = c.Put(wname(string(rune('a'+i%26))+"."+string(rune('a'+i/26%26))+".x."), dns.TypeA, dns.ClassINET, 0, m, clk.t)
	}
	if n := c.Len(); n > 64+len(c.shards) {
		t.Fatalf("len %d over bound", n)
	}
}

func TestPrefetch(t *testing.T) {
	var calls atomic.Int32
	done := make(chan string, 1)
	c, clk := newTest(t, nil, func(name string, qtype, qclass uint16, flags Flags) {
		calls.Add(1)
		done <- name
	})
	_ = c.Put(wname("p."), dns.TypeA, dns.ClassINET, 0, &dns.Msg{Answer: []dns.RR{rr(t, "p. 100 IN A 192.0.2.1")}}, clk.t)
	for range 5 {
		c.Get(wname("p."), dns.TypeA, dns.ClassINET, 0, clk.t)
	}
	if calls.Load() != 0 {
		t.Fatal("prefetch before the last tenth of the TTL")
	}
	clk.t = clk.t.Add(95 * time.Second)
	c.Get(wname("p."), dns.TypeA, dns.ClassINET, 0, clk.t)
	select {
	case name := <-done:
		if name != string(wname("p.")) {
			t.Fatalf("refreshed %q", name)
		}
	case <-time.After(2 * time.Second):
		t.Fatal("no prefetch")
	}
	c.Get(wname("p."), dns.TypeA, dns.ClassINET, 0, clk.t)
	time.Sleep(10 * time.Millisecond)
	if calls.Load() != 1 {
		t.Fatalf("prefetched %d times, want once", calls.Load())
	}
}

func TestOff(t *testing.T) {
	c := New(Config{}, nil)
	if c != nil {
		t.Fatal("MaxEntries 0 should turn the cache off")
	}
	if _, st := c.Get(wname("a."), 1, 1, 0, time.Now()); st != Miss {
		t.Fatal("nil cache hit")
	}
}

// A time before the entry was stored (the pipeline passes a query's
// receive time, and another query may have stored the entry since) counts
// as no time elapsed: the full TTL, not 0 from a wrapped-around age. NowOr
// is the cache's own clock when it has one, else the time given, else now.
func TestTimeBeforeStored(t *testing.T) {
	c, clk := newTest(t, nil, nil)
	if err := c.Put(wname("a."), dns.TypeA, dns.ClassINET, 0, &dns.Msg{Answer: []dns.RR{rr(t, "a. 300 IN A 192.0.2.1")}}, clk.t); err != nil {
		t.Fatal(err)
	}
	e, st := c.Get(wname("a."), dns.TypeA, dns.ClassINET, 0, clk.t)
	if st != Fresh {
		t.Fatalf("state %v", st)
	}
	for _, before := range []time.Duration{time.Millisecond, 1500 * time.Millisecond, time.Hour} {
		if got := ttls(t, c, e, clk.t.Add(-before), false); len(got) != 1 || got[0] != 300 {
			t.Errorf("%v before it was stored: ttls %v, want [300]", before, got)
		}
	}
	given := time.Date(2030, 1, 1, 0, 0, 0, 0, time.UTC)
	if got := c.NowOr(given); !got.Equal(clk.t) {
		t.Errorf("NowOr with the cache's clock = %v, want %v", got, clk.t)
	}
	own := New(DefaultConfig(), nil)
	if got := own.NowOr(given); !got.Equal(given) {
		t.Errorf("NowOr = %v, want the time given", got)
	}
	if got := own.NowOr(time.Time{}); time.Since(got) > time.Minute || got.IsZero() {
		t.Errorf("NowOr(zero) = %v, want now", got)
	}
}
