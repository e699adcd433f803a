package upstream

import (
	"context"
	"fmt"
	"hash/maphash"
	"sync"

	"github.com/miekg/dns"
)

// maxCoalesced bounds the queries waiting on one in-flight question; later
// ones go out on their own.
const maxCoalesced = 256

// flights coalesces identical in-flight questions: a query whose outgoing
// message equals one already on its way to the same group (the same name,
// type, class, flags, EDNS size, DO and ECS option: every byte but the ID)
// waits for that answer instead of sending its own. Each waiter gets its
// own copy, with its own ID (and the caller restores its own case and
// EDNS). A flood of one name then costs one upstream query per round trip.
type flights struct {
	seed maphash.Seed
	mu   sync.Mutex
	m    map[uint64]*flight
	pool sync.Pool // flights no follower saw
}

// flight is one question on its way upstream.
type flight struct {
	key     []byte        // group, 0, the message without its ID
	done    chan struct{} // made by the first follower; closed by the leader
	waiters int
	// Set before done closes: a copy of the answer for the followers.
	resp *dns.Msg
	up   string
	err  error
}

func newFlights() *flights {
	return &flights{seed: maphash.MakeSeed(), m: make(map[uint64]*flight)}
}

func (fs *flights) hash(group string, wire []byte) uint64 {
	var h maphash.Hash
	h.SetSeed(fs.seed)
	h.WriteString(group)
	h.WriteByte(0)
	h.Write(wire[2:])
	return h.Sum64()
}

func sameKey(key []byte, group string, wire []byte) bool {
	return len(key) == len(group)+1+len(wire)-2 && string(key[:len(group)]) == group &&
		key[len(group)] == 0 && string(key[len(group)+1:]) == string(wire[2:])
}

// join returns the flight to wait on (leader false), or a new flight the
// caller leads (leader true), or nil when the question cannot be
// coalesced (a full flight, a hash collision).
func (fs *flights) join(h uint64, group string, wire []byte) (f *flight, leader bool) {
	fs.mu.Lock()
	defer fs.mu.Unlock()
	if f = fs.m[h]; f != nil {
		if f.waiters >= maxCoalesced || !sameKey(f.key, group, wire) {
			return nil, false
		}
		f.waiters++
		if f.done == nil {
			f.done = make(chan struct{})
		}
		return f, false
	}
	return fs.startLocked(h, group, wire), true
}

// startLocked records a new flight for the question under h (fs.mu held).
func (fs *flights) startLocked(h uint64, group string, wire []byte) *flight {
	f, _ := fs.pool.Get().(*flight)
	if f == nil {
		f = &flight{}
	}
	f.key = append(append(append(f.key[:0], group...), 0), wire[2:]...)
	fs.m[h] = f
	return f
}

// lead makes the caller the leader of a new flight for the question, or
// reports false when the same question is in flight already (the caller
// then joins it on the synchronous path). f is nil, with true, when the
// question cannot be coalesced (a hash collision).
func (fs *flights) lead(h uint64, group string, wire []byte) (f *flight, ok bool) {
	fs.mu.Lock()
	defer fs.mu.Unlock()
	if f = fs.m[h]; f != nil {
		return nil, !sameKey(f.key, group, wire)
	}
	return fs.startLocked(h, group, wire), true
}

// land ends f with the leader's result; followers get a copy of resp made
// before the leader's caller changes it, or of light, an answer the leader
// left unparsed (its bytes, which wire.ScanAnswer accepted).
func (fs *flights) land(h uint64, f *flight, resp *dns.Msg, light []byte, up string, err error) {
	fs.mu.Lock()
	delete(fs.m, h)
	followed := f.done != nil
	fs.mu.Unlock()
	if !followed {
		f.waiters = 0
		fs.pool.Put(f)
		return
	}
	f.up, f.err = up, err
	switch {
	case resp != nil:
		f.resp = resp.Copy()
	case light != nil:
		m := new(dns.Msg)
		if uerr := m.Unpack(light); uerr != nil {
			f.err = fmt.Errorf("%w: %w", errMalformed, uerr) // ScanAnswer rules this out
		} else {
			f.resp = m
		}
	}
	close(f.done)
}

// wait returns f's answer, a copy of its own, or ctx's error first.
func (f *flight) wait(ctx context.Context) (*dns.Msg, string, error) {
	select {
	case <-f.done:
	case <-ctx.Done():
		return nil, "", fmt.Errorf("waiting for the same question in flight: %w", ctx.Err())
	}
	if f.resp == nil {
		return nil, f.up, f.err
	}
	return f.resp.Copy(), f.up, f.err
}
