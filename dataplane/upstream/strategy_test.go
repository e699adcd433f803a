package upstream

import (
	"context"
	"errors"
	"sync/atomic"
	"testing"
	"time"

	"github.com/miekg/dns"
)

func group1(strategy Strategy, timeout time.Duration, servers ...string) Config {
	return Config{Groups: map[string]GroupConfig{DefaultGroup: {Servers: servers, Strategy: strategy, Timeout: timeout}}}
}

// TestFailover runs every strategy against groups where some servers fail
// (slow past the timeout, dropping packets, SERVFAIL, REFUSED): the answer
// must come from the good server, within a bounded time.
func TestFailover(t *testing.T) {
	const timeout = 150 * time.Millisecond
	good := startUDP(t, answerA("192.0.2.20"))
	slow := startUDP(t, delayed(3*timeout, answerA("203.0.113.1")))
	dropping := startUDP(t, drop)
	servfail := startUDP(t, answerRcode(dns.RcodeServerFailure))
	refused := startUDP(t, answerRcode(dns.RcodeRefused))

	for _, strategy := range []Strategy{Strict, Random, ParallelBest, RTTWeighted} {
		for _, tc := range []struct {
			name    string
			servers []string
			reason  string // metric reason of the bad server
		}{
			{"slow", []string{slow, good}, reasonTimeout},
			{"dropping", []string{dropping, good}, reasonTimeout},
			{"servfail", []string{servfail, good}, reasonServfail},
			{"refused", []string{refused, good}, reasonRefused},
			{"three bad", []string{servfail, dropping, refused, good}, ""},
		} {
			t.Run(string(strategy)+"/"+tc.name, func(t *testing.T) {
				r := newResolver(t, group1(strategy, timeout, tc.servers...))
				for i := range 4 {
					start := time.Now()
					resp, up, err := r.Forward(context.Background(), "", query("fail.example", dns.TypeA), clientAddr)
					if err != nil {
						t.Fatalf("query %d: %v", i, err)
					}
					if up != good || firstA(t, resp) != "192.0.2.20" || resp.Rcode != dns.RcodeSuccess {
						t.Fatalf("query %d: answer from %s rcode %s", i, up, dns.RcodeToString[resp.Rcode])
					}
					// Each bad server costs at most one timeout.
					if d := time.Since(start); d > time.Duration(len(tc.servers))*timeout+500*time.Millisecond {
						t.Errorf("query %d took %v", i, d)
					}
				}
				if tc.reason != "" && strategy == Strict {
					if got := errorCount(t, r, DefaultGroup, tc.servers[0], tc.reason); got != 4 {
						t.Errorf("%s errors of the bad server = %v, want 4", tc.reason, got)
					}
				}
			})
		}
	}
}

// TestEveryServerFails: the last failed answer is returned without error;
// with no answer at all the error says so, after bounded time.
func TestEveryServerFails(t *testing.T) {
	const timeout = 100 * time.Millisecond
	servfail := startUDP(t, answerRcode(dns.RcodeServerFailure))
	refused := startUDP(t, answerRcode(dns.RcodeRefused))
	dropping := startUDP(t, drop)
	dropping2 := startUDP(t, drop)

	for _, strategy := range []Strategy{Strict, Random, ParallelBest, RTTWeighted} {
		t.Run(string(strategy), func(t *testing.T) {
			r := newResolver(t, group1(strategy, timeout, servfail, refused))
			resp, up, err := r.Forward(context.Background(), "", query("x.example", dns.TypeA), clientAddr)
			if err != nil {
				t.Fatalf("error %v, want the last failed answer", err)
			}
			if resp.Rcode != dns.RcodeServerFailure && resp.Rcode != dns.RcodeRefused {
				t.Errorf("rcode %s", dns.RcodeToString[resp.Rcode])
			}
			if up != servfail && up != refused {
				t.Errorf("upstream %q", up)
			}
			if resp.Id != 4242 {
				t.Errorf("ID %d, want the client's", resp.Id)
			}

			r2 := newResolver(t, group1(strategy, timeout, dropping, dropping2))
			start := time.Now()
			resp, _, err = r2.Forward(context.Background(), "", query("x.example", dns.TypeA), clientAddr)
			if err == nil || resp != nil {
				t.Fatalf("got %v, %v; want an error", resp, err)
			}
			if !errors.Is(err, context.DeadlineExceeded) {
				t.Errorf("error %v, want a timeout", err)
			}
			if d := time.Since(start); d > 2*timeout+500*time.Millisecond {
				t.Errorf("took %v", d)
			}
		})
	}
}

