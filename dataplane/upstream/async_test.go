package upstream

import (
	"context"
	"errors"
	"net"
	"sync/atomic"
	"testing"
	"time"

	"github.com/miekg/dns"
	"github.com/prometheus/client_golang/prometheus/testutil"
)

// asyncOutcome is what an AsyncCallback got.
type asyncOutcome struct {
	light []byte // a copy of AsyncLight's bytes
	up    string
	h     *Handoff
	at    time.Time
}

// asyncRecorder records a StartRaw query's outcomes; a second one would be
// a bug (exactly one call).
type asyncRecorder struct {
	out     chan asyncOutcome
	flushed atomic.Int64
}

func newRecorder() *asyncRecorder { return &asyncRecorder{out: make(chan asyncOutcome, 2)} }

func (a *asyncRecorder) AsyncLight(raw []byte, up string) Flusher {
	a.out <- asyncOutcome{light: append([]byte(nil), raw...), up: up, at: time.Now()}
	return a
}

func (a *asyncRecorder) AsyncHandoff(h *Handoff) { a.out <- asyncOutcome{h: h, at: time.Now()} }

func (a *asyncRecorder) Flush() { a.flushed.Add(1) }

// wait returns the one outcome, and fails on none within 5s or a second.
func (a *asyncRecorder) wait(t *testing.T) asyncOutcome {
	t.Helper()
	var o asyncOutcome
	select {
	case o = <-a.out:
	case <-time.After(5 * time.Second):
		t.Fatal("no outcome")
	}
	select {
	case o2 := <-a.out:
		t.Fatalf("a second outcome: %+v after %+v", o2, o)
	case <-time.After(50 * time.Millisecond):
	}
	return o
}

func strictResolver(t *testing.T, timeout time.Duration, servers ...string) *Resolver {
	t.Helper()
	return newResolver(t, Config{Groups: map[string]GroupConfig{DefaultGroup: {Servers: servers, Strategy: Strict, Timeout: timeout}}})
}

// outstanding counts the queries pending on every pool of r.
func (r *Resolver) outstanding() int {
	n := 0
	for _, tr := range r.trs {
		if ut, ok := tr.(*udpTransport); ok && ut.pool != nil {
			n += ut.pool.outstanding()
		}
	}
	return n
}

func TestStartRawLightAnswerGoesToCallback(t *testing.T) {
	var n atomic.Int64
	addr := startUDP(t, counted(&n, answerA("192.0.2.1")))
	r := strictResolver(t, 2*time.Second, addr)
	rec := newRecorder()
	req := query("light.example", dns.TypeA)
	if !r.StartRaw(context.Background(), time.Now().Add(5*time.Second), "", req, clientAddr, nil, rec) {
		t.Fatal("StartRaw declined a strict group of one IP upstream")
	}
	o := rec.wait(t)
	if o.h != nil || o.light == nil {
		t.Fatalf("want a light answer, got a handoff (err %v)", o.h.legs[0].err)
	}
	if o.up != addr {
		t.Fatalf("upstream %q, want %q", o.up, addr)
	}
	m := new(dns.Msg)
	if err := m.Unpack(o.light); err != nil {
		t.Fatal(err)
	}
	if got := firstA(t, m); got != "192.0.2.1" || m.Question[0].Name != "light.example." {
		t.Fatalf("answer %v", m)
	}
	if n.Load() != 1 {
		t.Fatalf("%d queries upstream, want 1", n.Load())
	}
	if !eventually(func() bool { return rec.flushed.Load() == 1 }) {
		t.Fatalf("the reader flushed the callback's work %d times, want 1", rec.flushed.Load())
	}
	if r.outstanding() != 0 {
		t.Fatal("a query is still pending")
	}
}

