package dataplane

import (
	"context"
	"errors"
	"net"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/miekg/dns"

	"github.com/svcdns/svc/dataplane/upstream"
	"github.com/svcdns/svc/test/fakeupstream"
)

// shapedUpstream answers by the first label of the question, over UDP and
// TCP on one port: the shapes of answer a cache miss meets. It counts the
// UDP queries.
func shapedUpstream(t *testing.T, udpQueries *atomic.Int64) string {
	t.Helper()
	soa := func(zone string) dns.RR {
		rr, _ := dns.NewRR(zone + " 300 IN SOA ns.example. host.example. 1 7200 3600 1209600 60")
		return rr
	}
	answer := func(tcp bool) dns.HandlerFunc {
		return func(w dns.ResponseWriter, req *dns.Msg) {
			if !tcp {
				udpQueries.Add(1)
			}
			q := req.Question[0]
			label := strings.SplitN(q.Name, ".", 2)[0]
			m := new(dns.Msg)
			m.SetReply(req)
			m.RecursionAvailable = true
			rr := func(s string) dns.RR {
				r, err := dns.NewRR(q.Name + " 120 IN " + s)
				if err != nil {
					panic(err)
				}
				return r
			}
			switch label {
			case "a":
				m.Answer = append(m.Answer, rr("A 192.0.2.10"), rr("A 192.0.2.11"))
			case "aaaa":
				m.Answer = append(m.Answer, rr("AAAA 2001:db8::10"))
			case "nx":
				m.Rcode = dns.RcodeNameError
				m.Ns = append(m.Ns, soa("example."))
			case "nodata":
				m.Ns = append(m.Ns, soa("example."))
			case "cname":
				m.Answer = append(m.Answer, rr("CNAME target.example."))
				t, _ := dns.NewRR("target.example. 60 IN A 192.0.2.12")
				m.Answer = append(m.Answer, t)
			case "txt":
				m.Answer = append(m.Answer, rr(`TXT "v=spf1 -all" "second string"`))
			case "mx":
				m.Answer = append(m.Answer, rr("MX 10 mail.example."))
			case "srv": // not a light answer: handed off
				m.Answer = append(m.Answer, rr("SRV 0 5 5060 sip.example."))
			case "servfail":
				m.Rcode = dns.RcodeServerFailure
			case "refused":
				m.Rcode = dns.RcodeRefused
			case "tc":
				if !tcp {
					m.Truncated = true
				} else {
					m.Answer = append(m.Answer, rr("A 192.0.2.13"))
				}
			}
			_ = w.WriteMsg(m)
		}
	}
	return fakeupstream.UDPAndTCP(t, answer(false), answer(true))
}

func strictResolverFor(t *testing.T, timeout time.Duration, servers ...string) *upstream.Resolver {
	t.Helper()
	ucfg := upstream.DefaultConfig()
	ucfg.Groups = map[string]upstream.GroupConfig{upstream.DefaultGroup: {Servers: servers, Strategy: upstream.Strict, Timeout: timeout}}
	ucfg.Bootstrap = []string{}
	return newResolver(t, ucfg)
}

// TestAsyncLaneAnswersAsWorkers asks two servers the same misses, one on
// the async lane, one with every miss on a worker (SyncMisses), each with
// its own upstream of the same answers: the clients must get the same
// answers, on the miss and on the cache hit after it, and each upstream
// the same queries (a handoff asks nothing twice).
func TestAsyncLaneAnswersAsWorkers(t *testing.T) {
	t.Run("strict", func(t *testing.T) { testAsyncLaneAnswersAsWorkers(t, upstream.Strict, 1) })
	// Two servers racing (the default strategy): the lane races them too.
	t.Run("parallel_best", func(t *testing.T) { testAsyncLaneAnswersAsWorkers(t, upstream.ParallelBest, 2) })
}

func testAsyncLaneAnswersAsWorkers(t *testing.T, strategy upstream.Strategy, nServers int) {
	var nAsync, nSync atomic.Int64
	servers := map[bool]*Server{}
	for _, sync := range []bool{false, true} {
		n := &nAsync
		if sync {
			n = &nSync
		}
		var addrs []string
		for range nServers {
			addrs = append(addrs, shapedUpstream(t, n))
		}
		ucfg := upstream.DefaultConfig()
		ucfg.Groups = map[string]upstream.GroupConfig{upstream.DefaultGroup: {Servers: addrs, Strategy: strategy, Timeout: 2 * time.Second}}
		ucfg.Bootstrap = []string{}
		res := newResolver(t, ucfg)
		cfg := testConfig()
		cfg.SyncMisses = sync
		servers[sync] = startServer(t, cfg, NewSnapshot(SnapshotInput{Forwarder: res, Router: res}))
	}
	for _, label := range []string{"a", "aaaa", "nx", "nodata", "cname", "txt", "mx", "srv", "servfail", "refused", "tc"} {
		for _, do := range []bool{false, true} {
			name := label + ".shape.example."
			if do {
				name = label + ".do.shape.example."
			}
			for round := range 2 { // the miss, then the cache's answer
				var got [2]string
				for i, sync := range []bool{false, true} {
					m := query(name, dns.TypeA)
					if do {
						m.SetEdns0(1232, true)
					}
					r := exchange(t, servers[sync], "udp", m)
					r.Id = 0
					got[i] = r.String()
				}
				if got[0] != got[1] {
					t.Errorf("%s (round %d): the async lane answered\n%s\nworkers answered\n%s", name, round, got[0], got[1])
				}
			}
		}
	}
	if nAsync.Load() < 22 {
		t.Errorf("%d UDP queries upstream for 22 misses", nAsync.Load())
	}
	// With one server both send the same queries. Racing two, whether a
	// query also goes to the slower server depends on the latencies each
	// resolver has measured so far: the counts may differ by a few, never
	// past one query per server for each exchange.
	if nServers == 1 && nAsync.Load() != nSync.Load() {
		t.Errorf("UDP queries upstream: async lane %d, workers %d", nAsync.Load(), nSync.Load())
	}
	if most := int64(nServers * 44); nAsync.Load() > most || nSync.Load() > most {
		t.Errorf("UDP queries upstream: async lane %d, workers %d, more than %d", nAsync.Load(), nSync.Load(), most)
	}
}

