package upstream

import (
	"context"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/miekg/dns"
	"github.com/prometheus/client_golang/prometheus/testutil"
)

// TestCoalesceIdenticalQuestions: 40 clients asking the same question while
// the upstream takes 150 ms (under the first retransmission timeout, 200
// ms, so each query is one datagram) cost one upstream query, and every client gets
// the answer under its own ID; a question differing in DO goes out on its
// own.
func TestCoalesceIdenticalQuestions(t *testing.T) {
	var n atomic.Int64
	addr := startUDP(t, counted(&n, delayed(150*time.Millisecond, answerA("192.0.2.1"))))
	r := newResolver(t, Config{Groups: map[string]GroupConfig{DefaultGroup: {Servers: []string{addr}, Timeout: 2 * time.Second}}})
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()

	const clients = 40
	var wg sync.WaitGroup
	errs := make(chan error, clients+1)
	ids := make([]uint16, clients)
	got := make([]*dns.Msg, clients)
	for i := range clients {
		wg.Add(1)
		go func() {
			defer wg.Done()
			q := query("same.example.", dns.TypeA)
			q.Id = uint16(1000 + i)
			ids[i] = q.Id
			resp, _, err := r.Forward(ctx, "", q, clientAddr)
			if err != nil {
				errs <- err
				return
			}
			got[i] = resp
		}()
	}
	// The same name with DO set is another question.
	wg.Add(1)
	go func() {
		defer wg.Done()
		q := query("same.example.", dns.TypeA)
		q.SetEdns0(1232, true)
		if _, _, err := r.Forward(ctx, "", q, clientAddr); err != nil {
			errs <- err
		}
	}()
	wg.Wait()
	close(errs)
	for err := range errs {
		t.Fatal(err)
	}
	for i, m := range got {
		if m.Id != ids[i] {
			t.Errorf("client %d: answer ID %d, want its own %d", i, m.Id, ids[i])
		}
		if a := firstA(t, m); a != "192.0.2.1" {
			t.Errorf("client %d: answer %s", i, a)
		}
	}
	for i := 1; i < clients; i++ {
		if got[i] == got[0] || (len(got[i].Answer) > 0 && got[i].Answer[0] == got[0].Answer[0]) {
			t.Fatalf("clients 0 and %d share one answer message: each must get its own copy", i)
		}
	}
	// 40 identical questions started within a few ms of each other while
	// the first takes 150 ms: one upstream query (a second one when a
	// goroutine was scheduled only after the first answer), plus the DO one.
	if q := n.Load(); q > 3 {
		t.Errorf("upstream saw %d queries for 40 identical questions and one other, want 2 (3 at most)", q)
	}
	if c := testutil.ToFloat64(r.groups[DefaultGroup].coalesced); c < clients-2 {
		t.Errorf("service_upstream_coalesced_total = %v, want >= %d", c, clients-2)
	}
}

// TestCoalesceWaiterTimeout: a waiter whose own deadline passes first gives
// up with a timeout while the leader is still waiting.
func TestCoalesceWaiterTimeout(t *testing.T) {
	addr := startUDP(t, delayed(800*time.Millisecond, answerA("192.0.2.1")))
	r := newResolver(t, Config{Groups: map[string]GroupConfig{DefaultGroup: {Servers: []string{addr}, Timeout: 2 * time.Second}}})
	lead := make(chan error, 1)
	go func() {
		_, _, err := r.Forward(context.Background(), "", query("slow.example.", dns.TypeA), clientAddr)
		lead <- err
	}()
	deadline := time.Now().Add(2 * time.Second)
	for { // bounded: until the leader's flight is registered
		r.fl.mu.Lock()
		k := len(r.fl.m)
		r.fl.mu.Unlock()
		if k == 1 {
			break
		}
		if time.Now().After(deadline) {
			t.Fatal("leader never in flight")
		}
		time.Sleep(time.Millisecond)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 100*time.Millisecond)
	defer cancel()
	start := time.Now()
	if _, _, err := r.Forward(ctx, "", query("slow.example.", dns.TypeA), clientAddr); err == nil {
		t.Fatal("waiter answered before the upstream did")
	}
	if el := time.Since(start); el > 500*time.Millisecond {
		t.Errorf("waiter gave up after %v, want about its own 100ms deadline", el)
	}
	if err := <-lead; err != nil {
		t.Fatalf("leader: %v", err)
	}
}
