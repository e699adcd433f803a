package node

import (
	"sync"
	"time"
)

// Lifecycle tracks whether the node is serving or in lameduck, and when a lameduck
// period ends in shutdown. Readiness and the health name follow it.
type Lifecycle struct {
	mu       sync.Mutex
	lameduck bool
	until    time.Time
	timer    *time.Timer
	onChange func(lameduck bool)
	done     chan struct{} // closed when a lameduck period runs out
	closed   bool
}

// NewLifecycle returns a serving lifecycle; onChange is told of every switch.
func NewLifecycle(onChange func(lameduck bool)) *Lifecycle {
	if onChange == nil {
		onChange = func(bool) {}
	}
	return &Lifecycle{onChange: onChange, done: make(chan struct{})}
}

// Lameduck enters lameduck for d; when d passes without Cancel, Done is closed
// so the node shuts its listeners. d <= 0 ends at once.
func (l *Lifecycle) Lameduck(d time.Duration) time.Time {
	l.mu.Lock()
	defer l.mu.Unlock()
	if l.closed {
		return l.until
	}
	if l.timer != nil {
		l.timer.Stop()
	}
	wasLameduck := l.lameduck
	l.lameduck = true
	l.until = time.Now().Add(d)
	if d <= 0 {
		l.finishLocked()
	} else {
		l.timer = time.AfterFunc(d, func() {
			l.mu.Lock()
			defer l.mu.Unlock()
			if l.lameduck {
				l.finishLocked()
			}
		})
	}
	if !wasLameduck {
		l.onChange(true)
	}
	return l.until
}

func (l *Lifecycle) finishLocked() {
	if !l.closed {
		l.closed = true
		close(l.done)
	}
}

// Cancel returns to serving. It reports false when the lameduck period already
// ended (the node is shutting down) or the node was serving.
func (l *Lifecycle) Cancel() bool {
	l.mu.Lock()
	defer l.mu.Unlock()
	if !l.lameduck || l.closed {
		return false
	}
	if l.timer != nil {
		l.timer.Stop()
		l.timer = nil
	}
	l.lameduck = false
	l.until = time.Time{}
	l.onChange(false)
	return true
}

// State reports whether the node is in lameduck and until when.
func (l *Lifecycle) State() (lameduck bool, until time.Time) {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.lameduck, l.until
}

// Done is closed when a lameduck period has run out.
func (l *Lifecycle) Done() <-chan struct{} { return l.done }