// slowUpstream answers every A query after d (d < 0: never), each on a
// goroutine of its own (miekg/dns), and counts the queries.
func slowUpstream(t *testing.T, d time.Duration, n *atomic.Int64) string {
	t.Helper()
	return fakeupstream.Serve(t, func(w dns.ResponseWriter, req *dns.Msg) {
		n.Add(1)
		if d < 0 {
			return // silent
		}
		time.Sleep(d)
		m := new(dns.Msg)
		m.SetReply(req)
		rr, _ := dns.NewRR(req.Question[0].Name + " 60 IN A 192.0.2.20")
		m.Answer = append(m.Answer, rr)
		_ = w.WriteMsg(m)
	})
}

// sendMisses writes n unique-name misses to s's UDP listener and waits
// (2 s at most) until the upstream counted them; the client socket is
// returned for the answers.
func sendMisses(t *testing.T, s *Server, n int, upstream *atomic.Int64) *net.UDPConn {
	t.Helper()
	c, err := net.DialUDP("udp", nil, net.UDPAddrFromAddrPort(s.UDPAddrs()[0]))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { c.Close() })
	pkt := missQuery(t)
	for i := range n {
		uniqueName(pkt, uint64(i+1))
		if _, err := c.Write(pkt); err != nil {
			t.Fatal(err)
		}
	}
	deadline := time.Now().Add(2 * time.Second)
	for upstream.Load() < int64(n) && time.Now().Before(deadline) {
		time.Sleep(5 * time.Millisecond)
	}
	return c
}

// TestAsyncLaneHoldsNoWorker: misses waiting for a slow upstream hold
// their pending budget but no worker goroutine on the async lane, and one
// worker each without it.
func TestAsyncLaneHoldsNoWorker(t *testing.T) {
	for _, sync := range []bool{false, true} {
		t.Run(map[bool]string{false: "async", true: "workers"}[sync], func(t *testing.T) {
			var n atomic.Int64
			res := strictResolverFor(t, 3*time.Second, slowUpstream(t, 500*time.Millisecond, &n))
			cfg := testConfig()
			cfg.SyncMisses = sync
			s := startServer(t, cfg, NewSnapshot(SnapshotInput{Forwarder: res, Router: res}))
			const misses = 40
			c := sendMisses(t, s, misses, &n)
			jobs, _ := s.Pending()
			s.workers.mu.Lock()
			workers := s.workers.n
			s.workers.mu.Unlock()
			if jobs != misses {
				t.Fatalf("%d queries pending, want %d", jobs, misses)
			}
			if want := map[bool]int{false: 0, true: misses}[sync]; workers != want {
				t.Fatalf("%d workers while %d misses wait, want %d", workers, misses, want)
			}
			buf := make([]byte, 1500)
			_ = c.SetReadDeadline(time.Now().Add(5 * time.Second))
			for range misses {
				k, err := c.Read(buf)
				if err != nil {
					t.Fatal(err)
				}
				if k < 12 || buf[3]&0xF != dns.RcodeSuccess {
					t.Fatalf("bad answer % x", buf[:k])
				}
			}
			if jobs, bytes := s.Pending(); jobs != 0 || bytes != 0 {
				t.Fatalf("pending after the answers: %d jobs, %d bytes", jobs, bytes)
			}
		})
	}
}

// TestAsyncLaneShutdownBounded: misses at a silent upstream do not hold a
// shutdown past its context, and none is left pending after it.
func TestAsyncLaneShutdownBounded(t *testing.T) {
	var n atomic.Int64
	res := strictResolverFor(t, 5*time.Second, slowUpstream(t, -1, &n))
	s, err := New(testConfig(), Options{})
	if err != nil {
		t.Fatal(err)
	}
	s.Swap(NewSnapshot(SnapshotInput{Forwarder: res, Router: res}))
	if err := s.Start(context.Background()); err != nil {
		t.Fatal(err)
	}
	sendMisses(t, s, 10, &n)
	ctx, cancel := context.WithTimeout(context.Background(), 300*time.Millisecond)
	defer cancel()
	start := time.Now()
	err = s.Shutdown(ctx)
	if d := time.Since(start); d > time.Second {
		t.Fatalf("shutdown took %v with a 300ms context", d)
	}
	if !errors.Is(err, context.DeadlineExceeded) {
		t.Fatalf("shutdown: %v, want its context's deadline", err)
	}
	if jobs, _ := s.Pending(); jobs != 0 {
		t.Fatalf("%d queries still pending after shutdown", jobs)
	}
}