func TestStartRawBatchSendsOnFlush(t *testing.T) {
	var n atomic.Int64
	addr := startUDP(t, counted(&n, answerA("192.0.2.1")))
	r := strictResolver(t, 2*time.Second, addr)
	var batch AsyncBatch
	recs := make([]*asyncRecorder, 3)
	for i := range recs {
		recs[i] = newRecorder()
		if !r.StartRaw(context.Background(), time.Now().Add(5*time.Second), "", query("b"+string(rune('a'+i))+".example", dns.TypeA), clientAddr, &batch, recs[i]) {
			t.Fatal("declined")
		}
	}
	time.Sleep(100 * time.Millisecond)
	if n.Load() != 0 {
		t.Fatalf("%d queries sent before the batch was flushed", n.Load())
	}
	batch.Flush()
	for _, rec := range recs {
		if o := rec.wait(t); o.light == nil {
			t.Fatal("no light answer")
		}
	}
	if n.Load() != 3 {
		t.Fatalf("%d queries upstream, want 3", n.Load())
	}
}

func TestStartRawFailureGoesOnToNextServer(t *testing.T) {
	var na, nb atomic.Int64
	a := startUDP(t, counted(&na, answerRcode(dns.RcodeServerFailure)))
	b := startUDP(t, counted(&nb, answerA("192.0.2.2")))
	r := strictResolver(t, 2*time.Second, a, b)
	rec := newRecorder()
	if !r.StartRaw(context.Background(), time.Now().Add(5*time.Second), "", query("fail.example", dns.TypeA), clientAddr, nil, rec) {
		t.Fatal("declined")
	}
	o := rec.wait(t)
	if o.h == nil {
		t.Fatal("a SERVFAIL was not handed off")
	}
	resp, raw, up, err := r.Resume(context.Background(), o.h, nil)
	if err != nil || up != b {
		t.Fatalf("Resume: up %q err %v, want %q", up, err, b)
	}
	if resp == nil {
		resp = new(dns.Msg)
		if err := resp.Unpack(raw); err != nil {
			t.Fatal(err)
		}
	}
	if firstA(t, resp) != "192.0.2.2" {
		t.Fatalf("answer %v", resp)
	}
	if na.Load() != 1 || nb.Load() != 1 {
		t.Fatalf("queries: first server %d, second %d; want 1 and 1 (the handoff asks no server again)", na.Load(), nb.Load())
	}
	if got := errorCount(t, r, DefaultGroup, a, reasonServfail); got != 1 {
		t.Fatalf("servfail errors of the first server %v, want 1", got)
	}
}

func TestStartRawOnlyServerFailsWithItsAnswer(t *testing.T) {
	var n atomic.Int64
	a := startUDP(t, counted(&n, answerRcode(dns.RcodeServerFailure)))
	r := strictResolver(t, 2*time.Second, a)
	rec := newRecorder()
	req := query("onlyfail.example", dns.TypeA)
	if !r.StartRaw(context.Background(), time.Now().Add(5*time.Second), "", req, clientAddr, nil, rec) {
		t.Fatal("declined")
	}
	o := rec.wait(t)
	if o.h == nil {
		t.Fatal("not handed off")
	}
	resp, _, _, err := r.Resume(context.Background(), o.h, nil)
	// As Forward: the last failed answer, without error, with the
	// caller's ID.
	if err != nil || resp == nil || resp.Rcode != dns.RcodeServerFailure || resp.Id != req.Id {
		t.Fatalf("Resume: %v, %v", resp, err)
	}
	if n.Load() != 1 {
		t.Fatalf("%d queries, want 1", n.Load())
	}
}

func TestStartRawTimeoutGoesOnToNextServer(t *testing.T) {
	var na, nb atomic.Int64
	a := startUDP(t, counted(&na, drop))
	b := startUDP(t, counted(&nb, answerA("192.0.2.3")))
	const timeout = 400 * time.Millisecond
	r := strictResolver(t, timeout, a, b)
	rec := newRecorder()
	start := time.Now()
	if !r.StartRaw(context.Background(), time.Now().Add(5*time.Second), "", query("slow.example", dns.TypeA), clientAddr, nil, rec) {
		t.Fatal("declined")
	}
	o := rec.wait(t)
	if o.h == nil {
		t.Fatal("not handed off")
	}
	if d := o.at.Sub(start); d < timeout || d > timeout+500*time.Millisecond {
		t.Fatalf("handed off after %v, want the group timeout %v", d, timeout)
	}
	if !errors.Is(o.h.legs[0].err, context.DeadlineExceeded) {
		t.Fatalf("handoff error %v", o.h.legs[0].err)
	}
	resp, raw, up, err := r.Resume(context.Background(), o.h, nil)
	if err != nil || up != b || (resp == nil && raw == nil) {
		t.Fatalf("Resume: up %q err %v", up, err)
	}
	if got := errorCount(t, r, DefaultGroup, a, reasonTimeout); got != 1 {
		t.Fatalf("timeouts of the first server %v, want 1", got)
	}
	if na.Load() < 1 || na.Load() > 3 || nb.Load() != 1 {
		t.Fatalf("queries: first server %d (sent and resent), second %d", na.Load(), nb.Load())
	}
	if r.outstanding() != 0 {
		t.Fatal("a query is still pending")
	}
}

