package upstream

import (
	"context"
	"errors"
	"net"
	"testing"
	"time"

	"github.com/miekg/dns"
)

func TestDeadlineCtx(t *testing.T) {
	root, stop := context.WithCancel(context.Background())
	defer stop()
	ctx := NewDeadline(root, time.Now().Add(time.Hour))
	cancel := ctx.Release
	if ctx.Err() != nil {
		t.Fatalf("fresh: %v", ctx.Err())
	}
	// A later deadline below it adds nothing; an earlier one is its own.
	if c, dc := withDeadline(ctx, time.Now().Add(2*time.Hour)); c != ctx || dc != nil {
		t.Error("a later deadline made a new context")
	}
	if d, _ := NewDeadline(ctx, time.Now().Add(2*time.Hour)).Deadline(); time.Until(d) > 90*time.Minute {
		t.Error("a later deadline under an earlier one reports the later")
	}
	short := NewDeadline(ctx, time.Now().Add(20*time.Millisecond))
	defer short.Release()
	if d, _ := short.Deadline(); time.Until(d) > time.Second {
		t.Errorf("deadline %v", d)
	}
	select {
	case <-short.Done():
	case <-time.After(2 * time.Second):
		t.Fatal("Done not closed at the deadline")
	}
	if !errors.Is(short.Err(), context.DeadlineExceeded) {
		t.Errorf("after the deadline: %v", short.Err())
	}
	// Past its deadline without Done ever asked for.
	past := NewDeadline(root, time.Now().Add(-time.Second))
	defer past.Release()
	if !errors.Is(past.Err(), context.DeadlineExceeded) {
		t.Errorf("past: %v", past.Err())
	}
	cancel()
	if !errors.Is(ctx.Err(), context.Canceled) {
		t.Errorf("cancelled: %v", ctx.Err())
	}
	select {
	case <-ctx.Done():
	default:
		t.Error("Done after cancel not closed")
	}
	// The root's cancellation reaches it.
	ctx2 := NewDeadline(root, time.Now().Add(time.Hour))
	defer ctx2.Release()
	done := ctx2.Done()
	stop()
	select {
	case <-done:
	case <-time.After(2 * time.Second):
		t.Fatal("root cancel not seen")
	}
	if !errors.Is(ctx2.Err(), context.Canceled) {
		t.Errorf("root cancelled: %v", ctx2.Err())
	}
	// A parent with an earlier deadline bounds it.
	p, pc := context.WithTimeout(context.Background(), time.Minute)
	defer pc()
	c3 := NewDeadline(p, time.Now().Add(time.Hour))
	defer c3.Release()
	if d, _ := c3.Deadline(); time.Until(d) > 2*time.Minute {
		t.Errorf("deadline %v past the parent's", d)
	}
}

// TestUDPPoolDeadlineWithoutTimer: a pooled query to a silent upstream
// under a WithDeadline context fails at the deadline, timed by the pool's
// own timer (nobody asked for the context's Done), as a timeout.
func TestUDPPoolDeadlineWithoutTimer(t *testing.T) {
	pc, err := net.ListenPacket("udp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer pc.Close()
	_, tr := newTestPool(t, pc.LocalAddr().String(), 1)
	ctx := NewDeadline(context.Background(), time.Now().Add(300*time.Millisecond))
	defer ctx.Release()
	start := time.Now()
	_, err = ask(ctx, tr, "a.example", dns.TypeA, 1)
	if !errors.Is(err, context.DeadlineExceeded) || classify(err) != reasonTimeout {
		t.Errorf("error %v, want a timeout", err)
	}
	if d := time.Since(start); d < 250*time.Millisecond || d > 2*time.Second {
		t.Errorf("failed after %v, want the deadline (300ms)", d)
	}
	if ctx.real.Load() != nil {
		t.Error("the pool asked for Done: a timer per query")
	}
}
