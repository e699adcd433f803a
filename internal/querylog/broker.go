package querylog

import (
	"sync"

	"github.com/prometheus/client_golang/prometheus"
	dto "github.com/prometheus/client_model/go"
)

// Broker fans committed rows out to subscribers. A subscriber whose buffer
// is full is dropped (its channel closed with Overflowed set) rather than
// slowing the writer.
type Broker struct {
	mu   sync.Mutex
	subs map[*Subscription]struct{}
}

// Subscription receives rows in id order on C until it is closed.
type Subscription struct {
	C          <-chan Row
	ch         chan Row
	b          *Broker
	overflowed bool // guarded by b.mu
}

// NewBroker returns an empty broker.
func NewBroker() *Broker { return &Broker{subs: map[*Subscription]struct{}{}} }

// Subscribe registers a subscriber with a buffer of buf rows.
func (b *Broker) Subscribe(buf int) *Subscription {
	if buf <= 0 {
		buf = 1024
	}
	s := &Subscription{ch: make(chan Row, buf), b: b}
	s.C = s.ch
	b.mu.Lock()
	if b.subs == nil {
		close(s.ch) // broker closed
	} else {
		b.subs[s] = struct{}{}
	}
	b.mu.Unlock()
	return s
}

// Close unsubscribes; C is closed.
func (s *Subscription) Close() {
	s.b.mu.Lock()
	defer s.b.mu.Unlock()
	if _, ok := s.b.subs[s]; ok {
		delete(s.b.subs, s)
		close(s.ch)
	}
}

// Overflowed reports whether the subscription was dropped for being slow.
func (s *Subscription) Overflowed() bool {
	s.b.mu.Lock()
	defer s.b.mu.Unlock()
	return s.overflowed
}

// Publish hands rows (in id order) to every subscriber without blocking.
func (b *Broker) Publish(rows []Row) {
	if len(rows) == 0 {
		return
	}
	b.mu.Lock()
	defer b.mu.Unlock()
	for s := range b.subs {
		for i := range rows {
			select {
			case s.ch <- rows[i]:
				continue
			default:
			}
			s.overflowed = true
			delete(b.subs, s)
			close(s.ch)
			break
		}
	}
}

// Subscribers returns the number of live subscriptions.
func (b *Broker) Subscribers() int {
	b.mu.Lock()
	defer b.mu.Unlock()
	return len(b.subs)
}

func (b *Broker) closeAll() {
	b.mu.Lock()
	defer b.mu.Unlock()
	for s := range b.subs {
		close(s.ch)
	}
	b.subs = nil
}

func counterValue(c prometheus.Counter) float64 {
	m := &dto.Metric{}
	if err := c.Write(m); err != nil {
		return 0
	}
	return m.GetCounter().GetValue()
}