func TestStartRawResendsALostQuery(t *testing.T) {
	var n atomic.Int64
	addr := startUDP(t, func(req *dns.Msg) *dns.Msg {
		if n.Add(1) == 1 {
			return nil // the first copy is lost
		}
		return answerA("192.0.2.4")(req)
	})
	r := strictResolver(t, 3*time.Second, addr)
	rec := newRecorder()
	if !r.StartRaw(context.Background(), time.Now().Add(5*time.Second), "", query("lost.example", dns.TypeA), clientAddr, nil, rec) {
		t.Fatal("declined")
	}
	if o := rec.wait(t); o.light == nil {
		t.Fatalf("want the resent query's answer, got a handoff (%v)", o.h.legs[0].err)
	}
	if n.Load() != 2 {
		t.Fatalf("%d copies sent, want 2", n.Load())
	}
	ut := r.trs[0].(*udpTransport)
	if got := testutil.ToFloat64(ut.pool.retransmits); got != 1 {
		t.Fatalf("retransmits %v, want 1", got)
	}
}

func TestStartRawTruncatedRetriesOverTCP(t *testing.T) {
	var nu, nt atomic.Int64
	tc := func(req *dns.Msg) *dns.Msg {
		m := new(dns.Msg)
		m.SetReply(req)
		m.Truncated = true
		return m
	}
	addr := startUDPAndTCP(t, counted(&nu, tc), counted(&nt, answerA("192.0.2.5")))
	r := strictResolver(t, 2*time.Second, addr)
	rec := newRecorder()
	if !r.StartRaw(context.Background(), time.Now().Add(5*time.Second), "", query("tc.example", dns.TypeA), clientAddr, nil, rec) {
		t.Fatal("declined")
	}
	o := rec.wait(t)
	if o.h == nil {
		t.Fatal("a truncated answer was not handed off")
	}
	resp, raw, _, err := r.Resume(context.Background(), o.h, nil)
	if err != nil {
		t.Fatal(err)
	}
	if resp == nil {
		resp = new(dns.Msg)
		if err := resp.Unpack(raw); err != nil {
			t.Fatal(err)
		}
	}
	if firstA(t, resp) != "192.0.2.5" || resp.Truncated {
		t.Fatalf("answer %v", resp)
	}
	if nu.Load() != 1 || nt.Load() != 1 {
		t.Fatalf("queries: UDP %d, TCP %d; want 1 and 1", nu.Load(), nt.Load())
	}
}

func TestStartRawCoalescesAForwardOfTheSameQuestion(t *testing.T) {
	var n atomic.Int64
	addr := startUDP(t, counted(&n, delayed(300*time.Millisecond, answerA("192.0.2.6"))))
	r := strictResolver(t, 2*time.Second, addr)
	rec := newRecorder()
	if !r.StartRaw(context.Background(), time.Now().Add(5*time.Second), "", query("same.example", dns.TypeA), clientAddr, nil, rec) {
		t.Fatal("declined")
	}
	resp, _, err := r.Forward(context.Background(), "", query("same.example", dns.TypeA), clientAddr)
	if err != nil || firstA(t, resp) != "192.0.2.6" {
		t.Fatalf("the follower got %v, %v", resp, err)
	}
	if o := rec.wait(t); o.light == nil {
		t.Fatal("the leader got no light answer")
	}
	if n.Load() != 1 {
		t.Fatalf("%d queries upstream, want 1", n.Load())
	}
	if got := testutil.ToFloat64(r.groups[DefaultGroup].coalesced); got != 1 {
		t.Fatalf("coalesced %v, want 1", got)
	}
}

