package toggle

import (
	"sort"
	"sync"
	"testing"
	"time"
)

type fakeClock struct {
	mu     sync.Mutex
	now    time.Time
	timers []*fakeTimer
}

type fakeTimer struct {
	at      time.Time
	f       func()
	stopped bool
}

func (t *fakeTimer) Stop() bool { was := !t.stopped; t.stopped = true; return was }

func (c *fakeClock) Now() time.Time { c.mu.Lock(); defer c.mu.Unlock(); return c.now }

func (c *fakeClock) AfterFunc(d time.Duration, f func()) Timer {
	c.mu.Lock()
	defer c.mu.Unlock()
	t := &fakeTimer{at: c.now.Add(d), f: f}
	c.timers = append(c.timers, t)
	return t
}

// advance moves the clock and fires due timers in order.
func (c *fakeClock) advance(d time.Duration) {
	c.mu.Lock()
	c.now = c.now.Add(d)
	var due []*fakeTimer
	rest := c.timers[:0]
	for _, t := range c.timers {
		if !t.stopped && !t.at.After(c.now) {
			due = append(due, t)
		} else if !t.stopped {
			rest = append(rest, t)
		}
	}
	c.timers = rest
	c.mu.Unlock()
	sort.Slice(due, func(i, j int) bool { return due[i].at.Before(due[j].at) })
	for _, t := range due {
		t.f()
	}
}

type sw struct{ calls []bool }

func (s *sw) SetBlocking(on bool) { s.calls = append(s.calls, on) }

func TestToggle(t *testing.T) {
	clk := &fakeClock{now: time.Date(2025, 1, 1, 10, 0, 0, 0, time.UTC)}
	s := &sw{}
	tg := New(s, clk, "node-a", true)
	if st := tg.State(); !st.Blocking || !st.Configured || st.Scope != "node" || st.Node != "node-a" || st.Timer != nil {
		t.Fatalf("initial %+v", st)
	}
	st, err := tg.Disable(10*time.Minute, time.Time{})
	if err != nil || st.Blocking || st.Timer == nil || *st.Timer != 600 || !st.Until.Equal(clk.now.Add(10*time.Minute)) {
		t.Fatalf("disable: %+v %v", st, err)
	}
	clk.advance(4 * time.Minute)
	if st := tg.State(); st.Blocking || *st.Timer != 360 {
		t.Fatalf("after 4m %+v", st)
	}
	clk.advance(6 * time.Minute)
	if st := tg.State(); !st.Blocking || st.Timer != nil || st.Until != nil {
		t.Fatalf("after expiry %+v", st)
	}
	// disable until a time, then a shorter disable replaces the timer
	if _, err := tg.Disable(0, clk.now.Add(time.Hour)); err != nil {
		t.Fatal(err)
	}
	if _, err := tg.Disable(time.Minute, time.Time{}); err != nil {
		t.Fatal(err)
	}
	clk.advance(2 * time.Minute)
	if !tg.State().Blocking {
		t.Fatal("shorter disable did not re-enable")
	}
	// disable forever, enable by hand; a stale timer must not fire later
	if _, err := tg.Disable(time.Minute, time.Time{}); err != nil {
		t.Fatal(err)
	}
	tg.Enable()
	if _, err := tg.Disable(0, time.Time{}); err != nil {
		t.Fatal(err)
	}
	clk.advance(time.Hour)
	if st := tg.State(); st.Blocking || st.Timer != nil {
		t.Fatalf("indefinite disable ended: %+v", st)
	}
	if _, err := tg.Disable(0, clk.now.Add(-time.Second)); err != ErrPast {
		t.Fatalf("past until: %v", err)
	}
	tg.Enable()
	tg.SetConfigured(false)
	if st := tg.State(); st.Blocking || st.Configured {
		t.Fatalf("configured off: %+v", st)
	}
	want := []bool{true, false, true, false, false, true, false, true, false, true}
	if len(s.calls) != len(want) {
		t.Fatalf("SetBlocking calls %v, want %v", s.calls, want)
	}
	for i := range want {
		if s.calls[i] != want[i] {
			t.Fatalf("SetBlocking calls %v, want %v", s.calls, want)
		}
	}
}
