// Package toggle is the per-node blocking switch: disable for a duration or
// until a time, enable, and re-enable automatically when the time passes.
package toggle

import (
	"errors"
	"fmt"
	"sync"
	"time"
)

// Switch is what the toggle drives: dataplane.Server.SetBlocking (which
// flushes the cache on a change).
type Switch interface {
	SetBlocking(enabled bool)
}

// Clock is the injected time source.
type Clock interface {
	Now() time.Time
	AfterFunc(d time.Duration, f func()) Timer
}

// Timer is a pending re-enable.
type Timer interface{ Stop() bool }

type realClock struct{}

func (realClock) Now() time.Time                            { return time.Now() }
func (realClock) AfterFunc(d time.Duration, f func()) Timer { return time.AfterFunc(d, f) }

// RealClock is the wall clock.
func RealClock() Clock { return realClock{} }

// State is the BlockingState shape (took_ms is set by the API).
type State struct {
	Blocking   bool       `json:"blocking"`
	Configured bool       `json:"configured"`
	Scope      string     `json:"scope"`
	Node       string     `json:"node"`
	TookMS     float64    `json:"took_ms"`
	Timer      *float64   `json:"timer,omitempty"` // seconds left
	Until      *time.Time `json:"until,omitempty"`
}

// ErrPast refuses an until time that has already passed.
var ErrPast = errors.New("until time is not in the future")

// Toggle is the state machine: enabled -> disabled (forever, or until a
// time, with a timer) -> enabled by Enable or by the timer.
type Toggle struct {
	sw    Switch
	clock Clock
	node  string

	mu         sync.Mutex
	configured bool // blocking.enabled
	disabled   bool
	until      time.Time // zero: until enabled again
	timer      Timer
	gen        uint64
}

// New starts enabled. configured is the blocking.enabled setting.
func New(sw Switch, clock Clock, node string, configured bool) *Toggle {
	if clock == nil {
		clock = RealClock()
	}
	t := &Toggle{sw: sw, clock: clock, node: node, configured: configured}
	sw.SetBlocking(true)
	return t
}

// SetConfigured records a change of blocking.enabled.
func (t *Toggle) SetConfigured(on bool) {
	t.mu.Lock()
	t.configured = on
	t.mu.Unlock()
}

// Disable turns blocking off on this node; a positive d or a non-zero until
// re-enables it automatically (until wins when both are given).
func (t *Toggle) Disable(d time.Duration, until time.Time) (State, error) {
	now := t.clock.Now()
	if until.IsZero() && d > 0 {
		until = now.Add(d)
	}
	if d < 0 {
		return State{}, fmt.Errorf("duration %s is negative", d)
	}
	if !until.IsZero() && !until.After(now) {
		return State{}, ErrPast
	}
	t.mu.Lock()
	defer t.mu.Unlock()
	t.stopLocked()
	t.disabled, t.until = true, until
	t.gen++
	if !until.IsZero() {
		gen := t.gen
		t.timer = t.clock.AfterFunc(until.Sub(now), func() { t.expire(gen) })
	}
	t.sw.SetBlocking(false)
	return t.stateLocked(now), nil
}

// Enable turns blocking back on and cancels a pending timer.
func (t *Toggle) Enable() State {
	t.mu.Lock()
	defer t.mu.Unlock()
	t.enableLocked()
	return t.stateLocked(t.clock.Now())
}

func (t *Toggle) expire(gen uint64) {
	t.mu.Lock()
	defer t.mu.Unlock()
	if t.gen == gen && t.disabled {
		t.enableLocked()
	}
}

func (t *Toggle) enableLocked() {
	t.stopLocked()
	t.gen++
	t.disabled, t.until = false, time.Time{}
	t.sw.SetBlocking(true)
}

func (t *Toggle) stopLocked() {
	if t.timer != nil {
		t.timer.Stop()
		t.timer = nil
	}
}

// State reports the current state.
func (t *Toggle) State() State {
	t.mu.Lock()
	defer t.mu.Unlock()
	return t.stateLocked(t.clock.Now())
}

func (t *Toggle) stateLocked(now time.Time) State {
	st := State{Blocking: t.configured && !t.disabled, Configured: t.configured, Scope: "node", Node: t.node}
	if t.disabled && !t.until.IsZero() {
		u := t.until
		left := u.Sub(now).Seconds()
		if left < 0 {
			left = 0
		}
		st.Until, st.Timer = &u, &left
	}
	return st
}