func TestStartRawDeclinesAQuestionInFlight(t *testing.T) {
	var n atomic.Int64
	addr := startUDP(t, counted(&n, delayed(300*time.Millisecond, answerA("192.0.2.7"))))
	r := strictResolver(t, 2*time.Second, addr)
	done := make(chan error, 1)
	go func() {
		_, _, err := r.Forward(context.Background(), "", query("inflight.example", dns.TypeA), clientAddr)
		done <- err
	}()
	if !eventually(func() bool { return n.Load() == 1 }) {
		t.Fatal("the first query did not reach the upstream")
	}
	if r.StartRaw(context.Background(), time.Now().Add(5*time.Second), "", query("inflight.example", dns.TypeA), clientAddr, nil, newRecorder()) {
		t.Fatal("StartRaw sent a question already in flight instead of leaving it to follow")
	}
	if err := <-done; err != nil {
		t.Fatal(err)
	}
	if n.Load() != 1 {
		t.Fatalf("%d queries upstream, want 1", n.Load())
	}
}

func TestStartRawEndsWithItsRoot(t *testing.T) {
	addr := startUDP(t, drop)
	r := strictResolver(t, 5*time.Second, addr)
	root, cancel := context.WithCancel(context.Background())
	rec := newRecorder()
	if !r.StartRaw(root, time.Now().Add(10*time.Second), "", query("root.example", dns.TypeA), clientAddr, nil, rec) {
		t.Fatal("declined")
	}
	time.Sleep(50 * time.Millisecond)
	cancelled := time.Now()
	cancel()
	o := rec.wait(t)
	if o.h == nil || !errors.Is(o.h.legs[0].err, context.Canceled) {
		t.Fatalf("want a handoff with the root's error, got %+v", o)
	}
	if d := o.at.Sub(cancelled); d > 4*udpSweep+100*time.Millisecond {
		t.Fatalf("handed off %v after the root ended", d)
	}
	ctx, stop := context.WithCancel(root)
	defer stop()
	start := time.Now()
	if _, _, _, err := r.Resume(ctx, o.h, nil); err == nil {
		t.Fatal("Resume after the root ended gave no error")
	}
	if d := time.Since(start); d > time.Second {
		t.Fatalf("Resume took %v with its context done", d)
	}
	if r.outstanding() != 0 {
		t.Fatal("a query is still pending")
	}
}

func TestStartRawClosedResolverHandsOff(t *testing.T) {
	addr := startUDP(t, drop)
	r := strictResolver(t, 5*time.Second, addr)
	rec := newRecorder()
	if !r.StartRaw(context.Background(), time.Now().Add(10*time.Second), "", query("close.example", dns.TypeA), clientAddr, nil, rec) {
		t.Fatal("declined")
	}
	time.Sleep(50 * time.Millisecond)
	_ = r.Close()
	o := rec.wait(t)
	if o.h == nil || !errors.Is(o.h.legs[0].err, errClosed) {
		t.Fatalf("want a handoff with errClosed, got %+v", o)
	}
	ctx, cancel := context.WithTimeout(context.Background(), time.Second)
	defer cancel()
	if _, _, _, err := r.Resume(ctx, o.h, nil); err == nil {
		t.Fatal("Resume on a closed resolver gave no error")
	}
}