// TestParallelBestTakesFastest: both servers are asked at once, so a slow
// (but in time) server does not delay the answer.
func TestParallelBestTakesFastest(t *testing.T) {
	var slowN, fastN atomic.Int64
	slow := startUDP(t, counted(&slowN, delayed(400*time.Millisecond, answerA("203.0.113.2"))))
	// A little delay on the fast one too, so both queries are surely sent
	// before the race ends and cancels the other.
	fast := startUDP(t, counted(&fastN, delayed(30*time.Millisecond, answerA("192.0.2.21"))))
	r := newResolver(t, group1(ParallelBest, 2*time.Second, slow, fast))
	for i := range 3 {
		start := time.Now()
		resp, up, err := r.Forward(context.Background(), "", query("p.example", dns.TypeA), clientAddr)
		if err != nil {
			t.Fatal(err)
		}
		if up != fast || firstA(t, resp) != "192.0.2.21" {
			t.Errorf("query %d: answer from %s", i, up)
		}
		if d := time.Since(start); d > 300*time.Millisecond {
			t.Errorf("query %d took %v: the slow server held it up", i, d)
		}
	}
	if slowN.Load() != 3 || fastN.Load() != 3 {
		t.Errorf("slow got %d, fast %d queries; want 3 each (both asked)", slowN.Load(), fastN.Load())
	}
}

// TestStrictOrder: strict always asks the first server while it works.
func TestStrictOrder(t *testing.T) {
	var aN, bN atomic.Int64
	a := startUDP(t, counted(&aN, answerA("192.0.2.22")))
	b := startUDP(t, counted(&bN, answerA("192.0.2.23")))
	r := newResolver(t, group1(Strict, time.Second, a, b))
	for range 10 {
		if _, up, err := r.Forward(context.Background(), "", query("s.example", dns.TypeA), clientAddr); err != nil || up != a {
			t.Fatalf("answer from %s, %v", up, err)
		}
	}
	if aN.Load() != 10 || bN.Load() != 0 {
		t.Errorf("first got %d, second %d; want 10 and 0", aN.Load(), bN.Load())
	}
}

// TestRandomSpreads: random asks one server per query and uses both.
func TestRandomSpreads(t *testing.T) {
	var aN, bN atomic.Int64
	a := startUDP(t, counted(&aN, answerA("192.0.2.24")))
	b := startUDP(t, counted(&bN, answerA("192.0.2.25")))
	r := newResolver(t, group1(Random, time.Second, a, b))
	const n = 40
	for range n {
		if _, _, err := r.Forward(context.Background(), "", query("r.example", dns.TypeA), clientAddr); err != nil {
			t.Fatal(err)
		}
	}
	// P(one server never chosen) = 2^-39.
	if aN.Load()+bN.Load() != n || aN.Load() == 0 || bN.Load() == 0 {
		t.Errorf("servers got %d and %d of %d queries", aN.Load(), bN.Load(), n)
	}
}

// TestRTTWeightedPrefersFast: after a few samples most queries go to the
// server with the lower RTT.
func TestRTTWeightedPrefersFast(t *testing.T) {
	var slowN, fastN atomic.Int64
	slow := startUDP(t, counted(&slowN, delayed(40*time.Millisecond, answerA("192.0.2.26"))))
	fast := startUDP(t, counted(&fastN, answerA("192.0.2.27")))
	r := newResolver(t, group1(RTTWeighted, time.Second, slow, fast))
	const n = 60
	for range n {
		if _, _, err := r.Forward(context.Background(), "", query("w.example", dns.TypeA), clientAddr); err != nil {
			t.Fatal(err)
		}
	}
	if slowN.Load() > n/4 {
		t.Errorf("slow server got %d of %d queries, fast %d; want most on the fast one", slowN.Load(), n, fastN.Load())
	}
}

// TestGroupTimeout: the group's timeout bounds one attempt.
func TestGroupTimeout(t *testing.T) {
	slow := startUDP(t, delayed(time.Second, answerA("192.0.2.28")))
	for _, timeout := range []time.Duration{50 * time.Millisecond, 200 * time.Millisecond} {
		r := newResolver(t, group1(Strict, timeout, slow))
		start := time.Now()
		_, _, err := r.Forward(context.Background(), "", query("t.example", dns.TypeA), clientAddr)
		d := time.Since(start)
		if err == nil {
			t.Fatal("slow server answered within the timeout")
		}
		if d < timeout || d > timeout+300*time.Millisecond {
			t.Errorf("timeout %v: failed after %v", timeout, d)
		}
		if got := errorCount(t, r, DefaultGroup, slow, reasonTimeout); got != 1 {
			t.Errorf("timeout errors = %v, want 1", got)
		}
	}
}

// TestCallerContextCancels: the caller's context ends the query early.
func TestCallerContextCancels(t *testing.T) {
	dropping := startUDP(t, drop)
	r := newResolver(t, group1(Strict, 5*time.Second, dropping))
	ctx, cancel := context.WithTimeout(context.Background(), 100*time.Millisecond)
	defer cancel()
	start := time.Now()
	if _, _, err := r.Forward(ctx, "", query("c.example", dns.TypeA), clientAddr); err == nil {
		t.Fatal("no error")
	}
	if d := time.Since(start); d > time.Second {
		t.Errorf("took %v despite a 100ms context", d)
	}
}