func TestStartRawDeclines(t *testing.T) {
	var n atomic.Int64
	a := startUDP(t, counted(&n, answerA("192.0.2.8")))
	b := startUDP(t, counted(&n, answerA("192.0.2.8")))
	tcp, _ := startTCP(t, counted(&n, answerA("192.0.2.8")))
	for name, g := range map[string]GroupConfig{
		"tcp upstream":        {Servers: []string{"tcp://" + tcp}, Strategy: Strict},
		"named upstream":      {Servers: []string{"udp://dns.test:53"}, Strategy: Strict},
		"race with tcp":       {Servers: []string{a, "tcp://" + tcp}, Strategy: ParallelBest},
		"race with a name":    {Servers: []string{"udp://dns.test:53", b}, Strategy: ParallelBest},
		"strict tcp then udp": {Servers: []string{"tcp://" + tcp, a}, Strategy: Strict},
	} {
		t.Run(name, func(t *testing.T) {
			r := newResolver(t, Config{Groups: map[string]GroupConfig{DefaultGroup: g}})
			if r.StartRaw(context.Background(), time.Now().Add(5*time.Second), "", query("no.example", dns.TypeA), clientAddr, nil, newRecorder()) {
				t.Fatal("StartRaw took it")
			}
			if r.StartRaw(context.Background(), time.Now().Add(5*time.Second), "nosuchgroup", query("no.example", dns.TypeA), clientAddr, nil, newRecorder()) {
				t.Fatal("StartRaw took an unknown group")
			}
		})
	}
	time.Sleep(50 * time.Millisecond)
	if n.Load() != 0 {
		t.Fatalf("%d queries sent by declined starts", n.Load())
	}
	// parallel_best with one server asks it alone: the lane takes it.
	r := newResolver(t, Config{Groups: map[string]GroupConfig{DefaultGroup: {Servers: []string{a}, Strategy: ParallelBest}}})
	rec := newRecorder()
	if !r.StartRaw(context.Background(), time.Now().Add(5*time.Second), "", query("one.example", dns.TypeA), clientAddr, nil, rec) {
		t.Fatal("declined parallel_best with one server")
	}
	if o := rec.wait(t); o.light == nil {
		t.Fatal("no light answer")
	}
}

func raceResolver(t *testing.T, timeout time.Duration, servers ...string) *Resolver {
	t.Helper()
	return newResolver(t, Config{Groups: map[string]GroupConfig{DefaultGroup: {Servers: servers, Strategy: ParallelBest, Timeout: timeout}}})
}

func TestStartRawRaceFirstGoodAnswerWins(t *testing.T) {
	for _, tc := range []struct {
		name string
		slow responder
	}{
		{"slow", delayed(300*time.Millisecond, answerA("192.0.2.30"))},
		{"servfail", answerRcode(dns.RcodeServerFailure)},
		{"silent", drop},
	} {
		t.Run(tc.name, func(t *testing.T) {
			var ns, nf atomic.Int64
			slow := startUDP(t, counted(&ns, tc.slow))
			fast := startUDP(t, counted(&nf, delayed(20*time.Millisecond, answerA("192.0.2.31"))))
			r := raceResolver(t, 2*time.Second, slow, fast)
			rec := newRecorder()
			start := time.Now()
			if !r.StartRaw(context.Background(), time.Now().Add(5*time.Second), "", query("race.example", dns.TypeA), clientAddr, nil, rec) {
				t.Fatal("StartRaw declined a race of two IP upstreams")
			}
			o := rec.wait(t)
			if o.light == nil || o.up != fast {
				t.Fatalf("want the fast server's light answer, got %+v", o)
			}
			if d := o.at.Sub(start); d > 250*time.Millisecond {
				t.Fatalf("the good answer came after %v", d)
			}
			if ns.Load() != 1 || nf.Load() != 1 {
				t.Fatalf("queries: %d and %d, want one each", ns.Load(), nf.Load())
			}
			if !eventually(func() bool { return r.outstanding() == 0 }) {
				t.Fatal("the loser is still pending")
			}
			if tc.name == "slow" {
				// The loser's answer comes late: dropped as such.
				ut := r.groups[DefaultGroup].ups[0].t.(*udpTransport)
				if r.groups[DefaultGroup].ups[0].name != slow {
					ut = r.groups[DefaultGroup].ups[1].t.(*udpTransport)
				}
				if !eventually(func() bool { return ut.pool.dropped(dropLate) == 1 }) {
					t.Fatalf("late drops %v, want 1", ut.pool.dropped(dropLate))
				}
			}
		})
	}
}

func TestStartRawRaceBothFailHandsOff(t *testing.T) {
	var na, nb atomic.Int64
	a := startUDP(t, counted(&na, answerRcode(dns.RcodeServerFailure)))
	b := startUDP(t, counted(&nb, delayed(50*time.Millisecond, answerRcode(dns.RcodeRefused))))
	r := raceResolver(t, 2*time.Second, a, b)
	rec := newRecorder()
	req := query("bothfail.example", dns.TypeA)
	if !r.StartRaw(context.Background(), time.Now().Add(5*time.Second), "", req, clientAddr, nil, rec) {
		t.Fatal("declined")
	}
	o := rec.wait(t)
	if o.h == nil {
		t.Fatal("not handed off")
	}
	resp, _, _, err := r.Resume(context.Background(), o.h, nil)
	// As a race would: the last failed answer, without error.
	if err != nil || resp == nil || (resp.Rcode != dns.RcodeServerFailure && resp.Rcode != dns.RcodeRefused) || resp.Id != req.Id {
		t.Fatalf("Resume: %v, %v", resp, err)
	}
	if na.Load() != 1 || nb.Load() != 1 {
		t.Fatalf("queries: %d and %d, want one each", na.Load(), nb.Load())
	}
	if errorCount(t, r, DefaultGroup, a, reasonServfail) != 1 || errorCount(t, r, DefaultGroup, b, reasonRefused) != 1 {
		t.Fatal("each server's failure is not counted once")
	}
}

func TestStartRawRaceThenTheOtherServers(t *testing.T) {
	var n [3]atomic.Int64
	var addrs []string
	for i := range 2 {
		addrs = append(addrs, startUDP(t, counted(&n[i], drop)))
	}
	addrs = append(addrs, startUDP(t, counted(&n[2], answerA("192.0.2.32"))))
	// Three servers: the race takes two at random; whichever are left
	// are asked after it fails. Run until the race missed the good one.
	for try := 0; try < 20; try++ {
		r := raceResolver(t, 300*time.Millisecond, addrs...)
		rec := newRecorder()
		before := n[2].Load()
		if !r.StartRaw(context.Background(), time.Now().Add(5*time.Second), "", query("third.example", dns.TypeA), clientAddr, nil, rec) {
			t.Fatal("declined")
		}
		o := rec.wait(t)
		if o.h == nil {
			if o.up != addrs[2] {
				t.Fatalf("a light answer from %s, which never answers", o.up)
			}
			continue // the race had the good server
		}
		if n[2].Load() != before {
			t.Fatal("handed off although the good server was in the race")
		}
		resp, raw, up, err := r.Resume(context.Background(), o.h, nil)
		if err != nil || up != addrs[2] || (resp == nil && raw == nil) {
			t.Fatalf("Resume: up %q err %v", up, err)
		}
		return
	}
	t.Fatal("the race had the good server every time")
}

// TestStartRawSpoofedAnswers: answers with the query's ID but another
// question, and answers with other IDs, are dropped as for a waiting query;
// the lane's query ends at its deadline with a mismatch, counted once.
func TestStartRawSpoofedAnswers(t *testing.T) {
	addr := rawUDPServer(t, func(pc net.PacketConn, from net.Addr, req *dns.Msg) {
		other := req.Copy()
		other.Question[0].Name = "evil.example."
		sendMsg(pc, from, answerA("203.0.113.66")(other))
		wrongID := req.Copy()
		wrongID.Id++
		sendMsg(pc, from, answerA("203.0.113.67")(wrongID))
	})
	const timeout = 300 * time.Millisecond
	r := strictResolver(t, timeout, addr)
	rec := newRecorder()
	start := time.Now()
	if !r.StartRaw(context.Background(), time.Now().Add(5*time.Second), "", query("spoof.example", dns.TypeA), clientAddr, nil, rec) {
		t.Fatal("declined")
	}
	o := rec.wait(t)
	if o.h == nil || !errors.Is(o.h.legs[0].err, errMismatch) {
		t.Fatalf("want a handoff with a mismatch, got %+v", o)
	}
	if d := o.at.Sub(start); d < timeout {
		t.Fatalf("handed off after %v, before the attempt's deadline", d)
	}
	if _, _, _, err := r.Resume(context.Background(), o.h, nil); !errors.Is(err, errMismatch) {
		t.Fatalf("Resume: %v, want the mismatch", err)
	}
	if got := errorCount(t, r, DefaultGroup, addr, reasonMismatch); got != 1 {
		t.Fatalf("mismatch errors %v, want 1", got)
	}
	p := r.trs[0].(*udpTransport).pool
	if p.dropped(dropMismatch) < 1 || p.dropped(dropUnsolicited)+p.dropped(dropLate) < 1 {
		t.Fatalf("drops: mismatch %v, unsolicited %v, late %v", p.dropped(dropMismatch), p.dropped(dropUnsolicited), p.dropped(dropLate))
	}
}
